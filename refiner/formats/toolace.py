"""ToolACE: a pythonic call list ``[Func_Name(a="v", b=2), other(x=[1, 2])]`` inside
``<function_list>...</function_list>`` (the tags are the refiner's, Tool-Use Refiner Appendix B.2).

Parsed with :mod:`ast`, literals only. Strict parsing wants identifier (or dotted) names and keyword arguments;
raw ToolACE data has names with spaces (``Get Stock Price(...)``), which lenient parsing recovers and reports.
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Sequence

from refiner.calls import ToolCall
from refiner.formats.base import Detection, FormatError, Lenient, Problem, WireFormat, register
from refiner.formats.jsonfix import budget_spent, lenient_json
from refiner.formats.lenient import lenient_region
from refiner.formats.pythonic import (
    IDENTIFIER_NAME,
    Literals,
    dotted_name,
    fast_call_list,
    fast_call_prefix,
    looks_pythonic,
    matching_paren,
    parse_expr,
    parse_quietly,
    render_call,
    split_top_level,
)
from refiner.formats.strict import tagged_span
from refiner.formats.text import skip_ws

OPEN, CLOSE = "<function_list>", "</function_list>"
# Recovery reads at most this many items of a broken list (each costs an ast parse; real answers hold a few calls).
MAX_RECOVERED_SEGMENTS = 128
# The general (ast) reader takes call lists up to this many characters: Python's parser costs about 1.5 µs per
# character, twice that on a syntax error, and the reward must stay fast on any output. Lists in the plain layout
# (what render writes) are read at any length without it.
MAX_AST_CHARS = 4096
# When the list does not end at the first closing tag, strict parsing looks (quotes respected) for the list's own
# end within this many characters: a closing tag inside a string value is text. Real answers are a few KB at most.
MAX_QUOTED_TAG_LIST = 4096


def _quoted_close_end(text: str, a: int, b: int) -> int | None:
    """Where the closing tag that ends the list starting after ``a`` lies, when the list (read with quotes
    respected, at most :data:`MAX_QUOTED_TAG_LIST` characters) ends after ``b``, the first closing tag, which then
    sits inside one of its strings; ``None`` otherwise."""
    i = skip_ws(text, a)
    if not text.startswith("[", i):
        return None
    window = text[i : i + MAX_QUOTED_TAG_LIST]
    j = matching_paren(window, 0)
    if j >= len(window) or i + j < b:
        return None
    k = skip_ws(text, i + j + 1)
    return k if text.startswith(CLOSE, k) else None


@register
class ToolAce(WireFormat):
    name = "toolace"
    description = '<function_list>[Func_Name(a="v", b=2), other(x=[1, 2])]</function_list> (pythonic, ToolACE)'
    tags = (OPEN, CLOSE)
    detection = Detection(rank=30, markers=(OPEN,), closers=(CLOSE,))
    trained = True
    name_pattern = IDENTIFIER_NAME
    pythonic = True
    example = (
        '<function_list>[search_flights(origin="New York", destination="London", date="2024-08-15", max_stops=1), get_weather(city="London", days=3, units="metric")]</function_list>'
    )

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
        return self._calls(body.strip(), a + len(body) - len(body.lstrip()))

    def _calls(self, src: str, offset: int) -> list[ToolCall]:
        fast = fast_call_list(src)  # the renderer's layout, without ast (several times faster)
        if fast is not None:
            return [ToolCall.trusted(name, args) for name, args in fast]
        if len(src) > MAX_AST_CHARS:
            raise self.error(
                f"a call list of {len(src)} characters that is not in the plain layout (JSON literal values, "
                f"keyword arguments) is longer than the {MAX_AST_CHARS} characters the general reader takes",
                offset,
            )
        node = parse_expr(self, src, offset)
        lit = Literals(self, src, offset, strict=True)
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

    def recover(self, text: str, out: Lenient) -> None:
        known = len(out.problems)
        src = lenient_region(text, OPEN, CLOSE, out.problems).strip()
        if len(out.problems) > known:  # a tag is missing: the strict parse never read this list
            try:
                out.calls.extend(self._calls(src, 0))
                return
            except FormatError as e:
                out.note("strict", str(e))
        # (with both tags there the strict parse already read this list and failed): recover it item by item, the
        # leading items in the plain layout with the fast reader
        prefix, end, _ = fast_call_prefix(src)
        out.calls.extend(ToolCall.trusted(name, args) for name, args in prefix)
        if end:
            src = src[end:].lstrip().removeprefix(",")
        src = src.removeprefix("[")
        src = src.removesuffix("]")
        for n, segment in enumerate(split_top_level(src)):
            if n >= MAX_RECOVERED_SEGMENTS or budget_spent():
                out.note("gave_up", f"gave up after {n} of the list's items")
                return
            if segment.strip():
                call = self._recover_call(segment.strip(), out.problems)
                if call is not None:
                    out.calls.append(call)

    def _recover_call(self, segment: str, problems: list[Problem]) -> ToolCall | None:
        p = segment.find("(")
        if p <= 0:
            problems.append(Problem("not_a_call", f"not a call: {segment[:80]!r}"))
            return None
        name = " ".join(segment[:p].split())
        if dotted_name(_name_node(name)) is None:
            problems.append(Problem("bad_name", f"tool name {name!r} is not an identifier"))
        close = matching_paren(segment, p)
        if close == len(segment):
            problems.append(Problem("unclosed", f"unclosed '(' in {name!r}"))
        inner = segment[p + 1 : close]
        return ToolCall(name, self._recover_args(inner, problems))

    def _recover_args(self, inner: str, problems: list[Problem]) -> dict:
        try:
            node = parse_expr(self, f"f({inner})", 0)
            if isinstance(node, ast.Call):
                return Literals(self, f"f({inner})", 0, strict=False).arguments(node, problems)
        except FormatError:
            pass
        args = {}
        for part in split_top_level(inner):
            key, eq, raw = part.partition("=")
            if not eq or not key.strip():
                if part.strip():
                    problems.append(Problem("bad_argument", f"argument without a name dropped: {part.strip()[:80]!r}"))
                continue
            args[key.strip()] = self._recover_value(raw.strip(), problems)
        return args

    def _recover_value(self, raw: str, problems: list[Problem]) -> object:
        try:
            node = parse_expr(self, raw, 0)
            return Literals(self, raw, 0, strict=False).value(node)
        except FormatError:
            pass
        value = lenient_json(raw)
        if value is None:
            problems.append(Problem("bad_argument", f"value {raw[:80]!r} kept as text"))
            return raw.strip("\"'")
        return value

    def check_renderable(self, calls: Sequence[ToolCall]) -> None:
        super().check_renderable(calls)
        for i, c in enumerate(calls):
            if any(keyword.iskeyword(part) for part in c.name.split(".")):
                raise self.render_error(f"call #{i}: tool name {c.name!r} is a Python keyword")

    def render(self, calls: Sequence[ToolCall]) -> str:
        return f"{OPEN}[{', '.join(render_call(c.name, dict(c.arguments)) for c in calls)}]{CLOSE}"


def _name_node(name: str) -> ast.expr:
    try:
        return parse_quietly(name)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ast.Constant(None)
