"""Pythonic call lists ``[f(a="v", b=2), g.h(x=[1, 2])]``, read and written; literals only, never ``eval``. Argument
names may be Python keywords (``from=``); keys that are not identifiers render as a trailing ``**{...}``. Values are
JSON values as Python literals (``true``/``false``/``null`` read too). The renderer's layout is read by
:func:`fast_call_list`, anything else by :mod:`ast` (up to :data:`MAX_AST_CHARS`), which explains refusals. Lenient
readings (``bad_argument``): positional values placed on the tool's parameters (:func:`place_positional`), else dropped;
a value no JSON value holds drops its argument; a bytes literal reads as its text."""

from __future__ import annotations

import ast
import functools
import io
import itertools
import json
import keyword
import math
import re
import tokenize
import unicodedata
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import FormatError, Problem, WireFormat
from refiner.formats.pythonic_scan import string_end
from refiner.formats.strict import JSON_DECODER
from refiner.formats.text import dumps

# What a call's name may be in a pythonic list: an identifier, or dotted identifiers (``math.sqrt``), none a keyword.
_NOT_KEYWORD = r"(?!(?:" + "|".join(keyword.kwlist) + r")\b)"
IDENTIFIER_NAME = _NOT_KEYWORD + r"[^\W\d]\w*(?:\." + _NOT_KEYWORD + r"[^\W\d]\w*)*"
# (no two adjacent quantifiers over the same characters: "\s*\[?\s*" backtracks quadratically on a run of spaces)
_LOOKS_PYTHONIC = re.compile(r"\s*(?:\[\s*)?[A-Za-z_][\w.]*(?: [\w.]+){0,6}\(")


def looks_pythonic(body: str) -> bool:
    """Whether ``body`` starts like pythonic calls: ``[name(`` or ``name(`` (a few spaces allowed in names)."""
    return _LOOKS_PYTHONIC.match(body) is not None


# ---- The fast reader: the renderer's layout, a regex step per call and argument, the JSON decoder per value -------
# It stops at any doubt, and what it accepts ast reads the same way; kept beside ast, which stops at MAX_AST_CHARS.

MANGLE = "__kw__"  # the prefix the ast reader gives argument names that are Python keywords (``from=``)
_KEYWORDS = frozenset(keyword.kwlist)
_WS = "[ \t\n\r]*"  # JSON's whitespace: any other whitespace sends the text to ast
# An identifier: ASCII letters, digits and "_" (no digit first), or non-ASCII non-space characters (see _plain).
_IDENT_START = r"[^\x00-\x40\x5b-\x5e\x60\x7b-\x7f\s]"
_IDENT = _IDENT_START + r"[^\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f\s]*"
# "key=" (its value when a Python constant, which the decoder does not read) or "**" (a dict of further arguments)
_KEY = "(?:(" + _IDENT + ")" + _WS + r"=(?!=)" + _WS + r"()(?:(True|False|None)(?![A-Za-z0-9_]))?|(\*\*)" + _WS + ")"
# "name(" or "name()": an identifier with dots in it anywhere (read_on checks that each part starts an identifier)
_CALL = "(" + _IDENT_START + r"[^\x00-\x2d\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f\s]*)" + _WS + r"\(\)?"


@functools.lru_cache(maxsize=8)
def _call_steps(sep: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The patterns that take the first call and each next one: of a ``[...]`` list for ``","``, else of calls with
    ``sep`` between them (blanks around it free; a line break that is ``sep`` is no blank) up to the text's end."""
    if sep == ",":  # after "[": the first "name(", "name()" or "]"; after a call: ", name(", ", name()" or "]"
        return re.compile(_WS + r"(?:" + _CALL + r"|\])"), re.compile(_WS + r"(?:," + _WS + _CALL + r"|\])")
    before = "[ \t\r]*" if "\n" in sep else _WS
    return (re.compile(_WS + r"(?:" + _CALL + r"|\Z)"),
            re.compile(r"(?:" + before + re.escape(sep) + _WS + _CALL + r"|" + _WS + r"\Z)"))
# after "(": the first "key=" or "**", or ")"; after a value: ", key=", ", **" or ")"
_FIRST_ARG = re.compile(_WS + r"(?:" + _KEY + r"|\))")
_NEXT_ARG = re.compile(_WS + r"(?:," + _WS + _KEY + r"|\))")
# a "\/" escape or a surrogate escape, after any number of escaped backslashes (pairs, which both readers read alike)
_REFUSE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\(?:/|u[dD][89abAB])")
# Python's constants outside strings (not as argument or call names), for the decoder
_NESTED_CONSTANTS = re.compile(r'"(?:[^"\\]|\\.)*"|\b(True|False|None)\b(?!' + _WS + r"[=(.])")
_SURROGATE = re.compile("[\ud800-\udfff]")  # a surrogate code point (no UTF-8 text holds one)
# Python's and JSON's constants by name (a lenient reading takes JSON's in Python text)
CONSTANTS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_AS_JSON = {name: dumps(value) for name, value in CONSTANTS.items()}  # each constant as JSON writes it
_JSON_CONSTANTS = re.compile(r'"(?:[^"\\]|\\.)*"|(true|false|null)')  # JSON's constants outside strings
_AS_PYTHON = {dumps(value): repr(value) for value in (True, False, None)}


def refused(src: str) -> bool:
    """Whether ``src`` holds escapes JSON reads otherwise than Python (``\\/``, surrogate pairs) or what Python source
    cannot hold (NUL, lone surrogates)."""
    return ("\x00" in src or (("\\/" in src or "\\u" in src) and _REFUSE_ESCAPE.search(src) is not None)
            or (not src.isascii() and _SURROGATE.search(src) is not None))


def fast_call_list(src: str, sep: str = ",") -> list[ToolCall] | None:
    """The calls of a call list in the renderer's layout, else ``None``. ``sep``: ``","`` for a ``[...]`` list, else
    what is written between calls standing one after another (a call holds no line break when that is ``sep``)."""
    calls, _, complete, _ = fast_call_prefix(src, make=ToolCall, sep=sep)
    return calls if complete else None


def fast_call_prefix(src: str, limit: int | None = None, make: Callable | None = None, sep: str = ","
                     ) -> tuple[list[Any], int, bool, int]:
    """The calls a list (``sep``: :func:`fast_call_list`) starts with, before the first :func:`read_on` cannot read."""
    if sep == "," and not src.startswith("[") or refused(src):
        return [], 0, False, 0
    return read_on(src, int(sep == ","), [], limit, make, sep=sep)


def _plain(identifier: str) -> bool:
    """A non-ASCII identifier that Python reads as written (``ast`` NFKC-normalises identifiers)."""
    return identifier.isidentifier() and unicodedata.normalize("NFKC", identifier) == identifier


def read_on(src: str, end: int, calls: list, limit: int | None = None, make: Callable | None = None,
            rewritten: bool = False, sep: str = ",") -> tuple[list[Any], int, bool, int]:
    """``(calls, end, complete, stop)``: ``src`` read on from ``end`` after ``calls`` (extended) up to a call it
    cannot read or ``limit`` calls; ``end``: after the last call read; ``stop``: where reading stopped. Each call is
    ``make(name, arguments)``, by default the pair ``(name, arguments)``. A value the decoder refuses while ``src``
    holds Python's constants has the rest read again with them as JSON (``rewritten``: that was done). ``sep``: see
    :func:`fast_call_list` (with another than ``","`` the calls start at 0, with ``","`` after the list's ``[``)."""
    first, following = _call_steps(sep)
    decode, first_arg, next_arg, next_call = JSON_DECODER.scan_once, _FIRST_ARG.match, _NEXT_ARG.match, following.match
    add = calls.append
    one_a_line = sep == "\n"
    at = end
    m = first.match(src, end) if end == (1 if sep == "," else 0) else next_call(src, end)
    while m is not None:
        name = m[1]
        if name is None:  # "]" or the text's end: the end of the list, which must be the end of the text
            return calls, end, m.end() == len(src), m.start()
        if "." in name:  # (a plain name, the common case, is checked without a list of its parts)
            parts = name.split(".")
            if (any(not p or p[0] in "0123456789" for p in parts) or not _KEYWORDS.isdisjoint(parts)
                    or not (name.isascii() or all(map(_plain, parts)))):
                break
        elif name in _KEYWORDS or not (name.isascii() or _plain(name)):
            break
        args: dict[str, Any] = {}
        at = m.end()
        if src[at - 1] == "(":  # (else "name()": the call's match read its ")")
            arg = first_arg(src, at)
            while arg is not None:
                key, _, constant, star = arg.groups()
                at = arg.end()
                if key is None and star is None:  # ")"
                    break
                if key is not None and (key in args or key.startswith(MANGLE) or not (key.isascii() or _plain(key))):
                    return calls, end, False, arg.start(2)
                if constant is not None:  # (a failed decode counts the lines before it: quadratic on long lists)
                    args[key] = CONSTANTS[constant]
                else:
                    try:
                        value, pos = decode(src, at)
                    except (ValueError, StopIteration, RecursionError):
                        if rewritten or not ("True" in src or "False" in src or "None" in src):
                            return calls, end, False, at
                        # the rest from the call that stopped the reader, its constants as JSON (same positions)
                        rest = _NESTED_CONSTANTS.sub(lambda c: _AS_JSON[c[1]] if c[1] else c[0], src[end:])
                        return read_on(src[:end] + rest, end, calls, limit, make, True, sep)
                    if key is not None:
                        args[key] = value
                    elif type(value) is not dict or not value.keys().isdisjoint(args):
                        return calls, end, False, at
                    else:  # "**{...}": the renderer's form for keys that are not identifiers
                        args.update(value)
                    at = pos
                arg = next_arg(src, at)
            if arg is None:
                break
        if one_a_line and src.find("\n", m.start(1), at) >= 0:
            break
        add((name, args) if make is None else make(name, args))
        end = at
        m = next_call(src, at)
        if limit is not None and len(calls) >= limit:
            return calls, end, m is not None and m.group(1) is None and m.end() == len(src), end
    return calls, end, False, at


# ---- The ast reader --------------------------------------------------------------------------------------------

# A keyword followed by "=" (not "=="): the only case that needs the tokenize pass of _mangle_keywords.
_KEYWORD_ARG = re.compile(r"\b(?:" + "|".join(keyword.kwlist) + r")\s*=(?!=)")


def _mangle_keywords(src: str) -> str:
    """Renames keyword tokens used as argument names (``from=``) so :func:`ast.parse` accepts them."""
    tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    starts = list(itertools.accumulate(map(len, src.splitlines(keepends=True)), initial=0))
    for tok, nxt in reversed(list(itertools.pairwise(tokens))):  # (from the end: the offsets before stay right)
        if tok.type == tokenize.NAME and keyword.iskeyword(tok.string) and nxt.type == tokenize.OP and nxt.string == "=":
            off = starts[tok.start[0] - 1] + tok.start[1]
            src = src[:off] + MANGLE + src[off:]
    return src


def _offset(src: str, lineno: int | None, col: int | None) -> int:
    """Character offset of an ast/SyntaxError position (``col`` counted in UTF-8 bytes by ast)."""
    lines = src.splitlines(keepends=True)[: lineno or 0]
    line = lines.pop() if lineno and len(lines) == lineno else ""
    return sum(map(len, lines)) + len(line.encode("utf-8")[: max(col or 0, 0)].decode("utf-8", errors="ignore"))


def parse_quietly(src: str) -> ast.expr:
    """``ast.parse`` in eval mode without the SyntaxWarnings broken text provokes (``1if``, ``"\\d"``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning, and DeprecationWarning before Python 3.12
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
    except (tokenize.TokenError, ValueError) as e:
        raise fmt.error(f"not a pythonic call list: {e}", offset) from None
    except (RecursionError, MemoryError):
        raise fmt.error("expression nested too deeply", offset) from None


def _arg_name(name: str) -> str:
    if name.startswith(MANGLE) and keyword.iskeyword(name[len(MANGLE) :]):
        return name[len(MANGLE) :]
    return name


def dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class Literals:
    """Literal ast nodes as JSON values. ``strict`` refuses tuples, sets, unknown names and bytes, else read as lists
    and strings; a value no JSON value holds (``1e999``, ``1j``) fails in either mode."""

    def __init__(self, fmt: WireFormat, src: str, offset: int, strict: bool,
                 problems: list[Problem] | None = None) -> None:
        self.fmt, self.src, self.offset, self.strict = fmt, src, offset, strict
        self.problems = problems  # where a lenient reading notes what it read otherwise than as written

    def fail(self, node: ast.AST, message: str) -> FormatError:
        return self.fmt.error(
            message, self.offset + _offset(self.src, getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        )

    def _source(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.src, node) or ""

    def _number(self, node: ast.expr, v: Any) -> None:
        if isinstance(v, float) and not math.isfinite(v):  # 1e999: no JSON number holds it
            raise self.fail(node, f"number {self._source(node)[:40]} is out of range (no JSON number holds it)")

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            v = node.value
            self._number(node, v)
            if v is None or isinstance(v, (str, bool, int, float)):
                return v
            if isinstance(v, bytes) and not self.strict:
                text = v.decode("utf-8", errors="replace")
                if self.problems is not None:
                    self.problems.append(Problem("bad_argument", f"bytes literal {self._source(node)[:40]} read as "
                                                                 f"the string {text[:40]!r}"))
                return text
            raise self.fail(node, f"{type(v).__name__} literal {self._source(node)[:40]} is not a JSON value")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(
                node.operand, ast.Constant):
            v = node.operand.value
            self._number(node, v)
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
        if isinstance(node, ast.Name) and node.id in CONSTANTS:  # (True, False and None are ast.Constant)
            return CONSTANTS[node.id]
        if isinstance(node, ast.Call):  # (its value is the inner call's result, which no call list holds)
            raise self.fail(node, f"a call to {dotted_name(node.func) or 'a function'} as a value (a composition)")
        if not self.strict:
            return self._source(node)
        raise self.fail(node, f"{type(node).__name__} is not a literal value")

    def arguments(self, call: ast.Call, problems: list[Problem] | None = None,
                  params: Iterable[str] | None = None) -> dict[str, Any]:
        """Keyword arguments of ``call`` (``**{...}`` merged). With ``problems`` (lenient, each noted there),
        positional ones are placed on ``params`` (:func:`place_positional`) and bad values dropped; else errors."""
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


def place_positional(values: list[Any], args: dict[str, Any], params: Iterable[str] | None,
                     problems: list[Problem]) -> bool:
    """Places positional ``values`` on ``params`` (in order) in ``args`` when they fit (no more values than
    parameters, none also given by name, all JSON values), else drops them; noted in ``problems``. Whether placed."""
    names = list(params or ())[: len(values)]
    fits = len(names) == len(values) and values and not any(n in args for n in names)
    if fits and not any(v is _UNPLACEABLE for v in values):
        placed = dict(zip(names, values)) | args  # (first, as written)
        args.clear()
        args.update(placed)
        problems.append(Problem("bad_argument", f"{len(values)} positional argument(s) read as "
                                                f"{', '.join(names)} (the tool's parameters in declared order)"))
        return True
    why = "the tool's parameters are not known" if params is None else "they do not fit the tool's parameters"
    problems.append(Problem("bad_argument", f"{len(values)} positional argument(s) dropped: {why}"))
    return False


MAX_AST_CHARS = 4096  # characters of a call list the ast reader takes; fast_call_list reads any length


def strict_call_list(fmt: WireFormat, src: str, offset: int) -> list[ToolCall]:
    """The calls of the pythonic list ``src`` (``offset``: where it starts), strictly: :func:`fast_call_list`, else
    ``ast`` up to :data:`MAX_AST_CHARS`; a ``FormatError`` of ``fmt`` names the place."""
    fast = fast_call_list(src)
    if fast is not None:
        return fast
    if len(src) > MAX_AST_CHARS:
        raise fmt.error(f"a call list not in the plain layout (JSON literal values, keyword arguments) is longer "
                        f"than the {MAX_AST_CHARS} characters the general reader takes", offset)
    node = parse_expr(fmt, src, offset)
    lit = Literals(fmt, src, offset, strict=True)
    if not isinstance(node, ast.List):
        raise lit.fail(node, "the calls must be a [...] list")
    calls = []
    for el in node.elts:
        name = dotted_name(el.func) if isinstance(el, ast.Call) else None
        if name is None:
            raise lit.fail(el, "list items must be calls like name(key=value), named by an identifier")
        calls.append(ToolCall(name, lit.arguments(el)))
    return calls


# ---- Rendering -------------------------------------------------------------------------------------------------


def _is_plain_identifier(key: str) -> bool:
    return (key.isidentifier() if key.isascii() else _plain(key)) and not key.startswith(MANGLE)


def literal(value: Any) -> str:
    """A JSON value as Python source: its JSON text, Python's constants for JSON's (Python reads the rest alike)."""
    return _JSON_CONSTANTS.sub(lambda m: _AS_PYTHON[m[1]] if m[1] else m[0], dumps(value))


def render_call(name: str, arguments: dict[str, Any]) -> str:
    plain = [f"{k}={literal(v)}" for k, v in arguments.items() if _is_plain_identifier(k)]
    other = {k: v for k, v in arguments.items() if not _is_plain_identifier(k)}
    if other:
        plain.append("**" + literal(other))
    return f"{name}({', '.join(plain)})"


_STRING_PIECES = re.compile(r"\\.|['\"]|[^\\'\"]+|\\", re.DOTALL)


def lenient_string(raw: str) -> tuple[str, bool] | None:
    """For ``raw`` that is one leniently quoted string (:func:`string_end`): ``(text, whether it holds unescaped
    quotes of its own kind)``, escapes decoded as Python does; else ``None``."""
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
        value = None
    return (value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else body), unescaped
