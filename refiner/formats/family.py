"""A model family as a row of a grammar's table: a *grammar* (a :class:`~refiner.formats.base.WireFormat` subclass)
reads and writes one shape of calls from a *spelling* (a frozen dataclass of its own: tags, typing, quirk flags, at
most one hook); a *family* is one :class:`Row`, in the catalog (:mod:`refiner.formats.catalog`) or derived from a
chat template (:mod:`refiner.formats.derive`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, WireFormat, all_formats, register

# A spelling field's metadata when the field is a reading policy, not a fact of the markup (derivation leaves it out).
POLICY = {"policy": True}

# Two calls with a string, integers, a list and a nested object: what every row's example renders.
EXAMPLE_CALLS: tuple[ToolCall, ...] = (
    ToolCall("search_flights", {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}),
    ToolCall("get_weather", {"city": "London", "days": 3, "units": "metric"}),
)

THINK = (("<think>", "</think>"),)


@dataclass(frozen=True)
class Family:
    """What every row holds, whatever its grammar: the registry ``name``, a one-line ``description`` for the docs
    table, the ``models`` that write it (Hugging Face ids), the ``sources`` it was read from, the ``reasoning`` blocks
    as (open, close) pairs, and whether the refiner model was ``trained`` on it."""

    name: str
    description: str
    models: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    reasoning: tuple[tuple[str, str], ...] = THINK
    trained: bool = False


@dataclass(frozen=True)
class Row:
    """One family of the catalog: a plain value. ``grammar`` reads and writes ``spelling`` (its ``tags_for``,
    ``detection_for`` and the instance's ``self.spelling``)."""

    family: Family
    grammar: type[WireFormat]
    spelling: Any


def register_catalog(rows: Sequence[Row]) -> list[WireFormat]:
    """Registers every row of the catalog, ranked by its place in it, and returns the formats in that order."""
    wanted = [r.grammar.detection_for(r.spelling, i) for i, r in enumerate(rows)]
    left = markers_left(wanted, [r.grammar.tags_for(r.spelling) for r in rows])
    return [register(make_row(r.grammar, r.family, r.spelling, i, left[i])) for i, r in enumerate(rows)]


def markers_left(wanted: Sequence[Detection], tags: Sequence[Sequence[str]]) -> list[frozenset[str]]:
    """For each row (``wanted[i]``: its grammar's detection; ``tags[i]``: its tags), the further markers it leaves to
    other rows: those another row holds as its first marker, those an earlier row not sharing its first marker keeps,
    and those of a row whose first marker this row writes as a tag of its own (it wraps that row's calls)."""
    first = {d.markers[0] for d in wanted if d.markers}
    kept: dict[str, str] = {}  # a further marker -> the first marker of the row that keeps it
    out = []
    for i, d in enumerate(wanted):
        if len(d.markers) < 2:
            out.append(frozenset())
            continue
        wrapped = {m for e in wanted if e.markers and e.markers[0] != d.markers[0] and e.markers[0] in tags[i]
                   for m in e.markers[1:]}
        taken = frozenset(m for m in d.markers[1:] if m in first or m in wrapped
                          or kept.get(m, d.markers[0]) != d.markers[0])
        kept.update((m, d.markers[0]) for m in d.markers[1:] if m not in taken)
        out.append(taken)
    return out


def make_row(grammar: type[WireFormat], fam: Family, spelling: Any, rank: int,
             taken: Collection[str] | None = None) -> type[WireFormat]:
    """One row as a format class, not registered. ``taken``: the further markers of its grammar's detection that the
    row leaves to others (``None``: those of every format registered)."""
    if taken is None:
        taken = {m for f in all_formats() for m in f.detection.markers}
    detection = grammar.detection_for(spelling, rank)
    mine = detection.markers[:1] + tuple(m for m in detection.markers[1:] if m not in taken)
    attrs = {"name": fam.name, "description": fam.description, "row": fam, "spelling": spelling, "trained": fam.trained,
             "reasoning": fam.reasoning, "tags": grammar.tags_for(spelling),
             "detection": replace(detection, markers=mine), "__module__": grammar.__module__}
    cls = type(f"{grammar.__name__}_{fam.name}", (grammar,), attrs)
    if not getattr(grammar, "example", None):  # (a grammar whose calls carry more than these sets its own)
        cls.example = cls().render(list(EXAMPLE_CALLS))
    return cls
