"""Reading and writing pythonic call lists ``[f(a="v", b=2), g.h(x=[1, 2])]`` with :mod:`ast` (literals only,
never ``eval``). Used by the ``toolace`` format.

Argument names that are Python keywords (``from=``, ToolACE has them) are accepted; keys that are not identifiers
render as a trailing ``**{"key": value}``, which reads back. Values are JSON values written as Python literals;
``true``/``false``/``null`` are read as well.

Lenient readings (each reported as a ``bad_argument`` problem): positional values (LFM2 writes
``get_weather('Paris', unit='celsius')``) take the offered tool's parameters in declared order when the request's
tools are known and they fit (:func:`place_positional`), else they are dropped; a value no JSON value holds
(``1e999``) drops its argument; a bytes literal reads as its text. The item-by-item reader
(:mod:`refiner.formats.toolace`) also reads ``07`` as 7 and drops an argument written without a value (``f(city=)``).
"""

from __future__ import annotations

import ast
import bisect
import io
import itertools
import json
import keyword
import math
import re
import tokenize
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import MAX_ARGUMENT_DEPTH, FormatError, Problem, WireFormat
from refiner.formats.jsonfix import charge
from refiner.formats.strict import JSON_DECODER
from refiner.formats.tags import tag_look_alike
from refiner.formats.text import dumps

_MANGLE = "__kw__"

# What a call's name may be in a pythonic list: an identifier, or dotted identifiers (``math.sqrt``).
IDENTIFIER_NAME = r"[^\W\d]\w*(?:\.[^\W\d]\w*)*"
# (no two adjacent quantifiers over the same characters: "\s*\[?\s*" backtracks quadratically on a run of spaces)
_LOOKS_PYTHONIC = re.compile(r"\s*(?:\[\s*)?[A-Za-z_][\w.]*(?: [\w.]+){0,6}\(")


def looks_pythonic(body: str) -> bool:
    """Whether ``body`` starts like pythonic calls: ``[name(`` or ``name(`` (names with a few spaces allowed, as raw
    ToolACE writes them)."""
    return _LOOKS_PYTHONIC.match(body) is not None
_JSONISH = {"true": True, "false": False, "null": None}
# A keyword followed by "=" (not "=="): the only case that needs the tokenize pass of _mangle_keywords.
_KEYWORD_ARG = re.compile(r"\b(?:" + "|".join(keyword.kwlist) + r")\s*=(?!=)")


def _mangle_keywords(src: str) -> str:
    """Renames keyword tokens used as argument names (``from=``) so :func:`ast.parse` accepts them."""
    tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    lines = src.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    edits = []
    for tok, nxt in itertools.pairwise(tokens):
        if (
            tok.type == tokenize.NAME
            and keyword.iskeyword(tok.string)
            and nxt.type == tokenize.OP
            and nxt.string == "="
        ):
            edits.append(starts[tok.start[0] - 1] + tok.start[1])
    for off in reversed(edits):
        src = src[:off] + _MANGLE + src[off:]
    return src


def _offset(src: str, lineno: int | None, col: int | None) -> int:
    """Character offset of an ast/SyntaxError position (``col`` counted in UTF-8 bytes by ast)."""
    if not lineno:
        return 0
    lines = src.splitlines(keepends=True)
    base = sum(len(ln) for ln in lines[: lineno - 1])
    line = lines[lineno - 1] if lineno - 1 < len(lines) else ""
    return base + len(line.encode("utf-8")[: max(col or 0, 0)].decode("utf-8", errors="ignore"))


def parse_quietly(src: str) -> ast.expr:
    """``ast.parse`` in eval mode without the SyntaxWarnings broken text provokes (``1if``, ``"\\d"``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)  # invalid escape sequences, before Python 3.12
        return ast.parse(src, mode="eval").body


def parse_expr(fmt: WireFormat, src: str, offset: int) -> ast.expr:
    """The expression ``src`` as an ast node; a :class:`FormatError` at the absolute position otherwise."""
    try:
        try:
            return parse_quietly(src)
        except SyntaxError:
            if not _KEYWORD_ARG.search(src):
                raise
            return parse_quietly(_mangle_keywords(src))
    except SyntaxError as e:
        raise fmt.error(
            f"not a pythonic call list: {e.msg}", offset + _offset(src, e.lineno, e.offset and e.offset - 1)
        ) from None
    except (tokenize.TokenError, IndentationError, ValueError) as e:
        raise fmt.error(f"not a pythonic call list: {e}", offset) from None
    except (RecursionError, MemoryError):
        raise fmt.error("expression nested too deeply", offset) from None


def _arg_name(name: str) -> str:
    if name.startswith(_MANGLE) and keyword.iskeyword(name[len(_MANGLE) :]):
        return name[len(_MANGLE) :]
    return name


def dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class Literals:
    """Converts literal ast nodes to JSON values. ``strict`` rejects tuples, sets and unknown names; otherwise
    they become lists and strings. A value no JSON value holds (``1e999``, ``1j``, ``...``) fails in either mode
    (:meth:`arguments` in a lenient reading drops that argument and says so); a bytes literal (``b'z'``) is a failure
    in strict mode and its text (``"z"``) otherwise, with a problem."""

    def __init__(
        self, fmt: WireFormat, src: str, offset: int, strict: bool, problems: list[Problem] | None = None
    ) -> None:
        self.fmt, self.src, self.offset, self.strict = fmt, src, offset, strict
        self.problems = problems  # where a lenient reading notes what it read otherwise than as written

    def fail(self, node: ast.AST, message: str) -> FormatError:
        return self.fmt.error(
            message, self.offset + _offset(self.src, getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        )

    def _source(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.src, node) or ""

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, float) and not math.isfinite(v):  # 1e999: no JSON number holds it
                raise self.fail(node, f"number {self._source(node)[:40]} is out of range (no JSON number holds it)")
            if v is None or isinstance(v, (str, bool, int, float)):
                return v
            if isinstance(v, bytes) and not self.strict:
                text = v.decode("utf-8", errors="replace")
                if self.problems is not None:
                    self.problems.append(Problem("bad_argument", f"bytes literal {self._source(node)[:40]} read as "
                                                                 f"the string {text[:40]!r}"))
                return text
            raise self.fail(node, f"{type(v).__name__} literal {self._source(node)[:40]} is not a JSON value")
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, (ast.USub, ast.UAdd))
            and isinstance(node.operand, ast.Constant)
        ):
            v = node.operand.value
            if isinstance(v, float) and not math.isfinite(v):
                raise self.fail(node, f"number {self._source(node)[:40]} is out of range (no JSON number holds it)")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.List) or (not self.strict and isinstance(node, (ast.Tuple, ast.Set))):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    raise self.fail(v, "'**' inside a dict literal")
                key = self.value(k)
                if not isinstance(key, str):
                    if self.strict:
                        raise self.fail(k, "dict keys must be strings")
                    key = json.dumps(key)
                out[key] = self.value(v)
            return out
        if isinstance(node, ast.Name) and node.id in _JSONISH:
            return _JSONISH[node.id]
        if not self.strict:
            return self._source(node)
        raise self.fail(node, f"{type(node).__name__} is not a literal value")

    def arguments(
        self, call: ast.Call, problems: list[Problem] | None = None, params: Iterable[str] | None = None
    ) -> dict[str, Any]:
        """Keyword arguments of ``call`` (``**{...}`` merged); positional ones are an error, or, in a lenient reading
        (``problems`` given), placed on ``params`` (the called tool's declared parameter names, in order: see
        :func:`place_positional`) when they are known, else dropped; either way a problem says so. A lenient reading
        drops an argument whose value no JSON value holds, with a problem."""
        if call.args and problems is None:
            raise self.fail(call.args[0], "positional arguments are not allowed; use name=value")
        if problems is not None:
            self.problems = problems
        args: dict[str, Any] = {}
        for kw in call.keywords:
            try:
                if kw.arg is None:
                    extra = self.value(kw.value)
                    if not isinstance(extra, dict):
                        raise self.fail(kw.value, "'**' must be followed by a dict literal")
                    items = list(extra.items())
                else:
                    items = [(_arg_name(kw.arg), self.value(kw.value))]
            except FormatError as e:
                if problems is None:
                    raise
                what = f"argument {_arg_name(kw.arg)!r}" if kw.arg else "'**' arguments"
                problems.append(Problem("bad_argument", f"{what} dropped: {e.message}"))
                continue
            for k, v in items:
                if k in args:
                    if problems is None:
                        raise self.fail(kw.value, f"argument {k!r} given twice")
                    problems.append(Problem("bad_argument", f"argument {k!r} given twice; last kept"))
                args[k] = v
        if call.args:
            values = []
            for a in call.args:
                try:
                    values.append(self.value(a) if not isinstance(a, ast.Starred) else _UNPLACEABLE)
                except FormatError:
                    values.append(_UNPLACEABLE)
            place_positional(values, args, params, problems)
        return args


_UNPLACEABLE: Any = object()  # a positional value that is not a JSON value (``*rest``, ``1e999``)


def place_positional(
    values: list[Any], args: dict[str, Any], params: Iterable[str] | None, problems: list[Problem] | None
) -> bool:
    """Places positional ``values`` on the declared parameter names ``params`` (in order), adding them to ``args``,
    when the tool is known and they fit: no more values than parameters, none of those parameters also given by
    name, every value a JSON value; else drops them all (nothing is guessed). Either way a ``bad_argument`` problem
    is noted in ``problems`` (when given). Returns whether they were placed."""
    names = list(params or ())[: len(values)]
    if (
        len(names) == len(values)
        and values
        and not any(n in args for n in names)
        and not any(v is _UNPLACEABLE for v in values)
    ):
        placed = dict(zip(names, values))  # (first, as written)
        placed.update(args)
        args.clear()
        args.update(placed)
        if problems is not None:
            problems.append(Problem("bad_argument", f"{len(values)} positional argument(s) read as "
                                                    f"{', '.join(names)} (the tool's parameters in declared order)"))
        return True
    if problems is not None:
        why = "the tool's parameters are not known" if params is None else "they do not fit the tool's parameters"
        problems.append(Problem("bad_argument", f"{len(values)} positional argument(s) dropped: {why}"))
    return False


# ----------------------------------------------------------------------------------------------------------------
# Fast reader: call lists laid out like the renderer's, with the values read by the JSON decoder

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


def _refused(src: str) -> bool:
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


# The general (ast) reader takes call lists up to this many characters (Python's parser works per character, more
# on a syntax error); the renderer's plain layout is read at any length by fast_call_list.
MAX_AST_CHARS = 4096


def strict_call_list(fmt: WireFormat, src: str, offset: int) -> list[ToolCall]:
    """The calls of the pythonic list ``src`` (stripped; ``offset``: where it starts in the text), strictly: the
    renderer's layout through :func:`fast_call_list`, anything else through ``ast`` up to :data:`MAX_AST_CHARS`.
    Raises ``FormatError`` (of ``fmt``) naming the place."""
    fast = fast_call_list(src)
    if fast is not None:
        return [ToolCall.trusted(name, args) for name, args in fast]
    if len(src) > MAX_AST_CHARS:
        raise fmt.error(
            f"a call list of {len(src)} characters that is not in the plain layout (JSON literal values, keyword "
            f"arguments) is longer than the {MAX_AST_CHARS} characters the general reader takes",
            offset,
        )
    node = parse_expr(fmt, src, offset)
    lit = Literals(fmt, src, offset, strict=True)
    if not isinstance(node, ast.List):
        raise lit.fail(node, "the calls must be a [...] list")
    calls = []
    for el in node.elts:
        if not isinstance(el, ast.Call):
            raise lit.fail(el, "list items must be calls like name(key=value)")
        name = dotted_name(el.func)
        if name is None:
            raise lit.fail(el, "a call's name must be an identifier")
        calls.append(ToolCall(name, lit.arguments(el)))
    return calls


def fast_call_prefix(src: str, limit: int | None = None) -> tuple[list[tuple[str, dict[str, Any]]], int, bool]:
    """``(calls, end, complete)``: the calls a list starts with, read as :func:`fast_call_list` reads them, up to
    the first one it cannot read (or ``limit`` calls); ``end`` is where the last call read ends (after its ``)``) and
    ``complete`` whether that was the whole list. Lenient parsing reads the rest item by item."""
    if not src.startswith("[") or _refused(src):
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
            if key in args or key.startswith(_MANGLE) or not (key.isascii() or _plain(key)):
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


# ----------------------------------------------------------------------------------------------------------------
# Rendering


def _is_plain_identifier(key: str) -> bool:
    return (
        key.isidentifier()
        and (key.isascii() or unicodedata.normalize("NFKC", key) == key)
        and not key.startswith(_MANGLE)
    )


def literal(value: Any) -> str:
    """A JSON value as Python literal source (strings in JSON quoting, which Python reads identically)."""
    if type(value) is str:  # the common case first
        return dumps(value)
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} is not a JSON number")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(str(k))}: {literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def render_call(name: str, arguments: dict[str, Any]) -> str:
    plain = [f"{k}={literal(v)}" for k, v in arguments.items() if _is_plain_identifier(k)]
    other = {k: v for k, v in arguments.items() if not _is_plain_identifier(k)}
    if other:
        plain.append("**" + literal(other))
    return f"{name}({', '.join(plain)})"


# ----------------------------------------------------------------------------------------------------------------
# Splitting broken text (lenient): one linear scan, quotes and bracket depth tracked, at C speed between the
# structural characters

_PLAIN = re.compile(r"[^\"'()\[\]{},]*")
# A string from its opening quote: Python's reading (the first quote not escaped ends it) ...
_STRICT_STRING = {q: re.compile(q + r"(?:[^" + q + r"\\]|\\.)*" + q, re.S) for q in "'\""}
# ... and the lenient one: the first quote not escaped that is followed (after spaces) by what may follow a value
# (",", ")", "]", "}", ":" or the end), so an unescaped quote inside a value ('sed -n '1,5p' f') stays text. The
# quotes that may end a string that way are found once per text (one regex pass), then each string's end is a
# binary search: linear in all.
_CLOSING_QUOTE = {q: re.compile(q + r"(?=[ \t\r\n]*(?:[,)\]}:]|\Z))") for q in "'\""}
_closing_cache: tuple[str, dict[str, list[int]]] = ("", {})


def _closing_quotes(src: str, q: str) -> list[int]:
    """Positions of the quotes ``q`` in ``src`` that are not escaped and are followed by what may follow a value."""
    global _closing_cache
    cached_src, table = _closing_cache
    if cached_src is not src:
        table = {}
        _closing_cache = (src, table)
    found = table.get(q)
    if found is None:
        found = []
        for m in _CLOSING_QUOTE[q].finditer(src):
            p = m.start()
            k = p
            while k > 0 and src[k - 1] == "\\":
                k -= 1
            if (p - k) % 2 == 0:
                found.append(p)
        table[q] = found
    return found


def string_end(src: str, i: int, *, lenient_quotes: bool = False) -> int:
    """The index after the string whose opening quote is ``src[i]`` (``len(src)`` when it is not closed). With
    ``lenient_quotes``, the string ends at the first unescaped quote that is followed by what may follow a value
    (else as Python reads it): a quote the model forgot to escape inside a value does not end it."""
    q = src[i]
    if lenient_quotes:
        ends = _closing_quotes(src, q)
        k = bisect.bisect_right(ends, i)
        if k < len(ends):
            return ends[k] + 1
    m = _STRICT_STRING[q].match(src, i)
    return m.end() if m is not None else len(src)


def _unquoted(src: str, start: int = 0, *, lenient_quotes: bool = False) -> Iterator[tuple[int, str]]:
    """``(index, char)`` for each bracket and comma of ``src`` from ``start`` that lies outside quoted strings (see
    :func:`string_end`). Linear: the text between them is skipped by one regex step."""
    n = len(src)
    i = start
    while i < n:
        i = _PLAIN.match(src, i).end()
        if i >= n:
            return
        ch = src[i]
        if ch == "'" or ch == '"':
            i = string_end(src, i, lenient_quotes=lenient_quotes)
            continue
        yield i, ch
        i += 1


def split_top_level(src: str, *, lenient_quotes: bool = False) -> list[str]:
    """``src`` cut at commas outside brackets and quotes (``lenient_quotes``: see :func:`string_end`)."""
    parts, depth, last = [], 0, 0
    for i, ch in _unquoted(src, lenient_quotes=lenient_quotes):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0:  # a comma
            parts.append(src[last:i])
            last = i + 1
    parts.append(src[last:])
    return parts


def matching_paren(src: str, open_at: int, *, lenient_quotes: bool = False, max_marks: int | None = None) -> int:
    """Index of the ``)`` closing the ``(`` at ``open_at`` (quotes respected), or ``len(src)`` if none; ``-1`` when
    more than ``max_marks`` brackets and commas were passed without finding it (each costs a step of Python: a
    caller that reads many windows bounds them in all)."""
    depth = 0
    for n, (i, ch) in enumerate(_unquoted(src, open_at, lenient_quotes=lenient_quotes)):
        if max_marks is not None and n >= max_marks:
            return -1
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i
    return len(src)


def open_brackets(src: str, *, lenient_quotes: bool = False) -> tuple[int, bool]:
    """``(depth, in_string)`` at the end of ``src``: brackets left open, and whether a string is left open."""
    depth, i, n = 0, 0, len(src)
    while i < n:
        i = _PLAIN.match(src, i).end()
        if i >= n:
            break
        ch = src[i]
        if ch == "'" or ch == '"':
            end = string_end(src, i, lenient_quotes=lenient_quotes)
            if end >= n and not _closed(src, i, lenient_quotes):
                return depth, True
            i = end
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        i += 1
    return depth, False


def _closed(src: str, j: int, lenient_quotes: bool) -> bool:
    q = src[j]
    if lenient_quotes and bisect.bisect_right(_closing_quotes(src, q), j) < len(_closing_quotes(src, q)):
        return True
    return _STRICT_STRING[q].match(src, j) is not None


def lenient_string(raw: str) -> tuple[str, bool] | None:
    """For a value ``raw`` that is one quoted string as the lenient reading of :func:`string_end` sees it (it starts
    with a quote and the string it starts ends where ``raw`` ends): ``(text, unescaped)``, its text (escape
    sequences decoded as Python decodes them) and whether it holds quotes of its own kind that were not escaped;
    ``None`` otherwise."""
    raw = raw.strip()
    if len(raw) < 2 or raw[0] not in "'\"" or string_end(raw, 0, lenient_quotes=True) != len(raw) or raw[-1] != raw[0]:
        return None
    q, body = raw[0], raw[1:-1]
    pieces = _STRING_PIECES.findall(body)
    unescaped = q in pieces
    fixed = "".join("\\" + p if p == q else p for p in pieces)
    try:
        value = parse_quietly(q + fixed + q)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return body, unescaped
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value, unescaped
    return body, unescaped


_STRING_PIECES = re.compile(r"\\.|['\"]|[^\\'\"]+|\\", re.S)


# ----------------------------------------------------------------------------------------------------------------
# Mending a call list that lost or doubled one character (lenient)
#
# Broken pythonic lists mostly lack one character: an "=" between a parameter and its value (``base10``), the "("
# after the name (``gcdnum1=12``), a quote, a comma, a bracket; or hold one closing bracket twice. The first call the
# fast reader cannot read is tried with each such edit near it, and an edit counts when the whole rest of the list
# then reads in the plain layout. The readings the edits give are compared: one reading is taken; several are
# settled by the request's tools when they are known (see settle), else none is taken. An edit only inserts
# punctuation or drops a doubled closer: every value read is text the model wrote.

# Characters around the place the fast reader stops at where edits are tried; edits tried per list (nearest first).
MAX_MEND_WINDOW = 512
MAX_MEND_EDITS = 768
# Characters of the list after its plain-layout prefix beyond which it is not mended (each edit reads the rest).
MAX_MEND_CHARS = 4096
# Repair-budget units charged per edit tried and per 64 characters it reads (refiner.formats.jsonfix.charge).
MEND_UNITS_PER_EDIT = 1
MEND_CHARS_PER_UNIT = 64

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_VALUE_AFTER = frozenset("=([{,:")  # what a value follows
_VALUE_BEFORE = frozenset(",)]}:")  # what may follow a value
_MEND_WHAT = {
    "=": "an '=' between a parameter and its value",
    "(": "the '(' after a tool name",
    '"': "a quote",
    ",": "a comma",
    ":": "a ':' in a dict",
    "[": "a '['",
    "{": "a '{'",
    ")": "a ')'",
    "]": "a ']'",
    "}": "a '}'",
}


def _string_spans(src: str, start: int, stop: int) -> list[tuple[int, int]]:
    """The double-quoted strings of ``src[start:stop]`` as Python reads them (each ``(open, after close)``)."""
    spans, i = [], start
    pattern = _STRICT_STRING['"']
    while True:
        i = src.find('"', i, stop)
        if i < 0:
            return spans
        m = pattern.match(src, i)
        end = m.end() if m is not None else len(src)
        spans.append((i, end))
        i = end


def _mend_edits(src: str, start: int, stop: int, outside: int) -> Iterator[tuple[int, str]]:
    """``(position, char)`` edits worth trying in ``src[start:stop]``: ``char`` inserted before ``position``, or
    (``char`` empty) the doubled closer at ``position`` dropped. Punctuation other than quotes is only inserted
    outside strings (read as Python reads them from ``outside``, a position outside any string: the call's start); a
    quote where one may open or close a value."""
    spans = _string_spans(src, outside, stop)
    k = 0
    n = len(src)
    for p in range(start, stop + 1):
        while k < len(spans) and spans[k][1] <= p:
            k += 1
        inside = k < len(spans) and spans[k][0] < p < spans[k][1]
        a = src[p - 1] if p > 0 else ""
        b = src[p] if p < n else ""
        before = src[p - 2] if p > 1 else ""
        value_start = (a in _VALUE_AFTER or (a == " " and before in _VALUE_AFTER)) and b not in ' \n,)]}'
        value_end = (b in _VALUE_BEFORE or b == "") and a not in " \n([{,:="
        # a quote: opening a value (an empty string's too), or closing one (after an escaped quote too)
        if (value_start or value_end) and (a != '"' or before == "\\") and (b != '"' or a in _VALUE_AFTER):
            yield p, '"'
        if inside:
            continue
        if a in _WORD:
            if b in _WORD or b == ")":
                yield p, "("
            if b and (b in _WORD or b in "\"'[{-"):
                yield p, "="
        if value_start and b:
            yield p, "["
            yield p, "{"
        elif a in _VALUE_AFTER and b in "]}":  # an empty list or dict that lost its opener
            yield p, "[" if b == "]" else "{"
        if value_end:
            yield p, ")"
            yield p, "]"
            yield p, "}"
        elif a in "[{" and b in _VALUE_BEFORE:  # ... or its closer
            yield p, "]" if a == "[" else "}"
        if b == " " and a and a not in " \n,([{:=":
            yield p, ","
            if a == '"':
                yield p, ":"
        elif a in ')]}"' and b and b not in ",)]} \n:":
            yield p, ","
        if b and b in ")]}" and a == b:
            yield p, ""


def _read_from(src: str, end: int, calls: list[tuple[str, dict[str, Any]]], stopped: list[int] | None = None
               ) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls of the list ``src`` read on from ``end`` (as :func:`fast_call_prefix` reads, after ``calls``) when
    the rest of the list reads whole in the plain layout; else ``None`` (``stopped``: where reading stopped is
    appended to it)."""
    got, stop, status = _fast_read(src, end, list(calls), stopped=stopped)
    if status is _NESTED_CONSTANT:
        rewritten = src[:stop] + _FAST_CONSTANT.sub(_constant_to_json, src[stop:])
        got, stop, status = _fast_read(rewritten, stop, got, stopped=stopped)
    return got if status is True else None


_JSON_TYPES: dict[str, Any] = {"string": str, "object": dict, "array": list, "boolean": bool}


def value_fits(value: Any, param: Any, depth: int = 0) -> bool:
    """Whether ``value`` has the JSON type ``param`` (a :class:`refiner.specs.Param`) declares, its items too."""
    kind = getattr(param, "type", None)
    if kind is None or depth > 8 or value is None:  # (None: the parameter left unset, as pythonic calls write it)
        return True
    if kind in ("integer", "number"):
        return type(value) is int or (kind == "number" and type(value) is float)
    if kind == "null":
        return value is None
    if not isinstance(value, _JSON_TYPES.get(kind, object)):
        return False
    items = getattr(param, "items", None)
    return not (kind == "array" and items is not None and not all(value_fits(v, items, depth + 1) for v in value))


def _depth(value: Any, level: int = 0) -> int:
    if level > 32 or not isinstance(value, (list, dict)):
        return level
    items = value.values() if isinstance(value, dict) else value
    return max((_depth(v, level + 1) for v in items), default=level + 1)


def tools_fit(calls: list[tuple[str, dict[str, Any]]], offered: Mapping[str, Any]) -> tuple[bool, int, bool, int]:
    """How well a reading fits the offered tools: (every name and parameter offered, arguments read, every value of
    its declared type, the values' nesting, shallower first). (Declared types come after the arguments read: specs
    declare some types loosely, BFCL passes "dontcare" for integers. Nesting last: ``[3, 4]]`` is a doubled ']'
    sooner than a list of lists whose '[' was lost.)"""
    named, typed, n = True, True, 0
    for name, args in calls:
        n += len(args)
        params = offered.get(name)
        if params is None:
            named = typed = False
            continue
        for key, value in args.items():
            if key not in params:
                named = typed = False
            elif isinstance(params, Mapping) and not value_fits(value, params[key]):
                typed = False
    return named, n, typed, -sum(_depth(v) for _, args in calls for v in args.values())


def settle(readings: list[Any], offered: Mapping[str, Any] | None) -> Any:
    """The one reading of ``readings`` (each a tuple whose first item is its calls, ``[(name, arguments), ...]``)
    to take: the only one; or, with the tools known, the only one that fits them best (:func:`tools_fit`: names and
    parameters all offered, then most arguments, then values of the declared types, then the shallowest values);
    else ``None``."""
    if len(readings) > 1 and offered:
        fits = [(tools_fit(r[0], offered), r) for r in readings]
        best = max(fit for fit, _ in fits)
        readings = [r for fit, r in fits if fit == best] if best[0] else []
    return readings[0] if len(readings) == 1 else None


def edit_readings(
    src: str, edits: Iterable[tuple[int, str]], cost: int,
    read: Callable[[str], tuple[list[tuple[str, dict[str, Any]]], Any] | None],
) -> list[tuple[list[tuple[str, dict[str, Any]]], Any, int, str]] | None:
    """The readings one-character edits of ``src`` give, for the menders (:func:`mend_list`,
    :func:`refiner.formats.nestful.mend_json_list`): each edit ``(position, char)`` (``char`` inserted before
    ``position``, or, empty, the character there dropped), in order, charged ``cost`` units of the repair budget and
    read with ``read(edited) -> (calls, value) | None``; one ``(calls, value, position, char)`` per distinct value
    (the first edit that gave it), or ``None`` when the budget ran out."""
    readings: dict[str, tuple[list[tuple[str, dict[str, Any]]], Any, int, str]] = {}
    for p, ch in edits:
        if not charge(cost):
            return None
        edited = src[:p] + ch + src[p:] if ch else src[:p] + src[p + 1 :]
        got = read(edited)
        if got is not None:
            key = json.dumps(got[1], sort_keys=True, ensure_ascii=False, default=str)
            readings.setdefault(key, (got[0], got[1], p, ch))
    return list(readings.values())


_BRACKETS = re.compile(r"[\[\]{}()]")


def _nests_deeper(src: str, limit: int) -> bool:
    """Whether brackets in ``src`` (quotes not minded: an upper bound) nest deeper than ``limit``."""
    if src.count("[") + src.count("{") + src.count("(") <= limit:
        return False
    depth = 0
    for m in _BRACKETS.finditer(src):
        depth += 1 if m.group() in "[{(" else -1
        if depth > limit:
            return True
    return False


def mend_list(
    src: str, end: int, calls: list[tuple[str, dict[str, Any]]], offered: Any = None
) -> tuple[list[tuple[str, dict[str, Any]]], str] | None:
    """For a list ``src`` (``[...]``, its own ``]`` last) whose plain-layout prefix ``calls`` ends at ``end``
    (:func:`fast_call_prefix`) and whose rest does not read: ``(every call of the list, what was mended)`` when one
    character inserted (or a doubled closer dropped) near the first call that does not read makes the rest read
    whole, and the readings such edits give agree, or the request's tools (``offered``: tool name -> parameter
    names) settle them (see above); else ``None``. Bounded: at most :data:`MAX_MEND_EDITS` edits within
    :data:`MAX_MEND_WINDOW` characters, each charged to the repair budget. A list quoted with single quotes only
    (no double quote, no backslash) is mended with its quotes swapped: the plain layout's strings are JSON's, and
    every string reads the same either way."""
    if len(src) - end > MAX_MEND_CHARS or not src.startswith("[") or not src.endswith("]") or _refused(src):
        return None
    if _nests_deeper(src, MAX_ARGUMENT_DEPTH + 2):  # (arguments that deep are dropped anyway: each edit would read
        return None  # a thousand-level nest again)
    if "'" in src and '"' not in src and "\\" not in src:
        src = src.replace("'", '"')
        calls, end, _ = fast_call_prefix(src)
    stopped: list[int] = []
    _read_from(src, end, calls, stopped)
    at = stopped[-1] if stopped else end
    start, stop = max(end, at - MAX_MEND_WINDOW // 2), min(len(src), at + MAX_MEND_WINDOW // 2)
    edits = sorted(_mend_edits(src, start, stop, end), key=lambda e: abs(e[0] - at))[:MAX_MEND_EDITS]
    cost = MEND_UNITS_PER_EDIT + (len(src) - end) // MEND_CHARS_PER_UNIT

    def read(edited: str) -> tuple[list[tuple[str, dict[str, Any]]], Any] | None:
        got = _read_from(edited, end, calls)
        return None if got is None else (got, got)

    readings = edit_readings(src, edits, cost, read)  # nearest to where reading stopped first
    chosen = None if readings is None else settle(readings, offered)
    if chosen is None:
        return None
    got, _, p, ch = chosen
    what = f"{_MEND_WHAT[ch]} was missing at {p}" if ch else f"a doubled {src[p]!r} at {p}"
    return got, what


# ----------------------------------------------------------------------------------------------------------------
# Where the calls start when the opening tag is missing (lenient)

# Characters at the start of a body looked at for a misspelt or foreign opening tag.
MAX_TAG_PREFIX = 256
# A tag of another kind: <...>, <|...|> (also with full-width bars), [...] or a quoted word, holding no call; an
# XML tag's start glued to a name (<function=name(...)); a lone ']' glued to one.
_TAG_LIKE = re.compile(
    r'[ \t]*(?:<[^<>\n()]{1,64}>|\[[^\[\]\n()=,]{1,64}\]|"[^"\n()=,]{1,64}"|<[\w|]{1,32}=(?=[^\W\d])|\](?=[^\W\d]))'
)
# The start of a call list: "[name(".
_LIST_START = re.compile(r"\[[ \t]*[^\W\d][\w.]*[ \t]*\(")


def after_opening_tag(body: str, tag: str) -> int:
    """Where the calls start in ``body`` (its opening ``tag`` missing), when it starts with ``tag`` misspelt
    (:func:`tag_look_alike`) or with tags of another kind (:data:`_TAG_LIKE`, at most four) before them: the position
    after those; else 0."""
    head = body[:MAX_TAG_PREFIX]
    m = tag_look_alike(tag).match(head.lstrip())
    if m is not None:
        return len(head) - len(head.lstrip()) + m.end()
    pos = 0
    for _ in range(4):
        m = _TAG_LIKE.match(head, pos)
        if m is None:
            break
        pos = m.end()
    return pos


def list_start(body: str) -> int:
    """Where the call list (``[name(``) starts in ``body`` when a tag-like word comes before it (one word holding no
    call: no space, no ``(``), as a misspelt or foreign opening tag leaves it (``<functionlist>[f(a=1)]``,
    ``[|python_start|][f(a=1)]``); 0 when the list starts the body, is not found within :data:`MAX_TAG_PREFIX`
    characters, or comes after prose (which salvage reads, and says so)."""
    m = _LIST_START.search(body, 0, MAX_TAG_PREFIX)
    if m is None:
        return 0
    before = body[: m.start()].strip()
    if "(" in before or any(ch.isspace() for ch in before):
        return 0
    return m.start()
