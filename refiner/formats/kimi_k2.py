"""Kimi-K2 tool calls: ``<|tool_calls_section_begin|>``, then per call
``<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>``, then
``<|tool_calls_section_end|>``.

The call id is ``functions.`` + the tool name + ``:`` + an index counted over the conversation; the name is what lies
between ``functions.`` and the last ``:`` (dots kept). Render numbers the calls from 0. The arguments are one JSON
object, decoded before the closing token is looked for. Whitespace between the tokens is free; prose (and reasoning)
may come before the section, anything after it.

Recovery also reads ids without ``functions.`` or without an index, the singular ``<|tool_call_section_begin|>``, and
calls whose section or end tokens were lost. An id that names no tool (``0``, ``functions.invalid.0``) is the offered
tool's when only one is offered, else left out; either way reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from refiner.calls import ToolCall
from refiner.formats.bare import IDENTIFIER, bare_calls
from refiner.formats.base import NAME_PATTERN, Detection, Lenient, WireFormat, offered_tools
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.lenient import TokenFinder, add_arguments_call, past_strings
from refiner.formats.strict import decode_at, token_sections
from refiner.formats.tags import respell_tokens
from refiner.formats.text import dumps, reasoning_offset, skip_ws
from refiner.formats.xmlvalues import Finder

SECTION_BEGIN, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
SECTION_BEGIN_1, SECTION_END_1 = "<|tool_call_section_begin|>", "<|tool_call_section_end|>"  # singular variants
CALL_BEGIN, ARG_BEGIN, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
PREFIX = "functions."
_NAME = re.compile(NAME_PATTERN)
_INDEX = re.compile(r"[0-9]+")
# A call whose tokens were all lost: its whole id, then its arguments (functions.NAME:0{...}).
_BARE_ID = re.compile(rf"{re.escape(PREFIX)}({IDENTIFIER}):[0-9]+(?=\{{)")


def _is_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


# What K2 writes in place of a name it could not give: the index alone, or "invalid" (with its index after a dot).
_NO_NAME = re.compile(r"(?:invalid)?(?:\.?[0-9]+)?")


def named_tool(call_id: str, name: str, out: Lenient) -> str | None:
    """The tool a call id names, or, for an id that names none (:data:`_NO_NAME`), the one tool offered; ``None``
    (reported) when there is no such tool."""
    if _NO_NAME.fullmatch(name) is None:
        return name
    tools = offered_tools()
    if tools is not None and len(tools) == 1:
        only = next(iter(tools))
        out.note("bad_name", f"call id {call_id[:60]!r} names no tool; read as the one tool offered, {only!r}")
        return only
    out.note("unnamed_call", f"call id {call_id[:60]!r} names no tool")
    return None


def split_id(call_id: str) -> tuple[str, str | None, bool]:
    """``(name, index or None, had the functions. prefix)`` of a call id such as ``functions.get_weather:0``."""
    had_prefix = call_id.startswith(PREFIX)
    rest = call_id[len(PREFIX) :] if had_prefix else call_id
    name, colon, index = rest.rpartition(":")
    if not colon or _INDEX.fullmatch(index) is None:
        return rest, None, had_prefix
    return name, index, had_prefix


class KimiK2(WireFormat):
    tags = (SECTION_BEGIN, CALL_BEGIN, ARG_BEGIN, CALL_END, SECTION_END)
    detection = Detection(
        markers=(SECTION_BEGIN, SECTION_BEGIN_1, CALL_BEGIN, ARG_BEGIN),
        closers=(CALL_END, SECTION_END, SECTION_END_1),
    )
    name_pattern = NAME_PATTERN

    # Strict

    def parse_strict(self, text: str) -> list[ToolCall]:
        return token_sections(self, text, SECTION_BEGIN, CALL_BEGIN, SECTION_END, self._call)

    def _call(self, text: str, pos: int) -> tuple[ToolCall, int]:
        j = text.find(ARG_BEGIN, pos)
        if j < 0:
            raise self.error(f"missing {ARG_BEGIN}", pos)
        call_id = text[pos:j].strip()
        name, index, had_prefix = split_id(call_id)
        if not had_prefix or index is None:
            raise self.error(f"call id {call_id[:60]!r} is not functions.NAME:INDEX", pos)
        if not _is_name(name):
            raise self.error(f"tool name {name[:60]!r} is not allowed", pos)
        at = skip_ws(text, j + len(ARG_BEGIN))
        args, end = decode_at(self, text, at)
        if type(args) is not dict:
            raise self.error(f"the arguments of {name!r} must be a JSON object, got {type(args).__name__}", at)
        end = skip_ws(text, end)
        if not text.startswith(CALL_END, end):
            raise self.error(f"expected {CALL_END} after the arguments of {name!r}, got {text[end : end + 30]!r}", end)
        return ToolCall.trusted(name, args), end + len(CALL_END)

    # Lenient

    def recover(self, text: str, out: Lenient) -> None:
        text = respell_tokens(text, (*self.tags, SECTION_BEGIN_1, SECTION_END_1), out)
        start = reasoning_offset(text)
        f = Finder(text)
        strings = TokenFinder(text, (CALL_END, CALL_BEGIN, SECTION_END, SECTION_END_1))
        section = min((h for h in (f.next(SECTION_BEGIN, start), f.next(SECTION_BEGIN_1, start)) if h >= 0), default=-1)
        first = f.next(CALL_BEGIN, start)
        if section < 0 or (0 <= first < section):
            out.note("missing_tag", f"missing {SECTION_BEGIN}")
        elif f.next(SECTION_BEGIN, start) != section:
            out.note("missing_tag", f"{SECTION_BEGIN_1} written for {SECTION_BEGIN}")
        pos = start
        for n in range(MAX_RECOVERED_ITEMS + 1):
            c = f.next(CALL_BEGIN, pos)
            a = f.next(ARG_BEGIN, pos)
            if c < 0 and a < 0:
                if n == 0 and not bare_calls(text, start, out, _BARE_ID):  # every token lost: functions.NAME:0{...}
                    out.note("missing_tag", f"no {CALL_BEGIN} found")
                break
            if not take_items(1):  # (the parse's count of items read: a gave_up problem)
                return
            if c >= 0 and (a < 0 or c < a):
                pos = self._recover_call(text, c + len(CALL_BEGIN), f, out, strings)
            else:  # an argument block whose <|tool_call_begin|> was lost: its id is the text just before it
                out.note("missing_tag", f"missing {CALL_BEGIN}")
                line = max(text.rfind("\n", pos, a), text.rfind(">", pos, a)) + 1
                pos = self._recover_call(text, max(pos, line), f, out, strings)
        if f.next(SECTION_END, start) < 0 and f.next(SECTION_END_1, start) < 0:
            out.note("missing_tag", f"missing {SECTION_END}")

    def _recover_call(self, text: str, pos: int, f: Finder, out: Lenient, strings: TokenFinder) -> int:
        end, tag = past_strings(strings, pos, *f.first((CALL_END, CALL_BEGIN, SECTION_END, SECTION_END_1), pos))
        seg = text[pos:end]
        if tag is None:
            out.note("unclosed", f"a call cut short: {seg[:60]!r}")
        elif tag != CALL_END:
            out.note("missing_tag", f"missing {CALL_END} after {seg[:60]!r}")
        after = end + len(CALL_END) if tag == CALL_END else end
        head, sep, body = seg.partition(ARG_BEGIN)
        if tag is None and not sep:
            out.note("unclosed", f"the text ends inside a call id: {seg[:60]!r}")
            out.mark_cut(None)
            return after
        if not sep:
            brace = seg.find("{")
            head, body = (seg, "") if brace < 0 else (seg[:brace], seg[brace:])
            out.note("missing_tag", f"missing {ARG_BEGIN} in {seg[:60]!r}")
        call_id = head.strip()
        name, index, had_prefix = split_id(call_id)
        name = name.strip()
        if not name:
            out.note("no_name", f"a call without a tool name: {seg[:60]!r}")
            if tag is None:
                out.mark_cut(None)
            return after
        resolved = named_tool(call_id, name, out)
        if resolved is None:
            if tag is None:
                out.mark_cut(None)
            return after
        if resolved == name and (not had_prefix or index is None):
            out.note("bad_name", f"call id {call_id[:60]!r} is not functions.NAME:INDEX")
        if not _is_name(resolved):
            out.note("bad_name", f"tool name {resolved[:60]!r} is not allowed")
        add_arguments_call(out, resolved, body, at_end=tag is None)
        return after

    # Render

    def render(self, calls: Sequence[ToolCall]) -> str:
        items = "".join(
            f"{CALL_BEGIN}{PREFIX}{c.name}:{i}{ARG_BEGIN}{dumps(dict(c.arguments))}{CALL_END}" for i, c in enumerate(calls)
        )
        return f"{SECTION_BEGIN}{items}{SECTION_END}"
