"""Strict parsing rejects what a format cannot resolve (with a message and a position), lenient parsing recovers
what it can and says what it met, and detection tells apart formats that share tags."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError, detect_format
from refiner.formats.strict import strict_fields

# (format, text, words the error message must contain)
BAD = [
    ("hermes", '{"name": "a", "arguments": {}}', "no <tool_call>"),
    ("hermes", '<tool_call>{"name": "a", "parameters": {}}</tool_call>', "unexpected keys"),
    ("hermes", '<tool_call>{"name": "a", "arguments": {"x": [1, NaN]}}</tool_call>', "NaN"),
    ("glaive", '{"name": "a", "arguments": "{}"} <|endoftext|>', "missing <functioncall>"),
    ("glaive", '<functioncall> {"name": "a", "arguments": \'{"x": 1}\'} then prose', "missing <|endoftext|>"),
    ("glaive", '<functioncall> {"name": "a", "arguments": \'[1, 2]\'} <|endoftext|>', "must be a JSON object"),
    ("glaive", '<functioncall> {"name": "a", "arguments": "{\\"x\\": [1,}"} <|endoftext|>', "invalid JSON"),
    ("toolace", "[f(a=1)]", "missing <function_list>"),
    ("toolace", "<function_list>[f(a=1)]", "without </function_list>"),
    ("toolace", '<function_list>[Get Weather(city="x")]</function_list>', "pythonic"),
    ("toolace", '<function_list>[f(a=[1, {"k": {2, 3}}])]</function_list>', "Set is not a literal"),
    ("toolace", "<function_list>[f(a=[1, (2, 3)])]</function_list>", "Tuple is not a literal"),
    ("toolace", "<function_list>[f(a=g(1))]</function_list>", "a call to g as a value"),
    ("toolace", '<function_list>[f("pos")]</function_list>', "positional"),
    ("toolace", "<function_list>[f(a=1, a=2)]</function_list>", "given twice"),
    ("toolace", '<function_list>[f(a={1: "x"})]</function_list>', "keys must be strings"),
    ("toolace", "<function_list>f(a=1)</function_list>", "must be a [...] list"),
    ("xlam", '[{"name": "a", "arguments": {}}]', "no <func_call>"),
    ("xlam", '<func_call>{"name": "a", "arguments": {}}</func_call>', "must hold a JSON list"),
    ("xlam", '<func_call>[{"name": "a", "arguments": "{}"}]</func_call>', "must be a JSON object"),
    ("xlam", '<func_call>[{"name": "a", "arguments": {}}, 3]</func_call>', "call #1"),
    ("xlam", '<func_call>[{"name": "a", "arguments": {}}] trailing</func_call>', "unexpected text"),
    (
        "nestools",
        '<nested function>[{"api_name": "a", "parameters": {}, "responses": [0]}]</nested function>',
        "list of strings",
    ),
    ("nestools", '<nested function>[{"name": "a", "parameters": {}}]</nested function>', "unexpected keys"),
    (
        "nestools",
        '<nested function>[{"api_name": "a", "responses": "API_call_0"}]</nested function>',
        "list of strings",
    ),
    ("nestools", '<nested function>[{"api_name": " ", "parameters": {}}]</nested function>', "empty 'api_name'"),
    ("hermes", '<tool_call>{"name": "a", "arguments": {}}</tool_call> <tool_call>{"name": "b"', "without </tool_call>"),
    ("hermes", '<tool_call>{"name": "a", "arguments": {}, "id": 1}</tool_call>', "unexpected keys"),
    ("order", '<order_func>[{"step": "1", "tool_list": ["a"]}]</order_func>', "integer"),
    ("order", '<order_func>[{"step": 1, "tool_list": ["a", 2]}]</order_func>', "list of strings"),
    ("order", '<order_func>[{"step": 1}]</order_func>', "no 'tool_list'"),
    ("order", '<order_func>[{"step": 1, "tool_list": ["a", " "]}]</order_func>', "empty tool name"),
    (
        "order",
        '<order_func>[{"step": 1, "tool_list": ["a"]}, {"step": 2, "tool_list": "b"}]</order_func>',
        "list of strings",
    ),
    ("apibank", '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>', "unexpected keys"),
    (
        "apibank",
        '<tool_call>\n{"name": "a", "parameters": {}}\n{"name": "b", "parameters": [}\n</tool_call>',
        "invalid JSON",
    ),
    ("apibank", "<response>Hello</response>", "no <tool_call>"),
    (
        "openai",
        '{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": {}}}]}',
        "must be a string",
    ),
    (
        "openai",
        '{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": "[1]"}}]}',
        "must be a JSON object",
    ),
    (
        "openai",
        '{"role": "assistant", "tool_calls": [{"type": "retrieval", "function": {"name": "a", "arguments": "{}"}}]}',
        "'type'",
    ),
    ("openai", '{"role": "user", "tool_calls": []}', "role"),
    ("openai", "no json here", "no assistant message"),
    ("anthropic", '[{"type": "tool_use", "id": "t", "name": "a", "input": "x"}]', "must be a JSON object"),
    ("anthropic", '[{"type": "tool_use", "id": "t", "name": "a", "input": {}}, {"type": "image"}]', "unknown 'type'"),
    ("anthropic", '[{"type": "text", "text": "hi"}]', "no tool_use"),
    ("nestful", '[{"name": "a", "arguments": {}, "label": 3}]', "must be a string"),
    ("nestful", '[{"name": "a", "arguments": [1]}]', "must be a JSON object"),
    ("nestful", '[{"name": "a", "arguments": {}, "output": "x"}]', "unexpected keys"),
]


@pytest.mark.parametrize(("name", "text", "words"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_strict_rejects_with_message_and_position(name, text, words):
    fmt = formats.get(name)
    with pytest.raises(FormatError) as info:
        fmt.parse_strict(text)
    err = info.value
    assert err.fmt == name
    assert words in err.message, err.message
    assert 0 <= err.position <= len(text)
    assert not fmt.is_valid(text)
    got = fmt.parse_lenient(text)  # lenient never raises and always reports the defect
    assert got.problems


def test_optional_fields_may_be_left_out():
    """The fast validity checks accept what the general ones do: no arguments, no responses, no label."""
    assert formats.get("nestools").parse_strict('<nested function>[{"api_name": "a"}]</nested function>') == [
        ToolCall("a", {})
    ]
    assert formats.get("nestful").parse_strict('[{"name": "a"}]') == [ToolCall("a", {})]
    assert formats.get("hermes").parse_strict('<tool_call>{"name": "a"}</tool_call>') == [ToolCall("a", {})]
    assert formats.get("xlam").parse_strict('<func_call>[{"name": "a"}]</func_call>') == [ToolCall("a", {})]


def test_error_positions_point_at_the_defect():
    fmt = formats.get("xlam")
    text = '<think>x</think><func_call>[{"name": "a", "arguments": {"k": [1, 2,]}}]</func_call>'
    with pytest.raises(FormatError) as info:
        fmt.parse_strict(text)
    assert text[info.value.position] == "]"
    text = '<function_list>[f(a=1), g(b={"x": {1, 2}})]</function_list>'
    with pytest.raises(FormatError) as info:
        formats.get("toolace").parse_strict(text)
    assert text[info.value.position] == "{" and text[info.value.position + 1] == "1"


def test_toolace_reads_keywords_json_constants_and_star_star():
    text = (
        '<function_list>[Financial_Fundamentals_API(shareuid=6789, from="2024-01-01", to="2024-12-31"), '
        'api.v2.search(flag=true, none=null, **{"max-results": 5}), neg(x=-1.5e3)]</function_list>'
    )
    assert formats.get("toolace").parse_strict(text) == [
        ToolCall("Financial_Fundamentals_API", {"shareuid": 6789, "from": "2024-01-01", "to": "2024-12-31"}),
        ToolCall("api.v2.search", {"flag": True, "none": None, "max-results": 5}),
        ToolCall("neg", {"x": -1500.0}),
    ]


def test_toolace_lenient_recovers_names_with_spaces():
    fmt = formats.get("toolace")
    text = '[Get Stock Price(symbol="AAPL", exchange=\'NASDAQ\'), Weather Forecast(city="Paris", days=(1, 2)), broken]'
    got = fmt.parse_lenient(text)
    assert got.calls == [
        ToolCall("Get Stock Price", {"symbol": "AAPL", "exchange": "NASDAQ"}),
        ToolCall("Weather Forecast", {"city": "Paris", "days": [1, 2]}),
    ]
    problems = " | ".join(map(str, got.problems))
    assert "missing <function_list>" in problems and "'Get Stock Price' is not an identifier" in problems
    assert "not a call: 'broken'" in problems


def test_toolace_lenient_unparseable_values():
    got = formats.get("toolace").parse_lenient('<function_list>[f(a="unterminated, b=2)]</function_list>')
    assert got.problems and len(got.calls) == 1 and got.calls[0].name == "f"


def test_glaive_raw_single_quoted_arguments_with_apostrophes():
    text = (
        'USER: Send it\n\n\nASSISTANT: <functioncall> {"name": "send_email", "arguments": '
        '\'{"to": "a@b.c", "body": "It\'s done, isn\'t it?"}\'} <|endoftext|>\n\n\nFUNCTION RESPONSE: {"ok": true}'
    )
    want = [ToolCall("send_email", {"to": "a@b.c", "body": "It's done, isn't it?"})]
    assert formats.get("glaive").parse_strict(text) == want
    broken = text.replace(" <|endoftext|>", "").replace("isn't it?\"}", "isn't it?\"")
    got = formats.get("glaive").parse_lenient(broken)
    assert got.calls == want and any("<|endoftext|>" in str(p) for p in got.problems)


@pytest.mark.parametrize(
    ("name", "text", "want"),
    [
        ("hermes", '<tool_call>{"name": "a", "arguments": {"x": 1,}', [ToolCall("a", {"x": 1})]),
        ("xlam", '{"name": "a", "arguments": {"x": "y"}}</func_call>', [ToolCall("a", {"x": "y"})]),
        ("xlam", "<func_call>[{'name': 'a', 'arguments': {'x': True}}]</func_call>", [ToolCall("a", {"x": True})]),
        (
            "nestools",
            '<nested function>[{"api_name": "a", "parameters": {}, "responses": ["API_call_0"]}',
            [ToolCall("a", {}, outputs=("API_call_0",))],
        ),
        (
            "order",
            '<order_func>[{"step": "2", "tool_list": ["a"]}, {"tool_list": ["b"]}]</order_func>',
            [ToolCall("a", {}, step=2), ToolCall("b", {}, step=2)],
        ),
        (
            "apibank",
            '<tool_call>\n{"name": "a", "parameters": {"x": 1}\n{"name": "b", "parameters": {}}\n',
            [ToolCall("a", {"x": 1}), ToolCall("b", {})],
        ),
        ("openai", '[{"function": {"name": "a", "arguments": "{\\"x\\": 1"}}]', [ToolCall("a", {"x": 1})]),
        (
            "anthropic",
            '{"content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "name": "a", "input": {"x": 1}',
            [ToolCall("a", {"x": 1})],
        ),
        (
            "nestful",
            'Plan: [{"name": "a", "arguments": {}, "label": "$var_1"}, {"name": "b", "arguments": {"y": "$var_1.result$"}',
            [ToolCall("a", {}, outputs=("$var_1",)), ToolCall("b", {"y": "$var_1.result$"})],
        ),
    ],
)
def test_lenient_recovers_broken_text(name, text, want):
    got = formats.get(name).parse_lenient(text)
    assert got.calls == want
    assert got.problems


def test_detect_tells_shared_tags_apart():
    hermes = '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>'
    apibank = '<think>ok</think>\n<tool_call>\n{"name": "a", "parameters": {"x": 1}}\n{"name": "b", "parameters": {}}\n</tool_call>\n<response>done</response>'
    assert detect_format(hermes) == "hermes"
    assert detect_format(apibank) == "apibank"
    # broken texts still get a best guess from tags and keys
    assert detect_format('<tool_call>\n{"name": "a", "parameters": {"x": 1}') == "apibank"
    assert detect_format('<tool_call>{"name": "a", "arguments": {"x": 1') == "hermes"
    assert detect_format('[{"name": "a", "arguments": {}}]</func_call>') == "xlam"
    assert detect_format("[Get Weather(city='Paris')]") == "toolace"
    assert detect_format('<functioncall> {"name": "a", "arguments": \'{"x": 1') == "glaive"
    assert detect_format('{"tool_calls": [{"function": {"name": "a"') == "openai"
    assert detect_format("I cannot help with that.") is None
    assert detect_format("") is None


def test_detect_priority_is_first_tag():
    text = '<func_call>[{"name": "a", "arguments": {}}]</func_call> and then <tool_call>{"name": "b"'
    assert detect_format(text) == "xlam"
    text = 'broken <order_func>[{"step": 1, "tool_list": ["a"]} <func_call>'
    assert detect_format(text) == "order"


def test_every_format_has_description_and_tags():
    for fmt in formats.all_formats():
        assert fmt.description and (fmt.tags or fmt.detection.by_name), fmt.name


@pytest.mark.parametrize(
    ("name", "text", "want"),
    [
        ("nestful", 'Plan [draft]: [{"name": "a", "arguments": {"x": 1}', [ToolCall("a", {"x": 1})]),
        ("openai", 'Calling [now] {"tool_calls": [{"function": {"name": "a", "arguments": "{}"}}', [ToolCall("a", {})]),
        ("anthropic", 'Calling [now] [{"type": "tool_use", "name": "a", "input": {}', [ToolCall("a", {})]),
        ("xlam", '<func_call>Here [1]: [{"name": "a", "arguments": {}}</func_call>', [ToolCall("a", {})]),
    ],
)
def test_lenient_skips_bracketed_prose_before_broken_json(name, text, want):
    got = formats.get(name).parse_lenient(text)
    assert got.calls == want and got.problems


def test_glaive_end_marker_may_be_dropped_after_the_last_call_only():
    """``<|endoftext|>`` is a special token: decoding with skip_special_tokens drops it, so the last call may lack it;
    between two calls it is still required."""
    from refiner.calls import ToolCall
    from refiner.formats import FormatError, get

    g = get("glaive")
    calls = [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    text = g.render(calls)
    assert g.parse_strict(text.removesuffix("<|endoftext|>").rstrip()) == calls
    broken = text.replace("<|endoftext|>", "", 1)  # the marker between the calls is gone
    with pytest.raises(FormatError, match="endoftext"):
        g.parse_strict(broken)
    with pytest.raises(FormatError):
        g.parse_strict(text.removesuffix("<|endoftext|>") + " trailing prose")


@pytest.mark.parametrize(
    "name", ["xlam", "nestools", "order", "hermes", "apibank", "glaive", "openai", "nestful", "toolace"]
)
def test_closing_tags_quoted_inside_strings_are_text(name):
    """A value (or, for the order format, a tool name) holding a closing tag of any format still parses strictly:
    JSON values are decoded before their closing tag is looked for."""

    fmt = formats.get(name)
    text = " ".join(sorted(formats.all_markers()))
    call = ToolCall(text, {}, step=1) if name == "order" else ToolCall("search", {"q": text, "n": 1})
    assert fmt.parse_strict(fmt.render([call, call])) == [call, call]


def test_toolace_a_broken_list_is_still_reported_at_its_first_closing_tag():
    fmt = formats.get("toolace")
    with pytest.raises(FormatError, match="positional"):
        fmt.parse_strict('<function_list>[f("a")]</function_list> and </function_list>')


# --- strict_fields: its unchecked reading of a valid object must accept exactly what its checks accept ----------

_field_values = st.one_of(
    st.sampled_from(["f", "", "  ", "get_x"]),
    st.none(),
    st.integers(0, 3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 2) | st.text(max_size=2), max_size=2),
    st.lists(st.sampled_from(["API_call_0", "v"]), max_size=2),
)
_SHAPES = [("name", "arguments", ()), ("api_name", "parameters", ("responses",)), ("name", "arguments", ("id", "type"))]


def _is_call_object(obj, name_key, args_key, extra_keys):
    name, args = obj.get(name_key), obj.get(args_key, {})
    return (set(obj) <= {name_key, args_key, *extra_keys} and isinstance(name, str) and bool(name.strip())
            and isinstance(args, dict))


@pytest.mark.parametrize("shape", _SHAPES, ids=lambda s: s[0] + "/" + ",".join(s[2]))
@settings(max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "300")), deadline=None)
@given(data=st.data())
def test_strict_fields_accepts_exactly_call_objects(shape, data):
    name_key, args_key, extra_keys = shape
    obj = data.draw(st.dictionaries(st.sampled_from([name_key, args_key, "other", *extra_keys]), _field_values,
                                    max_size=4))
    try:
        got = strict_fields(formats.get("xlam"), obj, 0, what="call", index=0, name_key=name_key, args_key=args_key,
                            extra_keys=extra_keys)
    except FormatError:
        got = None
    if not _is_call_object(obj, name_key, args_key, extra_keys):
        assert got is None
    else:
        assert got == (obj[name_key], obj.get(args_key, {}), {k: obj[k] for k in extra_keys if k in obj})


def test_toolace_general_reader_takes_lists_up_to_its_cap_and_plain_lists_at_any_length():
    from refiner.formats.pythonic import MAX_AST_CHARS

    fmt = formats.get("toolace")
    n = MAX_AST_CHARS // 10 + 1
    quoted = "<function_list>[" + ", ".join(f"f{i}(a='v')" for i in range(n)) + "]</function_list>"  # not plain
    with pytest.raises(FormatError, match="longer than the 4096 characters"):
        fmt.parse_strict(quoted)
    out = fmt.parse_lenient(quoted)  # read item by item instead
    assert out.calls[:2] == [ToolCall("f0", {"a": "v"}), ToolCall("f1", {"a": "v"})] and not out.ok
    short = "<function_list>[" + ", ".join(f"f{i}(a='v')" for i in range(20)) + "]</function_list>"
    assert fmt.parse_strict(short) == [ToolCall(f"f{i}", {"a": "v"}) for i in range(20)]
    plain = [ToolCall(f"f{i}", {"a": "v", "b c": [1, None]}) for i in range(2 * n)]  # '**{...}' for "b c"
    assert len(fmt.render(plain)) > 4 * MAX_AST_CHARS
    assert fmt.parse_strict(fmt.render(plain)) == plain


def test_render_raises_only_render_error_for_calls_a_format_cannot_write():
    toolace = formats.get("toolace")
    for name in ("Get Stock Price", "class", "a.b c", "1abc"):
        with pytest.raises(formats.RenderError, match="toolace"):
            toolace.render([ToolCall(name, {})])
    for fmt in formats.all_formats():
        if fmt.names_only:
            continue
        for bad in (float("inf"), float("nan"), {1, 2}, object()):
            with pytest.raises(formats.RenderError):
                fmt.render([ToolCall("f", {"x": bad})])


def test_parse_strict_raises_only_format_error_whatever_the_input():
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    texts = [None, 12, b"<tool_call>", ["x"], f'<tool_call>{{"name": "f", "arguments": {{"x": {deep}}}}}</tool_call>',
             "[" * 10_000 + "]" * 10_000, "[calc(x=" + "[" * 3000 + "1" + "]" * 3000 + ")]"]
    for fmt in formats.all_formats():
        for text in texts:
            with pytest.raises(FormatError):
                fmt.parse_strict(text)
            assert fmt.is_valid(text) is False
            got = fmt.parse_lenient(text)
            assert isinstance(got, formats.Lenient) and not got.ok
    assert formats.detect_format(None) is None


def test_numbers_json_cannot_hold_are_not_valid():
    for text in ('<func_call>[{"name": "calc", "arguments": {"x": 1e999}}]</func_call>',
                 '<tool_call>{"name": "calc", "arguments": {"x": -1e999}}</tool_call>'):
        fmt = formats.get(formats.detect_format(text))
        with pytest.raises(FormatError, match="out of range"):
            fmt.parse_strict(text)


def test_json_in_prose_gives_up_inside_a_nesting_bomb():
    """Every starting point inside a nesting bomb nests too deeply: after MAX_DEEP_CANDIDATES of them the search
    stops (each is a thousand-level descent), and a value before the bomb is still found."""
    from unittest import mock

    from refiner.formats import strict as strict_mod

    fmt = formats.get("openai")
    bomb = "[" * 5000 + "]" * 5000
    calls = []
    real = strict_mod.decode_at

    def counted(*a, **k):
        calls.append(a[2])
        return real(*a, **k)

    with mock.patch.object(strict_mod, "decode_at", counted), pytest.raises(formats.FormatError):
        strict_mod.json_in_prose(fmt, "text " + bomb, lambda v: isinstance(v, dict), "a call")
    assert len(calls) == strict_mod.MAX_DEEP_CANDIDATES
    value, _ = strict_mod.json_in_prose(fmt, 'x {"a": 1} ' + bomb, lambda v: isinstance(v, dict), "a call")
    assert value == {"a": 1}
