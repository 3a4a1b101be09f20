"""Tables. Postgres is authoritative; Redis only ever holds ids derived from these rows."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Table,
    Text,
    false,
    func,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, REAL
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


# Fan-out modes are stored as small ints; the names are the GraphQL enum values.
FANOUT_PUSH = 0
FANOUT_PULL = 1


class Visibility(StrEnum):
    """Who may see a post (the rule itself: app.posts.visibility). Stored as its value; the
    GraphQL enum maps onto it (app.api.schema.types)."""

    PUBLIC = "public"
    FOLLOWERS = "followers"
    PRIVATE = "private"


class User(Base):
    __tablename__ = "users"
    __table_args__ = (
        # searchUsers: prefix LIKE, case-insensitive (app.users.search; decision 0009).
        Index(
            "users_handle_prefix_idx", "handle", postgresql_ops={"handle": "varchar_pattern_ops"}
        ),
        # The feed's pull sources start from the few pull-mode or just-switched users, not
        # from each of a heavy viewer's followees (app.feed.rows; migration 0005).
        Index("users_pull_idx", "id", postgresql_where=text(f"fanout_mode = {FANOUT_PULL}")),
        Index(
            "users_mode_changed_idx",
            "fanout_mode_changed_at",
            postgresql_where=text("fanout_mode_changed_at IS NOT NULL"),
        ),
        CheckConstraint("fanout_pin IN ('push', 'pull')", name="users_fanout_pin_check"),
        # The synthetic probe's canaries, for the pruning job (migration 0009).
        Index("users_canary_idx", "id", postgresql_where=text("canary")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    handle: Mapped[str] = mapped_column(String(30), unique=True)
    password_hash: Mapped[str] = mapped_column(Text)
    display_name: Mapped[str] = mapped_column(String(80))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_active_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    follower_count: Mapped[int] = mapped_column(Integer, server_default="0")
    following_count: Mapped[int] = mapped_column(Integer, server_default="0")
    fanout_mode: Mapped[int] = mapped_column(SmallInteger, server_default=str(FANOUT_PUSH))
    # Bumped on every mode switch so an in-flight fan-out can tell it is stale.
    fanout_mode_version: Mapped[int] = mapped_column(Integer, server_default="0")
    # The viewer's setting: RANKED feeds carry recommendations (setRecommendations).
    recommendations_enabled: Mapped[bool] = mapped_column(Boolean, server_default=true())
    # When the mode last changed: posts made in pull mode since then need reconciling.
    fanout_mode_changed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # An operator's override of the control plane ("push" | "pull"; NULL: decided by cost),
    # set by `python -m app.fanout pin` (decision 0026).
    fanout_pin: Mapped[str | None] = mapped_column(String(4))
    # Tokens carry the version they were issued under; changePassword bumps it, and every
    # older token is refused (app/auth/revocation.py, decision 0013).
    token_version: Mapped[int] = mapped_column(Integer, server_default="0")
    # A synthetic probe canary (signed up with the deployment's secret handle prefix,
    # app.config.canary_handle_prefix; decision 0065): left out of search, followed by
    # canaries only, its posts pruned after CANARY_POSTS_RETENTION_SECONDS.
    canary: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # The region whose database made the row (region_identity's name; "local" with one
    # region): the user's writes are accepted there only (app.db.regions, decision 0087).
    home_region: Mapped[str] = mapped_column(String(32), server_default=text("region_name()"))


Index(
    "users_display_name_prefix_idx",
    func.lower(User.display_name).label("display_name_lower"),
    postgresql_ops={"display_name_lower": "text_pattern_ops"},
)


class Post(Base):
    __tablename__ = "posts"
    __table_args__ = (
        Index("posts_author_created_idx", "author_id", "created_at", "id"),
        CheckConstraint(
            f"visibility in {tuple(v.value for v in Visibility)}", name="posts_visibility_check"
        ),
    )

    # Time-ordered 64-bit id from next_post_id(): 19 decimal digits, so ids sort as strings too.
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    author_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("users.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    body: Mapped[str] = mapped_column(Text)
    visibility: Mapped[str] = mapped_column(String(10), server_default=Visibility.PUBLIC.value)
    version: Mapped[int] = mapped_column(Integer, server_default="1")
    edited_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    like_count: Mapped[int] = mapped_column(Integer, server_default="0")
    comment_count: Mapped[int] = mapped_column(Integer, server_default="0")
    # Regions it is withheld in (NULL: none): the rule's copy of post_restrictions (0088).
    restricted_regions: Mapped[list[str] | None] = mapped_column(ARRAY(String(32)))


class Follow(Base):
    __tablename__ = "follows"
    __table_args__ = (
        Index("follows_followee_idx", "followee_id", "follower_id"),
        # User.followers / User.following: newest edge first (app.social.follow_lists).
        Index("follows_followee_created_idx", "followee_id", "created_at", "follower_id"),
        Index("follows_follower_created_idx", "follower_id", "created_at", "followee_id"),
    )

    follower_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    followee_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Block(Base):
    __tablename__ = "blocks"
    __table_args__ = (Index("blocks_blocked_idx", "blocked_id", "blocker_id"),)

    blocker_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    blocked_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Like(Base):
    __tablename__ = "likes"
    __table_args__ = (Index("likes_user_idx", "user_id", "post_id"),)

    post_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("posts.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    # Denormalised so author affinity is one indexed scan of the viewer's likes.
    author_id: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Comment(Base):
    __tablename__ = "comments"
    __table_args__ = (
        Index("comments_post_idx", "post_id", "created_at", "id"),  # Post.comments keyset
        Index("comments_author_idx", "author_id", "post_author_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    post_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("posts.id", ondelete="CASCADE"))
    author_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("users.id", ondelete="CASCADE"))
    post_author_id: Mapped[int] = mapped_column(BigInteger)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class OutboxEvent(Base):
    __tablename__ = "outbox"
    __table_args__ = (
        Index("outbox_unpublished_idx", "id", postgresql_where=text("published_at IS NULL")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    event_type: Mapped[str] = mapped_column(String(40))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class IdempotencyKey(Base):
    """createPost's keys, kept IDEMPOTENCY_KEY_TTL_SECONDS after their first use (then taken
    over by a new use, and deleted by jobs.housekeeping, oldest first)."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (Index("idempotency_keys_created_idx", "created_at"),)

    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    post_id: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class CommentIdempotencyKey(Base):
    """addComment's keys, apart from createPost's: a key names one comment of its user (on
    the post recorded with it), kept after the comment is deleted so a late retry is refused
    rather than made again (app.social.engagement.add_comment), until it expires as
    createPost's do."""

    __tablename__ = "comment_idempotency_keys"
    __table_args__ = (Index("comment_idempotency_keys_created_idx", "created_at"),)

    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    comment_id: Mapped[int] = mapped_column(BigInteger)
    post_id: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class PostWidening(Base):
    """A widening of a post (PRIVATE -> FOLLOWERS/PUBLIC) that fans it out again, at its new
    version: at most FANOUT_WIDENINGS_PER_POST_PER_HOUR rows of a post within an hour
    (app.posts.service.set_visibility, decision 0067); a widening's fan-out whose version is
    not the post's newest one here was overtaken and writes nothing. Kept an hour
    (jobs.housekeeping)."""

    __tablename__ = "post_widenings"
    __table_args__ = (Index("post_widenings_widened_idx", "widened_at"),)

    post_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("posts.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    widened_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class RevokedToken(Base):
    """logOut's record of one token id, until the token would have expired anyway: Redis's
    deny-list (`tr:` keys) is a cache of this table, filled back whenever Redis cannot
    vouch for a token (app.auth.revocation, docs/decisions/0066). Rows past `expires_at`
    are pruned by later logOuts (a bounded batch each)."""

    __tablename__ = "revoked_tokens"
    __table_args__ = (Index("revoked_tokens_expires_at_idx", "expires_at"),)

    token_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class HiddenPost(Base):
    """A post the viewer hid (hidePost, showFewerLikeThis): never in their home feed again,
    still on the author's profile and by id (app.posts.visibility `hidden_sql`). At most
    FEEDBACK_MAX_HIDDEN_POSTS per user: the oldest go first (app.social.feedback)."""

    __tablename__ = "hidden_posts"
    __table_args__ = (Index("hidden_posts_user_created_idx", "user_id", "created_at"),)

    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    post_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("posts.id", ondelete="CASCADE"), primary_key=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Mute(Base):
    """The muter sees none of the muted user's posts in feeds and live counts; not a block:
    follows stay and the muted user is told nothing (app.posts.visibility `muted_sql`)."""

    __tablename__ = "mutes"
    __table_args__ = (
        Index("mutes_muted_idx", "muted_id", "muter_id"),
        CheckConstraint("muter_id <> muted_id", name="mutes_not_self"),
    )

    muter_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    muted_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class FeedFeedback(Base):
    """A viewer's feedback on an author's posts by kind ('fewer': "show fewer like this"),
    counted: a ranking feature and a recommendation source's demotion, never a filter."""

    __tablename__ = "feed_feedback"
    __table_args__ = (
        Index("feed_feedback_author_idx", "author_id", "user_id"),
        Index("feed_feedback_user_updated_idx", "user_id", "updated_at"),
        CheckConstraint("kind IN ('fewer')", name="feed_feedback_kind"),
        CheckConstraint("count > 0", name="feed_feedback_count_positive"),
    )

    user_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    author_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    count: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


# The engagement log (app.engagement, docs/decisions/0077): a table partitioned by day on
# `at`, one partition per UTC day (`engagement_events_pYYYYMMDD`, made ahead and dropped past
# ENGAGEMENT_RETENTION_DAYS by a job; migrations/env.py leaves the partitions out of the
# comparison with the models). Core, not ORM: rows are only ever COPYed and scanned.
ENGAGEMENT_EVENTS = Table(
    "engagement_events",
    Base.metadata,
    Column("at", DateTime(timezone=True), nullable=False),
    Column("kind", SmallInteger, nullable=False),  # app.engagement.kinds.Kind
    Column("viewer_id", BigInteger, nullable=False),
    Column("post_id", BigInteger),
    Column("author_id", BigInteger),
    Column("session_id", String(64)),
    Column("position", Integer),
    Column("reason", String(32)),
    Column("model_version", String(64)),
    Column("arm", String(64)),
    Column("shown", Integer),  # PAGE events: the page's figures
    Column("duplicates", Integer),
    Column("empty", Boolean),
    Column("cost_ms", REAL),
    postgresql_partition_by="RANGE (at)",
)

# Each author's source quality from the log (app.engagement.features); author 0: the prior.
AUTHOR_QUALITY = Table(
    "author_quality",
    Base.metadata,
    Column("author_id", BigInteger, primary_key=True, autoincrement=False),
    Column("impressions", Integer, nullable=False),
    Column("engagements", Integer, nullable=False),
    Column("quality", Float, nullable=False),
    Column("computed_at", DateTime(timezone=True), nullable=False),
)


# ---- Image posts (app.media, docs/decisions/0080) -------------------------------------------

# An upload's life: `pending` (its URL handed out, bytes maybe PUT), `attached` (its bytes
# checked and stored as a media object by createPost), `expired` (never attached within
# MEDIA_UPLOAD_TTL_SECONDS: its staged bytes deleted, the row kept for the day's budget).
UPLOAD_STATES = ("pending", "attached", "expired")


class Upload(Base):
    """A presigned upload (createUpload): what the client declared, where its bytes are
    staged. Kept a day at least: the per-user budgets count these rows (app.media.uploads)."""

    __tablename__ = "uploads"
    __table_args__ = (
        # The budgets: a user's uploads of the last 24 h.
        Index("uploads_user_created_idx", "user_id", "created_at"),
        # The cleanup job: pending uploads past their expiry; the others by age.
        Index(
            "uploads_pending_expiry_idx", "expires_at", postgresql_where=text("state = 'pending'")
        ),
        Index("uploads_created_idx", "created_at"),
        CheckConstraint(f"state IN {UPLOAD_STATES}", name="uploads_state_check"),
        CheckConstraint("byte_size > 0", name="uploads_byte_size_positive"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # random, unguessable
    user_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("users.id", ondelete="CASCADE"))
    content_type: Mapped[str] = mapped_column(String(32))
    byte_size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(String(64))  # declared, hex
    staging_key: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    state: Mapped[str] = mapped_column(String(10), server_default=text("'pending'"))


class MediaObject(Base):
    """Checked, stripped bytes in the object store, once per content: the key is an HMAC of
    their sha256 under a media sub-key of SECRET_KEY (app.media.keys), so equal bytes share
    one object and a key tells nothing guessable."""

    __tablename__ = "media_objects"
    __table_args__ = (
        # The cleanup job: objects not attached for a while, oldest first.
        Index("media_objects_attached_idx", "last_attached_at"),
    )

    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    content_type: Mapped[str] = mapped_column(String(32))
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    byte_size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # Touched by every attach: the cleanup's grace counts from it, and its row lock makes a
    # concurrent cleanup of the same object re-check (app.media.cleanup).
    last_attached_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class PostMedia(Base):
    """A post's images, positions 0-3, each a media object and its alt text. Read per page
    with `post_id = ANY(...)` through the primary key (app.media.hydrate)."""

    __tablename__ = "post_media"
    __table_args__ = (
        # Whether any live post still uses an object (the cleanup job).
        Index("post_media_key_idx", "media_key"),
        CheckConstraint("position BETWEEN 0 AND 3", name="post_media_position_check"),
    )

    post_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("posts.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    media_key: Mapped[str] = mapped_column(
        String(128), ForeignKey("media_objects.key", ondelete="CASCADE")
    )
    alt: Mapped[str | None] = mapped_column(Text)


CLIENT_DOCUMENT_FORMATS = ("apollo", "codegen", "relay")


class ClientDocument(Base):
    """A client's own persisted document, registered from its build's manifest with
    `python -m app.documents register` (docs/decisions/0083): kept by the id the client
    sends for it (Apollo's and GraphQL Code Generator's SHA-256 hex, Relay's md5), validated
    against the schema at registration and again when an API process loads it."""

    __tablename__ = "client_documents"
    __table_args__ = (
        CheckConstraint(f"format IN {CLIENT_DOCUMENT_FORMATS}", name="client_documents_format"),
    )

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(128))  # the operation's name, if any
    body: Mapped[str] = mapped_column(Text)
    format: Mapped[str] = mapped_column(String(16))
    registered_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class PostRestriction(Base):
    """A post withheld in one region (`python -m app.moderation`, decision 0088)."""

    __tablename__ = "post_restrictions"

    post_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("posts.id", ondelete="CASCADE"), primary_key=True
    )
    region: Mapped[str] = mapped_column(String(32), primary_key=True)
    reason: Mapped[str] = mapped_column(Text)
    restricted_by: Mapped[str] = mapped_column(String(64))
    restricted_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )


class PostRestrictionAudit(Base):
    """One restrict or unrestrict; outlives the post (no foreign key)."""

    __tablename__ = "post_restriction_audit"
    __table_args__ = (
        CheckConstraint(
            "action IN ('restrict', 'unrestrict')", name="post_restriction_audit_action"
        ),
        Index("post_restriction_audit_post_idx", "post_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    post_id: Mapped[int] = mapped_column(BigInteger)
    action: Mapped[str] = mapped_column(String(16))
    regions: Mapped[list[str]] = mapped_column(ARRAY(String(32)))
    reason: Mapped[str] = mapped_column(Text)
    operator: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


# ---- Regions (app.db.regions, docs/decisions/0087) ------------------------------------------

# Which region this database is (one row at most; none: region 0, "local").
REGION_IDENTITY = Table(
    "region_identity",
    Base.metadata,
    Column("one", Boolean, primary_key=True, server_default=true()),
    Column("name", String(32), nullable=False),
    Column("number", SmallInteger, nullable=False),
    Column("confirm_ms", Integer, nullable=False, server_default="3000"),
    CheckConstraint("one", name="region_identity_one"),
    CheckConstraint("number BETWEEN 0 AND 15", name="region_identity_number"),
)

# The priority path: deletes and narrowings of posts, recorded by a trigger in the post's
# home region and carried by a subscription of their own ahead of the bulk stream.
POST_TOMBSTONES = Table(
    "post_tombstones",
    Base.metadata,
    Column("post_id", BigInteger, primary_key=True, autoincrement=False),
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("deleted", Boolean, primary_key=True),
    Column("visibility", String(10), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
)

# Each region's heartbeat as applied here (the priority path): up to when its tombstones are.
REGION_HEARTBEATS = Table(
    "region_heartbeats",
    Base.metadata,
    Column("number", SmallInteger, primary_key=True, autoincrement=False),
    Column("at", DateTime(timezone=True), nullable=False),
)
