"""regions: the database's region identity, region-coded post ids, users' home region, the
tombstones of the priority path and the triggers logical replication's apply runs (issue 37,
docs/decisions/0087)

Revision ID: 0017
Revises: 0015

Nothing here changes a single-region deployment's behaviour: region number 0 keeps the post
id layout of migration 0001 exactly, the origin trigger records no tombstone, and the
ENABLE REPLICA triggers fire only inside logical replication's apply worker
(session_replication_role = replica), which never runs without a subscription.
`python -m app.db.regions setup` numbers a region and its sequences; `... link` makes the
publications and subscriptions.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The 22-bit sequence field of migration 0001: region 0 keeps all of it; a numbered region
# (1-15) keeps 18 bits of sequence (262,144 posts per millisecond) and its number below them.
POST_ID_FUNCTION = """
CREATE OR REPLACE FUNCTION next_post_id(ts timestamptz) RETURNS bigint LANGUAGE plpgsql
VOLATILE AS $$
DECLARE
  r bigint := region_number();
  s bigint := nextval('post_id_seq');
BEGIN
  RETURN ((floor(extract(epoch FROM ts) * 1000)::bigint - 1420070400000) << 22)
         | CASE WHEN r = 0 THEN s & 4194303 ELSE ((s & 262143) << 4) | r END;
END
$$
"""

OLD_POST_ID_FUNCTION = """
CREATE OR REPLACE FUNCTION next_post_id(ts timestamptz) RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT ((floor(extract(epoch FROM ts) * 1000)::bigint - 1420070400000) << 22)
         | (nextval('post_id_seq') & 4194303)
$$
"""

FUNCTIONS = [
    # The regions whose tombstone state this database cannot confirm now: their heartbeat,
    # applied on the priority path, is older than confirm_ms (or never came). Their posts
    # are not served here (app.posts.visibility.alive_sql) until it is current again.
    """
    CREATE FUNCTION region_unconfirmed() RETURNS smallint[] LANGUAGE sql STABLE AS $$
      SELECT coalesce(array_agg(h.number), '{}'::smallint[])
      FROM region_heartbeats h, region_identity i
      WHERE h.number <> i.number AND h.at < now() - make_interval(secs => i.confirm_ms / 1000.0)
    $$
    """,
    """
    CREATE FUNCTION region_number() RETURNS smallint LANGUAGE sql STABLE AS $$
      SELECT coalesce((SELECT number FROM region_identity), 0::smallint)
    $$
    """,
    """
    CREATE FUNCTION region_name() RETURNS text LANGUAGE sql STABLE AS $$
      SELECT coalesce((SELECT name FROM region_identity), 'local')
    $$
    """,
    # The home region's side of the priority path: a delete or a narrowing of a post made
    # here is also a row of post_tombstones, which its own publication and subscription
    # carry to the other regions ahead of the bulk stream. An ordinary (origin) trigger:
    # it fires for this region's own writes, never for replicated ones.
    """
    CREATE FUNCTION post_tombstone_record() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF region_number() = 0 THEN
        RETURN NULL;
      END IF;
      IF OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
        INSERT INTO post_tombstones (post_id, version, deleted, visibility, at)
        VALUES (NEW.id, NEW.version, true, NEW.visibility, NEW.deleted_at)
        ON CONFLICT DO NOTHING;
      ELSIF visibility_rank(NEW.visibility) < visibility_rank(OLD.visibility) THEN
        INSERT INTO post_tombstones (post_id, version, deleted, visibility, at)
        VALUES (NEW.id, NEW.version, false, NEW.visibility, now())
        ON CONFLICT DO NOTHING;
      END IF;
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION visibility_rank(v text) RETURNS int LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE v WHEN 'public' THEN 3 WHEN 'followers' THEN 2 ELSE 1 END
    $$
    """,
    # The read region's side: a tombstone applied (priority subscription) narrows or deletes
    # the local copy at once, if the bulk stream has not gone past it already.
    """
    CREATE FUNCTION post_tombstone_apply() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.deleted THEN
        UPDATE posts SET deleted_at = NEW.at WHERE id = NEW.post_id AND deleted_at IS NULL;
      ELSE
        UPDATE posts SET visibility = NEW.visibility
        WHERE id = NEW.post_id AND version < NEW.version
          AND visibility_rank(NEW.visibility) < visibility_rank(visibility);
      END IF;
      RETURN NULL;
    END
    $$
    """,
    # ...and a post row the bulk stream brings later (its insert, or an update older than a
    # tombstone already here) is never less narrow than what the tombstones prove.
    """
    CREATE FUNCTION post_tombstone_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      t record;
    BEGIN
      FOR t IN SELECT * FROM post_tombstones WHERE post_id = NEW.id LOOP
        IF t.deleted THEN
          NEW.deleted_at := coalesce(NEW.deleted_at, t.at);
        ELSIF t.version > NEW.version
              AND visibility_rank(t.visibility) < visibility_rank(NEW.visibility) THEN
          NEW.visibility := t.visibility;
        END IF;
      END LOOP;
      NEW.restricted_regions := post_restriction_union(NEW.restricted_regions, NEW.id);
      RETURN NEW;
    END
    $$
    """,
    # Regional restrictions (decision 0088) on the priority path: the home region's
    # post_restrictions rows replicate on region_priority; applied here, they set the local
    # post's restricted_regions at once (the post row may not be here yet: the apply worker
    # checks no foreign key, and the guard below takes the rows on its insert).
    """
    CREATE FUNCTION post_restriction_apply() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      p bigint;
    BEGIN
      IF TG_OP = 'DELETE' THEN p := OLD.post_id; ELSE p := NEW.post_id; END IF;
      UPDATE posts SET restricted_regions = post_restricted_in(p) WHERE id = p;
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION post_restricted_in(p bigint) RETURNS varchar(32)[] LANGUAGE sql STABLE AS $$
      SELECT array_agg(region ORDER BY region) FROM post_restrictions WHERE post_id = p
    $$
    """,
    # A bulk post row keeps at least the restrictions the priority path brought: the union
    # of its own copy and the applied rows. A lift is applied by the priority row's delete
    # (the copy is then the rows alone); an older bulk row arriving after it narrows again
    # until the bulk row of the lift itself, which is never wider than the rows.
    """
    CREATE FUNCTION post_restriction_union(mine varchar(32)[], p bigint)
    RETURNS varchar(32)[] LANGUAGE sql STABLE AS $$
      SELECT array_agg(DISTINCT r ORDER BY r) FROM (
        SELECT unnest(mine) AS r UNION SELECT region FROM post_restrictions WHERE post_id = p
      ) u
    $$
    """,
    # Counters are region-local columns (left out of the publications' column lists): each
    # region counts the graph and engagement rows it holds, its own writes in the app's
    # transactions, replicated ones here.
    """
    CREATE FUNCTION region_follow_counts() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      r record;
      d int;
    BEGIN
      IF TG_OP = 'INSERT' THEN r := NEW; d := 1; ELSE r := OLD; d := -1; END IF;
      UPDATE users SET following_count = following_count + d WHERE id = r.follower_id;
      UPDATE users SET follower_count = follower_count + d WHERE id = r.followee_id;
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION region_like_counts() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        UPDATE posts SET like_count = like_count + 1 WHERE id = NEW.post_id;
      ELSE
        UPDATE posts SET like_count = like_count - 1 WHERE id = OLD.post_id;
      END IF;
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION region_comment_counts() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        UPDATE posts SET comment_count = comment_count + 1 WHERE id = NEW.post_id;
      ELSE
        UPDATE posts SET comment_count = comment_count - 1 WHERE id = OLD.post_id;
      END IF;
      RETURN NULL;
    END
    $$
    """,
    # A block cuts follows both ways; the follow of the blocked user is homed in the other
    # region, so the region receiving the block cuts it too (its delete from the blocker's
    # region, if it comes, finds nothing: a skipped delete_missing, counted once).
    """
    CREATE FUNCTION region_block_cuts() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM follows
      WHERE (follower_id = NEW.blocker_id AND followee_id = NEW.blocked_id)
         OR (follower_id = NEW.blocked_id AND followee_id = NEW.blocker_id);
      RETURN NULL;
    END
    $$
    """,
    # Statement triggers do not fire for applied rows: a row trigger wakes the relay there.
    """
    CREATE FUNCTION outbox_notify_row() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('outbox', '');
      RETURN NULL;
    END
    $$
    """,
]

# (trigger, table, timing and events, function): ENABLE REPLICA, fired by the apply worker only.
REPLICA_TRIGGERS = [
    ("post_tombstones_apply", "post_tombstones", "AFTER INSERT", "post_tombstone_apply"),
    ("posts_tombstone_guard", "posts", "BEFORE INSERT OR UPDATE", "post_tombstone_guard"),
    (
        "post_restrictions_apply",
        "post_restrictions",
        "AFTER INSERT OR UPDATE OR DELETE",
        "post_restriction_apply",
    ),
    ("follows_region_counts", "follows", "AFTER INSERT OR DELETE", "region_follow_counts"),
    ("likes_region_counts", "likes", "AFTER INSERT OR DELETE", "region_like_counts"),
    ("comments_region_counts", "comments", "AFTER INSERT OR DELETE", "region_comment_counts"),
    ("blocks_region_cuts", "blocks", "AFTER INSERT", "region_block_cuts"),
    ("outbox_notify_applied", "outbox", "AFTER INSERT", "outbox_notify_row"),
]

FUNCTION_NAMES = [
    "post_tombstone_record()",
    "post_tombstone_apply()",
    "post_tombstone_guard()",
    "post_restriction_apply()",
    "post_restricted_in(bigint)",
    "post_restriction_union(varchar[], bigint)",
    "region_follow_counts()",
    "region_like_counts()",
    "region_comment_counts()",
    "region_block_cuts()",
    "outbox_notify_row()",
    "visibility_rank(text)",
    "region_name()",
    "region_unconfirmed()",
    "region_number()",
]


def upgrade() -> None:
    # One row at most (the `one` key): which region this database is, set by
    # `python -m app.db.regions setup`; absent = region 0, "local" (one region).
    op.create_table(
        "region_identity",
        sa.Column("one", sa.Boolean(), primary_key=True, server_default=sa.true()),
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("number", sa.SmallInteger(), nullable=False),
        # How far behind a peer's heartbeat may be before its posts are not served here.
        sa.Column("confirm_ms", sa.Integer(), nullable=False, server_default="3000"),
        sa.CheckConstraint("one", name="region_identity_one"),
        sa.CheckConstraint("number BETWEEN 0 AND 15", name="region_identity_number"),
    )
    op.create_table(
        "post_tombstones",
        sa.Column("post_id", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("visibility", sa.String(10), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("post_id", "version", "deleted"),
    )
    # Each region's heartbeat, written by its relay every REGION_HEARTBEAT_MS and carried on
    # the priority path: a region's row here says up to when every tombstone of that region
    # has been applied in this database. Rows of peers are made by `link`.
    op.create_table(
        "region_heartbeats",
        sa.Column("number", sa.SmallInteger(), primary_key=True, autoincrement=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    for statement in FUNCTIONS:
        op.execute(statement)
    for signature in FUNCTION_NAMES:
        # The apply worker runs with an empty search_path: the triggers name their tables.
        op.execute(f"ALTER FUNCTION {signature} SET search_path = public")
    op.execute(POST_ID_FUNCTION)
    op.add_column(
        "users",
        sa.Column(
            "home_region", sa.String(32), nullable=False, server_default=sa.text("region_name()")
        ),
    )
    op.execute(
        "CREATE TRIGGER posts_tombstone_record AFTER UPDATE OF deleted_at, visibility ON posts "
        "FOR EACH ROW EXECUTE FUNCTION post_tombstone_record()"
    )
    for name, table, when, function in REPLICA_TRIGGERS:
        op.execute(
            f"CREATE TRIGGER {name} {when} ON {table} FOR EACH ROW EXECUTE FUNCTION {function}()"
        )
        op.execute(f"ALTER TABLE {table} ENABLE REPLICA TRIGGER {name}")


def downgrade() -> None:
    for name, table, _, _ in REPLICA_TRIGGERS:
        op.execute(f"DROP TRIGGER {name} ON {table}")
    op.execute("DROP TRIGGER posts_tombstone_record ON posts")
    op.drop_column("users", "home_region")
    op.execute("DROP FUNCTION next_post_id(timestamptz)")
    op.execute(OLD_POST_ID_FUNCTION)
    for signature in FUNCTION_NAMES:
        op.execute(f"DROP FUNCTION {signature}")
    op.drop_table("region_heartbeats")
    op.drop_table("post_tombstones")
    op.drop_table("region_identity")
