"""The polite forward proxy: absolute-form requests are proxied with politeness enforced;
origin-form requests go to an ASGI app (the REST service) on the same port."""

from __future__ import annotations

from polite.proxy.base import Mode, ProxySettings
from polite.proxy.server import ProxyServer
from polite.proxy.tunnel import Interception, TunnelCertificates

__all__ = ["Interception", "Mode", "ProxyServer", "ProxySettings", "TunnelCertificates"]
