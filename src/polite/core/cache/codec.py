"""Stored responses as bytes, for the stores: a small binary frame, no pickle (a shared Redis
must never hand this process code to run)."""

from __future__ import annotations

import json
import struct

from polite.core.cache.policy import Stored

__all__ = ["decode", "encode"]

_MAGIC = b"PC1\n"
_LENGTHS = struct.Struct(">IQ")  # metadata length, body length


def _text(value: bytes) -> str:
    return value.decode("latin-1")


def encode(variants: list[Stored]) -> bytes:
    """Every stored variant of one URL, in one blob."""
    parts = [_MAGIC, struct.pack(">I", len(variants))]
    for stored in variants:
        meta = json.dumps({
            "url": stored.url, "status": stored.status, "reason": _text(stored.reason),
            "headers": [[_text(k), _text(v)] for k, v in stored.headers],
            "request_time": stored.request_time, "response_time": stored.response_time,
            "vary": [[_text(k), None if v is None else _text(v)] for k, v in stored.vary],
            "stored_for_s": stored.stored_for_s,
        }, separators=(",", ":")).encode()
        parts += [_LENGTHS.pack(len(meta), len(stored.body)), meta, stored.body]
    return b"".join(parts)


def decode(blob: bytes) -> list[Stored]:
    """The variants in ``blob``; an empty list for anything that is not one (a cache miss,
    never an error)."""
    if not blob.startswith(_MAGIC):
        return []
    try:
        (count,) = struct.unpack_from(">I", blob, len(_MAGIC))
        offset = len(_MAGIC) + 4
        out = []
        for _ in range(count):
            meta_len, body_len = _LENGTHS.unpack_from(blob, offset)
            offset += _LENGTHS.size
            meta = json.loads(blob[offset:offset + meta_len])
            offset += meta_len
            body = blob[offset:offset + body_len]
            if len(body) != body_len:
                return []
            offset += body_len
            out.append(Stored(
                meta["url"], int(meta["status"]), meta["reason"].encode("latin-1"),
                tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in meta["headers"]),
                body, float(meta["request_time"]), float(meta["response_time"]),
                tuple((k.encode("latin-1"), None if v is None else v.encode("latin-1"))
                      for k, v in meta["vary"]),
                meta.get("stored_for_s")))
        return out
    except (struct.error, ValueError, KeyError, TypeError, AttributeError):
        return []
