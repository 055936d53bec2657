"""Qwen3-Coder (and Qwen3.5) XML tool calls: one block per call,
``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>``.

Grammar, from the model's chat template and vLLM's ``qwen3coder_tool_parser.py`` / SGLang's
``qwen3_coder_detector.py``:

- blocks are separated by a newline (any text between blocks is allowed, as is prose before the first and after the
  last, and a ``<think>`` block before them); whitespace between the tags is free;
- a value is the text between ``<parameter=KEY>`` and its ``</parameter>``, less one newline at each end (the
  template writes one each side; both parsers strip them). A ``</parameter>`` closes the value only when a
  ``<parameter=`` or ``</function>`` follows it (whitespace aside) and it does not close a parameter block the value
  quotes itself (one opened at the start of a line), as in vLLM's parser: code holding the tags is read whole, and a
  value whose ``</parameter>`` was lost (the next parameter follows inside it) is not valid;
- values are typed as :mod:`refiner.formats.xmlvalues` says: strings raw, numbers in their canonical JSON text,
  booleans and null as ``True`` / ``False`` / ``None`` (the template's ``| string``; ``true`` / ``false`` / ``null``
  are read too), objects and arrays as JSON. A string that would read as something else (``42``, ``True``,
  ``{"a": 1}``) or holds ``<parameter=`` / ``</parameter>`` is written as its JSON string literal (``"42"``); a
  quoted text that escapes nothing (``"exact phrase"``) is read as written, quotes and all. With the tool specs
  known, :meth:`QwenCoder.retype` settles each value by its declared type (the gate calls it), as the published
  parsers do;
- a parameter name is written as it is, or as a JSON string literal when it holds ``>`` or a newline (never in
  practice); a name given twice is an error.

Shares ``<tool_call>`` with ``hermes`` and ``apibank``: it ranks before them and :meth:`QwenCoder.sniff` claims a
block only when ``<function=`` opens it. Recovery reads cut texts, lost tags (vLLM's fallbacks: a value ends at the
next ``<parameter=`` or ``</function>``) and JSON arguments written inside the function tags
(``<function=NAME>{...}</function>``, as Llama 3.1 writes calls).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat, register
from refiner.formats.jsonfix import lenient_json
from refiner.formats.strict import JSON_DECODER
from refiner.formats.text import reasoning_offset, skip_ws
from refiner.formats.xmlvalues import (
    Finder,
    read_key,
    read_value,
    retype_calls,
    strip_one_newline,
    value_end,
    write_key,
    write_value,
)

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FUNC, FUNC_END = "<function=", "</function>"
PARAM, PARAM_END = "<parameter=", "</parameter>"
VALUE_TAGS = (PARAM, PARAM_END)  # a string holding one of these is written as a JSON string literal
# A tool name: no whitespace, no angle brackets, quotes or braces (vLLM's parser rejects the same).
NAME_PATTERN = r"[^\s<>{}\"']+"
# Recovery reads at most this many calls.
MAX_RECOVERED_CALLS = 1024
DETECT_CHARS = 2_000  # of text after a marker read to tell this format from others sharing it


def _is_name(name: str) -> bool:
    return bool(name) and not any(c.isspace() or c in "<>{}\"'" for c in name)


@register
class QwenCoder(WireFormat):
    name = "qwen3_coder"
    description = (
        "Qwen3-Coder XML: <tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n"
        "</tool_call> per call (strings raw, other values JSON)"
    )
    tags = (OPEN, FUNC, PARAM, PARAM_END, FUNC_END, CLOSE)
    detection = Detection(rank=51, markers=(OPEN, FUNC, PARAM), closers=(PARAM_END, FUNC_END))
    name_pattern = NAME_PATTERN
    example = (
        "<tool_call>\n<function=search_flights>\n<parameter=origin>\nNew York\n</parameter>\n"
        "<parameter=destination>\nLondon\n</parameter>\n<parameter=date>\n2024-08-15\n</parameter>\n"
        "<parameter=max_stops>\n1\n</parameter>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nLondon\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n<parameter=units>\nmetric\n</parameter>\n</function>\n</tool_call>"
    )

    # Detection

    def sniff(self, body: str, at: int) -> bool:
        """A ``<tool_call>`` whose block opens with ``<function=``; a bare ``<function=NAME>`` followed by a
        ``<parameter=`` or ``</function>`` (not by JSON, as in Llama's ``<function=NAME>{...}``); a bare
        ``<parameter=``."""
        if body.startswith(OPEN, at):
            return body.startswith(FUNC, skip_ws(body, at + len(OPEN)))
        if body.startswith(FUNC, at):
            close = body.find(">", at, at + DETECT_CHARS)
            if close < 0:
                return True  # cut inside the name: nothing else writes "<function=" without JSON after it
            k = skip_ws(body, close + 1)
            return k >= len(body) or body.startswith(PARAM, k) or body.startswith(FUNC_END, k)
        return True

    # Strict

    def parse_strict(self, text: str) -> list[ToolCall]:
        start = reasoning_offset(text)
        i = text.find(OPEN, start)
        if i < 0:
            raise self.error(f"no {OPEN}...{CLOSE} block", start)
        calls = []
        while i >= 0:
            pos = skip_ws(text, i + len(OPEN))
            if not text.startswith(FUNC, pos):
                raise self.error(f"expected {FUNC}NAME> after {OPEN}, got {text[pos : pos + 30]!r}", pos)
            name, pos = self._name(text, pos + len(FUNC))
            args: dict[str, Any] = {}
            while True:
                pos = skip_ws(text, pos)
                if text.startswith(FUNC_END, pos):
                    pos += len(FUNC_END)
                    break
                if not text.startswith(PARAM, pos):
                    if pos >= len(text):
                        raise self.error(f"missing {FUNC_END}", pos)
                    raise self.error(f"expected {PARAM}KEY> or {FUNC_END}, got {text[pos : pos + 30]!r}", pos)
                key, pos = self._key(text, pos + len(PARAM))
                if key in args:
                    raise self.error(f"parameter {key!r} of {name!r} given twice", pos)
                end = self._value_end(text, pos)
                args[key] = read_value(strip_one_newline(text[pos:end]), True, VALUE_TAGS)
                pos = end + len(PARAM_END)
            pos = skip_ws(text, pos)
            if not text.startswith(CLOSE, pos):
                if pos >= len(text):
                    raise self.error(f"missing {CLOSE}", pos)
                raise self.error(f"unexpected text {text[pos : pos + 30]!r} before {CLOSE}", pos)
            calls.append(ToolCall.trusted(name, args))
            i = text.find(OPEN, pos + len(CLOSE))
        return calls

    def _name(self, text: str, pos: int) -> tuple[str, int]:
        j = text.find(">", pos)
        if j < 0:
            raise self.error(f"unclosed {FUNC}", pos)
        name = text[pos:j]
        if not _is_name(name):
            raise self.error(f"tool name {name[:60]!r} is not allowed (no spaces, quotes or brackets)", pos)
        return name, j + 1

    def _key(self, text: str, pos: int) -> tuple[str, int]:
        if text.startswith('"', pos):  # a name written as a JSON string literal
            try:
                key, end = JSON_DECODER.raw_decode(text, pos)
            except (ValueError, RecursionError):
                raise self.error("a quoted parameter name is not a JSON string", pos) from None
            if type(key) is not str or not text.startswith(">", end):
                raise self.error(f"expected > after the quoted parameter name at {end}", pos)
            return key, end + 1
        j = text.find(">", pos)
        if j < 0:
            raise self.error(f"unclosed {PARAM}", pos)
        key = text[pos:j]
        if "\n" in key:
            raise self.error(f"a parameter name runs over a line: {key[:40]!r}", pos)
        return key, j + 1

    def _value_end(self, text: str, pos: int) -> int:
        """Where the ``</parameter>`` that closes the value starting at ``pos`` lies: the first one followed by
        another parameter or the end of the function, outside any parameter block the value quotes (one opened at
        the start of a line, as vLLM's parser counts them)."""
        end = value_end(text, pos, "\n" + PARAM, PARAM_END, (PARAM, FUNC_END))
        if end < 0:
            j = text.find(PARAM_END, pos)
            if j >= 0 and skip_ws(text, j + len(PARAM_END)) == len(text):
                raise self.error(f"missing {FUNC_END}", len(text))
            raise self.error(f"unclosed parameter value (no {PARAM_END} followed by {PARAM} or {FUNC_END})", pos)
        return end

    # Lenient

    def recover(self, text: str, out: Lenient) -> None:
        f = Finder(text)
        pos = reasoning_offset(text)
        for n in range(MAX_RECOVERED_CALLS + 1):
            fs = f.next(FUNC, pos)
            if fs < 0:
                if n == 0:
                    out.note("missing_tag", f"no {FUNC}NAME> found")
                return
            if n == MAX_RECOVERED_CALLS:
                out.note("gave_up", f"gave up after {n} calls")
                return
            o = f.next(OPEN, pos)
            if o < 0 or o > fs:
                out.note("missing_tag", f"missing {OPEN} before call #{n + 1}")
            elif skip_ws(text, o + len(OPEN)) != fs:
                out.note("unreadable", f"text skipped before {FUNC}: {text[o + len(OPEN) : fs][:60]!r}")
            pos = self._recover_call(text, fs + len(FUNC), f, out)

    def _recover_call(self, text: str, pos: int, f: Finder, out: Lenient) -> int:
        name_end, which = f.first((">", "\n"), pos)
        name = text[pos:name_end].strip()
        pos = name_end + 1 if which == ">" else name_end
        if which is None:  # cut inside the name: no call can be trusted
            out.note("unclosed", f"the text ends inside the tool name {name[:60]!r}")
            return pos
        if which != ">":
            out.note("missing_tag", f"the {FUNC}{name}> tag is not closed")
        if not _is_name(name):
            out.note("bad_name" if name else "no_name", f"tool name {name[:60]!r} is not allowed")
        args: dict[str, Any] = {}
        closed = False
        while pos < len(text):
            pos = skip_ws(text, pos)
            if text.startswith(FUNC_END, pos):
                pos += len(FUNC_END)
                closed = True
                break
            if text.startswith(PARAM, pos):
                pos = self._recover_param(text, pos + len(PARAM), f, args, out)
                continue
            nxt, tag = f.first((PARAM, FUNC_END, FUNC, CLOSE, OPEN), pos)
            junk = text[pos:nxt]
            value = lenient_json(junk) if junk.startswith("{") and not args else None
            if isinstance(value, dict):  # JSON arguments inside the function tags (Llama 3.1 writes calls this way)
                out.note("missing_tag", f"arguments of {name!r} written as JSON instead of {PARAM}KEY> tags")
                args.update((str(k), v) for k, v in value.items())
            elif tag in (PARAM, FUNC_END) or junk.strip():
                out.note("unreadable", f"text skipped in call {name!r}: {junk[:60]!r}")
            pos = nxt
            if tag not in (PARAM, FUNC_END):
                break
        if not closed:
            out.note("missing_tag", f"missing {FUNC_END} in call {name!r}")
        k = skip_ws(text, pos)
        if text.startswith(CLOSE, k):
            pos = k + len(CLOSE)
        else:
            out.note("missing_tag", f"missing {CLOSE} after call {name!r}")
        if name:
            out.calls.append(ToolCall(name, args))
        return pos

    def _recover_param(self, text: str, pos: int, f: Finder, args: dict, out: Lenient) -> int:
        key_end, which = f.first((">", "\n"), pos)
        raw_key = text[pos:key_end]
        key = read_key(raw_key)
        key = raw_key.strip() if key is None else key
        if which != ">":
            out.note("missing_tag", f"the {PARAM}{key[:40]}> tag is not closed")
            vstart = key_end
        else:
            vstart = key_end + 1
        # the value ends at its closing tag, unless a new parameter (on a new line) or the end of the function or
        # block comes first (the closing tag was lost), or at the end of the text (cut short)
        close = f.next(PARAM_END, vstart)
        stop, tag = f.first(("\n" + PARAM, FUNC_END, CLOSE, OPEN), vstart)
        if 0 <= close <= stop:
            end, after = close, close + len(PARAM_END)
        else:
            end, after = stop, stop
            if tag is None:
                out.note("unclosed", f"parameter {key[:40]!r} cut short")
            else:
                out.note("missing_tag", f"missing {PARAM_END} after parameter {key[:40]!r}")
        if key in args:
            out.note("bad_argument", f"parameter {key[:40]!r} given twice: the last value kept")
        args[key] = read_value(strip_one_newline(text[vstart:end]), True, VALUE_TAGS)
        return after

    # Render

    def render(self, calls: Sequence[ToolCall]) -> str:
        blocks = []
        for c in calls:
            lines = [f"{OPEN}\n{FUNC}{c.name}>"]
            for k, v in c.arguments.items():
                key = write_key(k, ">" not in k and "\n" not in k and "\r" not in k)
                lines.append(f"{PARAM}{key}>\n{write_value(v, VALUE_TAGS, python_literals=True)}\n{PARAM_END}")
            lines.append(f"{FUNC_END}\n{CLOSE}")
            blocks.append("\n".join(lines))
        return "\n".join(blocks)

    # Typing by the tool specs

    def retype(self, calls: Sequence[ToolCall], tools: Mapping[str, Any]) -> list[ToolCall]:
        return retype_calls(calls, tools, python_literals=True)
