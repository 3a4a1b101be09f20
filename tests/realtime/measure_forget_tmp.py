"""Temporary measurement (helper H-counts): cost of withdrawing a deleted post."""
import dataclasses
import time

from app.realtime import counts
from app.realtime.settings import get_realtime_settings
from tests.helpers import sql


async def test_measure(state) -> None:
    settings = get_realtime_settings()
    fanout = dataclasses.replace(
        state.fanout, settings=state.settings.model_copy(update={"fanout_batch_size": 1000})
    )
    for n, online in ((10_000, 1_000), (100_000, 10_000), (1_000_000, 50_000)):
        await sql("TRUNCATE follows, posts, users RESTART IDENTITY CASCADE")
        await state.redis.flushdb()
        await sql(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at)"
            " SELECT 'u' || g, '!', 'u', now() FROM generate_series(0, $1) g",
            n,
        )
        await sql(
            "INSERT INTO follows (follower_id, followee_id, created_at)"
            " SELECT id, 1, now() - interval '1 day' FROM users WHERE id > 1"
        )
        await sql("ANALYZE follows")
        live = list(range(2, 2 + online))
        await counts.mark_online(state.redis, live, settings)
        post_id = 7_000_000_000_000_000_000
        for i in range(0, online, 5000):
            await counts.add_and_publish(state.redis, live[i:i+5000], [(post_id, 1_000)], settings)
        started = time.perf_counter()
        visited = await fanout.withdraw_from_counts(1, post_id, final=True)
        first = time.perf_counter() - started
        started = time.perf_counter()
        await fanout.withdraw_from_counts(1, post_id, final=True)
        again = time.perf_counter() - started
        left = await counts.add_for_users(state.redis, live, [], settings)
        print(f"\nfollowers={n} online={online} visited={visited} first={first:.3f}s "
              f"replay={again:.3f}s still_counted={sum(s.count for s in left.values())}")
