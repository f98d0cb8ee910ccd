"""Drop-ins that bring polite to the crawlers people already use.

* :mod:`polite.integrations.scrapy`: a ``ROBOTSTXT_PARSER`` and a downloader middleware
  (``polite-web[scrapy]``);
* :mod:`polite.integrations.httpx`: ``PoliteTransport`` and ``AsyncPoliteTransport``;
* :mod:`polite.integrations.requests`: ``PoliteAdapter`` for a ``requests.Session``
  (``polite-web[scrapy]`` installs requests too).

All of them ask one :class:`PoliteGate` (on a thread of its own) or, Scrapy on its asyncio
reactor, a :class:`LoopGate` (on the reactor's loop): polite's own driver in the process (its
state in memory, SQLite or Redis) or a running ``polite serve``.
"""

from __future__ import annotations

from polite.errors import RequestRefused, RobotsDisallowed, SlotNotReady
from polite.integrations._gate import Grant, LoopGate, PoliteGate

__all__ = ["Grant", "LoopGate", "PoliteGate", "RequestRefused", "RobotsDisallowed", "SlotNotReady"]
