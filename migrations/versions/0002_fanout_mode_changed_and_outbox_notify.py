"""fan-out mode change time; NOTIFY on outbox insert so the relay wakes at once

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOTIFY_FUNCTION = """
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('outbox', '');
  RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.add_column(
        "users", sa.Column("fanout_mode_changed_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute(NOTIFY_FUNCTION)
    # Statement-level: one notification per inserting statement, delivered at commit.
    op.execute(
        "CREATE TRIGGER outbox_notify AFTER INSERT ON outbox "
        "FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER outbox_notify ON outbox")
    op.execute("DROP FUNCTION outbox_notify()")
    op.drop_column("users", "fanout_mode_changed_at")
