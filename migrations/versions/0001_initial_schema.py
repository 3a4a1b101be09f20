"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 00:26:42.300790
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Post ids: milliseconds since 2015-01-01 shifted left 22 bits, low bits from a sequence.
# Time-ordered, 19 decimal digits for centuries of dates after 2022, so they sort the same
# as numbers and as fixed-width strings (Redis compares equal scores lexicographically).
POST_ID_FUNCTION = """
CREATE FUNCTION next_post_id(ts timestamptz) RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT ((floor(extract(epoch FROM ts) * 1000)::bigint - 1420070400000) << 22)
         | (nextval('post_id_seq') & 4194303)
$$
"""


def upgrade() -> None:
    op.execute("CREATE SEQUENCE post_id_seq")
    op.execute(POST_ID_FUNCTION)
    op.create_table(
        "outbox",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "outbox_unpublished_idx",
        "outbox",
        ["id"],
        unique=False,
        postgresql_where=sa.text("published_at IS NULL"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("handle", sa.String(length=30), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("display_name", sa.String(length=80), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_active_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("follower_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("following_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("fanout_mode", sa.SmallInteger(), server_default="0", nullable=False),
        sa.Column("fanout_mode_version", sa.Integer(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("handle"),
    )
    op.create_table(
        "blocks",
        sa.Column("blocker_id", sa.BigInteger(), nullable=False),
        sa.Column("blocked_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["blocked_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["blocker_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("blocker_id", "blocked_id"),
    )
    op.create_index("blocks_blocked_idx", "blocks", ["blocked_id", "blocker_id"], unique=False)
    op.create_table(
        "follows",
        sa.Column("follower_id", sa.BigInteger(), nullable=False),
        sa.Column("followee_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["followee_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["follower_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("follower_id", "followee_id"),
    )
    op.create_index("follows_followee_idx", "follows", ["followee_id", "follower_id"], unique=False)
    op.create_table(
        "idempotency_keys",
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("post_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "key"),
    )
    op.create_table(
        "posts",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("author_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("visibility", sa.String(length=10), server_default="public", nullable=False),
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("edited_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("like_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("comment_count", sa.Integer(), server_default="0", nullable=False),
        sa.CheckConstraint(
            "visibility in ('public', 'followers', 'private')", name="posts_visibility_check"
        ),
        sa.ForeignKeyConstraint(["author_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "posts_author_created_idx", "posts", ["author_id", "created_at", "id"], unique=False
    )
    op.create_table(
        "comments",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("post_id", sa.BigInteger(), nullable=False),
        sa.Column("author_id", sa.BigInteger(), nullable=False),
        sa.Column("post_author_id", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["author_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["post_id"], ["posts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "comments_author_idx", "comments", ["author_id", "post_author_id"], unique=False
    )
    op.create_index("comments_post_idx", "comments", ["post_id", "created_at"], unique=False)
    op.create_table(
        "likes",
        sa.Column("post_id", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("author_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["post_id"], ["posts.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("post_id", "user_id"),
    )
    op.create_index("likes_user_idx", "likes", ["user_id", "post_id"], unique=False)


def downgrade() -> None:
    op.drop_index("likes_user_idx", table_name="likes")
    op.drop_table("likes")
    op.drop_index("comments_post_idx", table_name="comments")
    op.drop_index("comments_author_idx", table_name="comments")
    op.drop_table("comments")
    op.drop_index("posts_author_created_idx", table_name="posts")
    op.drop_table("posts")
    op.drop_table("idempotency_keys")
    op.drop_index("follows_followee_idx", table_name="follows")
    op.drop_table("follows")
    op.drop_index("blocks_blocked_idx", table_name="blocks")
    op.drop_table("blocks")
    op.drop_table("users")
    op.drop_index(
        "outbox_unpublished_idx",
        table_name="outbox",
        postgresql_where=sa.text("published_at IS NULL"),
    )
    op.drop_table("outbox")
    op.execute("DROP FUNCTION next_post_id(timestamptz)")
    op.execute("DROP SEQUENCE post_id_seq")
