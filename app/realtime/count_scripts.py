"""The live counts' Lua scripts (`app.realtime.counts` runs them; the rules they keep are
told there): adding posts to many users' counts (ADD), the fan-out batch's counts as a tail
of the timeline write (COUNT_TAIL, `app.timelines.tails`), stop marks (STOP), forgetting
posts (DROP, FORGET), resets (RESET, MARK).

Why scripts: a count's insert, trim, stop-mark check and publish must be atomic per user (a
replayed batch or a concurrent reset sees all of it or none), and a batch's users cost one
round trip (SCRIPT_KEYS users per call on a standalone server).
"""

from __future__ import annotations

from app.redis_scripts import LuaScript
from app.timelines.store import TIMELINE_ID_SPAN
from app.timelines.tails import TailProgram

# Publish to a user's channel: a shard channel (a cluster's, `}`-ended, app.realtime.keys)
# with SPUBLISH, on the shard the script runs on (the channel shares its user's slot), else
# classic PUBLISH.
_NOTIFY = """
local function notify(channel, message)
  if string.byte(channel, -1) == 125 then
    redis.call('SPUBLISH', channel, message)
  else
    redis.call('PUBLISH', channel, message)
  end
end
"""

# The counting of ADD as a Lua fragment, shared with COUNT_TAIL (the fan-out's insert and
# count in one call): `count_args(b)` reads the head from ARGV[b+1]: ttl, max, now_ms, mode,
# channel prefix, n, na, then n triples score, member, author index (1..na; 0 = author
# unknown), then na author ids, and returns the ARGV index the user ids start after;
# `count_user(key, marks, uid)` counts the posts for one user (its count key and stop-marks
# key): a post whose author has a stop mark >= its score, or that has a tombstone
# `p<post_id>` (a delete), is not counted for that user (one ZMSCORE per user over the authors
# and posts). mode 'p': publishes "count:latest:now" to <prefix><uid> when the count grew.
# Returns (added, card, latest).
_COUNT_LIB = (
    _NOTIFY
    + """
local C = {}
local function count_args(b)
  C.ttl, C.max, C.now, C.mode, C.prefix = ARGV[b + 1], tonumber(ARGV[b + 2]), ARGV[b + 3],
    ARGV[b + 4], ARGV[b + 5]
  C.close = string.byte(C.prefix, -1) == 123 and '}' or ''
  C.n, C.na = tonumber(ARGV[b + 6]), tonumber(ARGV[b + 7])
  C.zargs, C.scores, C.members, C.owner, C.names = {}, {}, {}, {}, {}
  for j = 1, C.n do
    local t = b + 5 + 3 * j
    C.scores[j], C.members[j], C.owner[j] = tonumber(ARGV[t]), ARGV[t + 1], tonumber(ARGV[t + 2])
    C.zargs[#C.zargs + 1] = ARGV[t]
    C.zargs[#C.zargs + 1] = ARGV[t + 1]
  end
  for a = 1, C.na do C.names[a] = ARGV[b + 7 + 3 * C.n + a] end
  for j = 1, C.n do C.names[C.na + j] = 'p' .. C.members[j] end
  return b + 7 + 3 * C.n + C.na
end

local function count_user(key, marks, uid)
  local z = C.zargs
  if C.n > 0 then
    local found = redis.call('ZMSCORE', marks, unpack(C.names))
    local marked = false
    for k = 1, C.na + C.n do
      if found[k] then marked = true end
    end
    if marked then
      z = {}
      for j = 1, C.n do
        local mark = C.owner[j] > 0 and found[C.owner[j]]
        if not found[C.na + j] and (not mark or C.scores[j] > tonumber(mark)) then
          z[#z + 1] = C.scores[j]
          z[#z + 1] = C.members[j]
        end
      end
    end
  end
  local added = 0
  if #z > 0 then
    added = redis.call('ZADD', key, unpack(z))
    redis.call('EXPIRE', key, C.ttl)
  end
  local card = redis.call('ZCARD', key)
  if card > C.max then
    redis.call('ZREMRANGEBYRANK', key, 0, card - C.max - 1)
    card = C.max
  end
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local latest = top[2] or '0'
  if C.mode == 'p' and added > 0 then
    notify(C.prefix .. uid .. C.close, card .. ':' .. latest .. ':' .. C.now)
  end
  return added, card, latest
end
"""
)

# Add posts to many users' counts. KEYS: per user its count key, then its stop-marks key.
# ARGV: the head `count_args` reads (from ARGV[1]), then one user id per key pair.
# mode 'p': publish to each user whose count grew; returns publishes.
# mode 'r': publish nothing; returns a flat list count1, latest1, count2, latest2, ...
ADD = LuaScript(
    "add",
    _COUNT_LIB
    + """
local base = count_args(0)
local out, published = {}, 0
for i = 1, #KEYS / 2 do
  local key, marks = KEYS[2 * i - 1], KEYS[2 * i]
  local added, card, latest = count_user(key, marks, ARGV[base + i])
  if added > 0 then published = published + 1 end
  out[#out + 1] = card
  out[#out + 1] = latest
end
if C.mode == 'p' then return published end
return out
""",
)

# The live counts of a fan-out batch page, as a tail of the timeline write
# (`app.timelines.tails`): right after the insert, atomically, so a user marked online before
# the call is counted here and one marked after finds the post in the timeline (the hub's
# catch-up reads it after marking).
# Keys (after k): the online key, then (count key, stop-marks key) of each expected user.
# Args (after a): the online cutoff ms, counting (1/0), then the head `count_args` reads,
# then how many users are expected and their positions (1..push.n) among the timelines (a
# recipient's id is read from its timeline key, TIMELINE_ID_SPAN).
# Online users (online score >= cutoff) are counted when expected (their keys are declared)
# and counting is on; the others online are returned, for the caller to count them apart.
# Answers {publishes, positions of online users not counted}.
COUNT_TAIL = TailProgram(
    "count",
    f"""
local ID_FROM, ID_TO = {TIMELINE_ID_SPAN[0]}, {TIMELINE_ID_SPAN[1]}
local n, online = push.n, KEYS[k + 1]
local cutoff, counting = tonumber(ARGV[a + 1]), ARGV[a + 2] == '1'
-- Nobody online anywhere (a quiet hour, a benchmark): no recipient to look up.
local seen, uids = {{}}, {{}}
if redis.call('ZCARD', online) > 0 then
  for i = 1, n do uids[i] = string.sub(KEYS[i], ID_FROM, ID_TO) end
  seen = redis.call('ZMSCORE', online, unpack(uids))
end
local base = count_args(a + 2) + 1
local slot, nexp = {{}}, tonumber(ARGV[base])
for j = 1, nexp do slot[tonumber(ARGV[base + j])] = k + 2 * j end
local published, missed = 0, {{}}
for i = 1, n do
  local ms = seen[i]
  if ms and tonumber(ms) >= cutoff then
    local at = slot[i]
    if counting and at then
      local key, marks = KEYS[at], KEYS[at + 1]
      if count_user(key, marks, uids[i]) > 0 then published = published + 1 end
    else
      missed[#missed + 1] = i
    end
  end
end
return {{published, missed}}
""",
    prelude=_COUNT_LIB,
)


# COUNT_TAIL cut by cluster node (decision 0089, `batch_counts.CountSplit`): each node's call
# counts the guessed online recipients whose timelines it wrote (their count keys live in
# their timelines' slot, so on that node), without an online check (the online key lives on
# one node); the call of the online key's node runs after every other node's and checks the
# page's other recipients (not guessed, or all when counting is off) against it, so a user
# marked online before that check finds the post in the timeline or is reported.
# Keys (after k): (count key, stop-marks key) of each guessed user of this call, then, on the
# online key's node, the online key.
# Args (after a): counting (1/0), the head `count_args` reads, how many guessed users and
# their positions (1..push.n), then 1/0 (the online key's node) and there the online cutoff
# ms, how many users to check and their ids.
# Answers {publishes, positions (1..m) of the checked users found online}.
COUNT_NODE_TAIL = TailProgram(
    "count_node",
    f"""
local ID_FROM, ID_TO = {TIMELINE_ID_SPAN[0]}, {TIMELINE_ID_SPAN[1]}
local counting = ARGV[a + 1] == '1'
local base = count_args(a + 1) + 1
local nexp = tonumber(ARGV[base])
local published = 0
for j = 1, nexp do
  local i = tonumber(ARGV[base + j])
  if counting and not push.away[i] then
    local key, marks = KEYS[k + 2 * j - 1], KEYS[k + 2 * j]
    if count_user(key, marks, string.sub(KEYS[i], ID_FROM, ID_TO)) > 0 then
      published = published + 1
    end
  end
end
local found, at = {{}}, base + nexp + 1
if ARGV[at] == '1' then
  local online, cutoff, m = KEYS[k + 2 * nexp + 1], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  if m > 0 and redis.call('ZCARD', online) > 0 then
    local seen = redis.call('ZMSCORE', online, unpack(ARGV, at + 3, at + 2 + m))
    for j = 1, m do
      if seen[j] and tonumber(seen[j]) >= cutoff then found[#found + 1] = j end
    end
  end
end
return {{published, found}}
""",
    prelude=_COUNT_LIB,
)


# Set one pair's stop mark. KEYS: stop-marks key, count key. ARGV: author, mark ms, ttl,
# prune_before ms, stop. stop = '1': set the mark and return the counted post ids; else only
# lower an existing mark (a first follow needs none). Marks older than the counts' ttl are
# pruned (STOPPED marks stay while the key lives).
STOP = LuaScript(
    "stop",
    """
if ARGV[5] == '1' then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
elseif redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[2], ARGV[1]) == 0 then
  return {}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[3])
if ARGV[5] == '1' then return redis.call('ZRANGE', KEYS[2], 0, -1) end
return {}
""",
)


# Keep pairs stopped for good while their cause lasts (a mute: the follow stays, so the
# author's posts keep arriving). KEYS: stop-marks key. ARGV: mark, ttl, author ids. Only marks
# that are missing are set (NX): a mark an unmute or follow lowered since is left as it is.
PLANT = LuaScript(
    "plant",
    """
local marks = {}
for i = 3, #ARGV do
  marks[#marks + 1] = ARGV[1]
  marks[#marks + 1] = ARGV[i]
end
local added = redis.call('ZADD', KEYS[1], 'NX', unpack(marks))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return added
""",
)


def _publish_count(channel: str, now: str, key: str = "KEYS[1]") -> str:
    """Lua that publishes the count in `key` and its newest post's ms to `channel`, as
    `decode_count` reads it (`channel`, `now` and `key` are Lua expressions)."""
    return f"""
  local card = redis.call('ZCARD', {key})
  local top = redis.call('ZRANGE', {key}, -1, -1, 'WITHSCORES')
  notify({channel}, card .. ':' .. (top[2] or '0') .. ':' .. {now})
"""


# Forget some counted posts. KEYS: count key. ARGV: now_ms, user channel, post ids.
# Publishes the new count and the newest remaining post's ms when anything was removed.
DROP = LuaScript(
    "drop",
    _NOTIFY
    + f"""
local removed = redis.call('ZREM', KEYS[1], unpack(ARGV, 3))
if removed > 0 then{_publish_count("ARGV[2]", "ARGV[1]")}end
return removed
""",
)

# Forget posts that no longer reach followers, for many users. KEYS: per user its count key,
# then its stop-marks key. ARGV: now_ms, channel prefix, ttl, prune_before ms, n, n post ids,
# then per user its id and '1' to leave tombstones `p<post_id>` (score now) in its stop marks,
# else '0'. Each user whose count shrank gets the new count and the newest remaining post's
# ms. Returns how many users' counts shrank.
FORGET = LuaScript(
    "forget",
    _NOTIFY
    + f"""
local now, prefix, ttl, prune = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local close = string.byte(prefix, -1) == 123 and '}}' or ''
local n = tonumber(ARGV[5])
local posts, tombs = {{}}, {{}}
for j = 1, n do
  posts[j] = ARGV[5 + j]
  tombs[2 * j - 1] = now
  tombs[2 * j] = 'p' .. ARGV[5 + j]
end
local base = 5 + n
local lowered = 0
for i = 1, #KEYS / 2 do
  local key, channel = KEYS[2 * i - 1], prefix .. ARGV[base + 2 * i - 1] .. close
  if ARGV[base + 2 * i] == '1' then
    redis.call('ZADD', KEYS[2 * i], unpack(tombs))
    redis.call('ZREMRANGEBYSCORE', KEYS[2 * i], '-inf', '(' .. prune)
    redis.call('EXPIRE', KEYS[2 * i], ttl)
  end
  if redis.call('ZREM', key, unpack(posts)) > 0 then
    lowered = lowered + 1{_publish_count("channel", "now", "key")}  end
end
return lowered
""",
)

# Reset after a fresh first page of the feed. KEYS: count key, reset key. ARGV: upto ms
# ('' = everything), reset ms, ttl, now_ms, user channel. Publishes the count when it changed.
RESET = LuaScript(
    "reset",
    _NOTIFY
    + f"""
local removed
if ARGV[1] == '' then
  removed = redis.call('ZCARD', KEYS[1])
  redis.call('DEL', KEYS[1])
else
  removed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
if removed > 0 then{_publish_count("ARGV[5]", "ARGV[4]")}end
return removed
""",
)

# The reset mark, set to now when missing. KEYS: reset key. ARGV: now_ms, ttl.
MARK = LuaScript(
    "mark",
    """
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return ARGV[1]
""",
)
