"""The robots.txt engine: ``from polite.robots import parse``.

>>> robots = parse(b"User-agent: *\\nDisallow: /private\\n")
>>> robots.allowed("https://example.com/private/x", "ExampleBot")
False
"""

from __future__ import annotations

# The same names as the core package, name for name: one list, kept there.
from polite.core.robots import *  # noqa: F403
from polite.core.robots import __all__ as __all__

# The tools a person runs on a file (diff, explain, lint), which the core package imports
# only when first named, from their modules: a reader of this module's source (the manual's
# reference among them) finds them with the others.
from polite.core.robots.diff import *  # noqa: F403
from polite.core.robots.explain import *  # noqa: F403
from polite.core.robots.lint import *  # noqa: F403
