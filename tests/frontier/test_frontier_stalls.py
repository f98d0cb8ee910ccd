"""A store that is slow to answer holds only the calls that wait on it: ``polite frontier
serve`` runs its store's calls on threads of their own, so that the event loop goes on
answering the RPCs that need no store, and those whose store answers, meanwhile."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import grpc

from tests.frontier.frontier_client import frontier_process, stubs


def test_a_store_locked_by_another_writer_holds_no_rpc_that_needs_none(tmp_path: Path) -> None:
    """Another connection holds the SQLite file's write lock: each write of the node waits
    for it (up to the store's busy timeout of 5 s, one write after the other, and then
    fails), while SetLogLevel, which needs no store, is answered at once. Were the store
    called on the event loop, SetLogLevel would wait behind at least the first write, and
    come back after it ended; here it comes back while none has (the first ends 5 s after
    it began: the margin a loaded machine has to answer a call on loopback)."""
    pb, pb_grpc = stubs(tmp_path.parent / "stubs")
    path = tmp_path / "f.sqlite"
    with frontier_process("--store", f"sqlite:///{path}", "--robots", "off") as (address, _), \
            grpc.insecure_channel(address) as channel:
        client = pb_grpc.URLFrontierStub(channel)
        client.SetCrawlLimit(pb.CrawlLimitParams(key="h0.example", limit=1), timeout=60)
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # the write lock, until the ROLLBACK
        try:
            held = [client.SetCrawlLimit.future(
                pb.CrawlLimitParams(key=f"h{n}.example", limit=2), timeout=600)
                for n in range(5)]
            client.SetLogLevel(pb.LogLevelParams(package="polite.frontier",
                                                 level=pb.LogLevelParams.INFO), timeout=600)
            ended = sum(call.done() for call in held)
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        assert ended == 0, f"{ended} of the writes ended before SetLogLevel was answered"
        for call in held:  # each answered in the end: stored, or failed on the lock
            assert call.exception() is None or call.code() == grpc.StatusCode.UNKNOWN
        # the node is whole once the lock is gone
        client.SetCrawlLimit(pb.CrawlLimitParams(key="h9.example", limit=3), timeout=60)
        assert client.GetStats(pb.QueueWithinCrawlParams(), timeout=60).numberOfQueues >= 2


def test_a_stalled_cluster_node_holds_no_call_of_a_crawl_on_another(tmp_path: Path) -> None:
    """On a Redis Cluster each crawl's keys are in one slot: a crawl whose node stops
    answering (stopped with SIGSTOP; its connections stay open) holds the calls on that
    crawl, and the node answers a call on a crawl kept by another Redis node meanwhile."""
    import redis

    from tests.redis_server import redis_cluster

    pb, pb_grpc = stubs(tmp_path.parent / "stubs")
    (tmp_path / "cluster").mkdir()
    with redis_cluster(tmp_path / "cluster") as nodes:
        crawls: dict[int, str] = {}  # a Redis node's port -> a crawl whose keys it keeps
        finder = redis.RedisCluster.from_url(nodes[0])
        try:
            for n in range(200):
                crawls.setdefault(finder.get_node_from_key(f"crawl{n}").port, f"crawl{n}")
        finally:
            finder.close()
        (port_a, crawl_a), (_, crawl_b) = list(crawls.items())[:2]
        info = redis.Redis(host="127.0.0.1", port=port_a)
        try:
            pid_a = int(info.info("server")["process_id"])
        finally:
            info.close()
        store = f"{nodes[0]}/0?cluster=1&prefix=stall:"
        with frontier_process("--store", store, "--robots", "off") as (address, _), \
                grpc.insecure_channel(address) as channel:
            client = pb_grpc.URLFrontierStub(channel)
            acks = list(client.PutURLs(iter([
                pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(
                    url="http://h.example/1", crawlID=crawl))) for crawl in (crawl_a, crawl_b)
            ]), timeout=60))
            assert [ack.status for ack in acks] == [pb.AckMessage.Status.OK] * 2
            os.kill(pid_a, signal.SIGSTOP)
            try:
                held = client.GetStats.future(pb.QueueWithinCrawlParams(crawlID=crawl_a),
                                              timeout=600)
                other = client.GetStats(pb.QueueWithinCrawlParams(crawlID=crawl_b),
                                        timeout=600)
                held_ended = held.done()
            finally:
                os.kill(pid_a, signal.SIGCONT)
            assert other.size == 1 and other.crawlID == crawl_b
            assert not held_ended, "the call on the other crawl waited for the stalled node"
            try:  # the held call ends either way: answered late, or failed on the timeout
                assert held.result().crawlID == crawl_a
            except grpc.RpcError as exc:
                assert exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED, exc


def test_put_urls_stores_what_arrives_together_and_acks_each_in_order(tmp_path: Path) -> None:
    """PutURLs stores the items that arrived while it stored the last ones in one call: one
    AckMessage per item still, in the order sent, SKIPPED for those refused and OK for the
    rest, whatever the batches were."""
    pb, pb_grpc = stubs(tmp_path.parent / "stubs")
    with frontier_process("--store", f"sqlite:///{tmp_path / 'f.sqlite'}",
                          "--robots", "off") as (address, _), \
            grpc.insecure_channel(address) as channel:
        client = pb_grpc.URLFrontierStub(channel)
        items = []
        for n in range(2000):
            url = f"http://h{n % 7}.example/{n}" if n % 5 != 4 else f"ftp://h.example/{n}"
            items.append(pb.URLItem(ID=f"id{n}", discovered=pb.DiscoveredURLItem(
                info=pb.URLInfo(url=url))))
        acks = list(client.PutURLs(iter(items), timeout=120))
        assert [ack.ID for ack in acks] == [f"id{n}" for n in range(2000)]
        expected = [pb.AckMessage.Status.OK if item.discovered.info.url.startswith("http")
                    else pb.AckMessage.Status.SKIPPED for item in items]
        assert [ack.status for ack in acks] == expected
        stored = sum(status == pb.AckMessage.Status.OK for status in expected)
        assert client.CountURLs(pb.CountUrlParams(key="h0.example"), timeout=60).value + sum(
            client.CountURLs(pb.CountUrlParams(key=f"h{h}.example"), timeout=60).value
            for h in range(1, 7)) == stored
