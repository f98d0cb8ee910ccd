"""``polite frontier serve`` on a Redis Cluster of three nodes: each crawl's keys in one
slot, the crawls spread over the nodes, and what the RPCs list or count of every crawl
gathered from all of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.frontier.frontier_client import frontier, frontier_process, store_url, stubs

CRAWLS = [f"crawl{i:02}" for i in range(12)]


def test_the_crawls_spread_over_the_nodes_and_every_rpc_finds_them(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    import redis

    pb = stubs(tmp_path.parent / "stubs")[0]
    store = store_url("redis-cluster", tmp_path, request)
    prefix = store.rsplit("prefix=", 1)[1]
    urls = {(crawl, f"http://{host}.example/{i}") for crawl in CRAWLS
            for host in ("a", "b") for i in range(3)}
    with frontier(tmp_path, "--store", store, "--robots", "off",
                  "--default-delay-s", "0") as client:
        items = [pb.URLItem(discovered=pb.DiscoveredURLItem(
            info=pb.URLInfo(url=url, crawlID=crawl))) for crawl, url in sorted(urls)]
        acks = list(client.PutURLs(iter(items)))
        assert [a.status for a in acks] == [pb.AckMessage.OK] * len(urls)
        assert sorted(client.ListCrawls(pb.Local()).values) == CRAWLS
        sizes = {crawl: client.GetStats(pb.QueueWithinCrawlParams(crawlID=crawl)).size
                 for crawl in CRAWLS}
        counted = {crawl: client.CountURLs(pb.CountUrlParams(crawlID=crawl)).value
                   for crawl in CRAWLS}
        queues = {crawl: sorted(client.ListQueues(pb.Pagination(crawlID=crawl)).values)
                  for crawl in CRAWLS}
        # a GetURLs of any crawl gives every crawl's URLs, each once
        got = list(client.GetURLs(pb.GetParams(max_urls_per_queue=10, delay_requestable=60,
                                               anyCrawlID=pb.AnyCrawlID())))
        # every URL in flight: nothing more to give
        none_left = list(client.GetURLs(pb.GetParams(anyCrawlID=pb.AnyCrawlID())))
        stats = client.GetStats(pb.QueueWithinCrawlParams(crawlID=CRAWLS[5]))
        assert client.DeleteCrawl(pb.DeleteCrawlMessage(value=CRAWLS[5])).value == 6
        assert CRAWLS[5] not in client.ListCrawls(pb.Local()).values
    assert sizes == dict.fromkeys(CRAWLS, 6) and counted == dict.fromkeys(CRAWLS, 6)
    assert queues == {crawl: ["a.example", "b.example"] for crawl in CRAWLS}
    assert sorted((u.crawlID, u.url) for u in got) == sorted(urls)
    assert none_left == []
    assert (stats.size, stats.inProcess) == (6, 6)
    # each crawl's keys on one node, and the crawls on more than one node
    nodes = request.getfixturevalue("redis_cluster_nodes")
    homes: dict[str, set[str]] = {}
    for node in nodes:
        client = redis.Redis.from_url(node)
        try:
            for key in client.scan_iter(match=f"{prefix}uf:{{*", count=1000):
                crawl = key.decode().split("{", 1)[1].split("}", 1)[0]
                homes.setdefault(crawl, set()).add(node)
        finally:
            client.close()
    assert sorted(homes) == [c for c in CRAWLS if c != CRAWLS[5]]
    assert all(len(where) == 1 for where in homes.values()), homes
    assert len(set().union(*homes.values())) > 1, homes


def test_max_queues_bounds_a_get_urls_of_any_crawl_over_all_crawls(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Three crawls of two queues each: max_queues=4 gives four queues' URLs in all, the
    next call the other two, whichever crawls' slots they are in."""
    pb = stubs(tmp_path.parent / "stubs")[0]
    store = store_url("redis-cluster", tmp_path, request)
    with frontier(tmp_path, "--store", store, "--robots", "off",
                  "--default-delay-s", "0") as client:
        items = [pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(
            url=f"http://{host}.example/", crawlID=crawl)))
            for crawl in CRAWLS[:3] for host in ("a", "b")]
        assert len(list(client.PutURLs(iter(items)))) == 6
        params = pb.GetParams(max_queues=4, delay_requestable=60, anyCrawlID=pb.AnyCrawlID())
        first = [(u.crawlID, u.url) for u in client.GetURLs(params)]
        second = [(u.crawlID, u.url) for u in client.GetURLs(params)]
    assert len(first) == 4 and len(second) == 2
    assert sorted(first + second) == sorted((i.discovered.info.crawlID,
                                             i.discovered.info.url) for i in items)


def test_a_crawl_deleted_by_another_node_is_listed_again_by_the_next_url_stored(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A node lists a crawl once, before its first URL; when another node deletes the crawl,
    the first node's next URL lists it again, so GetURLs of any crawl finds that URL."""
    import grpc

    pb, pb_grpc = stubs(tmp_path.parent / "stubs")
    store = store_url("redis-cluster", tmp_path, request)
    options = ("--store", store, "--robots", "off", "--default-delay-s", "0")

    def item(url: str) -> object:
        return pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=url,
                                                                          crawlID="gone")))

    with frontier_process(*options) as (address_a, _), \
            frontier_process(*options) as (address_b, _), \
            grpc.insecure_channel(address_a) as channel_a, \
            grpc.insecure_channel(address_b) as channel_b:
        a, b = pb_grpc.URLFrontierStub(channel_a), pb_grpc.URLFrontierStub(channel_b)
        assert len(list(a.PutURLs(iter([item("http://x.example/1")])))) == 1
        assert b.DeleteCrawl(pb.DeleteCrawlMessage(value="gone")).value == 1
        assert list(b.ListCrawls(pb.Local()).values) == []
        assert len(list(a.PutURLs(iter([item("http://x.example/2")])))) == 1
        listed = list(b.ListCrawls(pb.Local()).values)
        got = [(u.crawlID, u.url) for u in b.GetURLs(pb.GetParams(
            anyCrawlID=pb.AnyCrawlID(), delay_requestable=60))]
    assert listed == ["gone"]
    assert got == [("gone", "http://x.example/2")]
