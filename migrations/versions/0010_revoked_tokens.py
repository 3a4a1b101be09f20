"""revoked_tokens: logOut recorded in PostgreSQL, not only in Redis (issue 33)

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The durable copy of the deny-list: a Redis role that comes back empty (a failover to
    # an empty replica, a restart without persistence) is filled back from here
    # (app.auth.revocation, docs/decisions/0066-durable-revocation.md).
    op.create_table(
        "revoked_tokens",
        sa.Column("token_id", sa.String(length=64), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_revoked_tokens_user_id", "revoked_tokens", ["user_id"])
    # Pruning deletes the rows past expiry, oldest first.
    op.create_index("revoked_tokens_expires_at_idx", "revoked_tokens", ["expires_at"])


def downgrade() -> None:
    op.drop_index("revoked_tokens_expires_at_idx", table_name="revoked_tokens")
    op.drop_index("ix_revoked_tokens_user_id", table_name="revoked_tokens")
    op.drop_table("revoked_tokens")
