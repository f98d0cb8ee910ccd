"""Two ``polite frontier serve`` nodes on one store: ListNodes names both, and one killed
with SIGKILL loses no URL: the URLs it had handed out come back to the other once their
leases lapse."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from tests.frontier.frontier_client import (
    KINDS,
    environment,
    frontier_process,
    store_url,
    stubs,
)


@pytest.mark.parametrize("kind", KINDS)
def test_a_node_killed_loses_no_url(kind: str, tmp_path: Path,
                                    request: pytest.FixtureRequest) -> None:
    pb, pb_grpc = stubs(tmp_path.parent / "stubs")
    store = store_url(kind, tmp_path, request)
    options = ("--store", store, "--robots", "off", "--default-delay-s", "0")
    urls = {f"http://h{h}.example/{i}" for h in range(5) for i in range(10)}
    with frontier_process(*options) as (address_a, node_a), \
            frontier_process(*options) as (address_b, _), \
            grpc.insecure_channel(address_a) as channel_a, \
            grpc.insecure_channel(address_b) as channel_b:
        a, b = pb_grpc.URLFrontierStub(channel_a), pb_grpc.URLFrontierStub(channel_b)
        acks = list(a.PutURLs(iter(
            pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=u)))
            for u in sorted(urls))))
        assert len(acks) == len(urls)
        assert sorted(b.ListNodes(pb.Empty()).values) == sorted([address_a, address_b])
        # the cluster's state: off everywhere, then on; local: this node's only
        b.SetActive(pb.Active(state=False))
        assert a.GetActive(pb.Local(local=True)).state is False
        b.SetActive(pb.Active(state=True))
        b.SetActive(pb.Active(state=False, local=True))
        assert a.GetActive(pb.Local(local=True)).state is True
        assert b.GetActive(pb.Local()).state is False
        b.SetActive(pb.Active(state=True, local=True))
        # A hands out half the URLs and dies before sending any back
        taken_by_a = [u.url for u in a.GetURLs(pb.GetParams(
            max_urls_per_queue=5, delay_requestable=2))]
        assert len(taken_by_a) == 25
        os.kill(node_a.pid, signal.SIGKILL)
        node_a.wait(10)
        handed: list[str] = []
        deadline = time.monotonic() + 60
        while len(handed) < len(urls):  # A's leases lapse two seconds on
            assert time.monotonic() < deadline, (len(handed), sorted(urls - set(handed)))
            got = [u.url for u in b.GetURLs(pb.GetParams(max_urls_per_queue=10,
                                                         delay_requestable=60))]
            handed += got
            if not got:
                time.sleep(0.1)
        assert sorted(handed) == sorted(urls)  # each once, none lost
        assert set(taken_by_a) <= set(handed)
        while address_a in b.ListNodes(pb.Empty()).values:  # gone once it stops beating
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert list(b.ListNodes(pb.Empty()).values) == [address_b]
        assert b.CountURLs(pb.CountUrlParams(key="h0.example")).value == 10


@pytest.mark.parametrize("kind", KINDS)
def test_a_node_stopped_with_sigterm_leaves_list_nodes_at_once(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A clean stop strikes the node off before the process ends: the other node no longer
    names it, with no wait for its beats to lapse."""
    pb, pb_grpc = stubs(tmp_path.parent / "stubs")
    store = store_url(kind, tmp_path, request)
    options = ("--store", store, "--robots", "off")
    with frontier_process(*options) as (address_a, node_a), \
            frontier_process(*options) as (address_b, _), \
            grpc.insecure_channel(address_b) as channel_b:
        b = pb_grpc.URLFrontierStub(channel_b)
        assert sorted(b.ListNodes(pb.Empty()).values) == sorted([address_a, address_b])
        node_a.send_signal(signal.SIGTERM)
        assert node_a.wait(30) == 0
        assert list(b.ListNodes(pb.Empty()).values) == [address_b]


def test_a_redis_that_stops_answering_gives_an_error_not_a_hang(tmp_path: Path) -> None:
    """A Redis that stops answering (stopped with SIGSTOP: its connections stay open) makes
    each call fail after the store's socket timeout, with an error the client is told,
    rather than holding the node, and every call behind it, until the client gives up; once
    it answers again, so does the node. (redis-py 8 times a read out after 5 s by default;
    the frontier now says so itself rather than rely on a default.)"""
    from tests.redis_server import free_port, start_redis

    pb, pb_grpc = stubs(tmp_path.parent / "stubs")
    port = free_port()
    server = start_redis(tmp_path, port)
    try:
        store = f"redis://127.0.0.1:{port}/0?prefix=stall:"
        with frontier_process("--store", store, "--robots", "off") as (address, _), \
                grpc.insecure_channel(address) as channel:
            client = pb_grpc.URLFrontierStub(channel)
            acks = list(client.PutURLs(iter([pb.URLItem(discovered=pb.DiscoveredURLItem(
                info=pb.URLInfo(url="http://h.example/1")))])))
            assert [ack.status for ack in acks] == [pb.AckMessage.Status.OK]
            os.kill(server.pid, signal.SIGSTOP)
            try:
                with pytest.raises(grpc.RpcError) as failed:
                    client.GetStats(pb.QueueWithinCrawlParams(), timeout=120)
            finally:
                os.kill(server.pid, signal.SIGCONT)
            assert failed.value.code() != grpc.StatusCode.DEADLINE_EXCEEDED, failed.value
            assert client.GetStats(pb.QueueWithinCrawlParams(), timeout=120).size == 1
    finally:
        server.terminate()
        server.wait(10)


def test_a_name_a_live_node_has_is_refused_and_a_killed_nodes_name_taken_again(
        tmp_path: Path) -> None:
    """Nodes on several machines all listen on their own loopback, so the default names
    (HOST:PORT) can be the same: one node to ListNodes, to SetActive's ``local`` and to a
    clean stop, which would strike off the other's name. A node refuses a name that a node
    alive on its store beats under, says so, and takes the name of one killed a moment ago
    (its beats have stopped)."""
    pb, pb_grpc = stubs(tmp_path.parent / "stubs")
    options = ("--store", f"sqlite:///{tmp_path / 'frontier.sqlite'}", "--robots", "off",
               "--node-name", "crawler-1:7071")
    command = [sys.executable, "-m", "polite", "frontier", "serve", "--port", "0"]
    with frontier_process(*options) as (_, first):
        second = subprocess.run([*command, *options], capture_output=True, text=True,
                                timeout=60, env=environment())
        assert second.returncode == 2, second.stderr
        assert "a node named crawler-1:7071 is alive on this store" in second.stderr
        assert "Traceback" not in second.stderr
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        with frontier_process(*options) as (address, _), \
                grpc.insecure_channel(address) as channel:
            stub = pb_grpc.URLFrontierStub(channel)
            assert list(stub.ListNodes(pb.Empty()).values) == ["crawler-1:7071"]
    bad = subprocess.run([*command, *options[:-1], "two words"], capture_output=True,
                         text=True, timeout=60, env=environment())
    assert bad.returncode == 2 and "--node-name 'two words'" in bad.stderr, bad.stderr
