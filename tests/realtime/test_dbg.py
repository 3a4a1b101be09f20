import socket

from app.realtime.counts import now_ms
from app.realtime.keys import Channels
from tests.conftest import TEST_DB
from tests.fanout.helpers import make_user
from tests.realtime.live import ApiServer, LiveClient


async def test_dbg(state) -> None:
    api = await ApiServer(env={"REALTIME_COALESCE_MS": "0", "REALTIME_STALL_SECONDS": "1"}).ready()
    try:
        async with api.http() as http:
            slow_token, slow_id = await make_user(http, "slow")
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.connect(("127.0.0.1", api.port))
        slow = await LiveClient.open(api, slow_token, sock=raw, max_queue=1, compression=None)
        await slow.next_update()
        channels = Channels(TEST_DB)
        sent = 0
        for r in range(10):
            for _ in range(2000):
                sent += 1
                await state.redis.publish(channels.user(slow_id), f"{sent}:0:{now_ms()}")
            print(
                sent,
                await api.metric("feed_realtime_frames_delivered_total"),
                await api.metric("feed_realtime_notifications_coalesced_total"),
                await api.metric("feed_realtime_subscribers_dropped_total", 'reason="slow"'),
            )
        import subprocess

        print(
            subprocess.run(
                ["ss", "-tnm", f"sport = :{api.port} or dport = :{api.port}"],
                capture_output=True,
                text=True,
            ).stdout
        )
    finally:
        api.stop()
