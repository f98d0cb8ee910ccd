"""``polite frontier serve --robots off`` through stubs made from the vendored .proto: the
scenarios of the reference service's own test suite (URLFrontierServiceTest: never
refetched, right order, updates, queue names, crawl IDs) and the fields of each RPC as the
.proto's comments describe them."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.frontier.frontier_client import KINDS, environment, frontier, store_url, stubs

DEFAULT = "DEFAULT"  # the reference's CrawlID.DEFAULT


@pytest.fixture
def pb(tmp_path: Path) -> Any:
    return stubs(tmp_path.parent / "stubs")[0]


@pytest.fixture(params=KINDS)
def client(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A server of its own, for a test of what is the whole server's (its crawls, whether it
    is active, every crawl's URLs)."""
    store = store_url(request.param, tmp_path, request)
    with frontier(tmp_path, "--store", store, "--robots", "off") as stub:
        yield stub


@pytest.fixture(scope="module", params=KINDS)
def shared(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
           ) -> Iterator[Any]:
    """One server of each store for the module's tests of one crawl (each start of
    ``polite frontier serve`` costs a third of a second of CPU): each test asks its own
    crawl (:func:`crawl`), whose queues and URLs no other test sees."""
    folder = tmp_path_factory.mktemp("shared")
    store = store_url(request.param, folder, request)
    with frontier(folder, "--store", store, "--robots", "off") as stub:
        yield stub


@pytest.fixture
def crawl() -> str:
    """A crawl ID of the test's own, on the module's shared server."""
    return f"crawl-{uuid.uuid4().hex[:12]}"


def put(client: Any, items: list[Any]) -> list[Any]:
    return list(client.PutURLs(iter(items)))


def discovered(pb: Any, url: str, key: str = "", crawl: str = "", **meta: list[str]) -> Any:
    info = pb.URLInfo(url=url, key=key, crawlID=crawl)
    for name, values in meta.items():
        info.metadata[name].values.extend(values)
    return pb.URLItem(discovered=pb.DiscoveredURLItem(info=info))


def known(pb: Any, url: str, key: str = "", refetch: int = 0, crawl: str = "") -> Any:
    info = pb.URLInfo(url=url, key=key, crawlID=crawl)
    return pb.URLItem(known=pb.KnownURLItem(info=info, refetchable_from_date=refetch))


def get(client: Any, pb: Any, **params: Any) -> list[Any]:
    return list(client.GetURLs(pb.GetParams(**params)))


def test_never_refetched(shared: Any, pb: Any, crawl: str) -> None:
    acks = put(shared, [known(pb, "http://key1.com/", "key1.com", crawl=crawl)])
    assert [a.status for a in acks] == [pb.AckMessage.OK]
    assert get(shared, pb, key="key1.com", max_urls_per_queue=1, delay_requestable=2,
               crawlID=crawl) == []


def test_right_order(shared: Any, pb: Any, crawl: str) -> None:
    now = int(time.time())
    acks = put(shared, [known(pb, "http://key1.com/later", "key1.com", now, crawl),
                        known(pb, "http://key1.com/sooner", "key1.com", now - 10_000, crawl)])
    assert len(acks) == 2
    got = get(shared, pb, key="key1.com", max_urls_per_queue=2, delay_requestable=2,
              crawlID=crawl)
    assert [u.url for u in got] == ["http://key1.com/sooner", "http://key1.com/later"]


def test_updates(shared: Any, pb: Any, crawl: str) -> None:
    """Two duplicate discovered URLs make one; once handed out it is in process until its
    lease lapses, and deleting the queue removes it."""
    item = discovered(pb, "http://key1.com/", "key1.com", crawl)
    assert len(put(shared, [item, item])) == 2
    assert list(shared.ListQueues(pb.Pagination(crawlID=crawl)).values) == ["key1.com"]
    params = {"key": "key1.com", "max_urls_per_queue": 1, "delay_requestable": 2,
              "crawlID": crawl}
    assert [u.url for u in get(shared, pb, **params)] == ["http://key1.com/"]
    stats = shared.GetStats(pb.QueueWithinCrawlParams(key="key1.com", crawlID=crawl))
    assert (stats.numberOfQueues, stats.inProcess) == (1, 1)
    assert get(shared, pb, **params) == []
    deadline = time.monotonic() + 60  # the lease lapses two seconds on (waited for, not slept)
    while shared.GetStats(pb.QueueWithinCrawlParams(key="key1.com", crawlID=crawl)).inProcess:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    stats = shared.GetStats(pb.QueueWithinCrawlParams(key="key1.com", crawlID=crawl))
    assert (stats.numberOfQueues, stats.inProcess, stats.size) == (1, 0, 1)
    queue = pb.QueueWithinCrawlParams(key="key1.com", crawlID=crawl)
    assert shared.DeleteQueue(queue).value == 1
    assert shared.GetStats(queue).numberOfQueues == 0


def test_queue_names(shared: Any, pb: Any, crawl: str) -> None:
    put(shared, [discovered(pb, "http://gac.icann.org?language_id=9", crawl=crawl)])
    stats = shared.GetStats(pb.QueueWithinCrawlParams(key="gac.icann.org", crawlID=crawl))
    assert stats.size == 1
    queue = pb.QueueWithinCrawlParams(key="gac.icann.org", crawlID=crawl)
    assert shared.DeleteQueue(queue).value == 1


def test_crawl_ids(client: Any, pb: Any) -> None:
    assert list(client.ListCrawls(pb.Local()).values) == []
    put(client, [discovered(pb, "http://urlfrontier.net/", crawl="BESPOKE")])
    put(client, [discovered(pb, "http://urlfrontier.net/")])
    put(client, [discovered(pb, "http://urlfrontier.net/", crawl=DEFAULT)])
    stats = client.GetStats(pb.QueueWithinCrawlParams())
    assert (stats.size, stats.crawlID, stats.numberOfQueues) == (1, DEFAULT, 1)
    stats = client.GetStats(pb.QueueWithinCrawlParams(crawlID="BESPOKE"))
    assert (stats.size, stats.crawlID, stats.numberOfQueues) == (1, "BESPOKE", 1)
    assert sorted(client.ListCrawls(pb.Local()).values) == ["BESPOKE", DEFAULT]
    assert client.DeleteCrawl(pb.DeleteCrawlMessage(value="BESPOKE")).value == 1
    stats = client.GetStats(pb.QueueWithinCrawlParams(crawlID="BESPOKE"))
    assert (stats.crawlID, stats.size) == ("BESPOKE", 0)
    client.DeleteCrawl(pb.DeleteCrawlMessage())
    assert client.GetStats(pb.QueueWithinCrawlParams(crawlID="")).size == 0


def test_acks_metadata_and_status(client: Any, pb: Any) -> None:
    """One ack per item, with the client's ID or else the URL; what cannot be stored is
    SKIPPED; metadata is kept and handed back; GetURLStatus and ListURLs tell discovered
    from known and say when a URL may be fetched again."""
    items = [discovered(pb, "https://a.example/1", depth=["0"], source=["seed", "list"]),
             discovered(pb, "ftp://a.example/x"),
             discovered(pb, "https://a.example/" + "x" * 9000),
             pb.URLItem(ID="empty"),
             discovered(pb, "https://a.example/big", big=["x" * 70_000])]
    items[0].ID = "first"
    acks = put(client, items)
    assert [(a.ID, a.status) for a in acks] == [
        ("first", pb.AckMessage.OK), ("ftp://a.example/x", pb.AckMessage.SKIPPED),
        ("https://a.example/" + "x" * 9000, pb.AckMessage.SKIPPED),
        ("empty", pb.AckMessage.SKIPPED), ("https://a.example/big", pb.AckMessage.SKIPPED)]
    got = get(client, pb, max_urls_per_queue=5, anyCrawlID=pb.AnyCrawlID())
    assert [(u.url, u.key, u.crawlID) for u in got] == [
        ("https://a.example/1", "a.example", DEFAULT)]
    assert list(got[0].metadata["source"].values) == ["seed", "list"]
    status = client.GetURLStatus(pb.URLStatusRequest(url="https://a.example/1"))
    assert status.WhichOneof("item") == "discovered"
    assert status.creation_date >= int(time.time()) - 600
    later = int(time.time()) + 3600
    put(client, [known(pb, "https://a.example/1", refetch=later)])
    status = client.GetURLStatus(pb.URLStatusRequest(url="https://a.example/1"))
    assert status.WhichOneof("item") == "known"
    assert status.known.refetchable_from_date == later
    with pytest.raises(grpc.RpcError) as missing:
        client.GetURLStatus(pb.URLStatusRequest(url="https://a.example/none"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    listed = list(client.ListURLs(pb.ListUrlParams(filter="A.EXAMPLE", ignoreCase=True)))
    assert [u.known.info.url for u in listed] == ["https://a.example/1"]
    assert list(client.ListURLs(pb.ListUrlParams(filter="A.EXAMPLE"))) == []
    assert client.CountURLs(pb.CountUrlParams(key="a.example")).value == 1


def test_queues_pages_delay_block_and_active(client: Any, pb: Any) -> None:
    put(client, [discovered(pb, f"http://h{i}.example/") for i in range(5)])
    first = client.ListQueues(pb.Pagination(size=2))
    rest = client.ListQueues(pb.Pagination(start=2, size=10))
    assert list(first.values) + list(rest.values) == [f"h{i}.example" for i in range(5)]
    assert (first.start, first.size, rest.start, rest.size) == (0, 2, 2, 3)
    # a queue blocked is inactive and gives nothing; unblocked (0) it gives again
    client.BlockQueueUntil(pb.BlockQueueParams(key="h0.example", time=int(time.time()) + 3600))
    assert "h0.example" not in client.ListQueues(pb.Pagination()).values
    assert "h0.example" in client.ListQueues(pb.Pagination(include_inactive=True)).values
    assert get(client, pb, key="h0.example") == []
    client.BlockQueueUntil(pb.BlockQueueParams(key="h0.example", time=0))
    # inactive: nothing handed out, URLs still taken in
    client.SetActive(pb.Active(state=False))
    assert client.GetActive(pb.Local()).state is False
    assert get(client, pb, max_queues=5) == []
    assert [a.status for a in put(client, [discovered(pb, "http://h5.example/")])] == [
        pb.AckMessage.OK]
    client.SetActive(pb.Active(state=True))
    assert len(get(client, pb, max_queues=2)) == 2
    # max_queues, then a queue's delay: the next URL of h0 waits an hour after it gave one
    client.SetDelay(pb.QueueDelayParams(key="h6.example", delay_requestable=3600))
    put(client, [discovered(pb, f"http://h6.example/{i}") for i in range(2)])
    assert [u.url for u in get(client, pb, key="h6.example", max_urls_per_queue=1)] == [
        "http://h6.example/0"]
    assert get(client, pb, key="h6.example", max_urls_per_queue=1) == []
    assert list(client.ListNodes(pb.Empty()).values)
    client.SetLogLevel(pb.LogLevelParams(package="polite", level=pb.LogLevelParams.DEBUG))


def test_crawl_limit_purge_and_put_discovered(client: Any, pb: Any) -> None:
    client.SetCrawlLimit(pb.CrawlLimitParams(key="lim.example", limit=2))
    put(client, [discovered(pb, f"http://lim.example/{i}") for i in range(5)])
    got = get(client, pb, key="lim.example", max_urls_per_queue=10)
    assert len(got) == 2
    batch = pb.DiscoveredBatch(ID="page1", items=[
        pb.URLInfo(url="http://b.example/1"), pb.URLInfo(url="mailto:x@b.example"),
        pb.URLInfo(url="http://lim.example/0")])
    acks = list(client.PutDiscovered(iter([batch])))
    assert [(a.ID, list(a.statuses)) for a in acks] == [
        ("page1", [pb.AckMessage.OK, pb.AckMessage.SKIPPED, pb.AckMessage.OK])]
    assert client.CountURLs(pb.CountUrlParams(key="lim.example")).value == 5  # not twice
    assert client.PurgeURLs(pb.PurgeUrlParams(days=1)).value == 0  # all new
    assert client.PurgeURLs(pb.PurgeUrlParams(key="b.example", days=0)).value == 1
    counts = client.GetStats(pb.QueueWithinCrawlParams()).counts
    assert counts["active_queues"] == 1


def test_one_call_hands_out_ten_thousand_urls_at_most(shared: Any, pb: Any, crawl: str) -> None:
    """GetURLs' limits of 0 mean no limit, but one answer is bounded: the rest comes from
    the next call."""
    urls = [f"http://many.example/{i}" for i in range(10_050)]
    batches = (pb.DiscoveredBatch(ID=str(i), items=[pb.URLInfo(url=u, crawlID=crawl)
                                                    for u in urls[i:i + 1000]])
               for i in range(0, len(urls), 1000))
    assert sum(len(a.statuses) for a in shared.PutDiscovered(batches)) == len(urls)
    # held for ten minutes (the default 30 s passed before the second call on a machine
    # busy enough), so that the second call can hand out only the rest
    first = get(shared, pb, key="many.example", crawlID=crawl, delay_requestable=600)
    shared.SetDelay(pb.QueueDelayParams(key="many.example", delay_requestable=0,
                                        crawlID=crawl))
    second = get(shared, pb, key="many.example", crawlID=crawl)
    assert (len(first), len(second)) == (10_000, 50)
    assert sorted(u.url for u in first + second) == sorted(urls)


def test_stats_size_counts_the_urls_in_flight_too(shared: Any, pb: Any, crawl: str) -> None:
    """Stats.size: the active URLs, those not completed, in flight or not (a queue is active
    while it holds URLs not completed, as ListQueues' comment says); inProcess: those in
    flight."""
    put(shared, [discovered(pb, "http://size.example/a", crawl=crawl),
                 discovered(pb, "http://size.example/b", crawl=crawl),
                 known(pb, "http://size.example/c", crawl=crawl)])
    assert len(get(shared, pb, key="size.example", max_urls_per_queue=1,
                   crawlID=crawl)) == 1
    stats = shared.GetStats(pb.QueueWithinCrawlParams(key="size.example", crawlID=crawl))
    assert (stats.size, stats.inProcess, stats.counts["completed"]) == (2, 1, 1)


def test_a_crawl_limit_counts_urls_completed_and_in_flight(shared: Any, pb: Any,
                                                           crawl: str) -> None:
    """SetCrawlLimit: a queue hands out URLs while those completed and those in flight are
    fewer than its limit (the reference's limit counts completed URLs); a URL whose lease
    lapsed is handed out again, not lost to the limit."""
    shared.SetCrawlLimit(pb.CrawlLimitParams(key="cap.example", limit=2, crawlID=crawl))
    shared.SetDelay(pb.QueueDelayParams(key="cap.example", delay_requestable=0,
                                        crawlID=crawl))
    put(shared, [discovered(pb, f"http://cap.example/{i}", crawl=crawl) for i in range(4)])
    params = {"key": "cap.example", "max_urls_per_queue": 10, "delay_requestable": 1,
              "crawlID": crawl}
    first = [u.url for u in get(shared, pb, **params)]
    assert first == ["http://cap.example/0", "http://cap.example/1"]
    assert get(shared, pb, **params) == []  # two in flight
    deadline = time.monotonic() + 60  # the leases lapse a second on (waited for, not slept)
    while shared.GetStats(pb.QueueWithinCrawlParams(key="cap.example", crawlID=crawl)).inProcess:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    again = [u.url for u in get(shared, pb, **params)]
    assert again == first
    assert [a.status for a in put(shared, [known(pb, u, crawl=crawl) for u in again])] == [
        pb.AckMessage.OK] * 2
    assert get(shared, pb, **params) == []  # two completed: the limit is reached
    assert shared.CountURLs(pb.CountUrlParams(key="cap.example", crawlID=crawl)).value == 4


def test_a_nul_in_a_key_or_a_crawl_id_is_skipped(client: Any, pb: Any) -> None:
    """A NUL inside a key or a crawl ID is refused (SKIPPED): the Redis store joins the two
    with one, so crawl "a" with key "b<NUL>c" and crawl "a<NUL>b" with key "c" would share
    one queue's URLs."""
    acks = put(client, [discovered(pb, "http://nul.example/1", key="b\0c", crawl="a"),
                        discovered(pb, "http://nul.example/2", key="c", crawl="a\0b"),
                        discovered(pb, "http://nul.example/3", key="c", crawl="a")])
    assert [a.status for a in acks] == [pb.AckMessage.SKIPPED, pb.AckMessage.SKIPPED,
                                        pb.AckMessage.OK]
    assert list(client.ListCrawls(pb.Local()).values) == ["a"]
    assert client.CountURLs(pb.CountUrlParams(crawlID="a")).value == 1


def test_set_log_level_makes_a_bounded_number_of_loggers(client: Any, pb: Any) -> None:
    """Each logger named is kept for the server's life: a hundred new names are taken, the
    next is refused (RESOURCE_EXHAUSTED), a package that logs already is still set, and an
    over-long name is an INVALID_ARGUMENT."""
    debug = pb.LogLevelParams.DEBUG
    for i in range(100):
        client.SetLogLevel(pb.LogLevelParams(package=f"made.up.{i}", level=debug))
    with pytest.raises(grpc.RpcError) as refused:
        client.SetLogLevel(pb.LogLevelParams(package="made.up.100", level=debug))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    client.SetLogLevel(pb.LogLevelParams(package="made.up.7", level=debug))  # made already
    client.SetLogLevel(pb.LogLevelParams(package="polite", level=debug))
    with pytest.raises(grpc.RpcError) as too_long:
        client.SetLogLevel(pb.LogLevelParams(package="x" * 257, level=debug))
    assert too_long.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_server_without_robots_loads_no_robots_txt_fetcher() -> None:
    """What ``polite frontier serve --robots off`` runs on (the command, the service, the
    SQLite and Redis stores) loads neither robots.txt's fetcher nor its HTTP client nor the
    politeness driver: a server the tests start by the dozen starts without them."""
    loaded = subprocess.run(
        [sys.executable, "-c",
         "import sys\n"
         "import polite.cli.main, polite.cli.frontier, polite.frontier._server\n"
         "import polite.frontier._store, polite.frontier._redis_store, polite.storage\n"
         "print(*sorted(sys.modules), sep='\\n')"],
        capture_output=True, text=True, env=environment(), timeout=120, check=True
    ).stdout.split()
    assert "polite.frontier._server" in loaded
    assert [name for name in loaded if name.startswith("polite.fetch")] == []
