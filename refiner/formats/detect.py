"""Which wire format a text is written in, by the formats' own :class:`~refiner.formats.base.Detection` attributes and
hooks (nothing here names a format). Deterministic: formats are tried in rank order; the first rule that answers wins:

1. A tagged format that parses the text strictly (only those whose marker, or another spelling their strict reader
   accepts, occurs, and whose ``sniff`` accepts the text at the first marker it shares).
2. A guess from markers after any reasoning: the earliest marker names its formats, the first whose ``sniff`` accepts
   the text wins (a marker of untagged formats that all reject it names none). No marker: the same by ``closers``.
3. An untagged format (``detection.bare``) that parses the text strictly, tried only when the text holds a ``{``, a
   ``[`` or one of the format's markers, and one of its ``strict_needs`` when it declares some.
4. The first format whose ``claims_value`` accepts the first JSON value (repaired if broken).
5. The first format whose ``claims_text`` accepts the text (pythonic calls ``[name(...)...]``).
6. Otherwise ``None``.

So a marker quoted inside the calls of an untagged format makes the text read as that tagged format."""

from __future__ import annotations

from refiner.calls import ToolCall
from refiner.formats.base import (DETECT_CHARS, MAX_LENIENT_CHARS, FormatError, WireFormat, by_rank, kept,
                                  marker_positions, marker_table)
from refiner.formats.jsonfix import repair_budget
from refiner.formats.lenient import lenient_json_in_prose
from refiner.formats.reasoning import read

Strict = dict[str, "list[ToolCall] | FormatError"]  # the strict readings of one text made so far, by format name

# The format chosen among those sharing a marker, by (marker, its position after the reasoning): salvage takes it.
Sniffed = dict[tuple[str, int], WireFormat]

# The repair units (refiner.formats.jsonfix) that decoding an untagged text to classify it may spend.
DETECT_REPAIR_COST = 2048


def _by_marker(named: dict[str, tuple[WireFormat, ...]], found_at: dict[str, int], body: str, answers: dict,
               sniffed: Sniffed | None = None) -> str | None:
    """The format named by the earliest (then longest) of the markers or closers ``named`` (each with the formats it
    names) in the body, by rule 2 of the module doc (each format's sniff asked once per position: ``answers`` keeps
    them); the choice among formats sharing it is added to ``sniffed``."""
    for found, at in sorted(((m, i) for m, i in found_at.items() if m in named), key=lambda mi: (mi[1], -len(mi[0]))):
        sharing = named[found]
        fmt = next((f for f in sharing if _sniff(f, body, at, answers)), None)
        if fmt is None and all(f.detection.bare for f in sharing):
            continue
        fmt = fmt or sharing[-1]
        if sniffed is not None:
            sniffed[found, at] = fmt
        return fmt.name
    return None


def _sniff(fmt: WireFormat, body: str, at: int, answers: dict) -> bool:
    """``fmt.sniff(body, at)``, asked unless ``answers`` (by format name and position) holds it, and kept there."""
    if (fmt.name, at) not in answers:
        answers[fmt.name, at] = fmt.sniff(body, at)
    return answers[fmt.name, at]


def _after(text: str, at: int, found_at: dict[str, int]) -> dict[str, int]:
    """Where each marker of ``found_at`` (positions in ``text``) first occurs in ``text[at:]``, relative to ``at``."""
    return {m: j - at for m, i in found_at.items() if (j := i if i >= at else text.find(m, at)) >= 0}


def detect_format(text: str) -> str | None:
    """The name of the wire format ``text`` is written in, or ``None``; deterministic (see the module doc)."""
    return detect_with_calls(text)[0]


def strict_reading(fmt: WireFormat, text: str, tried: Strict) -> list[ToolCall] | None:
    """``fmt``'s strict reading of ``text`` (its calls, or None), made once: ``tried`` (:data:`Strict`) keeps it."""
    got = tried.get(fmt.name)
    if got is None:
        try:
            got = fmt.parse_strict(text)
        except FormatError as e:
            got = kept(e)
        tried[fmt.name] = got
    return got if type(got) is list else None


def detect_with_calls(
    text: str,
    tried: Strict | None = None,
    markers: dict[str, int] | None = None,
    sniffed: Sniffed | None = None,
) -> tuple[str | None, list[ToolCall] | None]:
    """``(format name or None, calls)``: :func:`detect_format`, and the calls when the text was found strictly valid in
    that format (rules 1 and 3). ``tried`` (:func:`strict_reading`) and ``sniffed`` (:data:`Sniffed`) are added to;
    ``markers``: :func:`~refiner.formats.base.marker_positions` of ``text``, when the caller has them."""
    if not isinstance(text, str):
        return None, None
    text = read(text)
    tried = {} if tried is None else tried
    table = marker_table()
    small = len(text) <= MAX_LENIENT_CHARS
    found_at = marker_positions(text) if markers is None else markers
    start = text.split.answer  # (the answer after the reasoning: text is a reasoning.Read)
    body = text[start:] if start else text
    in_body = _after(text, start, found_at) if start else found_at
    answers: dict[tuple[str, int], bool] = {}  # (each format's sniff asked once per position: rules 1 and 2)
    if small:
        shared = table.shared_markers
        for fmt in table.marked(found_at):
            at = -1
            for m in shared.get(fmt, ()):
                if (i := in_body.get(m, -1)) >= 0 and (at < 0 or i < at):  # (the first of them in the body)
                    at = i
            if at >= 0 and not _sniff(fmt, body, at, answers):
                continue
            calls = strict_reading(fmt, text, tried)
            if calls is not None:
                return fmt.name, calls
    if found_at:
        name = _by_marker(table.naming["markers"], in_body, body, answers, sniffed) or _by_marker(
            table.naming["closers"], in_body, body, answers)
        if name is not None:
            return name, None
    bracketed = "{" in text or "[" in text
    if small:
        for fmt in table.bare if bracketed else table.bare_marked(found_at):
            needs = fmt.detection.strict_needs
            if needs and not any(n in text for n in needs):
                continue
            calls = strict_reading(fmt, text, tried)
            if calls is not None:
                return fmt.name, calls
    head = body[:DETECT_CHARS]
    if bracketed and ("{" in head or "[" in head):  # (a JSON value starts at a bracket)
        with repair_budget(total=DETECT_REPAIR_COST):
            value = lenient_json_in_prose(head)
        if value is not None:
            for fmt in table.claiming_values:
                if fmt.claims_value(value):
                    return fmt.name, None
    held = {n for n in table.claimed_by if n in body}  # (a row needing none of them is not asked)
    for fmt, needs in table.claim_needs.items():
        if not held.isdisjoint(needs) and fmt.claims_text(body):
            return fmt.name, None
    return None, None


def all_markers() -> tuple[str, ...]:
    """Every marker and closer of every registered format."""
    return tuple(dict.fromkeys(m for f in by_rank() for m in (*f.detection.markers, *f.detection.closers)))
