"""Llama 3.x JSON calls (``llama3_json``): grammar edge cases, recovery, and detection against the formats that used
to claim bare ``{"name", ...}`` objects (apibank, hermes) and bare lists (nestful, openai)."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError, detect_format
from refiner.pipeline import Refiner

L3 = formats.get("llama3_json")


def test_the_shapes_the_published_parsers_read():
    one = [ToolCall("get_weather", {"city": "Paris"})]
    for text in (
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}',
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>',
        'I will check.\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n\nDone.',
        '<think>{maybe} [a list]</think>{"name": "get_weather", "parameters": {"city": "Paris"}}',
    ):
        assert L3.parse_strict(text) == one, text
        assert detect_format(text) == "llama3_json", text
    two = '<|python_tag|>{"name": "a", "parameters": {"x": 1}} ;\n{"name": "b", "arguments": {}}'
    assert L3.parse_strict(two) == [ToolCall("a", {"x": 1}), ToolCall("b", {})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"name": "a", "parameters": {}, "arguments": {}}', "unexpected keys"),
        ('{"name": "a"}', "has no 'parameters'"),
        ('{"name": "a", "parameters": {}, "type": "tool"}', "'type' of call #0 must be 'function'"),
        ('{"name": "a", "parameters": "{}"}', "must be a JSON object"),
        ('{"name": "test", "value": 123}', "unexpected keys"),
        ('{"name": "a", "parameters": {}}; 42', "must be a JSON object"),
        ('<|python_tag|>print("x")', "must be followed by a JSON call object"),  # (a built-in call is read)
        ("Nothing to call {here}.", "no JSON call object"),
        ('[{"name": "a", "arguments": {}}]', "no JSON call object"),
    ],
)
def test_strict_errors(text, message):
    with pytest.raises(FormatError, match=message.replace("(", r"\(").replace("'", "'")):
        L3.parse_strict(text)


def test_no_call_is_silently_dropped():
    """A second call not joined by ';', or a broken one before or after the joined calls, makes the text not
    strictly valid; lenient parsing then reads every call."""
    a, b = ToolCall("a", {"x": 1}), ToolCall("b", {"y": 2})
    cases = {
        '{"name": "a", "parameters": {"x": 1}}\n{"name": "b", "parameters": {"y": 2}}': [a, b],
        '{"name": "a", "parameters": {"x": 1}}\n{"name": "b", "parameters": {"y": 2': [a, b],
        '{"name": "a", "parameters": {"x": 1,}}; {"name": "b", "parameters": {"y": 2}}': [a, b],
        '{"name": "a", "parameters": {"x": 1}} then {"name": "b", "parameters": {"y": 2}}': [a, b],
        '[{"name": "a", "parameters": {"x": 1}}, {"name: "b", "parameters": {"y": 2}}]': [a, b],  # (a name key broken)
        '{"name": "a", "parameters": {"x": 1}} then {"name: "b", "parameters": {"y": 2}}': [a, b],
    }
    for text, calls in cases.items():
        with pytest.raises(FormatError):
            L3.parse_strict(text)
        got = L3.parse_lenient(text)
        assert got.calls == calls and not got.ok, text


def test_tokens_and_separators_inside_values_are_text():
    text = '{"name": "sql", "parameters": {"q": "SELECT 1; {\\"name\\": 2}", "t": "<|python_tag|>"}}'
    assert L3.parse_strict(text) == [ToolCall("sql", {"q": 'SELECT 1; {"name": 2}', "t": "<|python_tag|>"})]
    assert detect_format(text) == "llama3_json"


def test_recovery_of_common_breakage():
    assert L3.parse_lenient('{"name": "a", "parameters": "{\\"x\\": 1}"}').calls == [ToolCall("a", {"x": 1})]
    assert L3.parse_lenient("{'name': 'a', 'parameters': {'x': 1}}").calls == [ToolCall("a", {"x": 1})]
    cut = L3.parse_lenient('<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {"y": ')
    assert cut.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    assert L3.parse_lenient("no call here").calls == []


def test_detection_against_the_formats_that_read_bare_objects():
    # strictly valid bare objects are Llama 3's whichever argument key they use
    assert detect_format('{"name": "a", "parameters": {"x": 1}}') == "llama3_json"
    assert detect_format('{"name": "a", "arguments": {"x": 1}}') == "llama3_json"
    # broken bare objects: "parameters" alone is Llama 3's shape; anything else keeps going to hermes
    assert detect_format('{"name": "a", "parameters": {"x": 1') == "llama3_json"
    assert detect_format('{"name": "a", "arguments": {"x": 1') == "hermes"
    assert detect_format('{"name": "test", "value": 123}') == "hermes"
    # tagged texts and bare lists are unchanged
    assert detect_format('<tool_call>\n{"name": "a", "parameters": {"x": 1}}\n</tool_call>') == "apibank"
    assert detect_format('<tool_call>\n{"name": "a", "parameters": {"x": 1}') == "apibank"
    assert detect_format('<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>') == "hermes"
    assert detect_format('[{"name": "a", "arguments": {"x": 1}}]') == "nestful"
    openai = '{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": "{}"}}]}'
    assert detect_format(openai) == "openai"
    assert detect_format("You can write {name} in the template.") is None


def test_render_joins_calls_with_semicolons():
    calls = [ToolCall("a", {"x": "é"}), ToolCall("b", {})]
    text = L3.render(calls)
    assert text == '{"name": "a", "parameters": {"x": "é"}}; {"name": "b", "parameters": {}}'
    assert L3.parse_strict(text) == calls


def test_pipeline_keeps_a_valid_llama3_answer_and_converts_on_request():
    text = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    res = Refiner().refine({"upstream": text})
    assert res["stage"] == "unchanged" and res["format"] == "llama3_json" and res["refined"] == text
    res = Refiner().refine({"upstream": text, "format": "apibank"})
    assert formats.get("apibank").parse_strict(res["refined"]) == [ToolCall("get_weather", {"city": "Paris"})]
    broken = Refiner().refine({"upstream": '{"name": "get_weather", "parameters": {"city": "Paris"'})
    assert broken["format"] == "llama3_json" and broken["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert any(d["code"] == "format" for d in broken["upstream_diagnostics"])


# Llama 3.1 built-in tools: <|python_tag|>NAME.call(...) (Meta's template, llama.cpp's builtin-tools handler).
def test_builtin_tool_calls_are_read_and_written_back():
    fmt = formats.get("llama3_json")
    text = '<|python_tag|>brave_search.call(query="Menlo Park weather")<|eom_id|>'
    want = [ToolCall("brave_search", {"query": "Menlo Park weather"})]
    assert fmt.parse_strict(text) == want and formats.detect_format(text) == "llama3_json"
    assert fmt.render(want) == '<|python_tag|>brave_search.call(query="Menlo Park weather")'
    assert fmt.parse_strict(fmt.render(want)) == want
    cut = fmt.parse_lenient('<|python_tag|>wolfram_alpha.call(query="x^2')
    assert cut.calls == [] and cut.cut is not None
    with pytest.raises(formats.FormatError, match="not closed"):
        fmt.parse_strict('<|python_tag|>wolfram_alpha.call(query="x^2')


def test_llama3_json_is_a_row_of_the_json_calls_grammar():
    from refiner.formats import catalog
    from refiner.formats.json_calls import JsonCalls

    assert isinstance(L3, JsonCalls) and L3.spelling == catalog.LLAMA3
    assert L3.detection.bare and L3.detection.markers == (catalog.PYTHON_TAG,) and L3.tags == (catalog.PYTHON_TAG,)


def test_the_joined_payload_reads_a_spelling_of_its_own():
    """The ``"joined"`` payload is spelt by its row: another tag, name and argument keys, and separator."""
    from refiner.formats.family import Family, make_row
    from refiner.formats.json_calls import JsonCalls, JsonSpelling

    sp = JsonSpelling("<<run>>", None, "joined", name_key="tool", arg_keys=("args",), between=" && ")
    row = make_row(JsonCalls, Family("joined_example", "calls joined by &&"), sp, 999)()
    calls = [ToolCall("lookup", {"term": "a && b"}), ToolCall("count", {})]
    text = row.render(calls)
    assert text == '{"tool": "lookup", "args": {"term": "a && b"}} && {"tool": "count", "args": {}}'
    assert row.parse_strict(text) == calls and row.parse_strict("<<run>> " + text + " then prose") == calls
    with pytest.raises(FormatError, match="has no 'args'"):
        row.parse_strict('{"tool": "lookup"}')
    with pytest.raises(FormatError, match="not joined to the others by '&&'"):
        row.parse_strict('{"tool": "a", "args": {}} {"tool": "b", "args": {}}')
    with pytest.raises(FormatError, match='a "tool" key in text that is not JSON'):
        row.parse_strict('{"tool": "a", "args": {}} and then {"tool": "b", "args": ')
    got = row.parse_lenient('{"tool": "a", "args": {"x": 1} && {"tool": "b", "args": {}}')
    assert got.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    assert row.claims_value({"tool": "a", "args": {}}) and not row.claims_value({"name": "a", "args": {}})
