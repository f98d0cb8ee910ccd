"""Origins' certificates checked against the system's authorities, loaded when the first
connection over TLS is made (on asyncio's loop, uvloop's, or a blocking socket), and against
the authorities added beside them."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import uvloop

from polite.fetch.trust import client_context
from tests.sites import Reply, Site, serve
from tests.tls import make_authority

LOOPS: dict[str, Callable[[Coroutine[Any, Any, None]], None]] = {
    "asyncio": asyncio.run, "uvloop": uvloop.run}


def authorities(context: ssl.SSLContext) -> int:
    return context.cert_store_stats()["x509_ca"]


def system_authorities() -> int:
    return authorities(ssl.create_default_context())


def test_checks_as_the_standard_library_s_default_context() -> None:
    ours, theirs = client_context(), ssl.create_default_context()
    assert (ours.check_hostname, ours.verify_mode) == (True, ssl.CERT_REQUIRED)
    assert (ours.minimum_version, ours.options) == (theirs.minimum_version, theirs.options)
    assert authorities(ours) == 0  # not loaded yet


@pytest.mark.parametrize("loop", LOOPS)
def test_a_connection_on_an_event_loop_loads_the_system_s_authorities(
        loop: str, tmp_path: Path) -> None:
    authority = make_authority(tmp_path, "trust")
    host = "127.0.212.1" if loop == "asyncio" else "127.0.212.2"
    site = Site(host, routes={"/": Reply(200, b"hi")}, tls=authority.server(host))
    context = client_context()
    context.load_verify_locations(cafile=str(authority.path))
    assert authorities(context) == 1

    async def connect() -> None:
        _, writer = await asyncio.open_connection(site.host, site.port, ssl=context)
        writer.close()
        await writer.wait_closed()

    with serve(site):
        LOOPS[loop](connect())
    if system_authorities() == 0:
        pytest.skip("this system trusts no certificate authority")
    assert authorities(context) == 1 + system_authorities()


def test_a_blocking_connection_loads_them_too_and_a_wrong_name_is_refused(
        tmp_path: Path) -> None:
    authority = make_authority(tmp_path, "trust")
    site = Site("127.0.212.3", routes={"/": Reply(200, b"hi")},
                tls=authority.server("127.0.212.4"))  # a certificate for another address
    context = client_context()
    context.load_verify_locations(cafile=str(authority.path))
    with serve(site), socket.create_connection((site.host, site.port), timeout=10) as plain, \
            pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
        context.wrap_socket(plain, server_hostname=site.host)
    assert authorities(context) == 1 + system_authorities()
