"""How origins' certificates are checked: against the system's certificate authorities,
loaded when the first connection over TLS is made rather than when the context is.

Loading them (``ssl.create_default_context``) costs about 250 million instructions, 60 ms
here: a fifth of ``polite serve``'s start, paid by every command that might fetch over
https (the proxy, the crawler, the MCP server, the frontier), and wasted by each run that
fetches nothing over it, as most of a test suite's do.
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from typing import Any

__all__ = ["client_context"]


class _SystemTrust(ssl.SSLContext):
    """A client context whose system authorities are loaded by its first connection:
    ``wrap_bio`` (what asyncio's and uvloop's transports call) or ``wrap_socket``."""

    _loaded = False
    _lock = threading.Lock()  # a blocking client in threads may connect twice at once

    def _load(self) -> None:
        with self._lock:
            if not self._loaded:
                self.load_default_certs(ssl.Purpose.SERVER_AUTH)
                self._loaded = True

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        if not self._loaded:
            self._load()
        return super().wrap_bio(*args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        if not self._loaded:
            self._load()
        return super().wrap_socket(*args, **kwargs)


def client_context() -> ssl.SSLContext:
    """What ``ssl.create_default_context()`` makes (hostnames and certificates checked,
    ``SSLKEYLOGFILE`` honoured), its system authorities loaded at its first connection;
    authorities added to it (``load_verify_locations``) are trusted beside them."""
    context = _SystemTrust(ssl.PROTOCOL_TLS_CLIENT)
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog and not sys.flags.ignore_environment:
        context.keylog_filename = keylog
    return context
