"""Finding the deciding rule for a path in time that does not grow with the rule count.

Every dialect picks, among the rules that match a path, the one with the highest *rank*:
the longest pattern (RFC 9309, Google; Allow wins a tie), the first line (1996 draft) or the
last line (REGP). A :class:`PathIndex` holds one agent's rules in three parts:

* plain prefixes, sorted, each with a pointer to its longest proper prefix among the keys.
  The largest key not above the path is found by bisection; when it is not a prefix of the
  path, the answer is on its chain of prefixes (any key that is a prefix of the path and is
  longer than their common part would sort between them). Each key stores the best rank
  along its chain, so a lookup is one bisection and a walk of a few steps;
* exact patterns (ending in ``$`` with no ``*``), in a dict;
* wildcard patterns, compiled into one alternation ordered by rank, each ``*`` an atomic
  lazy group. Committing to the leftmost occurrence of each literal piece is exact for
  patterns whose only operator is ``*``, and it cannot backtrack, so matching is linear in
  the path length whatever the pattern (``/*a*a*a*a*b`` included).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

__all__ = ["PathIndex", "is_plain", "wildcard_regex"]

NO_MATCH = -(1 << 62)


def is_plain(pattern: str) -> bool:
    """Whether ``pattern`` is a plain prefix (no ``*``, no ``$``)."""
    return "*" not in pattern and "$" not in pattern


def wildcard_regex(pattern: str) -> str:
    """A regex source that matches a path (anchored at its start) as ``pattern`` does.

    ``*`` matches any run of characters and a final ``$`` anchors the end; a ``$`` elsewhere
    is literal, as in Google's parser.
    """
    anchored = pattern.endswith("$")
    if anchored:
        pattern = pattern[:-1]
    pieces = pattern.split("*")
    out = [re.escape(pieces[0])]
    if len(pieces) == 1:
        return out[0] + (r"\Z" if anchored else "")
    for piece in pieces[1:-1]:
        if piece:
            out.append("(?>.*?" + re.escape(piece) + ")")
    last = pieces[-1]
    if anchored:
        out.append("(?>.*" + re.escape(last) + r"\Z)")
    elif last:
        out.append("(?>.*?" + re.escape(last) + ")")
    return "".join(out)


class PathIndex:
    """The highest-ranked matching entry for a path; entries are ``(pattern, rank, payload)``.

    With ``wildcards`` false every pattern is a plain prefix (the 1996 draft gives ``*`` and
    ``$`` no meaning).
    """

    __slots__ = ("_best", "_best_rank", "_exact", "_keys", "_parent", "_wild", "_wild_payload",
                 "_wild_rank", "_wild_top")

    def __init__(self, entries: Sequence[tuple[str, int, int]], *, wildcards: bool = True) -> None:
        plain: dict[str, tuple[int, int]] = {}
        exact: dict[str, tuple[int, int]] = {}
        wild: dict[str, tuple[int, int]] = {}
        for pattern, rank, payload in entries:
            if not wildcards or is_plain(pattern):
                table, key = plain, pattern
            elif "*" not in pattern and pattern.find("$") == len(pattern) - 1:
                table, key = exact, pattern[:-1]
            else:
                table, key = wild, pattern
            known = table.get(key)
            if known is None or rank > known[0]:
                table[key] = (rank, payload)

        self._keys = sorted(plain)
        self._parent: list[int] = []
        self._best: list[int] = []
        self._best_rank: list[int] = []
        chain: list[int] = []
        for i, key in enumerate(self._keys):
            while chain and not key.startswith(self._keys[chain[-1]]):
                chain.pop()
            parent = chain[-1] if chain else -1
            rank, payload = plain[key]
            if parent >= 0 and self._best_rank[parent] > rank:
                rank, payload = self._best_rank[parent], self._best[parent]
            self._parent.append(parent)
            self._best.append(payload)
            self._best_rank.append(rank)
            chain.append(i)

        self._exact = exact
        ordered = sorted(wild.items(), key=lambda item: -item[1][0])
        self._wild_rank = [rank for _, (rank, _) in ordered]
        self._wild_payload = [payload for _, (_, payload) in ordered]
        self._wild_top = self._wild_rank[0] if ordered else NO_MATCH
        self._wild: re.Pattern[str] | None = None
        if ordered:
            source = "|".join("(" + wildcard_regex(p) + ")" for p, _ in ordered)
            self._wild = re.compile(source, re.DOTALL)

    def lookup(self, path: str) -> int:
        """The payload of the best matching entry, or -1 when none matches."""
        best, best_rank = -1, NO_MATCH
        keys = self._keys
        if keys:
            i = bisect_right(keys, path) - 1
            parent = self._parent
            while i >= 0:
                if path.startswith(keys[i]):
                    best, best_rank = self._best[i], self._best_rank[i]
                    break
                i = parent[i]
        if self._exact:
            hit = self._exact.get(path)
            if hit is not None and hit[0] > best_rank:
                best_rank, best = hit
        if self._wild_top > best_rank:
            assert self._wild is not None
            m = self._wild.match(path)
            if m is not None:
                i = m.lastindex - 1  # type: ignore[operator]
                if self._wild_rank[i] > best_rank:
                    best = self._wild_payload[i]
        return best
