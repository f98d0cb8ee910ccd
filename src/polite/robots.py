"""The robots.txt engine: ``from polite.robots import parse``.

>>> robots = parse(b"User-agent: *\\nDisallow: /private\\n")
>>> robots.allowed("https://example.com/private/x", "ExampleBot")
False
"""

from __future__ import annotations

# The same names as the core package, name for name: one list, kept there.
from polite.core.robots import *  # noqa: F403
from polite.core.robots import __all__ as __all__
