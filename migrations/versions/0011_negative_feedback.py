"""negative feedback: hidden posts, mutes, "show fewer like this" (issue 35, item 4)

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _user(name: str) -> sa.Column:
    return sa.Column(
        name,
        sa.BigInteger(),
        sa.ForeignKey("users.id", ondelete="CASCADE"),
        primary_key=True,
    )


def _now() -> sa.Column:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )


def upgrade() -> None:
    # The viewer's hidden posts: the home-feed rule's `hidden_sql` reads the viewer's rows
    # through the primary key (user_id, post_id); the oldest beyond the cap are dropped by
    # created_at (docs/decisions/0076-negative-feedback.md).
    op.create_table(
        "hidden_posts",
        _user("user_id"),
        sa.Column(
            "post_id",
            sa.BigInteger(),
            sa.ForeignKey("posts.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        _now(),
    )
    op.create_index("hidden_posts_user_created_idx", "hidden_posts", ["user_id", "created_at"])
    # Mutes: not a block (follows stay, the muted user is told nothing); the feed rule's
    # `muted_sql` reads the muter's rows through the primary key.
    op.create_table(
        "mutes",
        _user("muter_id"),
        _user("muted_id"),
        _now(),
        sa.CheckConstraint("muter_id <> muted_id", name="mutes_not_self"),
    )
    # The muted user's deletion cascades through this index, as blocks do.
    op.create_index("mutes_muted_idx", "mutes", ["muted_id", "muter_id"])
    # "Show fewer like this": how often the viewer asked it of an author's posts, a ranking
    # feature and a recommendation source's demotion (one row per viewer, author and kind).
    op.create_table(
        "feed_feedback",
        _user("user_id"),
        _user("author_id"),
        sa.Column("kind", sa.String(length=16), primary_key=True),
        sa.Column("count", sa.Integer(), nullable=False, server_default="1"),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("kind IN ('fewer')", name="feed_feedback_kind"),
        sa.CheckConstraint("count > 0", name="feed_feedback_count_positive"),
    )
    op.create_index("feed_feedback_author_idx", "feed_feedback", ["author_id", "user_id"])
    op.create_index("feed_feedback_user_updated_idx", "feed_feedback", ["user_id", "updated_at"])


def downgrade() -> None:
    op.drop_index("feed_feedback_user_updated_idx", table_name="feed_feedback")
    op.drop_index("feed_feedback_author_idx", table_name="feed_feedback")
    op.drop_table("feed_feedback")
    op.drop_index("mutes_muted_idx", table_name="mutes")
    op.drop_table("mutes")
    op.drop_index("hidden_posts_user_created_idx", table_name="hidden_posts")
    op.drop_table("hidden_posts")
