"""ToolACE: a pythonic call list ``[Func_Name(a="v", b=2), other(x=[1, 2])]`` inside
``<function_list>...</function_list>`` (the tags are the refiner's, Tool-Use Refiner Appendix B.2).

Parsed with :mod:`ast`, literals only. Strict parsing wants identifier (or dotted) names and keyword arguments;
raw ToolACE data has names with spaces (``Get Stock Price(...)``), which lenient parsing recovers and reports.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from refiner.calls import ToolCall
from refiner.formats.base import (
    FormatError,
    Lenient,
    WireFormat,
    budget_spent,
    lenient_json,
    lenient_region,
    register,
    tagged_span,
)
from refiner.formats.pythonic import (
    Literals,
    dotted_name,
    fast_call_list,
    matching_paren,
    parse_expr,
    parse_quietly,
    render_call,
    split_top_level,
)

OPEN, CLOSE = "<function_list>", "</function_list>"
# Recovery reads at most this many items of a broken list (each costs an ast parse; real answers hold a few calls).
MAX_RECOVERED_SEGMENTS = 256


@register
class ToolAce(WireFormat):
    name = "toolace"
    description = '<function_list>[Func_Name(a="v", b=2), other(x=[1, 2])]</function_list> (pythonic, ToolACE)'
    tags = (OPEN, CLOSE)

    def parse_strict(self, text: str) -> list[ToolCall]:
        a, b = tagged_span(self, text, OPEN, CLOSE)
        return self._calls(text[a:b].strip(), a + len(text[a:b]) - len(text[a:b].lstrip()))

    def _calls(self, src: str, offset: int) -> list[ToolCall]:
        fast = fast_call_list(src)  # the renderer's layout, without ast (several times faster)
        if fast is not None:
            return [ToolCall.trusted(name, args) for name, args in fast]
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
        src = lenient_region(text, OPEN, CLOSE, out.problems).strip()
        try:
            out.calls.extend(self._calls(src, 0))
            return
        except FormatError as e:
            out.problems.append(str(e))
        src = src.removeprefix("[")
        src = src.removesuffix("]")
        for n, segment in enumerate(split_top_level(src)):
            if n >= MAX_RECOVERED_SEGMENTS or budget_spent():
                out.problems.append(f"gave up after {n} of the list's items")
                return
            if segment.strip():
                call = self._recover_call(segment.strip(), out.problems)
                if call is not None:
                    out.calls.append(call)

    def _recover_call(self, segment: str, problems: list[str]) -> ToolCall | None:
        p = segment.find("(")
        if p <= 0:
            problems.append(f"not a call: {segment[:80]!r}")
            return None
        name = " ".join(segment[:p].split())
        if dotted_name(_name_node(name)) is None:
            problems.append(f"tool name {name!r} is not an identifier")
        close = matching_paren(segment, p)
        if close == len(segment):
            problems.append(f"unclosed '(' in {name!r}")
        inner = segment[p + 1 : close]
        return ToolCall(name, self._recover_args(inner, problems))

    def _recover_args(self, inner: str, problems: list[str]) -> dict:
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
                    problems.append(f"argument without a name dropped: {part.strip()[:80]!r}")
                continue
            args[key.strip()] = self._recover_value(raw.strip(), problems)
        return args

    def _recover_value(self, raw: str, problems: list[str]) -> object:
        try:
            node = parse_expr(self, raw, 0)
            return Literals(self, raw, 0, strict=False).value(node)
        except FormatError:
            pass
        value = lenient_json(raw)
        if value is None:
            problems.append(f"value {raw[:80]!r} kept as text")
            return raw.strip("\"'")
        return value

    def render(self, calls: Sequence[ToolCall]) -> str:
        return f"{OPEN}[{', '.join(render_call(c.name, dict(c.arguments)) for c in calls)}]{CLOSE}"


def _name_node(name: str) -> ast.expr:
    try:
        return parse_quietly(name)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ast.Constant(None)
