"""The event loop the long-running commands run on (``polite serve``, ``crawl``,
``survey``), in a module of its own: choosing it imports neither the service nor the proxy."""

from __future__ import annotations

import asyncio
import gc

from polite.errors import ConfigError

__all__ = ["YOUNG_COLLECTION_EVERY", "freeze_start_up", "new_event_loop"]

# The collector's youngest generation is collected after this many net allocations, not
# CPython's 700: nearly every object a crawled page makes is freed by its count, yet the
# default walked the young ones 380 times in a 10,000-page crawl of the bench's farm (0.14
# to 0.20 s of its 7.6 to 10.3 s of CPU), this 7 times (0.02 to 0.03 s); what cycles hold
# waits at most this many allocations longer.
YOUNG_COLLECTION_EVERY = 10_000


def new_event_loop(kind: str) -> asyncio.AbstractEventLoop:
    """uvloop when asked for or, with ``auto``, when installed: the proxy spends about a
    sixth less CPU per request on it (bench/proxy_vs_peers.py)."""
    if kind == "asyncio":
        return asyncio.new_event_loop()
    try:
        import uvloop
    except ImportError:
        if kind == "uvloop":
            raise ConfigError("--loop uvloop: uvloop is not installed "
                              "(pip install uvloop)") from None
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def freeze_start_up() -> None:
    """Take what start-up made (modules, functions, classes, settings: some 35,000 objects
    that live as long as the process) out of the garbage collector's reach, once the
    command is ready to serve, before it listens. A full collection walks every object it
    tracks, on the thread whose allocation set it off, the event loop's: with them it held
    the loop 10 to 20 ms of CPU whenever a large piece of work (a hostile robots.txt)
    allocated enough to set one off; without them it walks what was made since
    (docs/benchmarks.md). The youngest generation is then collected less often
    (:data:`YOUNG_COLLECTION_EVERY`)."""
    gc.collect()  # what start-up left for the collector is freed, not kept for ever
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, oldest)
