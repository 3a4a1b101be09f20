"""engagement_events: the engagement log, partitioned by day; author_quality: its feature
(issue 35, item 5)

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Partitions made here: today (UTC) and the days after it, as the periodic job keeps them
# (app.engagement.partitions.AHEAD_DAYS); a copy of this number, a migration stays as written.
FIRST_PARTITIONS = 4


def upgrade() -> None:
    # No primary key and no foreign keys: an append-only log, written in COPY batches off
    # the request path, that outlives the users and posts it names (decision 0077).
    op.execute(
        """
        CREATE TABLE engagement_events (
            at timestamptz NOT NULL,
            kind smallint NOT NULL,
            viewer_id bigint NOT NULL,
            post_id bigint,
            author_id bigint,
            session_id varchar(64),
            position integer,
            reason varchar(32),
            model_version varchar(64),
            arm varchar(64),
            shown integer,
            duplicates integer,
            empty boolean,
            cost_ms real
        ) PARTITION BY RANGE (at)
        """
    )
    today = datetime.now(UTC).date()
    for offset in range(FIRST_PARTITIONS):
        day = today + timedelta(days=offset)
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        op.execute(
            f"CREATE TABLE engagement_events_p{day:%Y%m%d} PARTITION OF engagement_events "
            f"FOR VALUES FROM ('{start.isoformat()}') TO "
            f"('{(start + timedelta(days=1)).isoformat()}')"
        )
    # Each author's source quality, computed from the log by a periodic job; author 0 holds
    # the window's overall rate, the prior (app.engagement.features).
    op.create_table(
        "author_quality",
        sa.Column("author_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("impressions", sa.Integer(), nullable=False),
        sa.Column("engagements", sa.Integer(), nullable=False),
        sa.Column("quality", sa.Float(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("author_quality")
    op.execute("DROP TABLE engagement_events")  # its partitions go with it
