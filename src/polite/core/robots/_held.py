"""The bytes objects hold, measured: :func:`sys.getsizeof` summed over what they reach.

A cache that charges parsed files by their bytes (the robots fetcher's budget) needs a figure
close to what the allocator gives them: estimates from line counts were two to four times
too high for some shapes and could be too low for others. What a parsed file and its
matchers hold is a few large containers (packed strings, arrays) and, for small files, a
few hundred small objects, so measuring them once costs little beside parsing.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Collection, Iterable, Sequence
from enum import Enum
from functools import partial
from itertools import compress
from operator import itemgetter, not_
from types import BuiltinFunctionType, CodeType, FunctionType, MethodType, ModuleType
from typing import cast

__all__ = ["distinct_bytes", "held_bytes", "rows_bytes"]

# Objects counted by their own size alone: they reference nothing else.
_LEAVES: frozenset[type] = frozenset({str, bytes, bytearray, int, float, array, re.Pattern})
# Objects every file shares (types, modules, functions defined at module level, enum
# members, singletons): never counted.
_SHARED = (type, ModuleType, BuiltinFunctionType, CodeType, Enum)
_SINGLETONS = frozenset({id(None), id(True), id(False), id(Ellipsis), id(NotImplemented)})
_slots: dict[type, tuple[str, ...]] = {}
# A container of this many items or more has its leaves counted in C loops, not one by one.
_MANY = 32


def _slot_names(kind: type) -> tuple[str, ...]:
    names = _slots.get(kind)
    if names is None:
        found: list[str] = []
        for klass in kind.__mro__:
            declared = klass.__dict__.get("__slots__", ())
            found.extend([declared] if isinstance(declared, str) else declared)
        names = _slots[kind] = tuple(n for n in found if n not in ("__dict__", "__weakref__"))
    return names


def distinct_bytes(leaves: Iterable[object]) -> int:
    """The bytes of ``leaves`` (strings, numbers), each object once, in C loops."""
    leaves = list(leaves)
    return sum(map(sys.getsizeof, dict(zip(map(id, leaves), leaves, strict=True)).values()))


def rows_bytes(rows: Sequence[tuple[object, ...]]) -> int:
    """:func:`held_bytes` of the items of ``rows``, tuples of one shape (a parsed file's
    rules, fields and issues: thousands in some), a column at a time in C loops where it
    holds only leaves; not of ``rows`` itself."""
    if not rows:
        return 0
    size = sys.getsizeof
    total = sum(map(size, rows))
    for j in range(len(rows[0])):
        column = list(filter(None, map(itemgetter(j), rows)))  # singletons left out
        if not column or type(column[0]) is bool:
            continue
        if all(map(_LEAVES.__contains__, map(type, column))):
            total += distinct_bytes(column)  # a code or a severity: one string, many rows
        else:
            total += held_bytes(*column)
    return total


def held_bytes(*roots: object, skip: Iterable[object] = ()) -> int:
    """The bytes ``roots`` and everything they reach hold, each object counted once; the
    objects of ``skip`` (and what only they reach) are someone else's and not counted."""
    seen = {id(o) for o in skip} | _SINGLETONS
    size = sys.getsizeof
    total = 0
    stack = list(roots)
    while stack:
        obj = stack.pop()
        key = id(obj)
        if key in seen:
            continue
        seen.add(key)
        kind = type(obj)
        if kind in _LEAVES:
            total += size(obj)
        elif kind is tuple or kind is list or kind is set or kind is frozenset:
            items = cast(Collection[object], obj)
            total += size(items)
            if len(items) < _MANY:
                stack.extend(items)
            else:  # the leaves counted in C loops (a matcher's keys: thousands of strings)
                leaves = list(map(_LEAVES.__contains__, map(type, items)))
                stack.extend(compress(items, map(not_, leaves)))
                total += sum(map(size, compress(items, leaves)))
        elif kind is dict:
            total += size(obj)
            stack.extend(obj.keys())  # type: ignore[attr-defined]
            stack.extend(obj.values())  # type: ignore[attr-defined]
        elif isinstance(obj, _SHARED):
            continue
        elif kind is FunctionType:
            closure = obj.__closure__  # type: ignore[attr-defined]
            if closure is None:  # defined at module level: shared
                continue
            total += size(obj) + size(closure) + sum(map(size, closure))
            stack.extend(cell.cell_contents for cell in closure)
        elif kind is MethodType:
            total += size(obj)
            stack.append(obj.__self__)  # type: ignore[attr-defined]
        elif kind is partial:
            total += size(obj)
            stack.extend((obj.func, obj.args, obj.keywords))  # type: ignore[attr-defined]
        else:
            total += size(obj)
            if isinstance(obj, tuple | list):  # named tuples, subclasses
                stack.extend(obj)
            names = _slot_names(kind)
            for name in names:
                value = getattr(obj, name, None)
                if value is not None:
                    stack.append(value)
            state = getattr(obj, "__dict__", None)
            if state is not None:
                stack.append(state)
    return total
