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
from collections.abc import Callable, Sequence

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


_STARS = re.compile(r"\*{2,}")


def _simplify(pattern: str) -> str:
    """The same set of paths with fewer operators: ``**`` is ``*``, and a trailing ``*`` or
    ``*$`` adds nothing to a prefix match (``/a/*`` matches what ``/a/`` matches). Ranks are
    computed by the caller from the pattern as written, so they are unaffected."""
    pattern = _STARS.sub("*", pattern)
    shorter = pattern[:-2] if pattern.endswith("*$") else pattern.rstrip("*")
    # A "$" left at the end was a literal one ("/a$*"); it would now read as an anchor.
    return pattern if shorter.endswith("$") else shorter


class _Member:
    """A wildcard rule in its group, matched with string searches: the leftmost occurrence
    of each literal piece, as the module docstring explains, so nothing is compiled."""

    __slots__ = ("anchored", "head", "last", "middle", "needed", "payload", "rank", "starred")

    def __init__(self, rank: int, payload: int, pattern: str, needed: str = "") -> None:
        self.rank, self.payload = rank, payload
        self.needed = needed  # a literal every matching path contains: a cheap first test
        self.anchored = pattern.endswith("$")
        pieces = (pattern[:-1] if self.anchored else pattern).split("*")
        self.head = pieces[0]
        self.starred = len(pieces) > 1
        self.middle = tuple(p for p in pieces[1:-1] if p)
        self.last = pieces[-1] if self.starred else ""

    def matches(self, path: str) -> bool:
        if not path.startswith(self.head):
            return False
        at = len(self.head)
        if not self.starred:  # a literal "$" inside, no "*"
            return len(path) == at if self.anchored else True
        for piece in self.middle:
            at = path.find(piece, at)
            if at < 0:
                return False
            at += len(piece)
        if self.anchored:
            return path.endswith(self.last) and len(path) - len(self.last) >= at
        return not self.last or path.find(self.last, at) >= 0


# Up to this many literals, a group's filter is a loop of "in" tests rather than a regex.
_FEW_LITERALS = 12


def _needed_literal(rest: str) -> str:
    """The longest literal piece a path must contain for a pattern (after its prefix) to
    match; "" when there is none to look for."""
    return max(rest.removesuffix("$").split("*"), key=len)


def _chain(keys: list[str]) -> list[int]:
    """For sorted ``keys``, the index of each one's longest proper prefix among them, or -1."""
    parents: list[int] = []
    chain: list[int] = []
    for i, key in enumerate(keys):
        while chain and not key.startswith(keys[chain[-1]]):
            chain.pop()
        parents.append(chain[-1] if chain else -1)
        chain.append(i)
    return parents


class PathIndex:
    """The highest-ranked matching entry for a path; entries are ``(pattern, rank, payload)``.

    With ``wildcards`` false every pattern is a plain prefix (the 1996 draft gives ``*`` and
    ``$`` no meaning).
    """

    __slots__ = ("_best", "_best_rank", "_exact", "_keys", "_parent", "_wild_filter", "_wild_keys",
                 "_wild_members", "_wild_parent", "_wild_top")

    def __init__(self, entries: Sequence[tuple[str, int, int]], *, wildcards: bool = True) -> None:
        plain: dict[str, tuple[int, int]] = {}
        exact: dict[str, tuple[int, int]] = {}
        wild: dict[str, tuple[int, int]] = {}
        for pattern, rank, payload in entries:
            if wildcards and "*" in pattern:
                pattern = _simplify(pattern)
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
        self._parent = _chain(self._keys)
        self._best: list[int] = []
        self._best_rank: list[int] = []
        for key, parent in zip(self._keys, self._parent, strict=True):
            rank, payload = plain[key]
            if parent >= 0 and self._best_rank[parent] > rank:
                rank, payload = self._best_rank[parent], self._best[parent]
            self._best.append(payload)
            self._best_rank.append(rank)

        self._exact = exact
        # Wildcard patterns grouped by their literal prefix (the text before the first "*"
        # or "$"), the prefixes chained like the plain keys: a lookup only runs the groups
        # whose prefix the path starts with, each one alternation ordered by rank.
        groups: dict[str, list[tuple[int, int, str]]] = {}
        for pattern, (rank, payload) in wild.items():
            cut = min((i for i in (pattern.find("*"), pattern.find("$")) if i >= 0),
                      default=len(pattern))
            groups.setdefault(pattern[:cut], []).append((rank, payload, pattern))
        self._wild_keys = sorted(groups)
        self._wild_parent = _chain(self._wild_keys)
        # Each group also gets a filter: one search for any literal piece its patterns need.
        # Most paths match no wildcard rule, and the filter says so in a single pass.
        self._wild_filter: list[re.Pattern[str] | tuple[str, ...] | str | None] = []
        self._wild_members: list[list[_Member]] = []
        for key in self._wild_keys:
            members = sorted(groups[key], reverse=True)
            needed = sorted({_needed_literal(p[len(key):]) for _, _, p in members},
                            key=len, reverse=True)
            if "" in needed:
                self._wild_filter.append(None)
            elif len(needed) <= _FEW_LITERALS:
                self._wild_filter.append(tuple(needed))
            else:  # compiled when first needed: compiling costs more than many checks
                self._wild_filter.append("|".join(map(re.escape, needed)))
            self._wild_members.append([_Member(rank, payload, p, _needed_literal(p[len(key):]))
                                       for rank, payload, p in members])
        self._wild_top = max((m[0].rank for m in self._wild_members), default=NO_MATCH)

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
            best, best_rank = self._best_wild(path, best, best_rank)
        return best

    def _best_wild(self, path: str, best: int, best_rank: int) -> tuple[int, int]:
        keys, parent = self._wild_keys, self._wild_parent
        i = bisect_right(keys, path) - 1
        while i >= 0 and not path.startswith(keys[i]):
            i = parent[i]
        while i >= 0:  # every node up the chain is a prefix of the path
            members = self._wild_members[i]
            if members[0].rank > best_rank:
                needed = self._wild_filter[i]
                if needed is None:
                    hit = True
                elif type(needed) is tuple:
                    # A few "in" tests beat a regex alternation, which gets no fast search.
                    hit = False
                    for literal in needed:
                        if literal in path:
                            hit = True
                            break
                else:
                    if type(needed) is str:
                        needed = self._wild_filter[i] = re.compile(needed, re.DOTALL)
                    hit = needed.search(path, len(keys[i])) is not None  # type: ignore[union-attr]
                if hit:
                    for member in members:
                        if member.rank <= best_rank:
                            break
                        if member.needed in path and member.matches(path):
                            best, best_rank = member.payload, member.rank
                            break
            i = parent[i]
        return best, best_rank

    def checker(
        self,
        allow: Sequence[bool],
        path_of: Callable[[str], str],
        fast_path: Callable[[str], re.Match[str] | None],
        *,
        escapes: Callable[[str], str] | None = None,
        lower: bool = False,
        robots_txt_allowed: bool = True,
    ) -> Callable[[str], bool]:
        """A ``url -> allowed`` function with everything bound locally: the hot path.

        ``fast_path`` matches the common URL whose path needs no normalising and captures
        that path as group 1; other URLs go through ``path_of``. ``escapes`` normalises a
        fast path that holds a ``%``; ``lower`` lower-cases it (REGP). The lookup is
        :meth:`lookup` written out inline.
        """
        keys, parent, best_of, rank_of = self._keys, self._parent, self._best, self._best_rank
        exact, best_wild, wild_top = self._exact, self._best_wild, self._wild_top
        verdicts = tuple(allow)
        # Most files have one group of wildcard rules: it is searched here, without a call,
        # each rule first tested for a literal it needs (a C-speed "in").
        only_prefix: str | None = None
        only_members: list[tuple[int, str, _Member]] = []
        if len(self._wild_keys) == 1:
            only_prefix = self._wild_keys[0]
            only_members = [(m.rank, m.needed, m) for m in self._wild_members[0]]

        def allowed(url: str) -> bool:
            m = fast_path(url)
            if m is None:
                path = path_of(url)
            else:
                path = m[1]
                if escapes is not None and "%" in path:
                    path = escapes(path)
                if lower:
                    path = path.lower()
            best, best_rank = -1, NO_MATCH
            if keys:
                i = bisect_right(keys, path) - 1
                while i >= 0:
                    if path.startswith(keys[i]):
                        best, best_rank = best_of[i], rank_of[i]
                        break
                    i = parent[i]
            if exact:
                hit = exact.get(path)
                if hit is not None and hit[0] > best_rank:
                    best_rank, best = hit
            if wild_top > best_rank:
                if only_prefix is None:
                    best = best_wild(path, best, best_rank)[0]
                elif path.startswith(only_prefix):
                    for rank, needed, member in only_members:
                        if rank <= best_rank:
                            break
                        if needed in path and member.matches(path):
                            best = member.payload
                            break
            if best < 0 or verdicts[best]:
                return True
            return robots_txt_allowed and (path == "/robots.txt"
                                           or path.startswith("/robots.txt?"))

        return allowed
