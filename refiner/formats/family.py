"""A model family as a row of a grammar's table, not a module of its own.

A *grammar* is a :class:`~refiner.formats.base.WireFormat` subclass that reads and writes one shape of calls (XML-ish
invoke/parameter elements, JSON inside sentinels, pythonic lists, ...) from a *spelling*: a frozen dataclass of the
grammar's own (its tags, how a value is typed, quirk flags, at most one named hook). A *family* is one row: a
:class:`Family` (what every row holds, whatever the grammar) and the grammar's spelling. :func:`register_rows` turns a
grammar's table into registered formats:

- ``name``, ``description``, ``trained`` and ``reasoning`` come from the :class:`Family` (kept as ``row``; the
  spelling as ``spelling``);
- ``detection.rank`` is the grammar's base rank plus the row's place in the table (earlier rows are tried first, so a
  more specific spelling goes before a more general one sharing its markers);
- ``detection`` markers and closers, and ``tags``, come from the grammar (``grammar.detection_for(spelling, rank)``
  and ``grammar.tags_for(spelling)``), never typed again per row;
- ``example`` is the grammar's own render of :data:`EXAMPLE_CALLS`, so the example and the renderer cannot drift.

A chat template derived by :mod:`refiner.formats.derive` yields the same kind of row, so a derived dialect and a
hand-written one are the same value and can be compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import WireFormat, get, register

# Two calls with a string, integers, a list and a nested object: what every row's example renders.
EXAMPLE_CALLS: tuple[ToolCall, ...] = (
    ToolCall(
        "search_flights",
        {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1},
    ),
    ToolCall("get_weather", {"city": "London", "days": 3, "units": "metric"}),
)

THINK = (("<think>", "</think>"),)


@dataclass(frozen=True)
class Family:
    """What every row holds, whatever its grammar.

    ``name``: the registry name (``deepseek_v32``); ``description``: one line for the docs table (the shape as the
    model writes it); ``models``: checkpoints that write it (Hugging Face ids); ``sources``: where the row was read
    from (a chat template path with its sha256, an engine's parser file), for whoever checks it again;
    ``reasoning``: the family's reasoning blocks as (open, close) pairs; ``trained``: the refiner model was trained
    on this format (see :attr:`WireFormat.trained`)."""

    name: str
    description: str
    models: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    reasoning: tuple[tuple[str, str], ...] = THINK
    trained: bool = False


def register_rows(grammar: type[WireFormat], base_rank: int, rows: Sequence[tuple[Family, Any]]) -> list[WireFormat]:
    """Registers one format per row of ``grammar``'s table and returns them, in table order. ``grammar`` provides
    ``detection_for(spelling, rank) -> Detection`` and ``tags_for(spelling) -> tuple[str, ...]`` (class methods) and
    reads its row's spelling from ``self.spelling``."""
    made = []
    for i, (fam, spelling) in enumerate(rows):
        made.append(make_row(grammar, fam, spelling, base_rank + i, register_it=True))
    return made


def make_row(grammar: type[WireFormat], fam: Family, spelling: Any, rank: int, *, register_it: bool) -> WireFormat:
    """One row as a format instance: registered (a built-in row) or not (a dialect derived at run time, which
    ``refiner.formats.get`` does not know)."""
    attrs = {
        "name": fam.name,
        "description": fam.description,
        "row": fam,
        "spelling": spelling,
        "trained": fam.trained,
        "reasoning": fam.reasoning,
        "tags": grammar.tags_for(spelling),
        "detection": grammar.detection_for(spelling, rank),
        "example": "(rendered below)",
        "__module__": grammar.__module__,
    }
    cls = type(f"{grammar.__name__}_{fam.name}", (grammar,), attrs)
    cls.example = cls().render(list(EXAMPLE_CALLS))
    if register_it:
        register(cls)
        return get(fam.name)
    return cls()
