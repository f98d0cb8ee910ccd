"""Crawler operators' published IP ranges (draft-illyes-webbotauth-jafar-00, "JAFAR", and the
files Google, Bing, OpenAI and others published before it in the same shape): reading
them, and which operator an address belongs to, the most specific prefix winning.

A file must say when it was made (``creationTime``): ranges that cannot be dated are not
taken, so that a site always knows how old the addresses it trusts are.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from polite.core._documents import read_json
from polite.errors import ConfigError, MalformedDocument

__all__ = ["MAX_RANGE_FILE_BYTES", "RangeFile", "RangeTable", "parse_creation_time",
           "parse_range_file"]

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_RANGE_FILE_BYTES = 4 * 1024 * 1024  # Google's largest file is a few tens of KiB

# ISO 8601 as the operators write it: "2025-08-15T14:30:00Z" (JAFAR), Google's
# "2024-11-21T15:46:02.000000" and Bing's seven-digit fractions, without a zone (UTC).
_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?"
                   r"\s*(Z|[+-]\d\d:?\d\d)?", re.I)


def parse_creation_time(text: object) -> float | None:
    """Unix seconds of a ``creationTime``, or ``None`` when it is not such a time."""
    if not isinstance(text, str):
        return None
    found = _TIME.fullmatch(text.strip())
    if found is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = found.groups()
    try:
        when = datetime.datetime(int(year), int(month), int(day), int(hour), int(minute),
                                 int(second or 0), tzinfo=datetime.UTC)
    except ValueError:
        return None
    offset = 0
    if zone and zone.upper() != "Z":
        digits = zone[1:].replace(":", "")
        offset = (int(digits[:2]) * 60 + int(digits[2:])) * 60 * (1 if zone[0] == "+" else -1)
    return when.timestamp() - offset + (float("0." + fraction) if fraction else 0.0)


@dataclass(frozen=True, slots=True)
class RangeFile:
    """One published file: when it was made, its prefixes, and how many entries were passed
    over (both or neither of ``ipv4Prefix``/``ipv6Prefix``, or not a network)."""

    creation_time: float
    prefixes: tuple[IpNetwork, ...]
    skipped: int = 0


def parse_range_file(data: bytes | str, *, source: str) -> RangeFile:
    """A published range file; :class:`ConfigError` naming ``source`` when it is not one or
    has no ``creationTime``."""
    try:
        document = read_json(data, max_bytes=MAX_RANGE_FILE_BYTES)
    except MalformedDocument as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: not a JSON object")
    created = parse_creation_time(document.get("creationTime"))
    if created is None:
        raise ConfigError(f"{source}: no creationTime it can be dated by "
                          f"({document.get('creationTime')!r}); its ranges are not taken")
    entries = document.get("prefixes")
    if not isinstance(entries, list):
        raise ConfigError(f'{source}: no "prefixes" list')
    prefixes: list[IpNetwork] = []
    skipped = 0
    for entry in entries:
        if not isinstance(entry, dict):
            skipped += 1
            continue
        v4, v6 = entry.get("ipv4Prefix"), entry.get("ipv6Prefix")
        if (v4 is None) == (v6 is None):  # both or neither: ignored, as the draft says
            skipped += 1
            continue
        text, version = (v4, 4) if v4 is not None else (v6, 6)
        try:
            network = ipaddress.ip_network(str(text).strip(), strict=False)
        except ValueError:
            skipped += 1
            continue
        if network.version != version:
            skipped += 1
            continue
        prefixes.append(network)
    return RangeFile(created, tuple(prefixes), skipped)


class RangeTable:
    """Every operator's prefixes; :meth:`owner` gives the crawler whose prefix holding an
    address is the most specific (a narrower range published inside another operator's
    wider one is the narrower one's)."""

    def __init__(self, files: Mapping[str, Iterable[IpNetwork]]) -> None:
        # (version, prefix length) -> network -> crawler: an address is looked up once per
        # prefix length in use, the longest first, rather than against every prefix
        self._by_length: dict[tuple[int, int], dict[IpNetwork, str]] = {}
        for name, networks in files.items():
            for network in networks:
                self._by_length.setdefault((network.version, network.prefixlen),
                                           {})[network] = name
        self._lengths = sorted(self._by_length, key=lambda key: -key[1])
        self.names = frozenset(files)

    def owner(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address
              ) -> tuple[str, IpNetwork] | None:
        for version, length in self._lengths:
            if version != address.version:
                continue
            network = ipaddress.ip_network(f"{address}/{length}", strict=False)
            name = self._by_length[(version, length)].get(network)
            if name is not None:
                return name, network
        return None

    def __len__(self) -> int:
        return sum(len(networks) for networks in self._by_length.values())
