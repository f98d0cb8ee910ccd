"""A Griffe extension for the Python reference: docstrings are written for ``help()`` and
Sphinx-style roles, not Markdown, so two of their forms are turned into Markdown first.

- a doctest (``>>>`` lines and the output under them) becomes a ``pycon`` code block, where
  Markdown would read ``>`` as a quote and ``[...]`` as a link;
- ``:role:`target``` (``:func:``, ``:class:``, ``:mod:``...) becomes ```target```.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension

_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|exc|obj|const):`~?([^`]+)`")


def markdown(text: str) -> str:
    out: list[str] = []
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        stripped = line.strip()
        if stripped.startswith(">>>") or (block and stripped):
            block.append(stripped)
            continue
        if block:
            out += ["```pycon", *block, "```"]
            block = []
        out.append(line)
    return _ROLE.sub(r"`\1`", "\n".join(out[:-1]))


class DocstringsAsMarkdown(Extension):
    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
