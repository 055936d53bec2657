"""Hostile inputs for the bounded-work tests and ``benchmarks/bench_worst_case.py``, built from the registry so that
every registered format (and any format added later) gets its own: bracket, paren, quote and tag storms (every
format's markers and tags, from :func:`refiner.formats.all_markers`), deep nesting (thousands of levels), repeated
blocks, huge numbers, very long strings, thousands of calls, texts cut short; each at a chosen size (the bound is
stated for 200 KB; the test suite runs them at a few KB, and at full size where the check is a count).

    hostile_texts(size)             -> [(kind, text)]  format-independent storms
    format_texts(fmt, size)         -> [(kind, text)]  the storms placed where a value of ``fmt`` goes, and more
    hostile_calls(size)             -> [(kind, [ToolCall])]  call lists for the gate, repair and the reward
    family_texts(fmt, size)         -> [(kind, text)]  ``fmt``'s own render of many calls and of one long call, to
                                       put through every format's reader (a reader must not rescan the text per call)
    repair_cost(region)             -> int  what json_repair on ``region`` costs, counted afresh (jsonfix's model)
"""

from __future__ import annotations

import re
from collections.abc import Callable

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.jsonfix import REPAIR_CALL_COST

# A number no other part of a rendered call holds: rendering a call with it as a value marks where a value goes in
# the format's text (inside a JSON string in OpenAI's arguments, as a literal elsewhere), so a storm can replace it.
SLOT = 731_953_157_731
# A tool and one of its parameters that the bench and the bound tests offer.
OFFERED = ("f", "b")
DEEP = 5_000  # nesting levels of the deep inputs (Python's recursion limit is 1,000)


def _fill(piece: str, size: int) -> str:
    return (piece * (size // max(len(piece), 1) + 1))[:size]


def storms(size: int) -> list[tuple[str, str]]:
    """Value-sized storms: what goes in a value slot (or makes a whole text)."""
    deep = min(DEEP, max(size // 8, 10))
    markers = formats.all_markers()
    tags = tuple(dict.fromkeys(t for f in formats.all_formats() for t in f.tags))
    return [
        ("paren_storm", "(" * size),
        ("close_paren_storm", ")" * size),
        ("bracket_storm", "[" * size),
        ("brace_storm", "{" * size),
        ("brace_bracket_storm", _fill("{]", size)),
        ("key_storm", _fill('{"', size)),
        ("quote_storm", '"' * size),
        ("single_quote_storm", "'" * size),
        ("escape_storm", _fill('\\"', size)),
        ("mixed_storm", _fill('({["\')}]', size)),
        ("marker_storm", _fill("".join(markers), size)),
        ("tag_storm", _fill("".join(tags), size)),
        ("deep_objects", '{"a":' * deep + "1" + "}" * deep),
        # just past the arguments' depth bound, and just under Python's recursion limit (which a decoder may reach)
        ("deep_objects_70", '{"a":' * 70 + "1" + "}" * 70),
        ("deep_lists_990", "[" * 990 + "]" * 990),
        ("deep_objects_open", '{"a":' * deep + "1"),
        ("deep_lists", "[" * deep + "]" * deep),
        ("deep_pythonic", "f(a=" * deep + "1" + ")" * deep),
        ("huge_int", "9" * min(size, 100_000)),
        ("huge_float", "1e999"),
        ("huge_exponent", "1" + "0" * min(size, 5_000) + ".5e99999"),
        ("long_string", '"' + _fill("x\\\"<é😀", size) + '"'),
        ("paren_in_key", '{"a": 1, "b"' + "(" * size + "}"),
        # whitespace runs: two adjacent regex quantifiers over spaces backtrack quadratically on them
        ("newline_storm", "\n" * size),
        ("space_storm", " " * size),
        ("spaces_between_keys", _fill('{"x": 1' + " " * 2000 + '"name"', size)),
        ("spaces_in_list", "[" + " " * size + "f("),
    ]


def hostile_texts(size: int) -> list[tuple[str, str]]:
    """Whole texts that belong to no format: each storm alone, and marker storms around broken JSON."""
    out = list(storms(size))
    markers = formats.all_markers()
    for m in markers:
        out.append((f"repeat {m}", _fill(m, size)))
        out.append((f"repeat {m}{{", _fill(m + "{", size)))
    # an offered tool's name after markup, again and again, each followed by a parameter and a value whose quotes,
    # like every later one, are escaped: a JSON string opened there runs to the end of the text
    name, key = OFFERED
    out.append(("offered_names_open_strings", _fill(f'<{name}: \\"{key}\\": \\"Paris \\" ', size)))
    out.append(("offered_names_open_strings_brace", _fill(f'<{name} {{\\"{key}\\": \\"Paris \\" ', size)))
    # an offered name in JSON objects opened inside one another and never closed: each one decoded runs to the end
    out.append(("offered_names_open_objects", _fill(f'{{"name": "{name}", "arguments": ', size)))
    out.append(("think_open", "<think>" + "x" * size))
    out.append(("think_storm", _fill("</think><think>", size)))
    return out


def _slot_text(fmt: formats.WireFormat) -> str:
    call = ToolCall("f", {"a": 1, "b": SLOT})
    if fmt.names_only:
        return fmt.render([ToolCall(str(SLOT), {}, step=1)]) if fmt.steps else fmt.render([ToolCall(str(SLOT), {})])
    outputs = ("API_call_0",) if fmt.outputs == "list" else ("$var_1",) if fmt.outputs == "one" else ()
    return fmt.render([ToolCall(call.name, call.arguments, outputs=outputs, step=1 if fmt.steps else None)])


def _call(i: int, fmt: formats.WireFormat, args: dict) -> ToolCall:
    outputs = (f"API_call_{i}",) if fmt.outputs == "list" else (f"$var_{i}",) if fmt.outputs == "one" else ()
    return ToolCall(f"tool_{i % 7}", {} if fmt.names_only else args, outputs=outputs,
                    step=(i // 3 + 1) if fmt.steps else None)


# Arguments of the calls in family_texts: none at all, literals only (no string, so no quote of any kind stops a
# reader early), and strings beside them.
CALL_SHAPES = {
    "no arguments": lambda i: {},
    "numbers": lambda i: {"n": i, "ok": True},
    "strings": lambda i: {"city": f"Paris {i}", "days": i, "ok": True},
}
# A source file as an agent writes it through one call: quotes, backslashes, braces, brackets, tags and line breaks,
# each of which some format escapes or ends a value at.
FILE_LINES = (
    "def render(items: list[dict[str, int]]) -> str:\n",
    '    """Rows as <tr><td>...</td></tr>, {"a": 1} -> 1."""\n',
    "    out = [f\"<td class='n'>{i['a']:>4}</td>\" for i in items if i.get('a', 0) > 0]\n",
    "    return '\\n'.join(out)  # a backslash, a tab\there, & < > ; :\n",
)


def _many(fmt: formats.WireFormat, size: int, args: Callable[[int], dict]) -> str:
    """``fmt``'s own render of as many calls as fit in ``size`` characters (the bound is stated for that size)."""
    one = fmt.render([_call(0, fmt, args(0))])
    n = max(2, size // max(len(one) - 10, 1))
    text = fmt.render([_call(i, fmt, args(i)) for i in range(n)])
    if len(text) > size:
        text = fmt.render([_call(i, fmt, args(i)) for i in range(max(2, n * size // len(text)))])
    return text


def family_texts(fmt: formats.WireFormat, size: int) -> list[tuple[str, str]]:
    """``fmt``'s own render of many calls (of each of :data:`CALL_SHAPES`), up to ``size`` characters, and of one
    call that writes a file of three quarters of ``size`` (none for a name-only format; kinds a format cannot write
    are left out). Meant for every format's reader, this one's and every other's."""
    out = []
    for shape, args in CALL_SHAPES.items():
        try:
            out.append((f"{fmt.name} calls, {shape}", _many(fmt, size, args)))
        except formats.RenderError:
            pass
    if not fmt.names_only:
        content = _fill("".join(FILE_LINES), size * 3 // 4)
        try:
            out.append((f"{fmt.name}: one call writing {len(content) // 1000} KB",
                        fmt.render([_call(0, fmt, {"path": "src/render.py", "content": content})])))
        except formats.RenderError:
            pass
    return out


def format_texts(fmt: formats.WireFormat, size: int) -> list[tuple[str, str]]:
    """Hostile texts in ``fmt``: every storm where one of its values (or, for name-only formats, a tool name) goes;
    the example repeated; thousands of calls, whole and cut short; the format's tags storming around a call."""
    out = [("repeated_example", _fill(fmt.example + "\n", size))]
    try:
        slot = _slot_text(fmt)
        many = _many(fmt, size, CALL_SHAPES["strings"])
    except formats.RenderError:  # a format that cannot write these calls: its example stands in
        slot = many = fmt.example
    if str(SLOT) in slot:
        for kind, storm in storms(size):
            out.append((f"value {kind}", slot.replace(str(SLOT), storm, 1)))
        # a quote storm after an empty string and a separator, and one followed by a second call
        try:
            two = fmt.render([ToolCall("f", {"a": 1, "b": SLOT}), ToolCall("g", {"x": 1})]) if not fmt.names_only else ""
        except formats.RenderError:
            two = ""
        for q in "\"'":
            out.append((f"value {q}{q}; then a {q} storm", slot.replace(str(SLOT), _fill(q + q + ";" + q * size, size), 1)))
            if str(SLOT) in two:
                out.append((f"{q} storm, then a second call", two.replace(str(SLOT), q * size, 1)))
    out.append(("many_calls", many))
    out.append(("many_calls_cut", many[: len(many) // 2]))
    if "Paris" in many:
        out.append(("many_calls_cut_in_string", many[: many.find("Paris", len(many) // 2) + 3]))
    for tag in fmt.tags:
        out.append((f"storm of {tag}", _fill(tag, size // 2) + slot))
        out.append((f"{tag} in a value", slot.replace(str(SLOT), '"' + _fill(tag, size) + '"', 1)))
    return out


def hostile_calls(size: int) -> list[tuple[str, list[ToolCall]]]:
    """Call lists for :func:`refiner.gate.check_calls`, :func:`refiner.repair.repair_calls` and the reward."""
    deep: object = 1
    for _ in range(min(DEEP, max(size // 8, 10))):
        deep = {"a": deep}
    deep_list: object = []
    for _ in range(min(DEEP, max(size // 8, 10))):
        deep_list = [deep_list]
    n = max(2, size // 40)
    return [
        ("deep_object", [ToolCall("book_table", {"restaurant": deep, "contact": deep})]),
        ("deep_list", [ToolCall("book_table", {"dishes": deep_list, "people": deep_list})]),
        ("huge_int", [ToolCall("book_table", {"people": 10 ** min(size, 5_000), "restaurant": "x"})]),
        ("non_finite", [ToolCall("book_table", {"people": float("inf"), "price": float("nan")})]),
        ("long_string", [ToolCall("book_table", {"restaurant": "a" * size, "time": "1" * size, "people": 2})]),
        ("many_calls", [ToolCall("book_table", {"restaurant": f"R{i}", "people": "2"}) for i in range(n)]),
        ("many_refs", [ToolCall("cancel_booking", {"booking_id": f"API_call_{i + 1}"}, outputs=(f"API_call_{i}",))
                       for i in range(n)]),
        ("many_args", [ToolCall("book_tabel", {f"p{i}": i for i in range(n)})]),
        ("long_names", [ToolCall("b" * size, {"x" * size: 1})]),
    ]


_BRACKETS = re.compile(r"[{}\[\]()]")
_MATCHES = {"}": "{", "]": "[", ")": "("}


def repair_cost(region: str) -> int:
    """What repairing ``region`` costs in :mod:`refiner.formats.jsonfix`'s model: REPAIR_CALL_COST, its length, and
    per opener the distance to its closer (the region's end for one left open)."""
    stack: list[tuple[str, int]] = []
    spans = 0
    for m in _BRACKETS.finditer(region):
        p = m.start()
        c = region[p]
        if c in "{[(":
            stack.append((c, p))
        elif stack and stack[-1][0] == _MATCHES[c]:
            spans += p - stack.pop()[1]
    n = len(region)
    return REPAIR_CALL_COST + n + spans + sum(n - q for _, q in stack)
