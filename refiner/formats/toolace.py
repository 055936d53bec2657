"""ToolACE: a pythonic call list ``[Func_Name(a="v", b=2), other(x=[1, 2])]`` inside
``<function_list>...</function_list>`` (the tags are the refiner's, Tool-Use Refiner Appendix B.2), read by
:mod:`refiner.formats.pythonic`; names with spaces (raw ToolACE's ``Get Stock Price(...)``) are read leniently.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, FormatError, Lenient, Problem, WireFormat, offered_tools
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, budget_spent, charge, lenient_json, take_items
from refiner.formats.lenient import lenient_region
from refiner.formats.pythonic import (
    IDENTIFIER_NAME,
    MAX_AST_CHARS,
    Literals,
    PythonicWriter,
    dotted_name,
    fast_call_prefix,
    lenient_string,
    looks_pythonic,
    parse_expr,
    parse_quietly,
    place_positional,
    render_call,
    strict_call_list,
)
from refiner.formats.pythonic_mend import mend_list
from refiner.formats.pythonic_scan import list_start, matching_paren, open_brackets, split_top_level
from refiner.formats.strict import tagged_span
from refiner.formats.text import skip_ws

OPEN, CLOSE = "<function_list>", "</function_list>"
# Recovery reads at most this many items of a broken list, from this many characters after its plain-layout prefix;
# each character handed to ast costs this many repair-budget units.
MAX_RECOVERED_SEGMENTS = 128
MAX_RECOVER_CHARS = 4096
AST_COST_PER_CHAR = 2
# Strict parsing looks this far (quotes respected) for the list's own end when a closing tag sits inside a string.
MAX_QUOTED_TAG_LIST = 4096


def _quoted_close_end(text: str, a: int, b: int) -> int | None:
    """Where the closing tag after the list at ``a`` lies when the list ends after ``b`` (the first closing tag,
    then inside one of its strings); else ``None``."""
    i = skip_ws(text, a)
    if not text.startswith("[", i):
        return None
    window = text[i : i + MAX_QUOTED_TAG_LIST]
    j = matching_paren(window, 0)
    if j >= len(window) or i + j < b:
        return None
    k = skip_ws(text, i + j + 1)
    return k if text.startswith(CLOSE, k) else None


class ToolAce(PythonicWriter, WireFormat):
    tags = (OPEN, CLOSE)
    detection = Detection(markers=(OPEN,), closers=(CLOSE,))
    name_pattern = IDENTIFIER_NAME
    pythonic = True

    def claims_text(self, body: str) -> bool:
        """Untagged pythonic calls (``[f(a=1)]`` or ``f(a=1)``) are read as this format's list."""
        return looks_pythonic(body)

    def parse_strict(self, text: str) -> list[ToolCall]:
        a, b = tagged_span(self, text, OPEN, CLOSE)
        try:
            return self._span_calls(text, a, b)
        except FormatError:
            b2 = _quoted_close_end(text, a, b)  # the first closing tag may sit inside a string of the list
            if b2 is None:
                raise
        return self._span_calls(text, a, b2)

    def _span_calls(self, text: str, a: int, b: int) -> list[ToolCall]:
        body = text[a:b]
        return strict_call_list(self, body.strip(), a + len(body) - len(body.lstrip()))

    def recover(self, text: str, out: Lenient) -> None:
        """The calls of a broken list (:meth:`recover_list`) between the tags, either of which may be missing."""
        known = len(out.problems)
        src = lenient_region(text, OPEN, CLOSE, out.problems).strip()
        missing = [p.message for p in out.problems[known:]]
        if f"missing {OPEN}" in missing:  # a misspelt or foreign opening tag (or prose) before the list is not read
            src = src[list_start(src) :]
        # (with both tags there the strict parse already read this list whole and failed)
        recover_list(self, src, out, read_whole=bool(missing), at_end=f"missing {CLOSE}" in missing)

    def render(self, calls: Sequence[ToolCall]) -> str:
        return f"{OPEN}[{', '.join(render_call(c.name, dict(c.arguments)) for c in calls)}]{CLOSE}"


def recover_list(fmt: WireFormat, src: str, out: Lenient, *, read_whole: bool, at_end: bool) -> None:
    """Adds the calls of the pythonic list ``src`` (tags removed) to ``out``: the plain-layout prefix by the fast
    reader; then the whole list by :mod:`ast` when ``read_whole`` (no strict parse read it); else, or when that
    fails, the list mended (:func:`~refiner.formats.pythonic_mend.mend_list`) or the rest item by item, quotes read
    leniently. ``at_end``: the text ends inside the list."""
    prefix, end, complete, _ = fast_call_prefix(src, limit=MAX_RECOVERED_ITEMS)
    k = take_items(len(prefix))
    if k < len(prefix) or (len(prefix) >= MAX_RECOVERED_ITEMS and not complete):
        out.calls.extend(ToolCall.trusted(name, args) for name, args in prefix[:k])
        out.note("gave_up", f"stopped after {len(out.calls)} calls; the rest was not read")
        return
    if read_whole:
        if complete:
            out.calls.extend(ToolCall.trusted(name, args) for name, args in prefix)
            return
        if len(src) > MAX_AST_CHARS or charge(AST_COST_PER_CHAR * len(src)):
            try:
                out.calls.extend(strict_call_list(fmt, src, 0))
                return
            except FormatError as e:
                out.note("strict", str(e))
    if not complete and not at_end:
        mended = mend_list(src, end, prefix, offered_tools())
        if mended is not None:  # one character lost or doubled: the list read with it mended
            calls, what = mended
            out.calls.extend(ToolCall.trusted(name, args) for name, args in calls)
            out.note("mended", f"broken call list read whole: {what}")
            return
    out.calls.extend(ToolCall.trusted(name, args) for name, args in prefix)
    if end:
        src = src[end:].lstrip().removeprefix(",")
    src = src.removeprefix("[")
    if len(src) > MAX_RECOVER_CHARS:
        out.note("gave_up", f"only the first {MAX_RECOVER_CHARS} characters of the broken list were read")
        src, at_end = src[:MAX_RECOVER_CHARS], False
    elif src.endswith("]") and matching_paren("[" + src, 0, lenient_quotes=True) == len(src):
        src, at_end = src[:-1], False  # the list's own "]": the text does not stop inside it
    segments = split_top_level(src, lenient_quotes=True)
    for n, segment in enumerate(segments):
        if n >= MAX_RECOVERED_SEGMENTS or budget_spent():
            out.note("gave_up", f"gave up after {n} of the list's items")
            return
        if segment.strip():
            last = at_end and n == len(segments) - 1
            _recover_call(fmt, segment.strip(), out, last)

def _recover_call(fmt: WireFormat, segment: str, out: Lenient, last: bool) -> None:
    """Adds the call ``segment`` holds; ``last``: the text ends inside this segment, so an unclosed call is cut."""
    problems = out.problems
    p = segment.find("(")
    if p <= 0:
        problems.append(Problem("not_a_call", f"not a call: {segment[:80]!r}"))
        if last and out.calls and _PARTIAL_NAME.fullmatch(segment):  # "[f(a=1), get_we": cut inside a name
            out.mark_cut(None)
        return
    name = " ".join(segment[:p].split())
    if not _is_dotted(name):
        problems.append(Problem("bad_name", f"tool name {name!r} is not an identifier"))
    close = matching_paren(segment, p, lenient_quotes=True)
    unclosed = close == len(segment)
    if unclosed:
        problems.append(Problem("unclosed", f"unclosed '(' in {name!r}"))
    inner = segment[p + 1 : close]
    args = _recover_args(fmt, inner, problems, _declared(name))
    out.calls.append(ToolCall(name, args))
    if last and unclosed:
        complete, clean = _cut_arguments(inner, args)
        out.mark_cut(len(out.calls) - 1, name, complete, clean)

def _recover_args(fmt: WireFormat, inner: str, problems: list[Problem], params: Mapping[str, Any] | None = None) -> dict:
    """The arguments a call's text between its parentheses holds; ``params``: the tool's declared parameters (for
    positional values)."""
    src = f"f({inner})"
    if len(src) <= MAX_AST_CHARS and charge(AST_COST_PER_CHAR * len(src)):
        try:
            node = parse_expr(fmt, src, 0)
            if isinstance(node, ast.Call):
                return Literals(fmt, src, 0, strict=False).arguments(node, problems, params)
        except FormatError:
            pass
    args = {}
    positional: list[Any] = []
    for part in split_top_level(inner, lenient_quotes=True):
        key, eq, raw = part.partition("=")
        if not eq or not key.strip() or not _ARG_NAME.fullmatch(key.strip()):
            if part.strip() and not positional and not args and _ARG_NAME.fullmatch(part.strip()) is None:
                value = _recover_value(fmt, "", part.strip(), problems, None)
                if value is not _DROPPED:
                    positional.append(value)
                    continue
            if part.strip():
                problems.append(Problem("bad_argument", f"argument without a name dropped: {part.strip()[:80]!r}"))
            continue
        key = key.strip()
        value = _recover_value(fmt, key, raw.strip(), problems, params.get(key) if params else None)
        if value is not _DROPPED:
            args[key] = value
    if positional:
        place_positional(positional, args, params, problems)
    return args

def _recover_value(fmt: WireFormat, key: str, raw: str, problems: list[Problem], param: Any = None) -> object:
    """One argument's value: a Python literal; else a string whose quotes were not escaped; else repaired JSON; else
    the text; :data:`_DROPPED` for no value or a number no JSON number holds; ``07`` as 7, or as text when ``param``
    declares a string. All but a literal reported."""
    if not raw:
        problems.append(Problem("bad_argument", f"argument {key!r} has no value; dropped"))
        return _DROPPED
    if len(raw) <= MAX_AST_CHARS and charge(AST_COST_PER_CHAR * len(raw)):
        try:
            node = parse_expr(fmt, raw, 0)
        except FormatError:
            node = None
        if node is not None:
            try:
                return Literals(fmt, raw, 0, strict=False, problems=problems).value(node)
            except FormatError as e:
                problems.append(Problem("bad_argument", f"argument {key!r} dropped: {e.message}"))
                return _DROPPED
    if _LEADING_ZEROS.fullmatch(raw):
        if getattr(param, "type", None) == "string":
            problems.append(Problem("bad_argument", f"value {raw!r} of {key!r} written without quotes; read as "
                                                    "the string its parameter declares"))
            return raw
        problems.append(Problem("bad_argument", f"value {raw!r} of {key!r} written with leading zeros; read as "
                                                f"{int(raw)}"))
        return int(raw)
    text = lenient_string(raw) if len(raw) <= MAX_AST_CHARS else None
    if text is not None:
        value, unescaped = text
        if unescaped:
            problems.append(Problem("bad_argument", f"value of {key!r} holds a {raw[0]} that was not escaped; read "
                                                    f"to the quote that ends the value: {value[:60]!r}"))
        return value
    value = lenient_json(raw)
    if value is None:
        problems.append(Problem("bad_argument", f"value {raw[:80]!r} kept as text"))
        return raw.strip("\"'")
    return value


_DROPPED: Any = object()  # an argument read as no value (dropped, with a problem)
_ARG_NAME = re.compile(r"[^\W\d]\w*")
_LEADING_ZEROS = re.compile(r"[+-]?0[0-9_]*[0-9]")  # Python refuses 07; the model meant 7 (a month, a day)


def _declared(name: str) -> Mapping[str, Any] | None:
    """The declared parameters of the offered tool ``name`` (name -> spec, in declared order), or ``None``."""
    params = (offered_tools() or {}).get(name)
    return params if params is None or isinstance(params, Mapping) else dict.fromkeys(params)


def _is_dotted(name: str) -> bool:
    """Whether ``name`` reads as a (dotted) identifier."""
    try:
        return len(name) <= MAX_AST_CHARS and dotted_name(parse_quietly(name)) is not None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


_MID_VALUE_ENDS = tuple(",=([{:")
_CONSTANTS = frozenset(("True", "False", "None", "true", "false", "null"))


_PARTIAL_NAME = re.compile(r"\s*[^\W\d][\w.]*\s*")  # what a call list cut inside its next name ends with


def _cut_arguments(inner: str, args: dict) -> tuple[dict, bool]:
    """For a call the text stops inside (``inner``: its arguments as written): ``(the arguments written whole, whether
    the text stops right after a value that cannot go on)`` (:class:`~refiner.formats.base.Cut`)."""
    tail = split_top_level(inner, lenient_quotes=True)[-1].strip()
    if not tail:  # stops after "(" or after a comma: every argument read was written whole
        return dict(args), False
    key, eq, raw = tail.partition("=")
    raw = raw.strip()
    complete = {k: v for k, v in args.items() if k != key.strip()}  # (the argument the text stops in left out)
    if not eq or not raw:  # stops in a name, or after "="
        return complete, False
    depth, in_string = open_brackets(raw, lenient_quotes=True)
    if in_string or depth:  # stops inside a string, or inside a list or dict (partly written)
        return complete, not in_string and not raw.endswith(_MID_VALUE_ENDS)
    if raw in _CONSTANTS or raw[0] in "[{(" or lenient_string(raw) is not None:
        return dict(args), True
    return complete, False  # a number (12 may be the start of 123), or half a name
