"""How deep an event tree may nest: the limit, and the depth of a tree computed without
recursion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpledger.core.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpledger.core.events import Event

__all__ = ["MAX_NESTING", "check_nesting", "nesting_depth"]

#: deepest nesting of sampled/composed events accepted (every tree walk stays far below
#: Python's recursion limit; real pipelines nest a handful of levels)
MAX_NESTING = 100


def nesting_depth(event: Event) -> int:
    """Levels of sub-events below ``event`` (0 for a leaf), computed without recursion."""
    return _depths((event,))


def _depths(roots: tuple[Event, ...]) -> int:
    """The largest nesting depth of ``roots`` (-1 if none); shared sub-events are walked once."""
    if all(not r.children() for r in roots):  # leaves (a sampled event's usual child), at once
        return 0 if roots else -1
    depth: dict[int, int] = {}
    stack: list[tuple[Event, bool]] = [(r, False) for r in roots]
    while stack:
        node, done = stack.pop()
        if id(node) in depth:
            continue
        kids = node.children()
        if done:
            depth[id(node)] = 1 + max(depth[id(k)] for k in kids) if kids else 0
            continue
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in depth)
    return max((depth[id(r)] for r in roots), default=-1)


def check_nesting(field: str, children: tuple[Event, ...]) -> None:
    """Refuse ``children`` as the sub-events of a field named ``field`` if they nest too deep."""
    deepest = _depths(children)
    if deepest + 1 > MAX_NESTING:
        raise InvalidParameterError(
            field,
            f"events are nested {deepest + 1} levels deep, more than {MAX_NESTING}",
            "flatten the composition: use one composed event with a list of events, or a count",
        )
