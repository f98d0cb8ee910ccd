"""The address a server of polite's listens on: what is no address, and what is loopback.

The commands that serve (``polite serve``, ``site serve``, ``frontier serve``, ``mcp
--http``) apply the same rules; here, apart from any server, each reads them without
importing the others' servers (``polite mcp`` would otherwise load the REST service's).
"""

from __future__ import annotations

import ipaddress

from polite.core.urls import host_name_problem

__all__ = ["is_loopback", "listen_problem"]


def listen_problem(option: str, host: str) -> str | None:
    """Why ``host`` is no address to listen on (``999.1.1.1``, ``my host``), naming
    ``option``; None for an IP address or a host name."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return None
    except ValueError:
        pass
    name = host.lower().rstrip(".")
    if name and all(label.isdigit() for label in name.split(".")):
        return f"{option} {host} is not an address (each number of an IPv4 address is 0 to 255)"
    problem = host_name_problem(name)
    return None if problem is None else f"{option} {host!r} is not an address: {problem}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address: a server there needs no
    token, as only this machine reaches it."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
