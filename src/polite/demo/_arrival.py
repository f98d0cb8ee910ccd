"""When a request reached a demonstration site, by the kernel's clock rather than the
server's thread.

A site that notes ``time.monotonic()`` once its thread gets round to the request notes it
late by however long the machine kept that thread waiting: on a loaded machine a few
milliseconds to tens of them (a crawl that kept a site's 1 s delay was once
measured 0.968 s apart). Linux stamps every packet as it arrives (``SO_TIMESTAMPNS``); a
server that asks for the stamp of a request's first bytes measures politeness where it
happens, whatever the load. Elsewhere (no stamp given) the server's own clock is the answer.
"""

from __future__ import annotations

import socket
import struct
import time
from contextlib import suppress

__all__ = ["ANCILLARY_BYTES", "SO_TIMESTAMPNS", "arrived", "next_arrival", "stamp_arrivals",
           "wall_time"]

# Linux's value where the socket module does not name it (the cmsg type has the same number)
SO_TIMESTAMPNS: int = getattr(socket, "SO_TIMESTAMPNS", 35)
_STAMP = struct.Struct("qq")  # struct timespec: seconds, nanoseconds
ANCILLARY_BYTES = socket.CMSG_SPACE(_STAMP.size)


def _wall_minus_monotonic() -> float:
    """The offset from time.monotonic() to the wall clock the kernel stamps with. Read a few
    times and the largest kept: a pause between the two reads can only make it smaller."""
    best = -float("inf")
    for _ in range(5):
        wall = time.time()
        best = max(best, wall - time.monotonic())
    return best


_OFFSET_S = _wall_minus_monotonic()


def wall_time(at: float) -> float:
    """The wall-clock time of ``at``, an instant on time.monotonic()'s scale (read as one
    offset, so that a thread paused between two clock reads does not move it)."""
    return at + _OFFSET_S


def stamp_arrivals(listener: socket.socket) -> None:
    """Have the kernel stamp what reaches the connections ``listener`` accepts (they inherit
    the option)."""
    with suppress(OSError):  # not Linux: arrivals fall back to the server's clock
        listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def arrived(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The arrival, on time.monotonic()'s scale, of the bytes a ``recvmsg`` returned with
    ``ancillary``; now if the kernel gave no stamp."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _STAMP.size:
            seconds, nanoseconds = _STAMP.unpack_from(data)
            return float(seconds + nanoseconds / 1e9 - _OFFSET_S)
    return time.monotonic()


def next_arrival(connection: socket.socket) -> float | None:
    """Wait for the next bytes on a blocking plain (not TLS) ``connection`` without taking
    them; when they arrived (time.monotonic()'s scale), or None if the peer closed it."""
    try:
        data, ancillary, _, _ = connection.recvmsg(1, ANCILLARY_BYTES, socket.MSG_PEEK)
    except OSError:
        return None
    return arrived(ancillary) if data else None
