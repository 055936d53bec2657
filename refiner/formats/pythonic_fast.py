"""The fast reader of pythonic call lists: a list laid out as the renderer writes one (keyword arguments whose values
are JSON values or Python constants) read with one regex step per call and per argument and the JSON decoder for each
value, instead of :mod:`ast`. It answers ``None`` (or stops, for a prefix) at any doubt; the :mod:`ast` reader
(:mod:`refiner.formats.pythonic`) then reads the list and explains.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from typing import Any

from refiner.formats.strict import JSON_DECODER

# The prefix the ast reader gives argument names that are Python keywords (``from=``); no argument name read here
# starts with it.
MANGLE = "__kw__"

_WS = "[ \t\n\r]*"  # JSON's whitespace: any other whitespace sends the text to ast
# An identifier: ASCII letters, digits and "_" (no digit first), or any character outside ASCII and whitespace; a
# match with non-ASCII characters is checked with str.isidentifier after the match (_plain).
_IDENT = r"[^\x00-\x40\x5b-\x5e\x60\x7b-\x7f\s][^\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f\s]*"
_KEY = "(?:(" + _IDENT + ")" + _WS + r"=(?!=)|(\*\*))" + _WS  # "key=" or "**" (a dict of further arguments)
# after "[": the first call's name, or "]" (no calls); after a call: ", name(" or "]"
_FAST_FIRST_CALL = re.compile(_WS + r"(?:(" + _IDENT + r"(?:\." + _IDENT + r")*)" + _WS + r"\(|\])")
_FAST_NEXT_CALL = re.compile(_WS + r"(?:," + _WS + r"(" + _IDENT + r"(?:\." + _IDENT + r")*)" + _WS + r"\(|\])")
# after "(": the first argument's "key=" or "**", or ")" (no arguments); after a value: ", key=", ", **" or ")"
_FAST_FIRST_ARG = re.compile(_WS + r"(?:" + _KEY + r"|\))")
_FAST_NEXT_ARG = re.compile(_WS + r"(?:," + _WS + _KEY + r"|\))")
# a "\/" escape or a surrogate escape, after any number of escaped backslashes (pairs, which both readers read alike)
_FAST_REFUSE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\(?:/|u[dD][89abAB])")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Python's constants outside strings (not as argument or call names), for the decoder
_FAST_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|\b(True|False|None)\b(?!' + _WS + r"[=(.])")
_TO_JSON = {"True": "true", "False": "false", "None": "null"}
_KEYWORDS = frozenset(keyword.kwlist)


def _constant_to_json(m: re.Match) -> str:
    return _TO_JSON[m.group(1)] if m.group(1) else m.group(0)


def refused(src: str) -> bool:
    """Escapes JSON reads otherwise than Python (``\\/``, surrogate pairs) and characters Python source cannot hold
    (NUL, lone surrogates). Checked with C-speed substring tests first: a regex scan of the whole text costs more than
    reading a short call list."""
    if "\x00" in src:
        return True
    if ("\\/" in src or "\\u" in src) and _FAST_REFUSE_ESCAPE.search(src):
        return True
    return not src.isascii() and _has_surrogate(src)


def _has_surrogate(src: str) -> bool:
    """Whether ``src`` holds a surrogate code point (UTF-8 cannot encode one: a C-speed test, where a regex scan of
    200 KB costs milliseconds)."""
    try:
        src.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def fast_call_list(src: str) -> list[tuple[str, dict[str, Any]]] | None:
    """``[(name, arguments), ...]`` for a call list laid out as the renderer writes one: keyword arguments whose
    values are JSON values or Python constants. One regex step per call and per argument and the JSON decoder for
    each value, instead of :mod:`ast`; ``None`` for anything else (any other layout, any doubt), which the :mod:`ast`
    reader then handles and explains. Whatever it accepts, :mod:`ast` reads the same way (tested on renderings and
    their mutations)."""
    calls, _, complete = fast_call_prefix(src)
    return calls if complete else None


def fast_call_prefix(src: str, limit: int | None = None) -> tuple[list[tuple[str, dict[str, Any]]], int, bool]:
    """``(calls, end, complete)``: the calls a list starts with, read as :func:`fast_call_list` reads them, up to
    the first one it cannot read (or ``limit`` calls); ``end`` is where the last call read ends (after its ``)``) and
    ``complete`` whether that was the whole list. Lenient parsing reads the rest item by item."""
    if not src.startswith("[") or refused(src):
        return [], 0, False
    calls, end, status = _fast_read(src, limit=limit)
    if status is _NESTED_CONSTANT:  # True/False/None inside a list or dict value: the rest rewritten as JSON (same
        # lengths and positions) and read on from the call that stopped the reader (the calls before it stand)
        rewritten = src[:end] + _FAST_CONSTANT.sub(_constant_to_json, src[end:])
        calls, end, status = _fast_read(rewritten, end, calls, limit=limit)
    return calls, end, status is True


_NESTED_CONSTANT: Any = object()


def _plain(identifier: str) -> bool:
    """A non-ASCII identifier that Python reads as written (``ast`` NFKC-normalises identifiers)."""
    return identifier.isidentifier() and unicodedata.normalize("NFKC", identifier) == identifier


def _has_constant(src: str) -> bool:
    return "True" in src or "False" in src or "None" in src


_CONSTANT_VALUE = re.compile(r"(True|False|None)(?![A-Za-z0-9_])")
_PY_CONSTANTS = {"True": True, "False": False, "None": None}
_CONSTANT_STARTS = frozenset("TFN")


def _fast_read(
    src: str,
    end: int = 1,
    calls: list[tuple[str, dict[str, Any]]] | None = None,
    limit: int | None = None,
    stopped: list[int] | None = None,
) -> tuple[list[tuple[str, dict[str, Any]]], int, Any]:
    """``(calls, end, status)``: status True when the whole list was read, False when reading stopped at a call it
    cannot read (or after ``limit`` calls), :data:`_NESTED_CONSTANT` when that call may hold Python constants inside
    a value. Reads on from ``end`` after ``calls`` when given (``end`` 1: from the first call). ``stopped``: where
    reading stopped inside that call is appended to it (the position of the part it could not read)."""
    decode = JSON_DECODER.raw_decode
    next_arg = _FAST_NEXT_ARG.match
    if calls is None:
        calls = []
    at = end
    m = _FAST_FIRST_CALL.match(src, 1) if end == 1 else _FAST_NEXT_CALL.match(src, end)
    while m is not None:
        name = m.group(1)
        if name is None:  # "]": the end of the list, which must be the end of the text
            if stopped is not None:
                stopped.append(m.start())
            return calls, end, m.end() == len(src)
        if name in _KEYWORDS or ("." in name and any(part in _KEYWORDS for part in name.split("."))):
            break
        if not name.isascii() and not all(_plain(part) for part in name.split(".")):
            break
        args: dict[str, Any] = {}
        at = m.end()
        m = _FAST_FIRST_ARG.match(src, at)
        while m is not None:
            key = m.group(1)
            at = m.end()
            if key is None:
                if m.group(2) is None:  # ")"
                    break
                # "**{...}": the renderer's form for keys that are not identifiers
                try:
                    more, pos = decode(src, at)
                except (ValueError, RecursionError):
                    if stopped is not None:
                        stopped.append(at)
                    return calls, end, _NESTED_CONSTANT if _has_constant(src) else False
                if type(more) is not dict or not more.keys().isdisjoint(args):
                    if stopped is not None:
                        stopped.append(at)
                    return calls, end, False
                args.update(more)
                at = pos
                m = next_arg(src, pos)
                continue
            if key in args or key.startswith(MANGLE) or not (key.isascii() or _plain(key)):
                if stopped is not None:
                    stopped.append(at)
                return calls, end, False
            # a Python constant as the whole value, matched first: a failed decode costs a pass over the text
            # before it (the decoder's error counts the lines), which would make a long list quadratic
            const = _CONSTANT_VALUE.match(src, at) if src[at : at + 1] in _CONSTANT_STARTS else None
            if const is not None:
                args[key], pos = _PY_CONSTANTS[const.group(1)], const.end()
            else:
                try:
                    args[key], pos = decode(src, at)
                except (ValueError, RecursionError):
                    if stopped is not None:
                        stopped.append(at)
                    return calls, end, _NESTED_CONSTANT if _has_constant(src) else False
            at = pos
            m = next_arg(src, pos)
        if m is None:
            break
        calls.append((name, args))
        end = at = m.end()
        if limit is not None and len(calls) >= limit:
            m = _FAST_NEXT_CALL.match(src, end)
            return calls, end, m is not None and m.group(1) is None and m.end() == len(src)
        m = _FAST_NEXT_CALL.match(src, end)
    if stopped is not None:
        stopped.append(at)
    return calls, end, False


def read_from(src: str, end: int, calls: list[tuple[str, dict[str, Any]]], stopped: list[int] | None = None
              ) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls of the list ``src`` read on from ``end`` (as :func:`fast_call_prefix` reads, after ``calls``) when
    the rest of the list reads whole in the plain layout; else ``None`` (``stopped``: where reading stopped is
    appended to it)."""
    got, stop, status = _fast_read(src, end, list(calls), stopped=stopped)
    if status is _NESTED_CONSTANT:
        rewritten = src[:stop] + _FAST_CONSTANT.sub(_constant_to_json, src[stop:])
        got, stop, status = _fast_read(rewritten, stop, got, stopped=stopped)
    return got if status is True else None
