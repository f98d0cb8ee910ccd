"""The one error tree of polite: everything raised on purpose derives from PoliteError."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DocumentTooLarge",
    "FetchError",
    "InvalidURL",
    "MalformedDocument",
    "MalformedField",
    "PoliteError",
    "PrivateAddress",
    "RequestRefused",
    "RobotsDisallowed",
    "SettingError",
    "SlotNotReady",
    "StoreURLError",
    "UnknownDialect",
]


class PoliteError(Exception):
    """Base class of every error polite raises on purpose."""


class ConfigError(PoliteError):
    """A setting or command-line option has a value polite cannot use."""


class SettingError(ConfigError):
    """One setting's value is unusable. ``knob`` names the setting as the surface it was
    given on spells it (``--store``, ``POLITE_STORE``, ``store=``); ``problem`` says what it
    must be."""

    def __init__(self, knob: str, value: object, problem: str) -> None:
        given = f"{knob}{value!r}" if knob.endswith("=") else f"{knob} {value!r}"
        super().__init__(f"{given.strip()}: {problem}")
        self.knob = knob
        self.value = value
        self.problem = problem


class StoreURLError(ConfigError):
    """A store URL that names no store polite has. It names no setting: a caller that
    has one raises :class:`SettingError` with ``problem`` and its own name for it."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(f"store URL {url!r}: {problem}")
        self.url = url
        self.problem = problem


class UnknownDialect(ConfigError):
    """A robots.txt dialect name that polite does not know."""


class InvalidURL(PoliteError):
    """A URL that cannot be checked (no scheme, unsupported scheme, bad host)."""


class MalformedDocument(PoliteError):
    """A JSON or TOML document polite will not read: over its size, not text, not well
    formed, or nested deeper than a reader bounds it to. The caller names the document."""


class DocumentTooLarge(MalformedDocument):
    """A document over its reader's bound of bytes or of items (array elements and object
    members), refused before it is parsed."""


class MalformedField(PoliteError):
    """A structured field value (RFC 9651) that cannot be parsed; ``offset`` is where the
    parser stopped."""

    def __init__(self, problem: str, offset: int) -> None:
        super().__init__(f"{problem} at character {offset}")
        self.problem = problem
        self.offset = offset


class FetchError(PoliteError):
    """A network fetch failed in a way the caller must hear about."""


class PrivateAddress(FetchError):
    """A host whose address is private, loopback or otherwise not public: polite does not
    connect to it unless told to (``--allow-private``, or its network allowed)."""


class RequestRefused(PoliteError):
    """A request polite will not let go out: waiting would not help (a private address, a
    site whose robots.txt forbids visits for good)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class RobotsDisallowed(RequestRefused):
    """robots.txt forbids the URL; ``reason`` names the rule and its line."""


class SlotNotReady(PoliteError):
    """The host's next slot is ``wait_s`` seconds away and the caller asked not to wait (or
    the wait is longer than it accepts)."""

    def __init__(self, url: str, wait_s: float, reason: str) -> None:
        super().__init__(f"{url}: not before {wait_s:.3f} s from now: {reason}")
        self.url = url
        self.wait_s = wait_s
        self.reason = reason
