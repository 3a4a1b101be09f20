"""idempotency keys expire; post_widenings bounds a post's re-fan-outs (issue 33)

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Keys expire IDEMPOTENCY_KEY_TTL_SECONDS after their first use; the worker's
    # housekeeping deletes them oldest first in bounded batches (jobs.housekeeping).
    op.create_index("idempotency_keys_created_idx", "idempotency_keys", ["created_at"])
    op.create_index(
        "comment_idempotency_keys_created_idx", "comment_idempotency_keys", ["created_at"]
    )
    # One row per widening of a post (PRIVATE -> FOLLOWERS/PUBLIC) that fans it out again:
    # at most FANOUT_WIDENINGS_PER_POST_PER_HOUR within an hour (decision 0067); the newest
    # version tells a widening's fan-out that a later one overtook it. Kept an hour.
    op.create_table(
        "post_widenings",
        sa.Column(
            "post_id",
            sa.BigInteger(),
            sa.ForeignKey("posts.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column(
            "widened_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
    )
    op.create_index("post_widenings_widened_idx", "post_widenings", ["widened_at"])


def downgrade() -> None:
    op.drop_index("post_widenings_widened_idx", table_name="post_widenings")
    op.drop_table("post_widenings")
    op.drop_index("comment_idempotency_keys_created_idx", table_name="comment_idempotency_keys")
    op.drop_index("idempotency_keys_created_idx", table_name="idempotency_keys")
