"""The client's address as a budget key: the one rule every per-address budget counts by
(sign-ups, log-ins, password guesses, reads, anonymous writes, sockets, subscriptions, open
connections).

Why a rule and not the address as sent: a host normally holds a whole IPv6 /64 (SLAAC and
privacy addresses pick any of its 2^64 addresses), so a budget per exact IPv6 address was a
fresh budget per request for anyone who cared to change addresses.

- IPv4: the address itself.
- IPv4-mapped IPv6 (`::ffff:a.b.c.d`, what a dual-stack listener sees of an IPv4 client):
  that IPv4 address, the same budget as over IPv4.
- IPv6: its first CLIENT_IPV6_PREFIX bits (64 by default) as `network/prefix`; 128 counts
  each address alone.
- anything else (no address, a unix socket's path): as sent, at most 64 characters.

It runs on every request and socket: answers are cached, in a bounded LRU (an attacker
cycling addresses only evicts entries). A key passed in again comes back unchanged.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from app.constants import CACHE_ENTRIES
from app.constants import DEFAULT_IPV6_PREFIX as DEFAULT_IPV6_PREFIX


@lru_cache(maxsize=CACHE_ENTRIES)
def budget_address(host: str, ipv6_prefix: int = DEFAULT_IPV6_PREFIX) -> str:
    """The budget key of a client whose address is `host` (see the module docstring)."""
    try:
        parsed = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]  # not an IP (a budget key already, "unknown", a socket path)
    if isinstance(parsed, ipaddress.IPv4Address):
        return str(parsed)
    mapped = parsed.ipv4_mapped
    if mapped is not None:
        return str(mapped)
    drop = 128 - ipv6_prefix
    network = ipaddress.IPv6Address(int(parsed) >> drop << drop)  # no zone: it names a link
    return f"{network}/{ipv6_prefix}"
