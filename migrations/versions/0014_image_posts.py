"""uploads, media_objects, post_media: image posts (issue 36, docs/decisions/0080)

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    # createUpload's rows: the budgets count a user's last 24 h (uploads_user_created_idx),
    # the cleanup job finds pending uploads past their expiry and old rows (app.media).
    op.create_table(
        "uploads",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("content_type", sa.String(32), nullable=False),
        sa.Column("byte_size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("staging_key", sa.String(128), nullable=False, unique=True),
        sa.Column("created_at", _TIME, server_default=sa.func.now(), nullable=False),
        sa.Column("expires_at", _TIME, nullable=False),
        sa.Column("state", sa.String(10), server_default=sa.text("'pending'"), nullable=False),
        sa.CheckConstraint(
            "state IN ('pending', 'attached', 'expired')", name="uploads_state_check"
        ),
        sa.CheckConstraint("byte_size > 0", name="uploads_byte_size_positive"),
    )
    op.create_index("uploads_user_created_idx", "uploads", ["user_id", "created_at"])
    op.create_index(
        "uploads_pending_expiry_idx",
        "uploads",
        ["expires_at"],
        postgresql_where=sa.text("state = 'pending'"),
    )
    op.create_index("uploads_created_idx", "uploads", ["created_at"])
    # Checked, stripped bytes, one row per content (the key: an HMAC of their sha256).
    op.create_table(
        "media_objects",
        sa.Column("key", sa.String(128), primary_key=True),
        sa.Column("content_type", sa.String(32), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("byte_size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TIME, server_default=sa.func.now(), nullable=False),
        sa.Column("last_attached_at", _TIME, server_default=sa.func.now(), nullable=False),
    )
    op.create_index("media_objects_attached_idx", "media_objects", ["last_attached_at"])
    # A post's images: a page's read by the primary key (post_id = ANY, position order).
    op.create_table(
        "post_media",
        sa.Column(
            "post_id",
            sa.BigInteger(),
            sa.ForeignKey("posts.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.SmallInteger(), primary_key=True),
        sa.Column(
            "media_key",
            sa.String(128),
            sa.ForeignKey("media_objects.key", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("alt", sa.Text(), nullable=True),
        sa.CheckConstraint("position BETWEEN 0 AND 3", name="post_media_position_check"),
    )
    op.create_index("post_media_key_idx", "post_media", ["media_key"])


def downgrade() -> None:
    op.drop_table("post_media")
    op.drop_table("media_objects")
    op.drop_table("uploads")
