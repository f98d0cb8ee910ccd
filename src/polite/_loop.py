"""The event loop the long-running commands run on (``polite serve``, ``crawl``,
``survey``), in a module of its own: choosing it imports neither the service nor the proxy."""

from __future__ import annotations

import asyncio

from polite.errors import ConfigError

__all__ = ["new_event_loop"]


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
