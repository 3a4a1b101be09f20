"""regional restrictions: posts withheld in named regions, with an audit trail (issue 37 part 3,
docs/decisions/0088)

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The operators' record: one row per (post, region) in force, with who and why.
    op.create_table(
        "post_restrictions",
        sa.Column(
            "post_id",
            sa.BigInteger(),
            sa.ForeignKey("posts.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("region", sa.String(32), primary_key=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("restricted_by", sa.String(64), nullable=False),
        sa.Column(
            "restricted_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
    )
    # Every restrict and unrestrict, kept after the restriction (and the post) are gone:
    # no foreign key.
    op.create_table(
        "post_restriction_audit",
        sa.Column("id", sa.BigInteger(), autoincrement=True, primary_key=True),
        sa.Column("post_id", sa.BigInteger(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("regions", ARRAY(sa.String(32)), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("operator", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint(
            "action IN ('restrict', 'unrestrict')", name="post_restriction_audit_action"
        ),
    )
    op.create_index("post_restriction_audit_post_idx", "post_restriction_audit", ["post_id", "id"])
    # The read rule's copy (app.posts.visibility.restricted_sql): the post's restricted
    # regions on its own row, NULL when none, so the filter reads no other table and a
    # feed page's cost stays flat (decision 0088). Written only with post_restrictions,
    # in the same transaction (app.posts.restrictions). Nullable without a default: adding
    # it rewrites nothing.
    op.add_column("posts", sa.Column("restricted_regions", ARRAY(sa.String(32)), nullable=True))


def downgrade() -> None:
    op.drop_column("posts", "restricted_regions")
    op.drop_index("post_restriction_audit_post_idx", table_name="post_restriction_audit")
    op.drop_table("post_restriction_audit")
    op.drop_table("post_restrictions")
