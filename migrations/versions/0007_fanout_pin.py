"""users.fanout_pin: an operator's push/pull override of the fan-out control plane (issue 21)

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL (auto) for every existing author: adding a nullable column rewrites nothing.
    op.add_column("users", sa.Column("fanout_pin", sa.String(length=4), nullable=True))
    op.create_check_constraint("users_fanout_pin_check", "users", "fanout_pin IN ('push', 'pull')")


def downgrade() -> None:
    op.drop_constraint("users_fanout_pin_check", "users", type_="check")
    op.drop_column("users", "fanout_pin")
