"""users.recommendations_enabled: the viewer's setting for the feed's recommendations (issue 35)

Revision ID: 0013
Revises: 0012
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # setRecommendations (docs/API.md); a RANKED first page reads it with the viewer's
    # context (app.feed.rows). A constant default: no table rewrite (PostgreSQL >= 11).
    op.add_column(
        "users",
        sa.Column(
            "recommendations_enabled", sa.Boolean(), server_default=sa.true(), nullable=False
        ),
    )


def downgrade() -> None:
    op.drop_column("users", "recommendations_enabled")
