"""Which wire format a text is written in, read from the formats' own :class:`~refiner.formats.base.Detection`
attributes and hooks (nothing here names a format).

Deterministic; the first rule that gives an answer wins. Formats are always tried in rank order.

1. A tagged format (``detection.bare`` false) that parses the text strictly (only those whose marker, or another
   spelling their strict reader accepts, occurs in the text are tried).
2. A guess from markers, looking only after any ``</think>``: the marker (tag or sentinel token) that occurs first
   in the text names its formats, and the first of them whose ``sniff`` accepts the text wins (formats sharing a
   marker, such as ``<tool_call>``, tell each other apart there). With no marker at all, the same by ``closers``.
3. An untagged format (``detection.bare``) that parses the text strictly.
4. A guess from the shape of the first JSON value (from the first ``{``/``[``, repaired if broken): the first format
   whose ``claims_value`` accepts it.
5. The first format whose ``claims_text`` accepts the text (pythonic calls ``[name(...)...]``).
6. Otherwise ``None``.

So a marker string quoted inside the calls of an untagged format (a NESTFUL label ``"<func_call>"``) makes the text
read as that tagged format: markers are taken as the stronger signal.

Cost: one substring search per marker (remembered within :func:`~refiner.formats.base.same_texts`, which detection
opens), one strict parse per format whose marker occurs and per untagged format for texts up to
:data:`~refiner.formats.base.MAX_LENIENT_CHARS`, one bounded lenient JSON read.
"""

from __future__ import annotations

from refiner.calls import ToolCall
from refiner.formats.base import MAX_LENIENT_CHARS, FormatError, WireFormat, by_rank, find_marker, same_texts
from refiner.formats.jsonfix import repair_budget
from refiner.formats.lenient import lenient_json_in_prose
from refiner.formats.text import strip_reasoning

# How much of an untagged text is decoded to classify it, and the repair units (see refiner.formats.jsonfix) that
# decoding may spend.
DETECT_CHARS = 20_000
DETECT_REPAIR_COST = 2048


def _by_marker(body: str, ranked: list[WireFormat], which: str) -> str | None:
    best: tuple[int, int] | None = None  # (position, -len(marker)): earliest, then longest
    found: str | None = None
    for fmt in ranked:
        for marker in getattr(fmt.detection, which):
            i = find_marker(body, marker)
            if i >= 0 and (best is None or (i, -len(marker)) < best):
                best, found = (i, -len(marker)), marker
    if found is None:
        return None
    at = best[0]
    sharing = [f for f in ranked if found in getattr(f.detection, which)]
    for fmt in sharing:
        if fmt.sniff(body, at):
            return fmt.name
    return sharing[-1].name


def detect_format(text: str) -> str | None:
    """The name of the wire format ``text`` is written in, or ``None``; deterministic (see the module doc)."""
    return detect_with_calls(text)[0]


def _strict_calls(fmt: WireFormat, text: str) -> list[ToolCall] | None:
    try:
        return fmt.parse_strict(text)
    except FormatError:
        return None


def detect_with_calls(text: str) -> tuple[str | None, list[ToolCall] | None]:
    """``(format name or None, calls)``: :func:`detect_format`, and the calls when the text was found strictly valid
    in that format (rules 1 and 3; else ``None``), so a caller need not parse it again."""
    if not isinstance(text, str):
        return None, None
    with same_texts():
        return _detect(text)


def _marked(fmt: WireFormat, text: str) -> bool:
    """Whether ``text`` holds a string without which ``fmt`` (a tagged format) cannot read it strictly."""
    needs = (*fmt.detection.markers, *fmt.detection.also_read)
    return not needs or any(find_marker(text, m) >= 0 for m in needs)


def _detect(text: str) -> tuple[str | None, list[ToolCall] | None]:
    ranked = by_rank()
    small = len(text) <= MAX_LENIENT_CHARS
    if small:
        for fmt in ranked:
            if not fmt.detection.bare and _marked(fmt, text):
                calls = _strict_calls(fmt, text)
                if calls is not None:
                    return fmt.name, calls
    body = strip_reasoning(text)
    name = _by_marker(body, ranked, "markers") or _by_marker(body, ranked, "closers")
    if name is not None:
        return name, None
    if small:
        for fmt in ranked:
            if fmt.detection.bare:
                calls = _strict_calls(fmt, text)
                if calls is not None:
                    return fmt.name, calls
    with repair_budget(total=DETECT_REPAIR_COST):
        value = lenient_json_in_prose(body[:DETECT_CHARS])
    if value is not None:
        for fmt in ranked:
            if fmt.claims_value(value):
                return fmt.name, None
    for fmt in ranked:
        if fmt.claims_text(body):
            return fmt.name, None
    return None, None


def all_markers() -> tuple[str, ...]:
    """Every marker and closer of every registered format."""
    return tuple(dict.fromkeys(m for f in by_rank() for m in (*f.detection.markers, *f.detection.closers)))
