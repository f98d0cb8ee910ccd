"""The polite forward proxy: absolute-form requests are proxied with politeness enforced;
origin-form requests go to an ASGI app (the REST service) on the same port."""

from __future__ import annotations

from polite.proxy.server import (
    Interception,
    Mode,
    ProxyServer,
    ProxySettings,
    TunnelCertificates,
)

__all__ = ["Interception", "Mode", "ProxyServer", "ProxySettings", "TunnelCertificates"]
