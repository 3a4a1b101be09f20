import statistics
import time

from app.feed.cursor import SessionPosition
from app.feed.modes import FeedMode
from tests.helpers import follow, make_user, post


async def test_bench_read_ahead(client, state, pipeline) -> None:
    reader, reader_id = await make_user(client, "reader")
    for a in range(4):
        token, _ = await make_user(client, f"author{a}")
        await follow(client, reader, f"author{a}")
        for i in range(60):
            await post(client, token, f"post {a} {i} " + "x" * 120)
    await pipeline.settle()
    page = await state.feed.page(reader_id, FeedMode.RANKED, 20, None)
    cursor = SessionPosition(page.session_id, 20)
    times = {0.0: [], 5.0: []}
    cpus = {0.0: [], 5.0: []}
    for _ in range(600):
        for ttl in (0.0, 5.0):
            state.feed.verified.ttl = ttl
            start, cpu = time.perf_counter(), time.process_time()
            got = await state.feed.page(reader_id, FeedMode.RANKED, 20, cursor)
            times[ttl].append(time.perf_counter() - start)
            cpus[ttl].append(time.process_time() - cpu)
            assert len(got.rows) == 20
    for ttl, values in times.items():
        values.sort()
        print(f"cpu mean {statistics.mean(cpus[ttl])*1000:.3f} ms"); print(f"ttl {ttl}: median {statistics.median(values)*1000:.3f} ms p90 {values[int(len(values)*0.9)]*1000:.3f} ms")
