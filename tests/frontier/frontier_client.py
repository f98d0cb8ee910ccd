"""``polite frontier serve`` as a real process, driven through Python stubs generated here from
the vendored .proto (not the package's own generated modules: what a client in any language
would do)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.commands import Forked, popen
from tests.serving import ROOT

PROTO = ROOT / "src" / "polite" / "frontier" / "_proto" / "urlfrontier.proto"


def generate(out: Path) -> None:
    """The Python modules of the vendored .proto, made by grpcio-tools into ``out``."""
    from grpc_tools import protoc  # type: ignore[import-untyped]

    include = Path(protoc.__file__).parent / "_proto"
    code = protoc.main(["grpc_tools.protoc", f"-I{PROTO.parent}", f"-I{include}",
                        f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}",
                        str(PROTO)])
    assert code == 0, f"protoc failed on {PROTO}"


_stubs: tuple[ModuleType, ModuleType] | None = None


def stubs(folder: Path) -> tuple[ModuleType, ModuleType]:
    """(urlfrontier_pb2, urlfrontier_pb2_grpc) made from the .proto, imported once."""
    global _stubs
    if _stubs is None:
        folder.mkdir(parents=True, exist_ok=True)
        generate(folder)
        sys.path.insert(0, str(folder))
        _stubs = (importlib.import_module("urlfrontier_pb2"),
                  importlib.import_module("urlfrontier_pb2_grpc"))
    return _stubs


# The stores a test runs on: an SQLite file, the session's redis-server (a key prefix of the
# test's own) and a Redis Cluster of three nodes (the same).
KINDS = ["sqlite", "redis", "redis-cluster"]


def store_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A ``--store`` of ``kind`` (one of :data:`KINDS`) that no other test uses."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'f.sqlite'}"
    prefix = f"t{uuid.uuid4().hex[:10]}:"
    if kind == "redis-cluster":
        node = request.getfixturevalue("redis_cluster_nodes")[1]
        return f"{node}/0?cluster=1&prefix={prefix}"
    return f"{request.getfixturevalue('redis_url')}?prefix={prefix}"


said: list[str] = []  # the metrics address of the last server started, if asked


def environment() -> dict[str, str]:
    """This process's environment without proxies (gRPC would take them up)."""
    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


@contextmanager
def frontier_process(*options: str) -> Iterator[tuple[str, subprocess.Popen[str] | Forked]]:
    """``python -m polite frontier serve --port 0 OPTIONS``; its address once it listens
    (what it said before, such as where its metrics are, is in ``said``)."""
    with popen("frontier", "serve", "--port", "0", *options, env=environment()) as process:
        try:
            assert process.stdout is not None and process.stderr is not None
            said.clear()
            line = process.stdout.readline()  # the server says where it listens, or exits
            while line.startswith("polite frontier: metrics at"):
                said.append(line.rsplit(" ", 1)[1].strip())
                line = process.stdout.readline()
            if "listening on" not in line:
                pytest.fail(f"polite frontier serve did not start: {line}"
                            f"{process.stderr.read()}")
            address = line.rsplit(" ", 1)[1].strip()
            # drained, so that the server never blocks on a full pipe
            threading.Thread(target=process.stderr.read, daemon=True).start()
            yield address, process
        finally:
            process.terminate()
            process.wait(10)


@contextmanager
def frontier(folder: Path, *options: str) -> Iterator[Any]:
    """A blocking stub on a running ``polite frontier serve``."""
    import grpc

    _, pb_grpc = stubs(folder.parent / "stubs")
    with frontier_process(*options) as (address, _), grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        yield pb_grpc.URLFrontierStub(channel)
