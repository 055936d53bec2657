"""Helpers for the XML-style dialects (Qwen3-Coder's ``<parameter=KEY>VALUE</parameter>``, GLM's
``<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>``): argument values written as raw text between tags, and a
linear scanner over tags.

Typing a raw value (:func:`read_value`), without tool specs and deterministically: the chat templates write a
string as it is and anything else as JSON (GLM: ``tojson``; Qwen3-Coder: ``tojson`` for objects and arrays,
Python's ``str`` for numbers, booleans and ``None``). A value is read as a non-string only when its text is exactly
what the template writes for that value:

- a number whose text is its canonical JSON (``42``, ``-1.5``, ``1e+16``); ``007``, ``12.50``, ``1e3`` or ``-0``
  stay text, so a number read back to text is exactly what was written;
- ``true`` / ``false`` / ``null``; for a dialect whose template writes Python's spellings (Qwen3-Coder's
  ``| string``: ``python_literals``) also ``True`` / ``False`` / ``None``, and there ``true`` / ``false`` are text
  (what the template writes for the *string* ``"true"``), which the tool spec settles: a boolean parameter's
  ``true`` is ``True``, a string parameter's stays ``"true"`` (never ``"True"``); ``null`` is ``None`` (as vLLM's
  parser reads it whatever the type);
- a JSON object or array (any layout);
- a JSON string literal only where it escapes a string that would otherwise be misread: ``"42"`` is the string
  ``42``, ``"{\\"a\\": 1}"`` the string ``{"a": 1}``; a quoted text that needs no escape stays as written, quotes
  and all (``"machine learning"``, an exact-phrase query, as vLLM keeps it for a string parameter);
- anything else is the string, exactly as written (no stripping beyond what the dialect's parser strips).

So reading never loses text, and :func:`retype_calls` can settle a value by the tool's declared type exactly:
``94105`` read as a number is the string ``"94105"`` where the spec says string, ``12.50`` read as text is the
number 12.5 where it says number (vLLM's and SGLang's parsers type these values by the tool schema the same way;
without one they keep every value a string). :func:`write_value` writes a string raw when it reads back as itself,
else as its JSON string literal, with ``<`` escaped as ``\\u003c`` where one of the dialect's tags would appear.
In the dialects that write Python's spellings, a list or object the template wrote with ``| string``
(``{'a': True}``) is read by ``ast.literal_eval`` where the spec declares an array or object (as vLLM's Seed-OSS
parser does), as JSON values only (no set, bytes or infinite number).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Lenient
from refiner.formats.pythonic import parse_quietly
from refiner.formats.strict import JSON_DECODER
from refiner.formats.text import dumps, skip_ws

_PYTHON_LITERALS = {"True": True, "False": False, "None": None}
_JSON_LITERALS = frozenset(("true", "false"))
_BOOLEANS = {"true": True, "True": True, "false": False, "False": False}
_JSON_STARTS = frozenset('{["-0123456789tfn')


def read_value(text: str, python_literals: bool = False, tags: tuple[str, ...] = ()) -> Any:
    """The value a raw parameter text stands for (see the module doc); ``tags``: the dialect's value tags, which a
    string holding them is escaped for. Never raises."""
    if not text:
        return text
    typed = _typed(text, python_literals)
    if typed is not _TEXT:
        if type(typed) is str and not _needs_escape(typed, python_literals, tags):
            return text  # a quoted text that needs no escape: the quotes are part of it
        return typed
    return text


_TEXT = object()  # _typed's answer for a text that stands for itself


def _typed(text: str, python_literals: bool) -> Any:
    """The non-text value ``text`` is the exact rendering of (a JSON string literal's content included), or
    ``_TEXT``."""
    if text[0] in _JSON_STARTS:
        if python_literals and text in _JSON_LITERALS:
            return _TEXT
        try:
            value, end = JSON_DECODER.raw_decode(text, 0)
        except (ValueError, RecursionError):
            return _TEXT
        if end != len(text):
            return _TEXT
        t = type(value)
        if t is int or t is float:
            return value if dumps(value) == text else _TEXT
        return value
    if python_literals and text in _PYTHON_LITERALS:
        return _PYTHON_LITERALS[text]
    return _TEXT


def _needs_escape(s: str, python_literals: bool, tags: tuple[str, ...]) -> bool:
    """Whether the content ``s`` of a JSON string literal is one the literal escapes: ``s`` alone would read as a
    non-text value or as a JSON string literal, or it holds one of the dialect's tags."""
    return bool(s) and (_typed(s, python_literals) is not _TEXT or any(tag in s for tag in tags)
                        or (python_literals and s in _JSON_LITERALS))  # "true": the string true, as JSON writes it


def write_value(value: Any, tags: tuple[str, ...], python_literals: bool = False) -> str:
    """The raw text of an argument value, which :func:`read_value` reads back as ``value``: a string as it is unless
    reading it back would give something else or it holds one of the dialect's ``tags`` (its value's opening and
    closing tags), else JSON (with ``<`` escaped where a tag would appear). Raises ``ValueError`` / ``TypeError`` for
    a value JSON cannot hold (the format's render turns them into ``RenderError``)."""
    if type(value) is str:
        if not any(tag in value for tag in tags):
            back = read_value(value, python_literals, tags)
            if type(back) is str and back == value:
                return value
        text = dumps(value)
    elif python_literals and (value is True or value is False or value is None):
        return str(value)
    else:
        text = dumps(value)
    if any(tag in text for tag in tags):
        text = text.replace("<", "\\u003c")  # "<" only occurs inside JSON strings, where the escape is the same text
    return text


def value_end(text: str, pos: int, open_tag: str, close_tag: str, follow: tuple[str, ...]) -> int:
    """Where the ``close_tag`` that ends the value starting at ``pos`` lies, or -1: the first one, outside any
    ``open_tag`` ... ``close_tag`` pair the value holds itself (a literal block quoted in code), that is followed
    (whitespace aside) by one of ``follow`` (the next structural tag). As vLLM's Qwen3-Coder parser does: code that
    quotes the tags is read whole, and a value whose closing tag was lost (the next parameter's tags follow inside
    it) has no end. Linear: the first closer followed by a structural tag is found in one search; only a value that
    holds an opening tag before it is walked closer by closer (each tag searched forward once)."""
    j = _followed(close_tag, follow).search(text, pos)
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
        else:
            k = skip_ws(text, j + len(close_tag))
            if text.startswith(follow, k):
                return j
        j = text.find(close_tag, j + len(close_tag))
    return -1


@functools.lru_cache(maxsize=256)
def _followed(close_tag: str, follow: tuple[str, ...]) -> re.Pattern:
    """``close_tag`` followed, whitespace aside, by one of ``follow`` (as :func:`skip_ws` skips it)."""
    return re.compile(re.escape(close_tag) + r"(?=\s*(?:" + "|".join(map(re.escape, follow)) + "))")


def write_key(key: str, plain_ok: bool) -> str:
    """A parameter name as written: plain when ``plain_ok`` (the dialect can hold it as it is and it does not start
    with a quote), else its JSON string literal (with ``<`` and ``>`` escaped)."""
    if plain_ok and not key.startswith('"'):
        return key
    return dumps(key).replace("<", "\\u003c").replace(">", "\\u003e")


def read_key(text: str) -> str | None:
    """A parameter name as written: a JSON string literal is decoded; ``None`` when it starts with a quote but is not
    one (the caller decides whether that is an error or the plain name)."""
    if not text.startswith('"'):
        return text
    try:
        value, end = JSON_DECODER.raw_decode(text, 0)
    except (ValueError, RecursionError):
        return None
    return value if type(value) is str and end == len(text) else None


def strip_one_newline(text: str) -> str:
    """Drops one newline at each end: Qwen3-Coder's template writes ``<parameter=K>\\nVALUE\\n</parameter>`` (vLLM's
    and SGLang's parsers strip the same)."""
    text = text.removeprefix("\n")
    text = text.removesuffix("\n")
    return text


def stops_in_call(text: str, start: int, closers: str, openers: tuple[str, ...]) -> bool | None:
    """How ``text`` ends after the last complete value of a call whose closing tag never came (``start``: where that
    value ends): ``True`` when only the closing tags are missing (the rest is blank or the start of ``closers``,
    whitespace aside: a clean cut, see :class:`~refiner.formats.base.Cut`); ``False`` when it stops inside the start
    of one of ``openers`` (a further parameter was begun); ``None`` when other text follows (the closing tags were
    lost, the text does not stop in this call). Reads only what lies before the next text that is not whitespace,
    and a few characters more."""
    i = skip_ws(text, start)
    rest = text[i : i + 2 * len(closers)]
    if skip_ws(text, i + len(rest)) < len(text):
        return None
    rest = "".join(rest.split())  # whitespace aside, in the tags too (DSML V4.1 writes "<｜DSML｜ parameter ")
    if not rest:
        return True
    if any("".join(o.split()).startswith(rest) for o in openers):
        return False
    return True if "".join(closers.split()).startswith(rest) else None


def mark_xml_cut(
    out: Lenient, name: str, args: dict[str, Any], cut: tuple[dict[str, Any], bool] | None, tail: bool | None
) -> None:
    """For a call whose closing tag never came, just read (added to ``out.calls`` when it has a ``name``): marks it
    as the call the text stops in (:meth:`~refiner.formats.base.Lenient.mark_cut`). ``cut``: ``(arguments written
    whole, clean)`` when the text ends inside one of its values; else ``tail``, what :func:`stops_in_call` says of the
    text after its last complete value (``None``: the text goes on, the call is not cut). A call with no value
    written whole stops after an opening tag, which is not clean."""
    if cut is None:
        if tail is None:
            return
        cut = dict(args), tail and bool(args)
    out.mark_cut(len(out.calls) - 1 if name else None, name or None, *cut)


MAX_ATTR_CHARS = 4_096  # of an opening element read for its attributes: a longer one is not an element
MAX_UNTAGGED_LINES = 2_048  # lines of a text read as calls whose tags were dropped


def untagged_lines(text: str, start: int) -> list[tuple[int, int, str]] | None:
    """``(start, end, line)`` for each line of ``text[start:]`` (a carriage return before a newline dropped), the
    text stripped of blank lines at both ends; ``None`` past :data:`MAX_UNTAGGED_LINES`."""
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


class Finder:
    """The next occurrence of each of a few tags at or after a position. Positions asked for one tag must not
    decrease (a smaller one searches again); each tag's searches then scan the text once in all, so a scanner that
    looks ahead for several tags at every step stays linear."""

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


# ----------------------------------------------------------------------------------------------------------------
# Typing by the tool spec


def _number_of(text: str) -> int | float | None:
    try:
        value, end = JSON_DECODER.raw_decode(text, 0)
    except (ValueError, RecursionError):
        return None
    if end != len(text) or type(value) not in (int, float):
        return None
    return value


# Characters of Python literals given to Python's parser per retype_calls: a list or object written as a longer
# literal stays text
PY_LITERAL_CHARS = 8_192


def retype_value(param: Any, value: Any, python_literals: bool = False, budget: list[int] | None = None) -> Any:
    """``value`` (read by :func:`read_value`) settled by the parameter's declared type where its text allows it;
    otherwise ``value`` itself (the same object). ``budget``: the characters of Python literals still to be parsed,
    shared by the calls of one text (:data:`PY_LITERAL_CHARS` when not given)."""
    ptype = getattr(param, "type", None)
    if ptype == "string":
        if type(value) is str:
            return value
        if value is None and getattr(param, "nullable", False):
            return value
        if python_literals and (value is True or value is False or value is None):
            return str(value)
        try:
            return dumps(value)  # a number: exactly its text (read_value types canonical numbers only)
        except (TypeError, ValueError):
            return value
    if ptype in ("object", "array") and type(value) is str and python_literals:
        return _python_container(value, dict if ptype == "object" else list, value,
                                 [PY_LITERAL_CHARS] if budget is None else budget)
    if ptype == "boolean" and type(value) is str and value.strip() in _BOOLEANS:
        return _BOOLEANS[value.strip()]  # Qwen3-Coder's true (text in that dialect) for a boolean parameter
    if ptype in ("integer", "number") and type(value) is str:
        number = _number_of(value.strip())
        if number is None:
            return value
        if ptype == "integer":
            if type(number) is float:
                return int(number) if number.is_integer() and abs(number) < 2**53 else value
            return number
        return number
    return value


def _python_container(text: str, want: type, default: Any, budget: list[int]) -> Any:
    """The dict or list (``want``) a Python literal stands for (``| string`` writes ``{'a': True}``), as JSON
    values (tuples become lists); ``default`` where the text is no such literal or holds a value JSON cannot
    (a set, bytes, ``1e999``). ``ast.literal_eval`` is linear in the text; Python's parser refuses nesting deeper
    than 200 with a ``SyntaxError``. A text longer than what is left of ``budget`` stays ``default``."""
    s = text.strip()
    if not s or s[0] not in "{[" or s[-1] not in "}]" or len(s) > budget[0]:
        return default
    budget[0] -= len(s)
    try:
        value = ast.literal_eval(parse_quietly(s))
        value = JSON_DECODER.decode(dumps(value))  # tuples -> lists; a set, bytes or an infinite number raises
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return default
    return value if type(value) is want else default


def retype_calls(
    calls: Sequence[ToolCall], tools: Mapping[str, Any], python_literals: bool = False
) -> list[ToolCall]:
    """The calls with each top-level argument value settled by its tool's declared parameter type
    (:func:`retype_value`); calls of unknown tools and undeclared parameters are kept as read."""
    out = []
    budget = [PY_LITERAL_CHARS]
    for call in calls:
        spec = tools.get(call.name)
        params = getattr(spec, "params", None) or {}
        if not params:
            out.append(call)
            continue
        args = dict(call.arguments)
        changed = False
        for k, v in args.items():
            if k in params:
                new = retype_value(params[k], v, python_literals, budget)
                if new is not v:
                    args[k] = new
                    changed = True
        out.append(replace(call, arguments=args) if changed else call)
    return out
