"""comment paging, follower lists, user search and impressions (issue 14)

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Post.comments pages (created_at, id) oldest first: the whole keyset in the index.
    op.drop_index("comments_post_idx", table_name="comments")
    op.create_index("comments_post_idx", "comments", ["post_id", "created_at", "id"])
    # User.followers / User.following page newest edge first.
    op.create_index(
        "follows_followee_created_idx", "follows", ["followee_id", "created_at", "follower_id"]
    )
    op.create_index(
        "follows_follower_created_idx", "follows", ["follower_id", "created_at", "followee_id"]
    )
    # searchUsers: prefix LIKE on the handle and the lower-cased display name. Pattern
    # operator classes, because a btree in a non-C collation cannot answer LIKE 'ab%'
    # (docs/decisions/0009-user-search.md).
    op.create_index(
        "users_handle_prefix_idx",
        "users",
        ["handle"],
        postgresql_ops={"handle": "varchar_pattern_ops"},
    )
    op.create_index(
        "users_display_name_prefix_idx",
        "users",
        [sa.text("lower(display_name) text_pattern_ops")],
    )


def downgrade() -> None:
    op.drop_index("users_display_name_prefix_idx", table_name="users")
    op.drop_index("users_handle_prefix_idx", table_name="users")
    op.drop_index("follows_follower_created_idx", table_name="follows")
    op.drop_index("follows_followee_created_idx", table_name="follows")
    op.drop_index("comments_post_idx", table_name="comments")
    op.create_index("comments_post_idx", "comments", ["post_id", "created_at"])
