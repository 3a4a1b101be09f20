"""Automatic persisted queries, learned (Apollo's APQ; docs/decisions/0082).

Apollo's `PersistedQueryLink` sends a document's SHA-256 alone first; on
`PERSISTED_QUERY_NOT_FOUND` it sends the text with the hash. Once such a request has run
(its text parsed, validated with every limit and the cost rule, and executed: `data` in the
answer), the server keeps hash -> text, and the next request with the hash alone runs it,
in any API process:

- shared: Redis, the sessions role (`apq:{apq}:texts`, a hash, hash -> text; its index
  `apq:{apq}:lru`, a zset, hash -> ms of its learning or last lookup). Each entry lives
  `APQ_TTL_SECONDS` after its last lookup from Redis; past `APQ_MAX_DOCUMENTS` the least
  recently looked up go (one script learns, prunes and evicts; each takes both keys);
- per client: learning a new document counts against the client's budget
  (`APQ_LEARN_PER_CLIENT_PER_HOUR`, per token user, else per address: app.ratelimit's
  `rl:apq-u<id>` / `rl:apq-ip<address>`), so a client flooding distinct texts pushes out at
  most that many others' documents an hour; a request past its budget still gets its
  answer, its document is just not kept;
- per process: `APQ_PROCESS_ENTRIES` hash -> text in an LRU, so a document this process
  learned or looked up is served without Redis, and on the compiled path
  (app.api.fast.compiled_http). A hash names its text for good: nothing here goes stale.

Texts longer than `APQ_MAX_DOCUMENT_CHARS` are not kept. Redis failing costs the learning
only: the lookup answers "not found" and Apollo sends the text again.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from redis.exceptions import RedisError

from app.errors import RateLimited
from app.ratelimit import check_windows
from app.redis_scripts import AnyRedis, LuaScript, run_script

log = logging.getLogger("app.api")

# One hash slot (the `{apq}` tag): each script touches both keys.
TEXTS_KEY = "apq:{apq}:texts"  # hash: hex SHA-256 -> text
INDEX_KEY = "apq:{apq}:lru"  # zset: hex SHA-256 -> ms of its learning or last lookup
KEYS = [TEXTS_KEY, INDEX_KEY]
HOUR = 3600

# Index entries older than the TTL go with their texts (ARGV: now ms, ttl s).
_PRUNE = """
local cutoff = tonumber(ARGV[1]) - tonumber(ARGV[2]) * 1000
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff)
for _, h in ipairs(old) do redis.call('HDEL', KEYS[1], h) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', cutoff)
"""

# KEYS: texts, index. ARGV: now ms, ttl s, hash, text, max documents. Learns one text, drops
# entries past their TTL, then the least recently looked up past the cap; how many it evicted.
_LEARN = LuaScript(
    "apq_learn",
    _PRUNE
    + """
redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[2], tonumber(ARGV[1]), ARGV[3])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
local evicted = 0
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #gone, 2 do
    redis.call('HDEL', KEYS[1], gone[i])
    evicted = evicted + 1
  end
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[2]))
return evicted
""",
)

# KEYS: texts, index. ARGV: now ms, ttl s, hash. The text (nil: unknown or expired), its rank
# renewed.
_LOOKUP = LuaScript(
    "apq_lookup",
    _PRUNE
    + """
local text = redis.call('HGET', KEYS[1], ARGV[3])
if text then
  redis.call('ZADD', KEYS[2], 'XX', tonumber(ARGV[1]), ARGV[3])
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[2]))
end
return text
""",
)


class LearnedDocuments:
    """The learned hash -> text store of one API process (see the module doc)."""

    def __init__(
        self,
        *,
        ttl_seconds: int,
        max_documents: int,
        max_chars: int,
        per_client_per_hour: int,
        process_entries: int,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_documents = max_documents
        self.max_chars = max_chars
        self.per_client_per_hour = per_client_per_hour
        self.process_entries = process_entries
        self._local: OrderedDict[str, str] = OrderedDict()  # hash -> text
        self._texts: dict[str, str] = {}  # text -> hash, the same entries

    def local(self, sha256: str) -> str | None:
        """The text of a hash this process holds (no I/O: the compiled path asks too)."""
        text = self._local.get(sha256)
        if text is not None:
            self._local.move_to_end(sha256)
        return text

    def holds_text(self, text: str) -> bool:
        return text in self._texts

    def _keep(self, sha256: str, text: str) -> None:
        self._local[sha256] = text
        self._texts[text] = sha256
        self._local.move_to_end(sha256)
        while len(self._local) > self.process_entries:
            _, gone = self._local.popitem(last=False)
            self._texts.pop(gone, None)

    async def lookup(self, redis: AnyRedis, sha256: str) -> str | None:
        """The learned text of a hash: this process's copy, else the shared store's."""
        text = self.local(sha256)
        if text is not None:
            return text
        now_ms = int(time.time() * 1000)
        try:
            found = await run_script(redis, _LOOKUP, KEYS, [now_ms, self.ttl_seconds, sha256])
        except (RedisError, OSError):
            log.warning("learned documents: Redis unreachable, lookup of %s missed", sha256)
            return None
        if found is None:
            return None
        text = found.decode() if isinstance(found, bytes) else str(found)
        self._keep(sha256, text)
        return text

    async def learn(
        self, redis: AnyRedis, limits: AnyRedis, sha256: str, text: str, who: str
    ) -> bool:
        """Keep `text` under `sha256` (the caller checked the hash and that the text ran):
        True when kept. Within the client's hourly budget `who` ("u<id>" or "ip<address>")
        only; a text this process already holds costs no budget."""
        if sha256 in self._local or len(text) > self.max_chars:
            return sha256 in self._local
        try:
            await check_windows(
                limits, [("apq_learn", f"apq-{who}", self.per_client_per_hour, HOUR)]
            )
        except RateLimited:
            return False  # answered, not kept: the client's budget of new documents is spent
        now_ms = int(time.time() * 1000)
        try:
            await run_script(
                redis, _LEARN, KEYS, [now_ms, self.ttl_seconds, sha256, text, self.max_documents]
            )
        except (RedisError, OSError):
            log.warning(
                "learned documents: Redis unreachable, %s kept in this process only", sha256
            )
        self._keep(sha256, text)
        return True
