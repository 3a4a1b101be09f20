import asyncio, time
from tests.regions.test_regions import author_and_reader, chronological, handle
from tests.helpers import post, eventually
from tests.regions.topology import Region

async def test_debug(regions: tuple[Region, Region]) -> None:
    a, b = regions
    t0 = time.monotonic()
    _, author_token, reader_token, rid = await author_and_reader(a, b)
    print("setup users", time.monotonic() - t0)
    async with a.http() as ha, b.http() as hb:
        for i in range(4):
            t = time.monotonic()
            pid = await post(ha, author_token, f"x{i}")
            t1 = time.monotonic()
            marks = {}
            while time.monotonic() - t < 30 and len(marks) < 3:
                if "row" not in marks and await b.sql("SELECT 1 FROM posts WHERE id=$1", pid):
                    marks["row"] = time.monotonic() - t1
                if "pub" not in marks and await b.sql("SELECT 1 FROM outbox WHERE payload->>'post_id'=$1 AND published_at IS NOT NULL", str(pid)):
                    marks["pub"] = time.monotonic() - t1
                if "feed" not in marks and pid in await chronological(hb, reader_token):
                    marks["feed"] = time.monotonic() - t1
                await asyncio.sleep(0.01)
            print(i, "post took", round(t1 - t, 3), marks)
    print(b.logs()[-6000:])
