"""client_documents: a client's own persisted documents, from its manifests (issue 39,
docs/decisions/0083)

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # `python -m app.documents register` writes these rows; every API process reads the whole
    # table (a few thousand rows at most, CLIENT_DOCUMENTS_MAX) into memory and serves them
    # by id (app.api.transports.trusted), re-reading it when it changed.
    op.create_table(
        "client_documents",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("name", sa.String(128), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column(
            "registered_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.CheckConstraint(
            "format IN ('apollo', 'codegen', 'relay')", name="client_documents_format"
        ),
    )


def downgrade() -> None:
    op.drop_table("client_documents")
