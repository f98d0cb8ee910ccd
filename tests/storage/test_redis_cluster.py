"""polite's Redis stores on a real Redis Cluster of three redis-server primaries, through
redis-py's cluster client (``?cluster=1``): the keys really spread over the nodes, each
host's keys on one node, the crawl-wide keys on one."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from polite.storage import open_frontier
from polite.storage.frontier import FrontierCounts, FrontierItem, settle
from polite.storage.redis import RedisStore
from polite.storage.redis_frontier import RedisFrontier

pytestmark = pytest.mark.anyio

HOSTS = [f"h{n}.example" for n in range(24)]


async def keys_by_node(nodes: list[str], prefix: str) -> list[set[str]]:
    found = []
    for node in nodes:
        client = aioredis.Redis.from_url(node)
        try:
            found.append({key.decode() async for key in client.scan_iter(f"{prefix}*")})
        finally:
            await client.aclose()
    return found


async def test_the_frontier_spreads_hosts_over_the_nodes(redis_cluster_nodes: list[str],
                                                          redis_prefix: str) -> None:
    url = f"{redis_cluster_nodes[2]}/0?cluster=1&prefix={redis_prefix}"
    frontier = open_frontier(url, default_path=lambda: pytest.fail("no file"), worker="w1")
    assert isinstance(frontier, RedisFrontier)
    try:
        await frontier.add([FrontierItem(f"http://{host}/{n}", host)
                            for host in HOSTS for n in range(3)])
        taken = await frontier.lease(HOSTS[0], 0.0, 30.0)
        assert taken is not None
        got = await settle(frontier, taken.url, fetched=True, lease=(HOSTS[0], 0.0, 30.0),
                           add=[FrontierItem(f"http://{HOSTS[1]}/new", HOSTS[1])],
                           mark=[FrontierItem(f"http://{HOSTS[2]}/0", HOSTS[2])])
        assert [i.url for i in got.added] == [f"http://{HOSTS[1]}/new"]
        assert got.marked == [] and got.leased is not None  # /0 was queued already
        assert await frontier.counts() == FrontierCounts(len(HOSTS) * 3 - 1 + 1 - 1, 1, 1, 0)
        assert len(await frontier.due_hosts(1.0, 100)) == len(HOSTS)
    finally:
        await frontier.close()
    per_node = await keys_by_node(redis_cluster_nodes, redis_prefix)
    hosts_on = [{key.split("{")[1].split("}")[0] for key in keys} - {"f"} for keys in per_node]
    # every node holds some hosts, no host is on two nodes, all hosts are somewhere
    assert all(hosts_on), hosts_on
    assert sum(len(h) for h in hosts_on) == len(HOSTS) == len(set().union(*hosts_on))
    crawl_wide = [n for n, keys in enumerate(per_node) if any("{f}" in k for k in keys)]
    assert len(crawl_wide) == 1  # the index and counts together, in one slot


async def test_the_politeness_store_spreads_slots_and_claims_across_nodes(
        redis_cluster_nodes: list[str], redis_prefix: str) -> None:
    store = RedisStore.from_url(f"{redis_cluster_nodes[0]}/0?cluster=1&prefix={redis_prefix}")
    try:
        claims = await store.claim_batch([(host, (5.0,)) for host in HOSTS], take=True)
        assert [c.granted for c in claims] == [0] * len(HOSTS)
        again = await store.claim_batch([(host, (5.0,)) for host in HOSTS], take=True)
        assert [c.granted for c in again] == [-1] * len(HOSTS)
        await store.page_put("http://a.example/", b"x" * 10, max_total_bytes=25)
        await store.page_put("http://b.example/", b"y" * 10, max_total_bytes=25)
        await store.page_put("http://c.example/", b"z" * 10, max_total_bytes=25)
        assert await store.page_get("http://a.example/") is None  # the oldest dropped
        assert await store.page_usage() == (2, 20)
        await store.node_beat("n1", "{}", 30.0)
        assert await store.live_nodes() == {"n1": "{}"}
    finally:
        await store.close()
    per_node = await keys_by_node(redis_cluster_nodes, redis_prefix)
    slots_on = [{k for k in keys if ":slot:" in k} for keys in per_node]
    assert all(slots_on) and sum(map(len, slots_on)) == len(HOSTS), slots_on


async def test_a_new_cluster_client_asked_by_many_tasks_at_once_routes_every_command(
        redis_cluster_nodes: list[str], redis_prefix: str) -> None:
    """A crawl worker's first moments: fifty hosts asked about at once on a client that has
    not met the cluster yet. Every call answers, none is sent to the wrong node (MOVED)."""
    async def moved() -> int:
        total = 0
        for node in redis_cluster_nodes:
            client = aioredis.Redis.from_url(node)
            try:
                stats = await client.info("commandstats")
                total += sum(int(v.get("rejected_calls", 0)) for v in stats.values())
            finally:
                await client.aclose()
        return total

    before = await moved()
    store = RedisStore.from_url(f"{redis_cluster_nodes[1]}/0?cluster=1&prefix={redis_prefix}")
    try:
        async def one(host: str) -> None:
            assert await store.load_robots(f"http://{host}") is None
            assert await store.host_facts([host]) == [(None, None)]
            (claim,) = await store.claim_batch([(host, (1.0,))], take=True)
            assert claim.granted == 0

        await asyncio.gather(*(one(f"t{n}.example") for n in range(50)))
    finally:
        await store.close()
    assert await moved() == before
