"""Crawler operators' published IP ranges (draft-illyes-webbotauth-jafar-00, "JAFAR", and the
files Google, Bing, OpenAI and others published before it in the same shape): reading
them, and which operator an address belongs to, the most specific prefix winning.

A file must say when it was made (``creationTime``): ranges that cannot be dated are not
taken, so that a site always knows how old the addresses it trusts are.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from polite.core._documents import read_json
from polite.errors import ConfigError, MalformedDocument

__all__ = ["MAX_RANGE_FILE_BYTES", "MIN_PREFIX_LENGTHS", "RangeFile", "RangeTable",
           "RefusedPrefix", "parse_creation_time", "parse_range_file", "prefix_problem"]

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_RANGE_FILE_BYTES = 4 * 1024 * 1024  # Google's largest file is a few tens of KiB
# The widest prefix taken, by IP version: published crawler ranges are far narrower
# (Google's and Bing's files hold /19 to /28 and /64 or longer), and one wide prefix would
# make every address in it that crawler's.
MIN_PREFIX_LENGTHS = {4: 8, 6: 19}
# A file made this far past the reader's clock is taken (clocks differ by seconds, and
# operators' files are stamped when made); later than that, the time is not the file's.
_FUTURE_SKEW_S = 300.0

# ISO 8601 as the operators write it: "2025-08-15T14:30:00Z" (JAFAR), Google's
# "2024-11-21T15:46:02.000000" and Bing's seven-digit fractions, without a zone (UTC).
_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?"
                   r"\s*(Z|[+-]\d\d:?\d\d)?", re.I)


def parse_creation_time(text: object) -> float | None:
    """Unix seconds of a ``creationTime``, or ``None`` when it is not such a time."""
    if not isinstance(text, str) or len(text) > 64:
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
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 14 or minutes > 59:  # no zone is further from UTC (RFC 3339, 5.6)
            return None
        offset = (hours * 60 + minutes) * 60 * (1 if zone[0] == "+" else -1)
    return when.timestamp() - offset + (float("0." + fraction) if fraction else 0.0)


@dataclass(frozen=True, slots=True)
class RefusedPrefix:
    """An entry of a range file that is not taken: where (``line`` of the file, ``entry``
    counted from 1 in ``prefixes``), what it said and why it is refused."""

    line: int | None
    entry: int
    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class RangeFile:
    """One published file: when it was made, its prefixes, and how many entries were passed
    over (both or neither of ``ipv4Prefix``/``ipv6Prefix``), and the prefixes refused (not
    a network, too wide, host bits set, private or special), each with its reason."""

    creation_time: float
    prefixes: tuple[IpNetwork, ...]
    skipped: int = 0
    refused: tuple[RefusedPrefix, ...] = ()


def prefix_problem(network: IpNetwork, *, allow_private: bool = False) -> str | None:
    """Why ``network`` cannot be a crawler's published range, or ``None``: wider than
    :data:`MIN_PREFIX_LENGTHS`, or (unless ``allow_private``: a site's own test setup)
    private, loopback, documentation, multicast or another range not routed on the
    Internet (IANA's special-purpose registries, as :mod:`ipaddress` knows them)."""
    shortest = MIN_PREFIX_LENGTHS[network.version]
    if network.prefixlen < shortest:
        return f"wider than /{shortest}: no crawler publishes a range that wide"
    if allow_private:
        return None
    if network.is_multicast or network.is_reserved or not (
            network.network_address.is_global and network.broadcast_address.is_global):
        return "a private or special-purpose range, not a crawler's public addresses"
    return None


def _entry_lines(text: str, values: list[str]) -> list[int | None]:
    """The line of each value, found in order as a JSON string (the files put one prefix a
    line, or every one on one line); ``None`` where it cannot be found."""
    lines: list[int | None] = []
    at = 0
    for value in values:
        found = text.find(json.dumps(value), at)
        if found < 0:
            lines.append(None)
            continue
        lines.append(text.count("\n", 0, found) + 1)
        at = found + 1
    return lines


def parse_range_file(data: bytes | str, *, source: str, now: float | None = None,
                     allow_private: bool = False) -> RangeFile:
    """A published range file; :class:`ConfigError` naming ``source`` when it is not one,
    has no ``creationTime`` or (given ``now``) one in the future. Each prefix that
    :func:`prefix_problem` refuses, or written with host bits set (``1.2.3.4/8``), is
    left out and reported in ``refused``."""
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
    if now is not None and created > now + _FUTURE_SKEW_S:
        raise ConfigError(f"{source}: creationTime {document.get('creationTime')!r} is in "
                          "the future; its ranges are not taken")
    entries = document.get("prefixes")
    if not isinstance(entries, list):
        raise ConfigError(f'{source}: no "prefixes" list')
    prefixes: list[IpNetwork] = []
    skipped = 0
    problems: list[tuple[int, str, str]] = []  # entry, text, why
    for index, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            skipped += 1
            continue
        v4, v6 = entry.get("ipv4Prefix"), entry.get("ipv6Prefix")
        if (v4 is None) == (v6 is None):  # both or neither: ignored, as the draft says
            skipped += 1
            continue
        value, version = (v4, 4) if v4 is not None else (v6, 6)
        text = str(value).strip()[:100]
        problem = None
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            problem = "not an IP prefix"
        else:
            if network.version != version:
                problem = f"not an IPv{version} prefix"
            elif ipaddress.ip_interface(text).ip != network.network_address:
                problem = (f"host bits set: the range it names is {network}, which the "
                           "operator did not write")
            else:
                problem = prefix_problem(network, allow_private=allow_private)
            if problem is None:
                prefixes.append(network)
        if problem is not None:
            problems.append((index, text, problem))
    refused: tuple[RefusedPrefix, ...] = ()
    if problems:
        raw = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        lines = _entry_lines(raw, [t for _, t, _ in problems])
        refused = tuple(RefusedPrefix(line, index, text, why)
                        for (index, text, why), line in zip(problems, lines, strict=True))
    return RangeFile(created, tuple(prefixes), skipped, refused)


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
