"""Ordered mode (seed 001's sequential client): one client's requests are answered in the
order they came, each held until its host's slot, whichever connection they came on."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from polite.fetch.wire import Channel
from polite.proxy.base import Mode, _Exchange
from polite.proxy.forward import Forwarding

__all__ = ["Ordered"]


class Ordered(Forwarding):
    """Holds each request of a client until the ones it sent before are answered."""

    # (peer address, client id) -> the last request of that client
    _order_tail: dict[tuple[str, str], asyncio.Future[None]]

    async def _ordered(self, client: Channel, exchange: _Exchange, peer: tuple[Any, ...],
                       wait_s: float) -> bool:
        head = exchange.head
        # Seed 001's sequential client: its requests are answered in the order they came,
        # each held until its slot, whichever connection they came on. A client is its
        # X-Polite-Client from its address: the same name from another address is another
        # client, which cannot hold this one's queue by claiming its name.
        name = (head.get(b"x-polite-client") or str(peer[0]).encode()).decode(
            "latin-1").strip()
        who = (str(peer[0]), name)
        previous = self._order_tail.get(who)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._order_tail[who] = done
        started = time.monotonic()
        try:
            if previous is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(previous), wait_s)
                except TimeoutError:
                    exchange.decision, exchange.status = "error", 504
                    self._send_error(client, 504, f"ordered: an earlier request of client "
                                     f"{name!r} was still unanswered after {wait_s:g} s")
                    return await self._answered(client, head)
            left = max(0.0, wait_s - (time.monotonic() - started))
            return await self._polite(client, exchange, Mode.ORDERED, left)
        finally:
            done.set_result(None)
            if self._order_tail.get(who) is done:
                del self._order_tail[who]

