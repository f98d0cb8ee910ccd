"""The generated modules checked in beside the vendored .proto are what grpcio-tools makes
of it today (src/polite/frontier/_proto/README.md says how they were made)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.frontier.frontier_client import PROTO, generate

# The lines naming the versions of protobuf and grpcio that made the files differ from one
# release of grpcio-tools to the next without changing what the files do.
_VERSIONS = re.compile(r"^.*(?:[Vv]ersion|_runtime_version\.Domain|^\s+\d+,\s*$).*$",
                       re.MULTILINE)


def _meaning(text: str) -> str:
    return _VERSIONS.sub("", text)


def test_generated_modules_match_the_vendored_proto(tmp_path: Path) -> None:
    generate(tmp_path)
    made = {path.name: path.read_text("utf-8") for path in tmp_path.glob("urlfrontier_pb2*")}
    assert sorted(made) == ["urlfrontier_pb2.py", "urlfrontier_pb2.pyi",
                            "urlfrontier_pb2_grpc.py"]
    # the one change made by hand: the service module imports its messages relatively
    made["urlfrontier_pb2_grpc.py"] = made["urlfrontier_pb2_grpc.py"].replace(
        "\nimport urlfrontier_pb2 as urlfrontier__pb2\n",
        "\nfrom . import urlfrontier_pb2 as urlfrontier__pb2\n")
    for name, text in made.items():
        kept = (PROTO.parent / name).read_text("utf-8")
        assert _meaning(kept) == _meaning(text), f"{name} is not what {PROTO.name} makes"


def test_the_vendored_proto_says_where_it_came_from() -> None:
    readme = (PROTO.parent / "README.md").read_text("utf-8")
    assert re.search(r"commit\s+[0-9a-f]{40}", readme)
    assert "Apache License" in (PROTO.parent / "LICENSE").read_text("utf-8")
    assert "service URLFrontier" in PROTO.read_text("utf-8")
