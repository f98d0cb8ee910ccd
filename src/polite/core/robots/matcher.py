"""Finding the deciding rule for a path in time that does not grow with the rule count.

Every dialect picks, among the rules that match a path, the one with the highest *rank*:
the longest pattern (RFC 9309, Google; Allow wins a tie), the first line (1996 draft) or the
last line (REGP).

The paths a plain prefix ``K`` matches are the strings that start with ``K``, one interval
of the string order. An exact pattern (``K$``) matches ``K`` alone, and the wildcard
patterns whose literal head is ``K`` can only match in ``K``'s interval. Any two such
intervals are nested or apart, so each key knows, once for all, the best plain rule in
force inside it and the key enclosing it. A lookup is one bisection (the nearest key at or
below the path; when that key does not hold the path, the walk to the key enclosing it
ends at the one that does, in fewer steps than that key has characters), then the wildcard
rules of the enclosing heads that may still beat the plain answer, best first, tried by
string search: committing to the leftmost occurrence of each literal piece is exact for
patterns whose only operator is ``*``, and it never backtracks, so matching is linear in the
path length whatever the pattern (``/*a*a*a*a*b`` included).
"""

from __future__ import annotations

import re
import sys
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate

from polite.core._steps import STEP, Steps, finish

__all__ = ["KEPT_MEMBERS", "PathIndex", "is_plain", "matches", "wildcard_regex"]

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

    def __init__(self, rank: int, payload: int, pattern: str, needed: str = "",
                 head: str = "") -> None:
        self.rank, self.payload = rank, payload
        self.anchored = pattern.endswith("$")
        pieces = (pattern[:-1] if self.anchored else pattern).split("*")
        # the group's head, when it is this one: one string held, not two
        self.head = head if head == pieces[0] else pieces[0]
        self.starred = len(pieces) > 1
        self.middle = tuple(p for p in pieces[1:-1] if p)
        self.last = pieces[-1] if self.starred else ""
        # a literal every matching path contains (a cheap first test), held once
        self.needed = next((p for p in (self.last, *self.middle) if p == needed), needed)

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


def matches(pattern: str, path: str, *, wildcards: bool = True) -> bool:
    """Whether one pattern matches ``path``, as :class:`PathIndex` matches it (without
    ``wildcards``, a plain prefix): for the few patterns an index leaves to compare."""
    if not wildcards or is_plain(pattern):
        return path.startswith(pattern)
    return _Member(0, 0, pattern).matches(path)


def _needed_literal(rest: str) -> str:
    """The longest literal piece a path must contain for a pattern (after its prefix) to
    match; "" when there is none to look for."""
    return max(rest.removesuffix("$").split("*"), key=len)


def _found_by_needed(member: _Member) -> bool:
    """Whether a path holding ``member.needed`` matches (see Chain)."""
    return (member.starred and not member.anchored and not member.middle
            and member.last == member.needed != ""
            and (member.head == "" or (member.head == "/" and member.needed[0] != "/")))


# Wildcard members that may beat a node's plain answer, best first, each as (rank, needed
# literal, whether finding it is the whole test, member) so that trying one costs no
# attribute lookups. ``/*x`` (or ``*x``) with no other piece, x not starting with "/",
# matches any path that holds x: no need to call the member.
Chain = tuple[tuple[int, str, bool, _Member], ...]

# A group of this many wildcard members or more is searched, for a path much shorter than
# its count, by what its members' needed literals start with (a run of _GRAM characters,
# hashed into _BUCKETS buckets): 14,000 patterns like "/*x{n}*y" took 4 ms a lookup tried
# one by one, a few dozen tried this way.
SEARCHED_FROM = 256
_GRAM = 3
_BUCKETS = 256

# What making a wildcard member ready costs, in the units of a step (a plain entry's: see
# polite.core._steps): about ten times a plain entry's time, split into its pieces.
_MEMBER_STEPS = 8

# Wildcard members made ready to match and kept per index (in chains, and one by one for
# chains longer than this): a hostile file lists tens of thousands, held as text until tried.
KEPT_MEMBERS = 512
# Entries of the kept chains (a member may be in many: see PathIndex._chain), at most.
_CHAINED_MAX = 4 * KEPT_MEMBERS
# What an index adds as it is used, in bytes, as sys.getsizeof measures it on CPython 3.11
# (tests/core/robots/test_compiled_once.py keeps grown_bytes an upper bound): a
# member made ready (the object, its tuple, its last piece) and each other piece besides
# their characters, its entry in a chain or in the kept members, a node's kept segment, and
# a searched group's buckets (_BUCKETS arrays, and a place per member).
_MEMBER_BYTES = 200
# An exact rule's entry (its numbers, their tuple), and a checker with what a matcher holds
# whatever its rules (the function, its closure, its verdicts, the matcher's own objects;
# besides a byte per key).
_EXACT_BYTES = 160
_CHECKER_BYTES = 2048
_PIECE_BYTES = 64
_CHAINED_BYTES = 88
_KEPT_BYTES = 96
_SEGMENT_BYTES = 160
_GRAMS_BYTES = _BUCKETS * 72 + 512


# Every character but those RFC 9309 leaves as they are in a path (reserved and unreserved)
# and "%", "#": a key without them is matched by a path as written (see PathIndex.checker).
_NOT_AS_WRITTEN = re.compile(r"[^A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=]")
# The longest scheme and authority a checker keeps to recognise the next URL's (a few
# hundred bytes, counted in _CHECKER_BYTES).
_ORIGIN_CHARS = 256


class PathIndex:
    """The highest-ranked matching entry for a path; entries are ``(pattern, rank, payload)``.

    With ``wildcards`` false every pattern is a plain prefix (the 1996 draft gives ``*`` and
    ``$`` no meaning).

    Every distinct key (a plain prefix, an exact pattern without its ``$``, a wildcard
    group's head) is a node, sorted; a node's interval holds the strings that start with its
    key (an exact-only node, its key alone), and intervals nest. The node a path falls in is
    found by one bisection and, when the nearest key below the path does not hold it, a walk
    to the enclosing nodes (at most as long as the path). Each node knows the best plain
    entry in force there; a wildcard group's members are tried from the deepest group out.
    Nodes and members are arrays and one string, not an object each: a file of 30,000
    wildcard lines costs a few bytes per line beside its keys.
    """

    __slots__ = ("_best", "_chained", "_chains", "_exact", "_gram_index", "_grams_bytes",
                 "_kept", "_keys", "_member_bytes", "_members", "_prefix", "_rank", "_rest",
                 "_rest_ends", "_segments", "_up", "_whole", "_wild_next", "_wild_start")

    def __init__(self, entries: Sequence[tuple[str, int, int]], *, wildcards: bool = True) -> None:
        finish(self._fill(entries, wildcards))

    @classmethod
    def built(cls, entries: Sequence[tuple[str, int, int]], *, wildcards: bool = True
              ) -> Steps[PathIndex]:
        """The index of ``entries``, built in steps (see :mod:`polite.core._steps`)."""
        index = cls.__new__(cls)
        yield from index._fill(entries, wildcards)
        return index

    def _fill(self, entries: Sequence[tuple[str, int, int]], wildcards: bool) -> Steps[None]:
        plain: dict[str, tuple[int, int]] = {}
        exact: dict[str, tuple[int, int]] = {}
        wild: dict[str, tuple[int, int]] = {}
        for start in range(0, len(entries), STEP):  # a pause between two steps
            if start:
                yield
            for pattern, rank, payload in entries[start:start + STEP]:
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

        # Wildcard patterns grouped by their literal head (the text before the first "*" or
        # "$"): a group is tried only for paths that start with its head.
        groups: dict[str, list[tuple[int, int, str]]] = {}
        for count, (pattern, (rank, payload)) in enumerate(wild.items(), 1):
            if not count % STEP:
                yield
            cut = min((i for i in (pattern.find("*"), pattern.find("$")) if i >= 0),
                      default=len(pattern))
            groups.setdefault(pattern[:cut], []).append((rank, payload, pattern[cut:]))

        large = len(entries) > STEP  # a pause before and after the sort, and the arrays
        if large:
            yield
        keys = sorted({*plain, *exact, *groups})
        if large:
            yield
        n = len(keys)
        up = array("i", [-1]) * n  # the nearest enclosing prefix node
        wild_next = array("i", [-1]) * n  # the nearest node at or above with a group
        # Lists while built (numbers read without boxing), kept as arrays: a payload is a
        # number object of its own in a list, four times the bytes (a check of a plain rule
        # reads neither; see checker).
        best = [-1] * n  # the best plain entry in force inside the node
        best_rank = [NO_MATCH] * n
        # per node with an exact rule: (its payload, its rank); and, for a group, where its
        # members start in the member arrays (each node's members are best first)
        exact_at: dict[int, tuple[int, int]] = {}
        wild_start = array("i", [0]) * (n + 1)
        # per member: rank, payload, and where its needed literal is in the rests' text
        member_fields = array("q")
        whole = bytearray()  # whether finding the needed literal is the whole test
        rests: list[str] = []
        at_rest = 0
        prefix = bytearray(n)  # whether a node holds every string starting with its key
        inside: list[int] = []  # open prefix nodes, outermost first
        done = 0  # keys and members placed, for the pauses
        for j, key in enumerate(keys):
            done += 1
            if done >= STEP:
                done = 0
                yield
            while inside and not key.startswith(keys[inside[-1]]):
                inside.pop()
            parent = inside[-1] if inside else -1
            up[j] = parent
            if parent >= 0:
                best[j], best_rank[j] = best[parent], best_rank[parent]
                wild_next[j] = wild_next[parent]
            found = plain.get(key)
            if found is not None and not best_rank[j] > found[0]:  # a longer key wins ties
                best[j], best_rank[j] = found[1], found[0]
            found = exact.get(key)
            if found is not None:
                exact_at[j] = (found[1], found[0])
            members = groups.get(key)
            if members is not None:
                members.sort(reverse=True)  # by rank, then the later rule
                for rank, payload, rest in members:
                    done += _MEMBER_STEPS
                    if done >= STEP:
                        done = 0
                        yield
                    # where the literal every match holds is, in the text of the rests
                    found_by = _Member(rank, payload, key + rest, _needed_literal(rest), key)
                    at = at_rest + rest.find(found_by.needed)
                    member_fields.extend((rank, payload, at, at + len(found_by.needed)))
                    whole.append(_found_by_needed(found_by))
                    rests.append(rest)
                    at_rest += len(rest)
                wild_next[j] = j
            wild_start[j + 1] = len(whole)
            if key in plain or members is not None:
                prefix[j] = 1
                inside.append(j)
        if large:
            yield
        # a tuple, not the list: a tuple of strings leaves the garbage collector's sight
        # once it has survived a collection, where a list's every item is visited by each
        # full collection (a service keeping 120 hostile files held its loop 70 ms each)
        self._keys = tuple(keys)
        self._up = up
        self._best = array("i", best)
        self._rank = array("q", best_rank)
        self._exact = exact_at
        self._wild_next = wild_next
        self._wild_start = wild_start
        self._members = member_fields
        self._whole = bytes(whole)
        # every member's pattern after its group's head, in one string
        self._rest = "".join(rests)
        self._rest_ends = array("I" if len(self._rest) < 1 << 32 else "Q",
                                accumulate(map(len, rests)))
        self._prefix = bytes(prefix)
        self._kept: dict[int, _Member] = {}
        self._gram_index: dict[int, tuple[array[int], list[array[int]]]] = {}
        self._chains: dict[int, Chain] = {}  # by the deepest group's node
        self._chained = 0  # entries of the kept chains (their members are kept ones)
        # a member made ready: its object, and its pieces after its group's head (the head
        # is the group's key), a string each
        rest = self._rest
        self._member_bytes = _MEMBER_BYTES + (len(rest) + _PIECE_BYTES * rest.count("*")
                                              ) // max(1, len(whole))
        self._grams_bytes = 0  # what the searched groups' buckets hold
        # per node with a wildcard or exact rule: (plain answer, its rank, chain), as used
        self._segments: dict[int, tuple[int, int, Chain]] = {}

    def held_bytes(self) -> int:
        """The bytes the index holds as built (:func:`sys.getsizeof` of its parts), with a
        :meth:`checker` made of it; :meth:`grown_bytes` adds what lookups keep since."""
        size = sys.getsizeof
        keys = self._keys
        return (size(self) + size(keys) + sum(map(size, keys)) + size(self._exact)
                + len(self._exact) * _EXACT_BYTES
                + sum(map(size, (self._up, self._best, self._rank, self._wild_next,
                                 self._wild_start, self._members, self._whole, self._rest,
                                 self._rest_ends, self._prefix, self._kept, self._gram_index,
                                 self._chains, self._segments)))
                + len(keys) + _CHECKER_BYTES)

    def grown_bytes(self) -> int:
        """The bytes lookups have added to what the index held when built (wildcard members
        made ready and kept, see :data:`KEPT_MEMBERS`; searched groups' buckets), estimated
        from their counts as an upper bound."""
        member = self._member_bytes
        return (self._chained * _CHAINED_BYTES + len(self._kept) * (member + _KEPT_BYTES)
                + len(self._segments) * _SEGMENT_BYTES + self._grams_bytes)

    def _node_of(self, path: str) -> int:
        """The deepest node whose interval holds ``path``, or -1."""
        keys, up, prefix = self._keys, self._up, self._prefix
        j = bisect_right(keys, path) - 1
        while j >= 0:
            key = keys[j]
            if path.startswith(key) and (prefix[j] or len(path) == len(key)):
                return j
            j = up[j]
        return -1

    def _chain(self, w: int) -> Chain | None:
        """The wildcard members of node ``w``'s group and of the groups enclosing it, best
        first, made ready to match; kept, a few hundred members in all, each made once
        (``None`` for a chain longer than that: its members are then tried from the
        arrays)."""
        chain = self._chains.get(w)
        if chain is not None:
            return chain
        keys, starts, up, wild_next = self._keys, self._wild_start, self._up, self._wild_next
        nodes = []
        g = w
        while g >= 0:
            nodes.append(g)
            g = wild_next[up[g]] if up[g] >= 0 else -1
        count = sum(starts[g + 1] - starts[g] for g in nodes)
        if count > KEPT_MEMBERS:
            return None
        # Members are shared with the other chains that hold them (an enclosing group's
        # are in every chain below it: remade for each, the chains of a file with many
        # "/dir/*" groups outgrew what is kept and were made again at nearly every lookup).
        kept = self._kept
        new = sum(m not in kept for g in nodes for m in range(starts[g], starts[g + 1]))
        if self._chained + count > _CHAINED_MAX or len(kept) + new > KEPT_MEMBERS:
            self._forget()
        found: list[tuple[int, int, int, _Member]] = []
        for g in nodes:
            head = keys[g]
            for m in range(starts[g], starts[g + 1]):
                member = self._member(m, head)
                found.append((member.rank, len(head), member.payload, member))
        # by rank, then the longer head (the deeper group), then the later rule
        found.sort(key=lambda f: f[:3], reverse=True)
        chain = tuple((m.rank, m.needed, _found_by_needed(m), m) for *_, m in found)
        self._chains[w] = chain
        self._chained += count
        return chain

    def _segment(self, j: int) -> tuple[int, int, Chain] | None:
        """Node ``j``'s plain answer and the wildcard chain that may beat it, for paths
        other than its key (``None`` for a chain too long to keep); kept per node."""
        w = self._wild_next[j]
        chain = () if w < 0 else self._chain(w)
        if chain is None:
            return None
        segment = (self._best[j], self._rank[j], chain)
        if len(self._segments) >= KEPT_MEMBERS:
            self._segments.clear()
        self._segments[j] = segment
        return segment

    def _wildcards(self, j: int, path: str, best: int, best_rank: int) -> int:
        """``best`` or the payload of the best wildcard member that matches ``path`` and
        outranks it, from the groups of node ``j`` and the nodes enclosing it."""
        w = self._wild_next[j]
        chain = self._chain(w)
        if chain is not None:
            for rank, needed, whole, member in chain:
                if rank <= best_rank:
                    break
                if needed in path and (whole or member.matches(path)):
                    return member.payload
            return best
        keys, members, starts, rest, whole_test = (self._keys, self._members,
                                                   self._wild_start, self._rest, self._whole)
        while w >= 0:  # a long chain: from the deepest group out, each best first
            count = starts[w + 1] - starts[w]
            tried: Iterable[int] = range(starts[w], starts[w + 1])
            if count >= SEARCHED_FROM and len(path) <= count // 8:
                tried = self._candidates(w, path)
            for m in tried:
                rank = members[4 * m]
                if rank <= best_rank:
                    break
                if rest[members[4 * m + 2]:members[4 * m + 3]] in path and (
                        whole_test[m] or self._member(m, keys[w]).matches(path)):
                    best, best_rank = members[4 * m + 1], rank
                    break
            parent = self._up[w]
            w = self._wild_next[parent] if parent >= 0 else -1
        return best

    def _candidates(self, w: int, path: str) -> list[int]:
        """The members of node ``w``'s group whose needed literal ``path`` may hold, best
        first: those whose literal starts with one of the path's runs of :data:`_GRAM`
        characters (found through :meth:`_grams`), and those with shorter literals."""
        short, buckets = self._grams(w)
        hit = {hash(path[i:i + _GRAM]) % _BUCKETS for i in range(len(path) - _GRAM + 1)}
        return sorted(set(short).union(*(buckets[h] for h in hit)))

    def _grams(self, w: int) -> tuple[array[int], list[array[int]]]:
        """Node ``w``'s members by the first :data:`_GRAM` characters of their needed
        literals, hashed into :data:`_BUCKETS` buckets (those with shorter literals apart);
        built when first used (or by :meth:`searched`), a few bytes a member."""
        return finish(self._grams_steps(w))

    def searched(self) -> Steps[None]:
        """The buckets of every group large enough to be searched by them built, in steps:
        for a caller that must not wait for them in a first lookup (two indexes of 14,000
        wildcard patterns: 8 ms)."""
        starts = self._wild_start
        for w in range(len(self._keys)):
            if starts[w + 1] - starts[w] >= SEARCHED_FROM:
                yield from self._grams_steps(w)

    def _grams_steps(self, w: int) -> Steps[tuple[array[int], list[array[int]]]]:
        found = self._gram_index.get(w)
        if found is None:
            members, rest = self._members, self._rest
            short = array("I")
            buckets = [array("I") for _ in range(_BUCKETS)]
            for m in range(self._wild_start[w], self._wild_start[w + 1]):
                if not m % STEP:
                    yield
                at, end = members[4 * m + 2], members[4 * m + 3]
                if end - at < _GRAM:
                    short.append(m)
                else:
                    buckets[hash(rest[at:at + _GRAM]) % _BUCKETS].append(m)
            found = (short, buckets)
            self._gram_index[w] = found
            self._grams_bytes += _GRAMS_BYTES + 8 * (self._wild_start[w + 1] - self._wild_start[w])
        return found

    def _member(self, m: int, head: str) -> _Member:
        """Member ``m`` (of the group whose head is ``head``) made ready to match, kept (a
        few hundred at most: the chains that hold them are dropped with them)."""
        member = self._kept.get(m)
        if member is None:
            ends = self._rest_ends
            rest = self._rest[ends[m - 1] if m else 0:ends[m]]
            member = _Member(self._members[4 * m], self._members[4 * m + 1], head + rest,
                             _needed_literal(rest), head)
            if len(self._kept) >= KEPT_MEMBERS:
                self._forget()
            self._kept[m] = member
        return member

    def _forget(self) -> None:
        """Every member made ready dropped, with the chains and segments that hold them."""
        self._kept.clear()
        self._chains.clear()
        self._segments.clear()
        self._chained = 0

    def lookup(self, path: str) -> int:
        """The payload of the best matching entry, or -1 when none matches."""
        j = self._node_of(path)
        return -1 if j < 0 else self._finish(j, path)

    def _finish(self, j: int, path: str) -> int:
        """The payload of the best entry matching ``path``, which node ``j`` holds."""
        best, best_rank = self._best[j], self._rank[j]
        exact = self._exact.get(j)
        if exact is not None and exact[1] > best_rank and len(path) == len(self._keys[j]):
            best, best_rank = exact
        if self._wild_next[j] < 0:
            return best
        return self._wildcards(j, path, best, best_rank)

    def checker(
        self,
        allow: Sequence[bool],
        path_of: Callable[[str], str],
        fast_path: Callable[[str], re.Match[str] | None],
        *,
        robots_txt_allowed: bool = True,
        escaped: Callable[[re.Match[str]], str] | None = None,
        as_written: bool = False,
    ) -> Callable[[str], bool]:
        """A ``url -> allowed`` function with everything bound locally: the hot path.

        ``fast_path`` matches the common URL whose path needs no normalising and captures
        that path as group 1; other URLs go through ``path_of``. A match whose group 1 is
        ``None`` (a path ``fast_path`` also knows how to fix) goes through ``escaped``. The
        lookup is :meth:`lookup` written out inline.

        With ``as_written`` (RFC 9309: normalising a path without ``%`` only escapes the
        characters that are neither reserved nor unreserved), when every key is written in
        reserved and unreserved characters without ``%``, a path without ``%`` or ``#``
        falls in the same node as written as normalised: a key starts it, or is it, as
        written exactly when normalised, for the key holds none of the characters
        normalising changes. Such a path, after the scheme and authority of the last URL
        ``fast_path`` read, is looked up without the regular expression (its fixed cost is
        most of a plain rule's check); only a node whose wildcard or exact rules may change
        the answer asks whether the path holds a character to escape (a search, about half
        the cost), and for the normalised path if it does.
        """
        keys, up, exact, wild_next = self._keys, self._up, self._exact, self._wild_next
        as_written = as_written and _NOT_AS_WRITTEN.search("".join(keys)) is None
        verdicts = bytes(allow) + b"\1"  # payload -1 (no rule) allows
        # Per node, its answer where only plain rules decide (bit 1), whether it holds more
        # than its key (2), whether an exact or wildcard rule may change the answer (4) and
        # whether an exact one does (8): most lookups read this byte alone.
        state = bytes(verdicts[best] | (2 if holds else 0)
                      | (4 if j in exact or wild_next[j] >= 0 else 0)
                      | (8 if j in exact else 0)
                      for j, (best, holds) in enumerate(zip(self._best, self._prefix,
                                                           strict=True)))
        segments, segment_of, finish = self._segments, self._segment, self._finish
        search = bisect_right
        fix = escaped or (lambda m: path_of(m.string))

        # "scheme://authority" of the last URL whose path fast_path took as it stands, when
        # as_written holds (one string, at most _ORIGIN_CHARS long: read and replaced whole)
        origin = ""
        unwritten = _NOT_AS_WRITTEN.search

        def allowed(url: str) -> bool:
            nonlocal origin
            # the URL's path as written, when it follows the origin last read (removeprefix
            # gives back the URL itself when the origin does not start it, or is "")
            path = url.removeprefix(origin)
            written = (path is not url and path != "" and path[0] == "/" and "%" not in path
                       and "#" not in path)
            if not written:
                m = fast_path(url)
                if m is None:
                    path = path_of(url)
                else:
                    path = m[1]
                    if path is None:
                        path = fix(m)
                    elif as_written and len(url) - len(path) <= _ORIGIN_CHARS:
                        origin = url[:len(url) - len(path)]
            j = search(keys, path) - 1
            while j >= 0:
                # path.startswith(keys[j]), a third of its instructions: removeprefix takes
                # its argument without a tuple of them, and gives back the path itself when
                # the key does not start it (an empty key, a bare wildcard's head, does)
                if path.removeprefix(keys[j]) is not path or not keys[j]:
                    node = state[j]
                    if node & 2 or len(path) == len(keys[j]):
                        if node & 4:  # an exact or a wildcard rule may change the answer
                            # the node is the same for the normalised path, which is
                            # the path as written when it holds no character to escape
                            if written and unwritten(path) is not None:
                                m = fast_path(url)
                                path = path_of(url) if m is None else (m[1] or fix(m))
                            segment = segments.get(j) or segment_of(j)
                            if segment is None or (node & 8 and len(path) == len(keys[j])):
                                node = verdicts[finish(j, path)]
                            else:
                                best, best_rank, chain = segment
                                for rank, needed, whole, member in chain:
                                    if rank <= best_rank:
                                        break
                                    if needed in path and (whole or member.matches(path)):
                                        best = member.payload
                                        break
                                node = verdicts[best]
                        if node & 1:
                            return True
                        break
                j = up[j]
            else:
                return True  # no rule matches
            # (as written too: normalising leaves "/robots.txt" and "?" alone and escapes
            # what follows them, if anything; removeprefix as above)
            after = path.removeprefix("/robots.txt")
            return robots_txt_allowed and after is not path and (not after or after[0] == "?")

        return allowed
