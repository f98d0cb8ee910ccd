"""Is a robot who it claims to be? A Web Bot Auth signature from the operator's key
directory first (checked by the caller; :func:`judge_signature` reads the outcome), then
the operator's published IP ranges, then forward-confirmed reverse DNS (the method Google
and Bing document: the address's PTR name ends in the operator's domain, and that name
resolves back to the address).

The lookups are the caller's: :func:`verify_by_ranges` answers at once or says a DNS check
is needed; :func:`judge_dns` reads the lookups' results.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from polite.core.identity import SignatureCheck, SignatureOutcome
from polite.core.site.crawlers import Crawler
from polite.core.site.ranges import RangeTable

__all__ = [
    "NEEDS_DNS",
    "Check",
    "NeedsDns",
    "Verification",
    "client_address",
    "judge_dns",
    "judge_signature",
    "verify_by_ranges",
]


class Verification(enum.StrEnum):
    """What a visit claiming a known crawler's name turned out to be."""

    VERIFIED = "verified"  # from the operator's addresses
    FORGED = "forged"  # the operator's addresses and names say it is not theirs
    UNVERIFIABLE = "unverifiable"  # the operator publishes no means, or DNS did not answer
    UNKNOWN = "unknown"  # not a known crawler: nothing to check it against
    INVALID = "invalid"  # a Web Bot Auth signature that does not hold


@dataclass(frozen=True, slots=True)
class Check:
    """A verdict with the evidence for it."""

    verdict: Verification
    how: str
    # what verified it: "signature", "ranges" or "dns"; "key" when a signature proved its
    # key but not the name it claims (an unknown robot's, from an unbound directory)
    by: str = ""


@dataclass(frozen=True, slots=True)
class NeedsDns:
    """Look up the address's PTR names, then each name's addresses, and call
    :func:`judge_dns`."""


NEEDS_DNS = NeedsDns()
_NOT_KNOWN = Check(Verification.UNKNOWN, "not a known crawler")


def _address(ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(ip.split("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def verify_by_ranges(crawler: Crawler | None, ip: str | None,
                     table: RangeTable | None = None) -> Check | NeedsDns:
    """The verdict the published ranges give, or :data:`NEEDS_DNS` when the operator
    documents host names to check instead (or as well). ``table``: the operators' published
    files, the most specific prefix holding the address deciding whose it is."""
    if crawler is None:
        return _NOT_KNOWN
    address = _address(ip) if ip else None
    if address is None:
        return Check(Verification.UNVERIFIABLE, f"no usable client address ({ip!r})")
    owner = table.owner(address) if table is not None else None
    if owner is not None:
        name, network = owner
        if name == crawler.name:
            return Check(Verification.VERIFIED, f"{address} is in {crawler.operator or name}'s "
                                                f"published range {network}", "ranges")
        return Check(Verification.FORGED, f"{address} is in {name}'s published range "
                                          f"{network}, not {crawler.name}'s")
    for network in crawler.ip_ranges:
        if address.version == network.version and address in network:
            return Check(Verification.VERIFIED, f"{address} is in {crawler.operator}'s "
                                                f"published range {network}", "ranges")
    if crawler.host_suffixes:
        return NEEDS_DNS
    if crawler.ip_ranges or (table is not None and crawler.name in table.names):
        return Check(Verification.FORGED, f"{address} is outside {crawler.operator}'s "
                                          f"published ranges")
    if crawler.ranges_urls:  # published, but not read here yet
        return Check(Verification.UNVERIFIABLE,
                     f"{crawler.operator or crawler.name} publishes its addresses "
                     f"({crawler.ranges_urls[0]}), but they are not loaded here: run "
                     "polite site ranges update")
    return Check(Verification.UNVERIFIABLE,
                 f"{crawler.operator or crawler.name} publishes no addresses or host names")


def _under(name: str, suffixes: Sequence[str]) -> bool:
    name = name.lower().rstrip(".")
    return any(name.endswith(suffix) for suffix in suffixes)


def judge_dns(crawler: Crawler, ip: str, ptr_names: Sequence[str] | None,
              forward: dict[str, Sequence[str]] | None) -> Check:
    """Forward-confirmed reverse DNS. ``ptr_names`` are the address's PTR names (``None``:
    the lookup failed, not "no such name"); ``forward`` maps each name under the operator's
    suffixes to its addresses (``None``: a forward lookup failed)."""
    if ptr_names is None:
        return Check(Verification.UNVERIFIABLE, f"reverse DNS of {ip} did not answer")
    mine = [n for n in ptr_names if _under(n, crawler.host_suffixes)]
    if not mine:
        shown = ", ".join(ptr_names) or "no PTR name"
        return Check(Verification.FORGED, f"{ip} is {shown}, not under "
                                          f"{' / '.join(crawler.host_suffixes)}")
    if forward is None:
        return Check(Verification.UNVERIFIABLE, f"forward DNS of {mine[0]} did not answer")
    address = _address(ip)
    for name in mine:
        for found in forward.get(name, ()):
            if address is not None and _address(found) == address:
                return Check(Verification.VERIFIED, f"{ip} is {name.rstrip('.')}, which "
                                                    f"resolves back to it", "dns")
    return Check(Verification.FORGED, f"{mine[0]} does not resolve back to {ip}")


def _directory_host(agent: str | None) -> str:
    return (urlsplit(agent).hostname or "").lower().rstrip(".") if agent else ""


def judge_signature(crawler: Crawler | None, name: str, signature: SignatureCheck,
                    bound: Collection[str] = ()) -> Check | None:
    """The verdict a request's signature gives (``name``: the robot it claims to be;
    ``bound``: the hosts of the key directories that speak for that name, exactly: the
    crawler list's and the site operator's own), or ``None`` when the published ranges
    and DNS are to decide: no signature, one that could not be checked, or a valid one
    from a directory not bound to a known crawler's name. A valid signature proves a name
    only through such a binding; for a robot no list knows, one from an unbound directory
    proves its key alone (``by="key"``): the visit is not verified, and is throttled
    apart from the name."""
    match signature.outcome:
        case SignatureOutcome.INVALID:
            return Check(Verification.INVALID, f"signature: {signature.how}")
        case SignatureOutcome.VERIFIED if _directory_host(signature.agent) in bound:
            return Check(Verification.VERIFIED, f"signature: {signature.how}", "signature")
        case SignatureOutcome.VERIFIED if crawler is None:
            return Check(Verification.UNKNOWN,
                         f"signature: {signature.how}, which proves the key, not the name "
                         f"{name}: no key directory is bound to {name}", "key")
    return None


def client_address(peer: str | None, forwarded_for: str | None,
                   trusted: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]
                   ) -> str | None:
    """The visitor's address: ``peer`` (the connection's), or, when ``peer`` is one of the
    site's own ``trusted`` proxies, the last address of ``X-Forwarded-For`` that is not one
    of them (the proxies append; what comes before the first trusted hop is the client's
    word and may be forged)."""
    if peer is None or not trusted or not forwarded_for:
        return peer
    address = _address(peer)
    if address is None or not any(address in n for n in trusted if n.version == address.version):
        return peer
    for hop in reversed([h.strip() for h in forwarded_for.split(",")]):
        found = _address(hop)
        if found is None:
            return peer  # a garbled header: trust only what we saw
        if not any(found in n for n in trusted if n.version == found.version):
            return str(found)
    return peer
