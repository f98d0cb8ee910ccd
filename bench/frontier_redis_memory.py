"""Redis memory per URL of the crawl frontier: queued, and seen (fetched and done).

One run on a real ``redis-server`` (started here, nothing persisted): 100,000 URLs of
realistic length (``https://www.site-00042.example/articles/2024/05/...html``, about 75
characters, via ``link``, depth 1 to 3) are queued in batches of 1,000, then each is
leased and acknowledged as fetched. ``INFO memory``'s ``used_memory`` is read before, after
queueing and after acknowledging; the scripts are loaded before the first reading. Two
shapes: many small hosts (1,000 hosts of 100 URLs, where Redis keeps a host's sets and
hashes as compact listpacks) and a few large ones (10 hosts of 10,000 URLs, hash tables
and skip lists).

Run: ``.venv/bin/python bench/frontier_redis_memory.py [--urls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

import redis.asyncio as aioredis

from polite.storage.frontier import FrontierItem
from polite.storage.redis_frontier import RedisFrontier
from serve_decisions import redis as redis_server

BATCH = 1_000


def urls(hosts: int, per_host: int, rng: random.Random) -> list[FrontierItem]:
    """``per_host`` URLs on each of ``hosts`` hosts, interleaved as links arrive."""
    names = [f"www.site-{i:05d}.example" for i in range(hosts)]
    items = []
    for n in range(per_host):
        for host in names:
            slug = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz-", k=rng.randint(12, 28)))
            url = f"https://{host}/articles/{2010 + n % 15}/{n % 12 + 1:02d}/{slug}-{n}.html"
            items.append(FrontierItem(url, host, depth=rng.randint(1, 3), via="link"))
    return items


async def used_memory(client: aioredis.Redis) -> int:
    return int((await client.info("memory"))["used_memory"])


async def measure(url: str, hosts: int, per_host: int) -> dict[str, float]:
    items = urls(hosts, per_host, random.Random(1))
    client = aioredis.Redis.from_url(url)
    await client.flushdb()
    warm = RedisFrontier.from_url(url + "?prefix=warm:")  # load every script once
    await warm.add([FrontierItem("https://w.example/", "w.example")])
    taken = await warm.lease("w.example", 0.0, 60.0)
    assert taken is not None
    await warm.release(taken)
    taken = await warm.lease("w.example", 0.0, 60.0)
    assert taken is not None
    await warm.done(taken.url, fetched=True)
    await warm.requeue_leased()
    await warm.close()
    await client.flushdb()

    frontier = RedisFrontier.from_url(url)
    before = await used_memory(client)
    started = time.perf_counter()
    for at in range(0, len(items), BATCH):
        await frontier.add(items[at:at + BATCH])
    add_s = time.perf_counter() - started
    queued = await used_memory(client)

    started = time.perf_counter()
    done = 0
    for host in {item.host for item in items}:
        while (taken := await frontier.lease(host, 0.0, 60.0)) is not None:
            await frontier.done(taken.url, fetched=True)
            done += 1
    done_s = time.perf_counter() - started
    seen = await used_memory(client)
    counts = await frontier.counts()
    assert done == len(items) and counts.fetched == len(items), counts
    await frontier.close()
    await client.aclose()
    n = len(items)
    return {"queued_b": (queued - before) / n, "seen_b": (seen - before) / n,
            "add_per_s": n / add_s, "lease_done_per_s": n / done_s,
            "url_chars": sum(len(item.url) for item in items) / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=100_000)
    args = parser.parse_args()
    shapes = [(args.urls // 100, 100), (10, args.urls // 10)]
    with tempfile.TemporaryDirectory() as folder, redis_server(Path(folder)) as url:
        if url is None:
            sys.exit("redis-server is not installed (apt-get install -y redis-server)")
        print(f"{args.urls:,} URLs per shape\n")
        print("| hosts x URLs | URL length | memory per queued URL | memory per seen URL "
              "| add (URLs/s) | lease + done (URLs/s) |")
        print("|---|---:|---:|---:|---:|---:|")
        for hosts, per_host in shapes:
            got = asyncio.run(measure(url, hosts, per_host))
            print(f"| {hosts:,} x {per_host:,} | {got['url_chars']:.0f} chars "
                  f"| {got['queued_b']:.0f} B | {got['seen_b']:.0f} B "
                  f"| {got['add_per_s']:,.0f} | {got['lease_done_per_s']:,.0f} |")


if __name__ == "__main__":
    main()
