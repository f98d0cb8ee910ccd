"""HTTP caching (RFC 9111) as a shared cache does it: pure decisions, and the stored form."""

from __future__ import annotations

from polite.core.cache import codec
from polite.core.cache.policy import CacheControl, Choice, Stored, choose, storable

__all__ = ["CacheControl", "Choice", "Stored", "choose", "codec", "storable"]
