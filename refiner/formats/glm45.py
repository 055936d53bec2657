"""GLM-4.5 / GLM-4.6 (and GLM-4.7 / GLM-5) XML tool calls: one block per call,
``<tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n...</tool_call>``.

Grammar, from the GLM-4.5 chat template and vLLM's ``glm4_moe_tool_parser.py`` / ``glm47_moe_tool_parser.py`` and
SGLang's ``glm4_moe_detector.py``:

- the tool name runs from ``<tool_call>`` to the first newline, ``<arg_key>`` or ``</tool_call>`` (GLM-4.5/4.6 write
  a newline after it, GLM-4.7 and later none: the same grammar), surrounding spaces dropped;
- then ``<arg_key>KEY</arg_key>`` / ``<arg_value>VALUE</arg_value>`` pairs, whitespace between tags free (the 4.5
  template puts newlines there); blocks are separated by a newline, reasoning (``<think>...</think>``) and prose may
  come before, prose after;
- the template writes a string value as it is and any other value as JSON (``tojson``): values are typed as
  :mod:`refiner.formats.xmlvalues` says (numbers in their canonical JSON text, ``true`` / ``false`` / ``null``,
  objects and arrays; anything else is the string exactly as written). A string that would read as something else
  (``42``, ``true``) or holds ``<arg_value>`` / ``</arg_value>`` is written as its JSON string literal (``"42"``);
  a quoted text that escapes nothing (``"exact phrase"``) is read as written. With the tool specs known,
  :meth:`Glm45.retype` settles each value by its declared type (vLLM types values by the schema the same way);
- a ``</arg_value>`` closes the value only when ``<arg_key>`` or ``</tool_call>`` follows it (whitespace aside) and
  it does not close an ``<arg_value>`` the value quotes itself: a value quoting the tags is read whole, and one whose
  ``</arg_value>`` was lost (the next pair follows inside it) is not valid; a parameter given twice is an error.

Shares ``<tool_call>`` with ``qwen3_coder``, ``hermes`` and ``apibank``: it ranks after ``qwen3_coder`` and before
the JSON formats, and :meth:`Glm45.sniff` claims a block that opens with a tool name rather than JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat, register
from refiner.formats.text import reasoning_offset, skip_ws
from refiner.formats.xmlvalues import Finder, read_key, read_value, retype_calls, value_end, write_key, write_value

OPEN, CLOSE = "<tool_call>", "</tool_call>"
KEY, KEY_END = "<arg_key>", "</arg_key>"
VAL, VAL_END = "<arg_value>", "</arg_value>"
VALUE_TAGS = (VAL, VAL_END)  # a string holding one of these is written as a JSON string literal
# A tool name: words of characters other than whitespace, angle brackets, braces and quotes, single spaces between.
NAME_PATTERN = r"[^\s<>{}\"']+(?: [^\s<>{}\"']+)*"
_NAME = re.compile(NAME_PATTERN)
MAX_RECOVERED_CALLS = 1024
DETECT_CHARS = 2_000


def _is_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


@register
class Glm45(WireFormat):
    name = "glm45"
    description = (
        "GLM-4.5/4.6: <tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n</tool_call> per "
        "call (strings raw, other values JSON)"
    )
    tags = (OPEN, KEY, KEY_END, VAL, VAL_END, CLOSE)
    detection = Detection(rank=52, markers=(OPEN, KEY), closers=(KEY_END, VAL_END))
    name_pattern = NAME_PATTERN
    example = (
        "<think>Two independent calls.</think>\n"
        "<tool_call>search_flights\n<arg_key>origin</arg_key>\n<arg_value>New York</arg_value>\n"
        "<arg_key>destination</arg_key>\n<arg_value>London</arg_value>\n<arg_key>date</arg_key>\n"
        "<arg_value>2024-08-15</arg_value>\n<arg_key>max_stops</arg_key>\n<arg_value>1</arg_value>\n</tool_call>\n"
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>London</arg_value>\n<arg_key>days</arg_key>\n"
        "<arg_value>3</arg_value>\n<arg_key>units</arg_key>\n<arg_value>metric</arg_value>\n</tool_call>"
    )

    # Detection

    def sniff(self, body: str, at: int) -> bool:
        """A ``<tool_call>`` block that opens with a tool name (then a newline, ``<arg_key>`` or the block's end), or
        holds ``<arg_key>``; not one that opens with JSON or ``<function=``. A bare ``<arg_key>`` is this format's."""
        if not body.startswith(OPEN, at):
            return True
        k = skip_ws(body, at + len(OPEN))
        seg = body[k : k + DETECT_CHARS]
        if seg.startswith(KEY):
            return True
        if not seg or seg[0] in "{[\"'<":
            return False
        block, closed, _ = seg.partition(CLOSE)
        if KEY in block:
            return True
        if not closed:
            return False  # a name line alone, never closed: prose mentioning the tag, not a call
        nl = block.find("\n")
        e = nl if nl >= 0 else len(block)
        rest = block[e:].strip()
        return _is_name(block[:e].strip()) and not rest

    # Strict

    def parse_strict(self, text: str) -> list[ToolCall]:
        start = reasoning_offset(text)
        i = text.find(OPEN, start)
        if i < 0:
            raise self.error(f"no {OPEN}...{CLOSE} block", start)
        f = Finder(text)
        calls = []
        while i >= 0:
            pos = i + len(OPEN)
            e, _ = f.first(("\n", KEY, CLOSE), pos)
            name = text[pos:e].strip()
            if not _is_name(name):
                raise self.error(f"tool name {name[:60]!r} is not allowed", pos)
            pos = e
            args: dict[str, Any] = {}
            while True:
                pos = skip_ws(text, pos)
                if text.startswith(CLOSE, pos):
                    pos += len(CLOSE)
                    break
                if not text.startswith(KEY, pos):
                    if pos >= len(text):
                        raise self.error(f"missing {CLOSE}", pos)
                    raise self.error(f"expected {KEY} or {CLOSE}, got {text[pos : pos + 30]!r}", pos)
                pos += len(KEY)
                j = f.next(KEY_END, pos)
                if j < 0:
                    raise self.error(f"missing {KEY_END}", pos)
                key = read_key(text[pos:j])
                if key is None:
                    raise self.error("a quoted parameter name is not a JSON string", pos)
                if key in args:
                    raise self.error(f"parameter {key!r} of {name!r} given twice", pos)
                pos = skip_ws(text, j + len(KEY_END))
                if not text.startswith(VAL, pos):
                    raise self.error(f"expected {VAL} after the {key!r} key, got {text[pos : pos + 30]!r}", pos)
                pos += len(VAL)
                end = self._value_end(text, pos)
                args[key] = read_value(text[pos:end], tags=VALUE_TAGS)
                pos = end + len(VAL_END)
            calls.append(ToolCall.trusted(name, args))
            i = text.find(OPEN, pos)
        return calls

    def _value_end(self, text: str, pos: int) -> int:
        end = value_end(text, pos, VAL, VAL_END, (KEY, CLOSE))
        if end < 0:
            j = text.find(VAL_END, pos)
            if j >= 0 and skip_ws(text, j + len(VAL_END)) == len(text):
                raise self.error(f"missing {CLOSE}", len(text))
            raise self.error(f"unclosed value (no {VAL_END} followed by {KEY} or {CLOSE})", pos)
        return end

    # Lenient

    def recover(self, text: str, out: Lenient) -> None:
        f = Finder(text)
        pos = reasoning_offset(text)
        first_key = f.next(KEY, pos)
        for n in range(MAX_RECOVERED_CALLS + 1):
            o = f.next(OPEN, pos)
            if o < 0:
                if n == 0:
                    out.note("missing_tag", f"no {OPEN} found")
                    if first_key >= 0:
                        out.note("no_name", f"arguments without a {OPEN}NAME line: no call can be named")
                return
            if n == 0 and 0 <= first_key < o:
                out.note("unreadable", f"arguments before the first {OPEN} dropped")
            if n == MAX_RECOVERED_CALLS:
                out.note("gave_up", f"gave up after {n} calls")
                return
            pos = self._recover_call(text, o + len(OPEN), f, out)

    def _recover_call(self, text: str, pos: int, f: Finder, out: Lenient) -> int:
        e, _ = f.first(("\n", KEY, CLOSE, OPEN), pos)
        name = text[pos:e].strip()
        if not name:
            out.note("no_name", f"a {OPEN} block without a tool name")
        elif not _is_name(name):
            out.note("bad_name", f"tool name {name[:60]!r} is not allowed")
        pos = e
        args: dict[str, Any] = {}
        closed = False
        while pos < len(text):
            pos = skip_ws(text, pos)
            if text.startswith(CLOSE, pos):
                pos += len(CLOSE)
                closed = True
                break
            if text.startswith(KEY, pos):
                pos = self._recover_pair(text, pos + len(KEY), f, args, out)
                continue
            nxt, tag = f.first((KEY, CLOSE, OPEN), pos)
            if tag == KEY:
                out.note("unreadable", f"text skipped in call {name!r}: {text[pos:nxt][:60]!r}")
                pos = nxt
                continue
            if tag == CLOSE:
                out.note("unreadable", f"text skipped in call {name!r}: {text[pos:nxt][:60]!r}")
                pos = nxt + len(CLOSE)
                closed = True
            else:
                pos = nxt
            break
        if not closed:
            out.note("missing_tag", f"missing {CLOSE} after call {name!r}")
            if not args:  # nothing but a name line: a cut text or prose mentioning the tag, not a call
                out.note("unreadable", f"a {OPEN} with neither arguments nor {CLOSE} dropped: {name[:60]!r}")
                return pos
        if name:
            out.calls.append(ToolCall(name, args))
        return pos

    def _recover_pair(self, text: str, pos: int, f: Finder, args: dict, out: Lenient) -> int:
        j, tag = f.first((KEY_END, VAL, "\n", CLOSE, OPEN), pos)
        raw = text[pos:j]
        key = read_key(raw)
        key = raw.strip() if key is None else key
        if tag == KEY_END:
            pos = skip_ws(text, j + len(KEY_END))
        else:
            out.note("missing_tag", f"missing {KEY_END} after key {key[:40]!r}")
            pos = skip_ws(text, j)
        if text.startswith(VAL, pos):
            vstart = pos + len(VAL)
        else:  # the <arg_value> tag was lost: the value is the text up to the next tag
            out.note("missing_tag", f"missing {VAL} after key {key[:40]!r}")
            vstart = pos
            nxt, _ = f.first((VAL_END, KEY, CLOSE, OPEN), pos)
            if not text[pos:nxt].strip():
                out.note("bad_argument", f"key {key[:40]!r} without a value dropped")
                return nxt + len(VAL_END) if text.startswith(VAL_END, nxt) else nxt
        close = f.next(VAL_END, vstart)
        stop, tag = f.first((KEY, CLOSE, OPEN), vstart)
        if 0 <= close <= stop:
            raw_value, after = text[vstart:close], close + len(VAL_END)
        else:
            raw_value, after = text[vstart:stop], stop
            if tag is None:
                out.note("unclosed", f"value of {key[:40]!r} cut short")
            else:
                out.note("missing_tag", f"missing {VAL_END} after the value of {key[:40]!r}")
                raw_value = raw_value.rstrip()  # the newline the template puts before the next tag
        if key in args:
            out.note("bad_argument", f"parameter {key[:40]!r} given twice: the last value kept")
        args[key] = read_value(raw_value, tags=VALUE_TAGS)
        return after

    # Render

    def render(self, calls: Sequence[ToolCall]) -> str:
        blocks = []
        for c in calls:
            parts = [f"{OPEN}{c.name}\n"]
            for k, v in c.arguments.items():
                key = write_key(k, KEY_END not in k)
                parts.append(f"{KEY}{key}{KEY_END}\n{VAL}{write_value(v, VALUE_TAGS)}{VAL_END}\n")
            parts.append(CLOSE)
            blocks.append("".join(parts))
        return "\n".join(blocks)

    # Typing by the tool specs

    def retype(self, calls: Sequence[ToolCall], tools: Mapping[str, Any]) -> list[ToolCall]:
        return retype_calls(calls, tools)
