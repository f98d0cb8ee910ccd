"""Drop-ins that bring polite to the crawlers people already use.

* :mod:`polite.integrations.scrapy`: a ``ROBOTSTXT_PARSER`` and a downloader middleware
  (``polite[scrapy]``);
* :mod:`polite.integrations.httpx`: ``PoliteTransport`` and ``AsyncPoliteTransport``;
* :mod:`polite.integrations.requests`: ``PoliteAdapter`` for a ``requests.Session``
  (``polite[scrapy]`` installs requests too).

All of them ask one :class:`PoliteGate`: polite's own driver in the process (its state in
memory, SQLite or Redis) or a running ``polite serve``.
"""

from __future__ import annotations

from polite.errors import RequestRefused, RobotsDisallowed, SlotNotReady
from polite.integrations._gate import PoliteGate

__all__ = ["PoliteGate", "RequestRefused", "RobotsDisallowed", "SlotNotReady"]
