-- wrk script of benchmarks/feed_wrk.py: POSTs one GraphQL page per request, as a viewer.
--
--   wrk -t50 -c50 -d11s --timeout 30s -s benchmarks/wrk/feed.lua http://127.0.0.1:PORT -- DATA
--
-- (the first second is spent opening the connections: see delay() below; env
-- FEED_WRK_START_DELAY_MS, default 1000)
--
-- DATA is a Lua file that feed_wrk.py writes for one variant and one viewer class:
--   return { mode = "first" | "next", path = "/graphql", seed = 42, max_pages = 25,
--            tokens = { "<jwt>", ... }, first_body = "<json>",
--            next_prefix = "<json up to the cursor>", next_suffix = "<json after it>",
--            latency_dir = "<directory>" }
--
-- mode "first": every request is a first page (`first_body`) for a random viewer.
-- mode "next": cursor following. A session starts with a first page for a random viewer, then
-- posts `next_prefix .. endCursor .. next_suffix` with that viewer's token while the answer
-- has "hasNextPage":true and fewer than `max_pages` pages were read; it starts again from a
-- first page at the end, on CURSOR_EXPIRED, on any other error and on a non-200.
--
-- The state (viewer, cursor, pages read) is per connection. wrk has one Lua state per thread
-- and gives request() and response() no handle on their connection, so the benchmark runs
-- one connection per thread (-t N -c N): with one request in flight per connection,
-- request() and response() alternate strictly within a thread, and the thread's globals are
-- its connection's state.
--
-- Responses are checked with plain string searches (no JSON parsing): status, "errors",
-- CURSOR_EXPIRED, "degraded":true, empty pages, "hasNextPage":true and "endCursor":"...".
-- Each request is timed here too (CLOCK_MONOTONIC through the FFI, next to where wrk takes
-- its own timestamps) and written to `latency_dir`/<thread>.lat as "<f|n> <latency> <end>
-- <viewer>" (microseconds; <end> on CLOCK_MONOTONIC; <viewer> the token's index):
-- first and next pages get their own percentiles, and the raw samples are not subject to
-- the coordinated-omission correction wrk applies to its own histogram (stats_correct).
-- done() prints one line, "FEED_WRK_RESULT <json>": wrk's summary and latency percentiles,
-- the per-thread counters (scalar globals, read with thread:get) summed, and when each
-- request still in flight at the stop was sent ("inflight_since_us").

local ffi = require("ffi")
ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } feed_wrk_timespec;
int clock_gettime(int clk_id, feed_wrk_timespec *tp);
]])
local CLOCK_MONOTONIC = 1
local ts = ffi.new("feed_wrk_timespec")
local function now_us()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

local find, sub = string.find, string.sub

-- Per-thread counters: scalar globals (wrk's thread:get copies numbers safely; tables it
-- copies with an unbalanced stack).
local COUNTERS = {
  "c_responses", "c_first", "c_next", "c_non200", "c_errors", "c_expired", "c_empty",
  "c_degraded", "c_degraded_first", "c_degraded_next", "c_sessions", "c_session_ends",
  "c_capped",
}
for _, name in ipairs(COUNTERS) do
  _G[name] = 0
end
pending_since = 0 -- when the request in flight was sent (0: none), for done()

-- main state: the threads, for done(), and one start time for all of them
local threads = {}
local common_start = nil
local START_DELAY_MS = tonumber(os.getenv("FEED_WRK_START_DELAY_MS") or "1000")

function setup(thread)
  threads[#threads + 1] = thread
  thread:set("thread_id", #threads)
  common_start = common_start or (now_us() + START_DELAY_MS * 1000)
  thread:set("start_at", common_start) -- a global of the thread's state
end

-- thread (= connection) state
local cfg, heads, first_requests, lat_file
local viewer, cursor, pages, kind, started = 1, nil, 0, "f", 0

function init(args)
  cfg = dofile(args[1])
  math.randomseed(cfg.seed * 1000 + (thread_id or 0))
  heads, first_requests = {}, {}
  local host = wrk.host .. (wrk.port and (":" .. wrk.port) or "")
  for i, token in ipairs(cfg.tokens) do
    heads[i] = "POST " .. cfg.path .. " HTTP/1.1\r\nHost: " .. host ..
      "\r\nAuthorization: Bearer " .. token ..
      "\r\nContent-Type: application/json\r\nContent-Length: "
    first_requests[i] = heads[i] .. #cfg.first_body .. "\r\n\r\n" .. cfg.first_body
  end
  viewer = math.random(#cfg.tokens)
  if cfg.latency_dir and thread_id then
    lat_file = io.open(cfg.latency_dir .. "/" .. thread_id .. ".lat", "w")
    lat_file:setvbuf("full", 65536) -- flushed when wrk exits
  end
end

-- The first request of every connection waits until `start_at`: by then wrk has created its
-- threads and the idle server has accepted every connection. A busy uvicorn worker on uvloop
-- accepts one new connection per event-loop iteration (libuv's accept, since 1.45): opened
-- under load, the 50th connection would wait seconds for its first answer, and the run would
-- measure a ramp instead of 50 connections. After that, delay() returns 0 (no wait).
local waited = false

function delay()
  if waited then
    return 0
  end
  waited = true
  local ms = ((start_at or 0) - now_us()) / 1000
  return ms > 0 and ms or 0
end

local function restart()
  cursor, pages = nil, 0
end

function request()
  started = now_us()
  pending_since = started
  if cursor then
    kind = "n"
    local body = cfg.next_prefix .. cursor .. cfg.next_suffix
    return heads[viewer] .. #body .. "\r\n\r\n" .. body
  end
  kind = "f"
  viewer = math.random(#cfg.tokens)
  return first_requests[viewer]
end

function response(status, headers, body)
  local now = now_us()
  local elapsed = now - started
  pending_since = 0
  if lat_file then
    lat_file:write(kind, " ", string.format("%.1f %.0f %d", elapsed, now, viewer), "\n")
  end
  c_responses = c_responses + 1
  if kind == "n" then
    c_next = c_next + 1
  else
    c_first = c_first + 1
    if cfg.mode == "next" then
      c_sessions = c_sessions + 1
    end
  end
  if status ~= 200 then
    c_non200 = c_non200 + 1
    restart()
    return
  end
  if find(body, '"errors":', 1, true) then
    c_errors = c_errors + 1
    if find(body, "CURSOR_EXPIRED", 1, true) then
      c_expired = c_expired + 1
    end
    restart()
    return
  end
  if find(body, '"edges":[]', 1, true) or find(body, '"edges": []', 1, true) then
    c_empty = c_empty + 1
  end
  if find(body, '"degraded":true', 1, true) or find(body, '"degraded": true', 1, true) then
    c_degraded = c_degraded + 1
    if kind == "n" then
      c_degraded_next = c_degraded_next + 1
    else
      c_degraded_first = c_degraded_first + 1
    end
  end
  if cfg.mode ~= "next" then
    return
  end
  pages = pages + 1
  local has_next = find(body, '"hasNextPage":true', 1, true)
    or find(body, '"hasNextPage": true', 1, true)
  local _, at = find(body, '"endCursor":"', 1, true)
  if not has_next or not at then
    c_session_ends = c_session_ends + 1
    restart()
    return
  end
  if pages >= cfg.max_pages then
    c_capped = c_capped + 1
    restart()
    return
  end
  local stop = find(body, '"', at + 1, true)
  cursor = sub(body, at + 1, stop - 1)
end

-- main state again, once every thread has stopped

function done(summary, latency, requests)
  local out = {
    duration_us = summary.duration,
    requests = summary.requests,
    bytes = summary.bytes,
    err_connect = summary.errors.connect,
    err_read = summary.errors.read,
    err_write = summary.errors.write,
    err_status = summary.errors.status,
    err_timeout = summary.errors.timeout,
    wrk_min_us = latency.min,
    wrk_max_us = latency.max,
    wrk_mean_us = latency.mean,
    wrk_stdev_us = latency.stdev,
    wrk_p50_us = latency:percentile(50),
    wrk_p90_us = latency:percentile(90),
    wrk_p99_us = latency:percentile(99),
    wrk_p99_9_us = latency:percentile(99.9),
    threads = #threads,
  }
  for _, name in ipairs(COUNTERS) do
    local total = 0
    for _, thread in ipairs(threads) do
      total = total + (thread:get(name) or 0)
    end
    out[name] = total
  end
  -- Requests still in flight when wrk stopped (it drops them): when they were sent
  -- (CLOCK_MONOTONIC, us), for a lower bound on their latency (the naive join's slowest).
  local inflight = {}
  for _, thread in ipairs(threads) do
    local since = thread:get("pending_since") or 0
    if since > 0 then
      inflight[#inflight + 1] = string.format("%.0f", since)
    end
  end
  local parts = { '"inflight_since_us":"' .. table.concat(inflight, " ") .. '"' }
  for k, v in pairs(out) do
    parts[#parts + 1] = string.format('"%s":%.17g', k, v)
  end
  io.write("FEED_WRK_RESULT {" .. table.concat(parts, ",") .. "}\n")
end
