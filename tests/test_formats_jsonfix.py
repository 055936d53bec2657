"""Lenient JSON (refiner.formats.jsonfix): texts cut short are closed without json_repair, never inventing values;
everything else still reaches json_repair under the shared budget. Plus the fast paths beside it (the shared strict
decoder) give exactly the results of the general code."""

from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refiner import formats
from refiner.calls import ToolCall, canonical_json
from refiner.formats import jsonfix
from refiner.formats.base import FormatError
from refiner.formats.strict import strict_json
from test_formats_roundtrip import arguments, calls_for, json_values, names

# HYPOTHESIS_EXAMPLES=2000 for a longer hunt (the fast readers must agree with the general ones everywhere)
SETTINGS = settings(
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture
def no_json_repair(monkeypatch):
    """json_repair raises if called: what passes with this fixture was recovered without it."""
    import json_repair

    def refuse(*a, **k):
        raise AssertionError("json_repair was called")

    monkeypatch.setattr(json_repair, "loads", refuse)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[{"a": 1}, {"b": "xy', [{"a": 1}, {"b": "xy"}]),  # open string closed
        ('{"a": 1, "b"', {"a": 1}),  # a key without its value is dropped
        ('{"a": 1, "b":', {"a": 1}),
        ('{"a": 1, "b": ', {"a": 1}),
        ('{"a": 1,', {"a": 1}),  # trailing comma
        ('{"a": [1, 2', {"a": [1, 2]}),  # a number at the end is kept as written
        ('{"a": 1.5e', {}),
        ('{"a": 1.', {}),
        ('{"a": 1, "b": -', {"a": 1}),
        ('{"a": true', {"a": True}),
        ('{"a": tru', {}),  # half a literal is not a value
        ('{"x": {"y": 1}, "z": {"w', {"x": {"y": 1}, "z": {}}),
        ("[", []),
        ('{"a": "say \\"hi', {"a": 'say "hi'}),  # an escaped quote does not end the string
        ('{"a": "[{,:", "b": [1, ', {"a": "[{,:", "b": [1]}),  # brackets inside strings are text
        ('[{"name": "f", "arguments": {"q": "a\\', [{"name": "f", "arguments": {}}]),  # cut inside an escape
        ('  {"a": 1  \n', {"a": 1}),
    ],
)
def test_cut_texts_are_closed_without_json_repair(no_json_repair, text, expected):
    assert jsonfix.lenient_json(text) == expected


@pytest.mark.parametrize("text", ['{"a": 1,}', "{'a': 1}", '{"a": True}', '[{"a": 1} {"b": 2}]'])
def test_other_defects_still_reach_json_repair(text, monkeypatch):
    import json_repair

    seen = []
    real = json_repair.loads
    monkeypatch.setattr(json_repair, "loads", lambda t, *a, **k: seen.append(t) or real(t, *a, **k))
    value = jsonfix.lenient_json(text)
    assert seen == [text]
    assert value is not None


def test_ran_off_the_end_only_for_cut_texts():
    cases = [('{"a": 1', True), ('{"a": "x', True), ("[1, ", True), ('{"a": fal', True), ('{"a": -', True)]
    cases += [('{"a": 1,}', False), ("{'a'", False), ('{"a": falsy', False), ('{"a": x', False)]
    for text, cut in cases:
        with pytest.raises(json.JSONDecodeError) as e:
            json.loads(text)
        assert jsonfix.ran_off_the_end(text, e.value) is cut, text


@SETTINGS
@given(st.lists(st.fixed_dictionaries({"name": names, "arguments": arguments}), min_size=1, max_size=4))
def test_every_prefix_of_a_call_list_keeps_the_complete_calls(calls):
    """Cut anywhere, a call list comes back as the calls before the cut, unchanged, plus at most one partial call
    whose content is a prefix of the real one: nothing is invented."""
    text = json.dumps(calls, ensure_ascii=False)
    for cut in range(1, len(text)):
        prefix = text[:cut]
        try:
            json.loads(prefix)
            continue  # not cut short (e.g. a whole number)
        except json.JSONDecodeError as e:
            if not jsonfix.ran_off_the_end(prefix, e):
                continue
        done = jsonfix._complete(prefix)
        value = None if done is None else done[0]
        assert isinstance(value, list), prefix
        assert len(value) <= len(calls)
        if value:
            assert value[:-1] == calls[: len(value) - 1], prefix
            _assert_partial(value[-1], calls[len(value) - 1], prefix)


def _assert_partial(got, full, where):
    """``got`` is what a cut can leave of ``full``: equal, or the same type holding partial content."""
    if got == full:
        return
    if isinstance(full, str):
        assert isinstance(got, str) and full.startswith(got), where
    elif isinstance(full, dict):
        assert isinstance(got, dict) and list(got) == list(full)[: len(got)], where
        for k in list(got)[:-1]:
            assert got[k] == full[k], where
        if got:
            last = list(got)[-1]
            _assert_partial(got[last], full[last], where)
    elif isinstance(full, list):
        assert isinstance(got, list) and len(got) <= len(full), where
        if got:
            assert got[:-1] == full[: len(got) - 1], where
            _assert_partial(got[-1], full[len(got) - 1], where)
    elif isinstance(full, (int, float)) and not isinstance(full, bool) and re.search(r"[0-9.eE+-]\Z", where):
        assert isinstance(got, (int, float)) and not isinstance(got, bool), where  # the text ends in this number
    else:  # literals, and numbers before the cut, come back whole or not at all
        raise AssertionError(f"{where}: {got!r} is not part of {full!r}")


@SETTINGS
@given(json_values, st.sampled_from(["", " ", "\n\t ", "\x0c", "\u00a0", " x", "]"]))
def test_strict_json_is_json_loads_without_nan(value, pad):
    fmt = formats.get("hermes")
    text = pad + json.dumps(value, ensure_ascii=False) + pad
    try:
        expected = json.loads(text)
    except json.JSONDecodeError:
        with pytest.raises(FormatError):
            strict_json(fmt, text)
        return
    assert strict_json(fmt, text) == expected
    for const in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(FormatError, match="not valid JSON"):
            strict_json(fmt, f"[{const}]")


def test_toolace_recovery_reads_a_bounded_number_of_items():
    """Items outside the plain layout are recovered one by one (an ast parse each), at most MAX_RECOVERED_SEGMENTS."""
    fmt = formats.get("toolace")
    text = "<function_list>[" + ", ".join(f"f{i}(a='{i}')" for i in range(1000)) + "</function_list>"  # no ']'
    out = fmt.parse_lenient(text)
    assert [c.name for c in out.calls[:3]] == ["f0", "f1", "f2"]
    assert out.calls[0].arguments == {"a": "0"}
    assert len(out.calls) <= formats.pythonic_sentinels.MAX_RECOVERED_SEGMENTS
    assert any("gave up after" in str(p) for p in out.problems)
    assert (fmt.parse_lenient(text).calls, fmt.parse_lenient(text).problems) == (out.calls, out.problems)


def test_toolace_recovery_reads_a_plain_prefix_whole_then_item_by_item():
    """A broken list in the plain layout is read by the fast reader up to the broken item; the rest item by item.
    At most MAX_RECOVERED_ITEMS calls are read: a longer broken list stops there and says so."""
    fmt = formats.get("toolace")
    n = jsonfix.MAX_RECOVERED_ITEMS - 10
    plain = ", ".join(f"f{i}(a={i}, b=[True, null])" for i in range(n))
    text = f"<function_list>[{plain}, g(x='y', 3), h(k=1)]</function_list>"
    out = fmt.parse_lenient(text)
    assert out.calls[:n] == [ToolCall(f"f{i}", {"a": i, "b": [True, None]}) for i in range(n)]
    assert [c.name for c in out.calls[n:]] == ["g", "h"]
    assert out.calls[n].arguments == {"x": "y"} and out.calls[n + 1].arguments == {"k": 1}
    assert any("without a name dropped" in str(p) for p in out.problems)
    longer = ", ".join(f"f{i}(a={i})" for i in range(3 * jsonfix.MAX_RECOVERED_ITEMS))
    out = fmt.parse_lenient(f"<function_list>[{longer}, g(x='y', 3)]</function_list>")
    assert len(out.calls) == jsonfix.MAX_RECOVERED_ITEMS
    assert out.calls[-1] == ToolCall(f"f{jsonfix.MAX_RECOVERED_ITEMS - 1}", {"a": jsonfix.MAX_RECOVERED_ITEMS - 1})
    assert any(p.code == "gave_up" for p in out.problems)


def test_parse_lenient_limit_reads_the_answer_after_the_reasoning():
    fmt = formats.get("hermes")
    call = '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
    text = "<think>" + "r" * 5000 + "</think>" + call + " " * 100 + '<tool_call>{"name": "b", "arguments": {'
    full = fmt.parse_lenient(text)
    cut = fmt.parse_lenient(text, limit=len(call) + 10)
    assert [c.name for c in full.calls] == ["a", "b"]
    assert [c.name for c in cut.calls] == ["a"]
    assert not cut.ok and any(p.code == "cut_input" for p in cut.problems)
    assert fmt.parse_lenient("<think>" + "r" * 5000 + "</think>" + call, limit=10).ok  # valid: strict, no limit


def _ast_calls(src: str):
    """The ast reading of a toolace call list (the fast reader bypassed); None when it rejects the text."""
    import ast

    from refiner.formats import pythonic

    fmt = formats.get("toolace")
    try:
        node = pythonic.parse_expr(fmt, src, 0)
        if not isinstance(node, ast.List):
            return None
        lit = pythonic.Literals(fmt, src, 0, strict=True)
        out = []
        for el in node.elts:
            name = pythonic.dotted_name(el.func) if isinstance(el, ast.Call) else None
            if name is None:
                return None
            out.append((name, lit.arguments(el)))
        return out
    except FormatError:
        return None


_MUTATIONS = [
    *["", " ", "\t", "\n", "'", '"', "(", ")", "[", "]", "{", "}", ",", "=", "\\", "#", "1", "e", ".", "-", "+"],
    *["True", "None", "true", "NaN", "\u3000", "\x0c", "\x00", "x(", "**", "\\/", "\\ud83d\\ude00", "from="],
    *["False", "[True, None]", '{"k": False}', "True)", "Truex", "None(", "g(", "b=", "__kw__if=", ".", "1.0"],
    *["é", "\u00b7", "\u0301", "\ufb01", "日", '**{"a b": 1}', "**{}", "**[1]"],
]


def _typed(calls):
    """Calls (ToolCalls or (name, arguments) pairs) with their JSON types visible (1, 1.0 and True compare equal in
    Python)."""
    pairs = None if calls is None else [(c.name, dict(c.arguments)) if isinstance(c, ToolCall) else c for c in calls]
    return None if pairs is None else canonical_json([[n, a] for n, a in pairs])


@SETTINGS
@given(calls_for("toolace"), st.data())
def test_toolace_fast_reader_agrees_with_ast(calls, data):
    """fast_call_list reads the renderer's layout like ast does; on mutated text it either declines or agrees with
    ast (which then accepts the text too)."""
    from refiner.formats.pythonic import fast_call_list, render_call

    src = "[" + ", ".join(render_call(c.name, dict(c.arguments)) for c in calls) + "]"
    expected = _ast_calls(src)
    assert expected is not None
    got = fast_call_list(src)
    assert got is not None  # the renderer's layout, '**{...}' for keys that are not identifiers included
    assert _typed(got) == _typed(expected)
    for _ in range(10):
        i = data.draw(st.integers(0, len(src)))
        j = data.draw(st.integers(i, min(len(src), i + 3)))
        mutated = src[:i] + data.draw(st.sampled_from(_MUTATIONS)) + src[j:]
        fast = fast_call_list(mutated)
        if fast is not None:
            assert _typed(fast) == _typed(_ast_calls(mutated)), mutated


def test_toolace_fast_reader_takes_real_renderings(nestools_records):
    """Real calls rendered by the format are read by the fast reader, with ast's result."""
    from refiner.formats.pythonic import fast_call_list

    fmt = formats.get("toolace")
    taken = 0
    for rec in nestools_records[:300]:
        calls = [ToolCall(c["api_name"], c.get("parameters") or {}) for c in rec["call"]]
        text = fmt.render(calls)
        src = text[len("<function_list>") : -len("</function_list>")]
        fast = fast_call_list(src)
        if fast is not None:
            taken += 1
            assert _typed(fast) == _typed(_ast_calls(src))
        assert fmt.parse_strict(text) == calls
    assert taken >= 290


@pytest.mark.parametrize("char", ["\x0c", "/", "\\", "\b", "\t", "\u00e9", "\\f"])
def test_escapes_survive_the_json_repair_path(char):
    """A string's escapes mean the same on every path: a text cut after a key (which only json_repair reads) keeps
    the form feed of ``\\f`` and the slash of ``\\/`` (json_repair alone keeps both as a backslash and a letter)."""
    value = {"a": "x" + char + "y", "b": [1]}
    text = json.dumps(value)
    for escaped in (text, text.replace("/", "\\/")):
        cut = escaped[:-1] + ', "c":'
        assert jsonfix.lenient_json(cut)["a"] == value["a"], cut


@pytest.mark.parametrize("text,expected", [
    ('{"a: 1, "b": 2}', {"a": 1, "b": 2}),  # a key's closing quote lost
    ('{"a": 1, "b: true}', {"a": 1, "b": True}),  # ... in the last member (not a cut: the key holds ': ')
    ('{"a" 1, "b": 2}', {"a": 1, "b": 2}),  # a colon lost
    ('{"a": "x, y, "b": 2}', {"a": "x, y", "b": 2}),  # a string value's closing quote lost
    ('{"a": 1, b": 2}', {"a": 1, "b": 2}),  # a key's opening quote lost
    ('{"a": kg/m3", "b": ["c", d"]}', {"a": "kg/m3", "b": ["c", "d"]}),  # a value's opening quote lost
])
def test_a_lost_quote_or_colon_is_put_back_where_the_decoder_stops(no_json_repair, text, expected):
    assert jsonfix.lenient_json(text) == expected


@pytest.mark.parametrize("text", ['{"a": 1, "b', '{"note": "see: the', '{"a": "x", "b": "y', '{"a": "x}'])
def test_cut_texts_are_not_mended(text):
    assert jsonfix._mended(text, _error(text))[0] is None


def test_a_value_whose_closing_quote_was_lost_before_a_closing_tag():
    """Before a closing tag the text was not cut: the brackets that end it close the value's string too."""
    assert jsonfix.lenient_json('{"a": 1, "b": "x}', at_end=False) == {"a": 1, "b": "x"}
    assert jsonfix.lenient_json('{"a": ["x", "y]}', at_end=False) == {"a": ["x", "y"]}
    assert jsonfix.lenient_json('{"a": 1, "b": "x}', at_end=True) == {"a": 1, "b": "x}"}  # at the end: a cut


def _error(text: str) -> json.JSONDecodeError:
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return e
    raise AssertionError(text)


def test_a_mended_value_followed_by_text_keeps_its_mends():
    """A key that lost its closing quote is put back before its ``: `` even when text follows the value (a closing
    token): the mended text is read as any value followed by text is, not the broken one (which reads the key as a
    string running on to the next quote)."""
    assert jsonfix.lenient_json('{"a: 1}</tag>') == {"a": 1}
    assert jsonfix.lenient_json('{"a": {"b: 1}}}') == {"a": {"b": 1}}
    assert jsonfix.lenient_json('{"a: 1} {"b": 2}') == [{"a": 1}, {"b": 2}]
    text = '<|tool_call|>{"name": "f", "arguments": {"body: {"mode": "DRY", "on": false}}}<|/tool_call|>'
    want = [ToolCall("f", {"body": {"mode": "DRY", "on": False}})]
    assert formats.get("granite").parse_lenient(text).calls == want
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "body": {"type": "object"}}}}}]
    from refiner.pipeline import Refiner

    res = Refiner().refine({"upstream": text, "format": "phi4_mini_tags", "tools": tools})
    assert res["calls"] == [{"name": "f", "arguments": {"body": {"mode": "DRY", "on": False}}}]
