"""Values written as raw text between tags (Qwen3-Coder's ``<parameter=KEY>VALUE</parameter>``, GLM's
``<arg_key>``/``<arg_value>``), a linear scanner over tags, and calls whose tags a decoder dropped. A raw value is typed
without specs only when its text is exactly what the templates write for it: a number in its canonical JSON (``42``, not
``007`` or ``1e3``), ``true``/``false``/``null`` (with ``python_literals`` the Python spellings: ``true`` is then text),
a JSON object or array, and a JSON string literal for a string that would otherwise be misread (``"42"``); anything else
is the string as written. Reading never loses text; :func:`retype_calls` then settles a value by its declared type
(``94105`` a string where the spec says string; a Python literal container where it says array or object)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.pythonic import parse_quietly
from refiner.formats.strict import JSON_DECODER, JSON_STARTS, json_head
from refiner.formats.text import dumps, skip_ws

_PYTHON_LITERALS = {"True": True, "False": False, "None": None}
_JSON_LITERALS = frozenset(("true", "false"))
_BOOLEANS = {"true": True, "True": True, "false": False, "False": False}


def read_value(text: str, python_literals: bool = False, tags: tuple[str, ...] = ()) -> Any:
    """The value a raw parameter text stands for; ``tags``: the dialect's value tags. Never raises."""
    typed = _typed(text, python_literals) if text else _TEXT
    if typed is _TEXT or (type(typed) is str and not _needs_escape(typed, python_literals, tags)):
        return text  # (a quoted text that needs no escape: the quotes are part of it)
    return typed


_TEXT = object()  # _typed's answer for a text that stands for itself


def _typed(text: str, python_literals: bool) -> Any:
    """The non-text value ``text`` is the exact rendering of, or ``_TEXT``."""
    if text[0] in JSON_STARTS:
        if python_literals and text in _JSON_LITERALS:
            return _TEXT
        try:
            value, end = JSON_DECODER.scan_once(text, 0)  # (raw_decode's scanner: StopIteration for no value)
        except (ValueError, StopIteration, RecursionError):
            return _TEXT
        exact = end == len(text) and (type(value) not in (int, float) or repr(value) == text)  # (numbers: as JSON writes)
        return value if exact else _TEXT
    return _PYTHON_LITERALS.get(text, _TEXT) if python_literals else _TEXT


def _needs_escape(s: str, python_literals: bool, tags: tuple[str, ...]) -> bool:
    """Whether a string literal's content ``s`` needs the literal: alone it would read otherwise, or holds a tag."""
    return bool(s) and (_typed(s, python_literals) is not _TEXT or any(tag in s for tag in tags)
                        or (python_literals and s in _JSON_LITERALS))  # "true": the string true, as JSON writes it


def write_value(value: Any, tags: tuple[str, ...], python_literals: bool = False) -> str:
    """The raw text :func:`read_value` reads back as ``value``: a string as it is when it reads back so and holds
    none of ``tags``, else JSON (``<`` escaped where a tag would appear). Raises ``ValueError`` / ``TypeError``."""
    if type(value) is str and not any(t in value for t in tags) and read_value(value, python_literals, tags) == value:
        return value
    if python_literals and (value is True or value is False or value is None):
        return str(value)
    text = dumps(value)
    if any(tag in text for tag in tags):
        text = text.replace("<", "\\u003c")  # "<" only occurs inside JSON strings, where the escape is the same text
    return text


def value_end(text: str, pos: int, open_tag: str, close_tag: str, ends: re.Pattern) -> int:
    """Where the ``close_tag`` ending the value at ``pos`` lies, or -1: the first outside the tag pairs the value holds
    and that ``ends`` matches at (followed by the next structural tag), as vLLM's Qwen3-Coder parser does. Linear."""
    j = ends.search(text, pos)
    if j is None:
        return -1
    if text.find(open_tag, pos, j.start() + len(open_tag) - 1) < 0:
        return j.start()
    depth = 0
    nxt_open = text.find(open_tag, pos)
    j = text.find(close_tag, pos)
    while j >= 0:
        if 0 <= nxt_open < j:  # the opening tags before this closer, counted at C speed
            n = text.count(open_tag, nxt_open, j + len(open_tag) - 1)
            depth += n
            last = text.rfind(open_tag, nxt_open, j + len(open_tag) - 1) if n > 1 else nxt_open
            nxt_open = text.find(open_tag, last + len(open_tag))
        if depth:
            depth -= 1
        elif ends.match(text, j):
            return j
        j = text.find(close_tag, j + len(close_tag))
    return -1


def followed(close_tag: str, follow: tuple[str, ...]) -> re.Pattern:
    """``close_tag`` followed, whitespace aside, by one of ``follow``."""
    return re.compile(re.escape(close_tag) + r"(?=\s*(?:" + "|".join(map(re.escape, follow)) + "))")


def write_key(key: str, plain_ok: bool) -> str:
    """A parameter name as written: plain when ``plain_ok`` and it starts with no quote, else a JSON literal."""
    if plain_ok and not key.startswith('"'):
        return key
    return dumps(key).replace("<", "\\u003c").replace(">", "\\u003e")


def read_key(text: str, default: str | None = None) -> str | None:
    """A parameter name as written, a JSON string literal decoded; ``default`` for a quote that starts no literal."""
    if not text.startswith('"'):
        return text
    head = json_head(text)
    return head[0] if head is not None and type(head[0]) is str and head[1] == len(text) else default


MAX_ATTR_CHARS = 4_096  # of an opening element read for its attributes: a longer one is not an element
MAX_UNTAGGED_LINES = 2_048  # lines of a text read as calls whose tags were dropped


def untagged_lines(text: str, start: int) -> list[tuple[int, int, str]] | None:
    """``(start, end, line)`` for each line of ``text[start:]`` stripped; ``None`` past :data:`MAX_UNTAGGED_LINES`."""
    out: list[tuple[int, int, str]] = []
    pos = skip_ws(text, start)
    stop = len(text.rstrip())
    while pos <= stop and len(out) <= MAX_UNTAGGED_LINES:
        nl = text.find("\n", pos, stop)
        e = stop if nl < 0 else nl
        out.append((pos, e, text[pos:e].removesuffix("\r")))
        if nl < 0:
            break
        pos = nl + 1
    return out if len(out) <= MAX_UNTAGGED_LINES else None


def untagged_calls(
    fmt: Any, text: str, start: int, offered: Mapping[str, Sequence[str]], mark: str, one_line: bool
) -> tuple[int, int, list[ToolCall]] | None:
    """Calls of ``fmt``'s row whose tags a decoder dropped, read by the offered tools alone: ``(start, end, calls)``
    from the first line ``NAME`` + ``mark`` of an offered tool followed by a line ``KEY`` + ``mark`` of its own; each
    call a name line, then key lines (each key once), each followed by its value: one line (``one_line``: then a
    blank line or the end closes the call), else the lines up to the next name line or unused key line (blank lines
    at its end dropped). ``None`` for any other text (a call without arguments, other lines)."""
    lines = untagged_lines(text, start)
    if lines is None:
        return None
    names = {f"{n}{mark}": n for n in offered}

    def keys_of(name: str) -> dict[str, str]:
        return {f"{k}{mark}": k for k in offered.get(name) or ()}

    i = next((k for k, (_, _, ln) in enumerate(lines[:-1]) if ln in names and lines[k + 1][2] in
              keys_of(names[ln])), None)
    if i is None:
        return None
    first, calls, end = lines[i][0], [], lines[i][1]
    while i < len(lines):
        if not lines[i][2].strip():
            i += 1
            continue
        if lines[i][2] not in names:
            return None
        name = names[lines[i][2]]
        keys = keys_of(name)
        args: dict[str, Any] = {}
        i += 1
        while i < len(lines) and lines[i][2] in keys and keys[lines[i][2]] not in args:
            key = keys[lines[i][2]]
            if one_line:
                if i + 1 == len(lines):
                    break
                value, end, j = lines[i + 1][2], lines[i + 1][1], i + 2
            else:
                j = i + 1
                while j < len(lines) and not (lines[j][2] in names or (lines[j][2] in keys and keys[lines[j][2]]
                                                                        not in args and keys[lines[j][2]] != key)):
                    j += 1
                last = j - 1
                while last > i and not lines[last][2].strip():
                    last -= 1
                value = ""  # no value line: an empty value is written as a blank line
                if last > i:
                    value, end = text[lines[i + 1][0] : lines[last][1]], lines[last][1]
            args[key] = read_value(value, fmt.spelling.python_literals, fmt.spelling.value_tags)
            i = j
        if not args or (one_line and i < len(lines) and lines[i][2].strip()):
            return None
        calls.append(ToolCall(name, args))
    return first, end, calls


class Finder:
    """The next occurrence of a few tags at or after a position, each one's searches scanning the text once while the
    positions asked for do not decrease."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._hits: dict[str, tuple[int, int]] = {}  # tag -> (searched from, hit or -1)

    def next(self, tag: str, pos: int) -> int:
        got = self._hits.get(tag)
        if got is not None:
            start, hit = got
            if start <= pos and (hit < 0 or hit >= pos):
                return hit
        hit = self.text.find(tag, pos)
        self._hits[tag] = (pos, hit)
        return hit

    def first(self, tags: Sequence[str], pos: int) -> tuple[int, str | None]:
        """``(position, tag)`` of the earliest of ``tags`` at or after ``pos``; ``(len(text), None)`` when none."""
        best, which = len(self.text), None
        for tag in tags:
            hit = self.next(tag, pos)
            if 0 <= hit < best:
                best, which = hit, tag
        return best, which


PY_LITERAL_CHARS = 8_192  # characters of Python literals parsed per retype_calls (a longer one stays text)


def retype_value(param: Any, value: Any, python_literals: bool = False, budget: list[int] | None = None) -> Any:
    """``value`` settled by the parameter's declared type where its text allows, else the same object; ``budget``:
    the characters of Python literals still to be parsed."""
    ptype = getattr(param, "type", None)
    if ptype == "string":
        if type(value) is str or value is None and getattr(param, "nullable", False):
            return value
        try:  # as written raw (a number: exactly its text; read_value types canonical numbers only)
            return write_value(value, (), python_literals)
        except (TypeError, ValueError):
            return value
    if ptype in ("object", "array") and type(value) is str and python_literals:
        want = dict if ptype == "object" else list
        return _python_container(value, want, [PY_LITERAL_CHARS] if budget is None else budget)
    if ptype == "boolean" and type(value) is str and value.strip() in _BOOLEANS:
        return _BOOLEANS[value.strip()]  # Qwen3-Coder's true (text in that dialect) for a boolean parameter
    if ptype in ("integer", "number") and type(value) is str:
        try:
            number = JSON_DECODER.decode(value.strip())
        except (ValueError, RecursionError):
            number = None
        if type(number) not in (int, float):
            return value
        if ptype == "integer" and type(number) is float:
            return int(number) if number.is_integer() and abs(number) < 2**53 else value
        return number
    return value


def _python_container(text: str, want: type, budget: list[int]) -> Any:
    """The dict or list (``want``) a Python literal stands for, as JSON values; ``text`` where it is none, holds a
    value JSON cannot (a set, bytes, ``1e999``) or passes what is left of ``budget``."""
    s = text.strip()
    if not s or s[0] not in "{[" or s[-1] not in "}]" or len(s) > budget[0]:
        return text
    budget[0] -= len(s)
    try:
        value = ast.literal_eval(parse_quietly(s))
        value = JSON_DECODER.decode(dumps(value))  # tuples -> lists; a set, bytes or an infinite number raises
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return text
    return value if type(value) is want else text


def retype_calls(
    calls: Sequence[ToolCall], tools: Mapping[str, Any], python_literals: bool = False,
    settle: Callable[[Any, Any], Any] | None = None,
) -> list[ToolCall]:
    """The calls, each argument settled by its declared type: ``settle(param, value)``, else :func:`retype_value`."""
    out = []
    budget = [PY_LITERAL_CHARS]
    for call in calls:
        params = getattr(tools.get(call.name), "params", None) or {}
        args = None  # (a copy of the arguments, made at the first value settled to another)
        for k, v in call.arguments.items():
            if k in params:
                new = settle(params[k], v) if settle else retype_value(params[k], v, python_literals, budget)
                if new is not v:
                    args = dict(call.arguments) if args is None else args
                    args[k] = new
        out.append(call if args is None else replace(call, arguments=args))
    return out
