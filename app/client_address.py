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

Trust (`trusted_peer`): whether the connection's peer is one of the proxies whose headers
are believed (REGION_HEADER_TRUSTED_PROXIES for the edge's region header, decision 0088).
The peer is the connection's own address, which the guarded HTTP protocol
(app.api.transports.connections) keeps in the request's state under PEER_STATE_KEY before
uvicorn's proxy-header middleware replaces the client address with X-Forwarded-For's; served
another way, the client address as the app sees it stands in (a rewritten one is a
client's, not a proxy's: trusted only if listed).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

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


# The connection's peer address in an ASGI scope's "state" (set by the guarded protocol).
PEER_STATE_KEY = "app.client_address.peer"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def connection_peer(scope: Mapping[str, Any]) -> str | None:
    """The address of the connection's peer: the guarded protocol's record, else the scope's
    client (see the module docstring)."""
    state = scope.get("state")
    if isinstance(state, Mapping):
        peer = state.get(PEER_STATE_KEY)
        if isinstance(peer, str):
            return peer
    client = scope.get("client")
    return str(client[0]) if client else None


def trusted_peer(scope: Mapping[str, Any], networks: Sequence[Network]) -> bool:
    """Is the connection's peer inside one of `networks` (an IPv4-mapped IPv6 peer as its
    IPv4 address)?"""
    peer = connection_peer(scope)
    if peer is None or not networks:
        return False
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address.version == n.version and address in n for n in networks)
