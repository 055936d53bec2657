"""Llama 3.1 / 3.2 / 3.3 JSON tool calls: ``{"name": ..., "parameters": {...}}``, optionally after the
``<|python_tag|>`` token, several calls joined by ``;`` (Meta's chat templates, vLLM ``llama_tool_parser.py``).

A call object is ``name`` plus exactly one of ``"parameters"`` / ``"arguments"`` (some outputs write the latter), and
optionally ``"type": "function"``. Rendering writes ``"parameters"`` and joins calls with ``"; "``. Llama 3.1's
built-in tools are a Python call after the tag, ``<|python_tag|>brave_search.call(query="x")``: read as a call of the
tool before ``.call``; rendering writes a lone call of a built-in tool that way.

Text before and after the calls is allowed, but a second call object not joined to the first by ``;`` makes the text
not strictly valid (read leniently, so no call is dropped unseen). Detection claims a valid text after every tagged
format failed, and a broken one holding ``{"name", "parameters"}`` through :meth:`Llama3Json.claims_value`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, FormatError, Lenient, WireFormat
from refiner.formats.jsonfix import budget_spent, lenient_json
from refiner.formats.lenient import add_call
from refiner.formats.pythonic import matching_paren, render_call, strict_call_list
from refiner.formats.strict import JSON_DECODER, decode_at, strict_fields
from refiner.formats.text import dumps, next_bracket, reasoning_offset, skip_ws

PYTHON_TAG = "<|python_tag|>"
SEP = ";"
ARG_KEYS = ("parameters", "arguments")
# How many "{"/"[" in the prose around the calls strict parsing decodes (see _check_prose); "{" recovery reads.
MAX_CANDIDATES = 64
MAX_OBJECTS = 256
BUILTIN_TOOLS = ("brave_search", "wolfram_alpha")  # the built-ins Meta's template writes as NAME.call(...)
_BUILTIN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\.call\(")


class Llama3Json(WireFormat):
    tags = (PYTHON_TAG,)
    detection = Detection(markers=(PYTHON_TAG,), bare=True)

    def claims_value(self, value: Any) -> bool:
        return isinstance(value, dict) and "name" in value and "parameters" in value and "arguments" not in value

    def _call(self, value: Any, pos: int, index: int) -> ToolCall:
        key = "arguments" if isinstance(value, dict) and "arguments" in value and "parameters" not in value else "parameters"
        name, args, extra = strict_fields(self, value, pos, what="call", index=index, args_key=key, extra_keys=("type",))
        if key not in value:
            raise self.error(f"call #{index} has no 'parameters'", pos)
        if extra.get("type", "function") != "function":
            raise self.error(f"'type' of call #{index} must be 'function'", pos)
        return ToolCall.trusted(name, args)

    def parse_strict(self, text: str) -> list[ToolCall]:
        start = reasoning_offset(text)
        tag = text.find(PYTHON_TAG, start)
        brace = text.find("{", start)
        if tag >= 0 and (brace < 0 or tag < brace):  # (a tag quoted inside a value is text)
            self._check_prose(text, start, tag)
            pos = skip_ws(text, tag + len(PYTHON_TAG))
            if _BUILTIN.match(text, pos):
                call, end = self._builtin_call(text, pos, strict=True)
                self._check_prose(text, end, len(text))
                return [call]
            if not text.startswith("{", pos):
                raise self.error(f"{PYTHON_TAG} must be followed by a JSON call object", pos)
        else:
            pos = self._first_call(text, start)
        value, end = decode_at(self, text, pos)
        calls = [self._call(value, pos, 0)]
        while True:
            nxt = skip_ws(text, end)
            if not text.startswith(SEP, nxt):
                break
            pos = skip_ws(text, nxt + 1)
            value, end = decode_at(self, text, pos)
            calls.append(self._call(value, pos, len(calls)))
        self._check_prose(text, end, len(text))
        return calls

    def _builtin_call(self, text: str, pos: int, *, strict: bool) -> tuple[ToolCall, int]:
        """The built-in tool call ``NAME.call(...)`` at ``pos``, and where it ends; raises when it is not one (a
        parenthesis left open, arguments that are not keyword literals)."""
        m = _BUILTIN.match(text, pos)
        close = matching_paren(text, m.end() - 1, lenient_quotes=not strict)
        if close >= len(text):
            raise self.error(f"{m.group(1)}.call( is not closed", pos)
        [call] = strict_call_list(self, "[" + text[pos : close + 1] + "]", pos - 1)
        return ToolCall(m.group(1), call.arguments), close + 1

    def _first_call(self, text: str, start: int) -> int:
        """Where the first call object starts; the prose before it must hold no broken call."""
        pos = self._call_object(text, start, len(text), to_end=False)
        if pos < 0:
            raise self.error('no JSON call object {"name": ..., "parameters": {...}} found', start)
        return pos

    def _check_prose(self, text: str, a: int, b: int) -> None:
        """Raises when the prose ``text[a:b]`` around the calls holds a further call, whole or broken."""
        pos = self._call_object(text, a, b, to_end=True)
        if pos >= 0:
            raise self.error(f"a call object that is not joined to the others by {SEP!r}", pos)

    def _call_object(self, text: str, a: int, b: int, *, to_end: bool) -> int:
        """Where the first JSON object with a ``name`` key in ``text[a:b]`` starts (-1: none); raises at a ``"name"``
        key in text that does not decode before it (up to ``b`` with ``to_end``, else to where the search stopped)."""
        pos = last = a
        for _ in range(MAX_CANDIDATES):
            pos = next_bracket(text, pos)
            if pos < 0 or pos >= b:
                break
            try:
                value, end = JSON_DECODER.raw_decode(text, pos)
            except (ValueError, RecursionError):
                pos += 1
                continue
            self._check_gap(text, last, pos)
            if isinstance(value, dict) and "name" in value:
                return pos  # a call, or a broken one that _call explains
            pos = last = end
        self._check_gap(text, last, b if to_end or pos < 0 else pos)
        return -1

    def _check_gap(self, text: str, a: int, b: int) -> None:
        i = text.find('"name"', a, b)
        if i >= 0:
            raise self.error("a broken call object (a \"name\" key in text that is not JSON)", i)

    def recover(self, text: str, out: Lenient) -> None:
        body = text[reasoning_offset(text) :]
        tag, brace = body.find(PYTHON_TAG), body.find("{")
        if tag >= 0 and (brace < 0 or tag < brace):
            body = body[tag + len(PYTHON_TAG) :]
            at = skip_ws(body, 0)
            if _BUILTIN.match(body, at):
                try:
                    out.calls.append(self._builtin_call(body, at, strict=False)[0])
                except FormatError as e:
                    out.note("unreadable", f"a built-in tool call that could not be read: {e.message}")
                    if matching_paren(body, _BUILTIN.match(body, at).end() - 1, lenient_quotes=True) >= len(body):
                        out.mark_cut(None)
                return
        pos, found = 0, 0
        for n in range(MAX_OBJECTS + 1):
            pos = body.find("{", pos)
            if pos < 0:
                break
            if n == MAX_OBJECTS or budget_spent():
                out.note("gave_up", f"gave up after {n} objects")
                break
            try:
                value, end = JSON_DECODER.raw_decode(body, pos)
            except (ValueError, RecursionError):
                value, end = self._repair_one(body, pos)
            if isinstance(value, dict) and ("name" in value or any(k in value for k in ARG_KEYS)):
                found += 1
                add_call(out, value)
            pos = max(end, pos + 1)
        if not found:
            out.note("unreadable", "no JSON call object found")

    def _repair_one(self, body: str, pos: int) -> tuple[Any, int]:
        """A broken object at ``pos``: repaired up to where the next call starts (``;`` or a line break, then
        ``{"name"``) or to the end of the text."""
        nxt = _next_call_start(body, pos)
        end = len(body) if nxt < 0 else nxt
        return lenient_json(body[pos:end].rstrip().removesuffix(SEP)), end

    def render(self, calls: Sequence[ToolCall]) -> str:
        if len(calls) == 1 and calls[0].name in BUILTIN_TOOLS:
            return PYTHON_TAG + render_call(calls[0].name + ".call", dict(calls[0].arguments))
        return f"{SEP} ".join(dumps({"name": c.name, "parameters": dict(c.arguments)}) for c in calls)


_WS = frozenset(" \t\r\n")


def _next_call_start(body: str, pos: int) -> int:
    """The ``{`` after ``pos`` that starts a further call: ``;`` or a line break, then ``{"name"`` (whitespace
    between allowed); -1 when there is none among the next :data:`MAX_CANDIDATES` ``"name"`` keys. Each
    whitespace run is scanned once, so the cost is linear."""
    i = pos
    for _ in range(MAX_CANDIDATES):
        i = body.find('"name"', i + 1)
        if i < 0:
            return -1
        j = i - 1
        while j > pos and body[j] in _WS:
            j -= 1
        if j <= pos or body[j] != "{":
            continue
        k, newline = j - 1, False
        while k > pos and body[k] in _WS:
            newline = newline or body[k] == "\n"
            k -= 1
        if newline or body[k] == SEP:
            return j
    return -1
