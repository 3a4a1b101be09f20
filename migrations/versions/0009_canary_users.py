"""users.canary: the synthetic probe's canary accounts (issue 33, decision 0065)

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: PostgreSQL 11+ adds the column without rewriting the table. Existing
    # accounts (an older probe's `probe_N` included: anyone could have registered those) stay
    # ordinary; a canary is made only by a sign-up with the deployment's secret prefix.
    op.add_column(
        "users", sa.Column("canary", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    # The pruning job starts from the few canaries, not from every user.
    op.create_index("users_canary_idx", "users", ["id"], postgresql_where=sa.text("canary"))


def downgrade() -> None:
    op.drop_index("users_canary_idx", table_name="users")
    op.drop_column("users", "canary")
