"""Functionary v3.1 (MeetKai's Llama 3.1 based models; llama.cpp's ``functionary_v3_1_llama_3_1``):
``<function=NAME>{...}</function>`` per call, then optionally ``<|python_tag|>`` and the python tool's code (the rest
of the text). A named-JSON row (:mod:`refiner.formats.named_json`) with what its spelling cannot say:

- ``<function=`` is also the call tag of Qwen3-Coder, Seed-OSS and ZAYA (a line break and ``<parameter=`` after the
  name): a call is this row's when a JSON object follows ``<function=NAME>`` (:meth:`sniff`). The row's first marker
  is ``<|python_tag|>``; ``<function=`` is read as another spelling of it (``Detection.also_read``), so it stays a
  marker of Qwen3-Coder's row (:func:`~refiner.formats.family.markers_left`).
- ``<|python_tag|>`` with no call before it is Llama 3.1's (``llama3_json``), read by neither reader of this row.
  Rendering writes every call, python's too, as ``<function=NAME>{...}</function>``."""

from __future__ import annotations

import re

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient
from refiner.formats.named_json import NAME_PATTERN, NamedJson, NamedSpelling
from refiner.formats.tags import Speller, apply_edits, respelt, tag_hits
from refiner.formats.text import reasoning_offset, skip_ws

OPEN, NAME_END, CLOSE = "<function=", ">", "</function>"
PYTHON_TAG = "<|python_tag|>"
PYTHON = "python"  # the tool the code after PYTHON_TAG calls, with the argument "code"
SPELLING = NamedSpelling(None, None, OPEN, NAME_END, CLOSE, call_marker=True)
SPELLER = Speller((OPEN, CLOSE))
AFTER_JSON = 64  # how far before a closing tag the end of the arguments is looked for (whitespace between)
_NAME_THEN_JSON = re.compile(rf"\s*({NAME_PATTERN})(>?)(?=\s*\{{)")  # a call's head, its tag or its ">" lost


class FunctionaryV31(NamedJson):
    """The grammar of the ``functionary_v31`` row (its spelling :data:`SPELLING`)."""

    @classmethod
    def tags_for(cls, sp: NamedSpelling) -> tuple[str, ...]:
        return (*super().tags_for(sp), PYTHON_TAG)

    @classmethod
    def detection_for(cls, sp: NamedSpelling, rank: int) -> Detection:
        return Detection(rank=rank, markers=(PYTHON_TAG,), closers=(sp.close,), also_read=(sp.call_open,))

    def sniff(self, body: str, at: int) -> bool:
        """``<function=NAME>`` followed by a JSON object, not by a line break and ``<parameter=``."""
        if not body.startswith(OPEN, at):
            return False
        end = body.find(NAME_END, at + len(OPEN))  # (the JSON after the tag is told first: the name's check costs more)
        return end >= 0 and body.startswith("{", skip_ws(body, end + len(NAME_END))) and super().sniff(body, at)

    def _after_calls(self, text: str, pos: int, calls: list[ToolCall]) -> list[ToolCall]:
        if text.startswith(PYTHON_TAG, pos):
            return [*calls, ToolCall(PYTHON, {"code": text[pos + len(PYTHON_TAG) :]})]
        return super()._after_calls(text, pos, calls)

    def recover(self, text: str, out: Lenient) -> None:
        """The named-JSON reading of the calls, after the tags written wrong or lost where the grammar puts them are put
        back (:func:`respell`); the code after a ``<|python_tag|>`` that follows a call is the python tool's call."""
        text = respell(text, out)
        start = reasoning_offset(text)
        first = text.find(OPEN, start)
        tag = text.find(PYTHON_TAG, max(first, text.rfind(CLOSE, start) + 1)) if first >= 0 else -1
        if tag < 0:
            return super().recover(text, out)
        super().recover(text[:tag], out)
        out.calls.append(ToolCall(PYTHON, {"code": text[tag + len(PYTHON_TAG) :]}))


def respell(text: str, out: Lenient) -> str:
    """``text`` with this row's tags put back (each a ``missing_tag`` problem): a look-alike of ``</function>`` after a
    JSON object (``[/function]``, ``</function`` without ``>``), of ``<function=`` (``<Function=``); the ``>`` lost
    after a call's name; ``<function=`` lost before a name and JSON at the answer's start or after ``</function>``."""
    start = reasoning_offset(text)
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []

    def put(at: int, end: int, tag: str, what: str) -> None:
        edits.append((at, end, tag))
        notes.append(what)

    def head(at: int) -> None:  # a call's head at ``at`` (the start of the answer, or after a </function>)
        m = _NAME_THEN_JSON.match(text, at)
        if m is not None and not text.startswith(OPEN, skip_ws(text, at)):
            put(m.start(1), m.end(), f"{OPEN}{m.group(1)}{NAME_END}", f"missing {OPEN} before {m.group(1)!r}")

    head(start)
    for hit in tag_hits(SPELLER, text, start):
        if hit.foreign or (edits and hit.start < edits[-1][1]):
            continue
        exact = hit.exact and hit.ended
        if hit.closing:
            if not text[max(start, hit.start - AFTER_JSON) : hit.start].rstrip().endswith("}"):
                continue
            if not exact:
                put(hit.start, hit.end, CLOSE, f"{text[hit.start:hit.end]!r} written for {CLOSE}")
            head(hit.end)
        elif hit.eq:
            if not exact:
                put(hit.start, hit.end, OPEN, f"{text[hit.start:hit.end]!r} written for {OPEN}")
            m = _NAME_THEN_JSON.match(text, hit.end)
            if m is not None and not m.group(2) and m.start(1) == hit.end:
                put(m.end(1), m.end(1), NAME_END, f"missing {NAME_END} after the tool name {m.group(1)!r}")
    return respelt(out, text, (apply_edits(text, edits), notes) if edits else None)
