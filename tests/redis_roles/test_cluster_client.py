"""The roles' client construction (app.redis_client): one client per distinct URL, cluster
URLs, and a cluster out of reach failing as a RedisError, so that every caller degrades on
it as on a plain server being down (issue 23, decision 0041)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app import ratelimit
from app.config import Settings
from app.errors import RateLimited
from app.redis_client import Cluster, RedisRoleError, make_client, make_roles, plain_cluster_url

KEY = "test-secret-key-that-is-long-enough-for-hs256"


def test_one_url_is_one_client_and_roles_split_by_url() -> None:
    one = make_roles(Settings(redis_url="redis://127.0.0.1:6379/3", secret_key=KEY))
    assert len(one.clients()) == 1 and isinstance(one.timelines, Redis)
    split = make_roles(
        Settings(
            redis_url="redis://127.0.0.1:6379/3",
            redis_timelines_url="redis+cluster://127.0.0.1:7000",
            redis_limits_url="redis+cluster://127.0.0.1:7000",
            redis_pubsub_url="redis://127.0.0.1:6379/4",
            secret_key=KEY,
        )
    )
    assert isinstance(split.timelines, Cluster) and split.limits is split.timelines
    assert split.sessions is split.queue and isinstance(split.queue, Redis)
    assert len(split.clients()) == 3
    assert plain_cluster_url("rediss+cluster://h:1") == "rediss://h:1"


def test_a_cluster_queue_is_refused_even_past_validation() -> None:
    with pytest.raises(ValueError, match="REDIS_QUEUE_URL"):
        Settings(redis_url="redis+cluster://127.0.0.1:7000", secret_key=KEY)
    copied = Settings(redis_url="redis://127.0.0.1:6379/3", secret_key=KEY).model_copy(
        update={"redis_queue_url": "redis+cluster://127.0.0.1:7000"}
    )
    with pytest.raises(RedisRoleError, match="plain Redis"):
        make_roles(copied)


async def test_an_unreachable_cluster_is_a_redis_error_callers_degrade_on() -> None:
    settings = Settings(
        redis_url="redis://127.0.0.1:6379/3", secret_key=KEY, redis_connect_timeout_seconds=0.5
    )
    cluster = make_client(settings, "redis+cluster://127.0.0.1:1")
    with pytest.raises(RedisError, match="cannot be connected"):
        await cluster.get("x")
    with pytest.raises(RedisError, match="cannot be connected"):
        async with cluster.pipeline(transaction=False) as pipe:
            pipe.get("x")
            await pipe.execute()
    try:
        # The rate limiter counts in process while its Redis is out of reach: no crash.
        ratelimit.forget_local()
        for _ in range(2):
            await ratelimit.check_rate(cluster, "u1", 2)
        with pytest.raises(RateLimited):
            await ratelimit.check_rate(cluster, "u1", 2)
    finally:
        ratelimit.forget_local()
        await cluster.aclose()


def test_the_hubs_node_connection_keeps_the_clusters_credentials_and_tls() -> None:
    """The hub listens on one node through a plain connection: with the cluster URL's user,
    password and TLS (a `rediss+cluster://` cluster refuses anything else)."""
    from app.realtime.pubsub import node_credentials as _node_credentials

    settings = Settings(redis_url="redis://127.0.0.1:6379/3", secret_key=KEY)
    tls = _node_credentials(make_client(settings, "rediss+cluster://u:pw@127.0.0.1:7000"))  # type: ignore[arg-type]
    assert tls["username"] == "u" and tls["password"] == "pw" and tls["ssl"] is True
    assert _node_credentials(make_client(settings, "redis+cluster://127.0.0.1:7000")) == {}  # type: ignore[arg-type]


def _attribute_error_raised_in(module: str) -> AttributeError:
    """An AttributeError on None raised by code whose module is `module`."""
    space: dict[str, object] = {"__name__": module}
    exec("def write(writer):\n    writer.writelines([])", space)
    try:
        space["write"](None)  # type: ignore[operator]
    except AttributeError as exc:
        return exc
    raise AssertionError("no AttributeError")


def test_a_connection_closed_while_connecting_is_an_outage_and_only_that() -> None:
    """redis-py's race under failover (a connection closed by a failing command while another
    was connecting on it: `'NoneType' object has no attribute 'writelines'` in its own
    connection code) is a ClusterUnavailable callers degrade on; an AttributeError from
    anywhere else is a bug and stays one."""
    from app.redis_client import ClusterUnavailable, _unavailable

    race = _attribute_error_raised_in("redis.asyncio.connection")
    assert isinstance(_unavailable(race), ClusterUnavailable)
    assert isinstance(_unavailable(race), RedisError)
    ours = _attribute_error_raised_in("app.feed.service")
    assert _unavailable(ours) is ours
