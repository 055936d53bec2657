"""Mistral's two tool-call shapes (``mistral``: tokenizers v2-v7, with ``mistral_tekken`` writing no space after the
token; ``mistral_v11``: v11+): grammar edge cases, what lenient parsing recovers, and detection against each other
and the other formats."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError, RenderError, detect_format
from refiner.pipeline import Refiner

V3 = formats.get("mistral")
TEKKEN = formats.get("mistral_tekken")
V11 = formats.get("mistral_v11")


def test_v3_list_with_ids_and_spacing_variants():
    calls = [ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_time", {})]
    tight = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time"}]'
    for text in (
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1B2c3D4e"}, '
        '{"name": "get_time", "arguments": {}, "id": "Zz9Yy8Xx7"}]',
        tight,
        'Checking.[TOOL_CALLS]\n[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "get_time", "arguments": {}}]</s>',
    ):
        assert V3.parse_strict(text) == calls, text
        # the list right after the token is what Tekken tokenizers write: detection names their row
        assert detect_format(text) == ("mistral_tekken" if text == tight else "mistral"), text
    assert V3.parse_strict("[TOOL_CALLS] []") == []


def test_tekken_row_writes_and_strictly_reads_the_list_right_after_the_token():
    calls = [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    assert TEKKEN.render(calls) == '[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]'
    spaced = V3.render(calls)
    assert TEKKEN.parse_strict(TEKKEN.render(calls)) == calls == V3.parse_strict(TEKKEN.render(calls))
    with pytest.raises(FormatError, match=r"at position 12"):
        TEKKEN.parse_strict(spaced)
    assert TEKKEN.parse_lenient(spaced).calls == calls  # read all the same, reported
    assert detect_format(spaced) == "mistral"
    # a cut text: the marker guess tells the two rows apart by what follows the token
    assert detect_format('[TOOL_CALLS][{"name": "a", "arguments": {"x": ') == "mistral_tekken"
    assert detect_format('[TOOL_CALLS] [{"name": "a", "arguments": {"x": ') == "mistral"
    assert Refiner().refine({"upstream": spaced, "format": "mistral_tekken"})["refined"] == TEKKEN.render(calls)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[TOOL_CALLS] [{"name": "a", "arguments": {}, "id": 7}]', "'id' of call #0 must be a string"),
        ('[TOOL_CALLS] [{"name": "a", "arguments": {}, "extra": 1}]', "unexpected keys"),
        ('[TOOL_CALLS] {"name": "a", "arguments": {}}', "must be followed by a JSON list"),
        ('[TOOL_CALLS] [{"name": "a", "arguments": {}}] [TOOL_CALLS] [{"name": "b"}]', "a second [TOOL_CALLS]"),
        ('[{"name": "a", "arguments": {}}]', "missing [TOOL_CALLS]"),
        ('[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}]', "invalid JSON"),
    ],
)
def test_v3_strict_errors(text, message):
    with pytest.raises(FormatError, match=message.replace("[", r"\[")):
        V3.parse_strict(text)


def test_v3_lenient_reads_a_repeated_token_and_a_cut_list():
    got = V3.parse_lenient('[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, [TOOL_CALLS] {"name": "b", "arguments": {}}]')
    assert got.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {})] and not got.ok
    got = V3.parse_lenient('[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": ')
    assert got.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {})]


def test_v11_call_id_and_decoded_without_args_token():
    assert V11.parse_strict('[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris"}') == [
        ToolCall("get_weather", {"city": "Paris"})
    ]
    assert V11.parse_strict('[TOOL_CALLS]get_weather{"city": "Paris"}') == [ToolCall("get_weather", {"city": "Paris"})]
    two = '[TOOL_CALLS]a[ARGS]{"x": 1}\n[TOOL_CALLS]b[CALL_ID]k9[ARGS]{}'
    assert V11.parse_strict(two) == [ToolCall("a", {"x": 1}), ToolCall("b", {})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[TOOL_CALLS] get_weather[ARGS]{"city": "Paris"}', "expected a tool name"),
        ('[TOOL_CALLS]get_weather[CALL_ID][ARGS]{"city": "Paris"}', "must be followed by an id"),
        ('[TOOL_CALLS]get_weather[ARGS]["Paris"]', "and a JSON object after"),
        ('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"} and then [TOOL_CALLS]b[ARGS]{}', "text between calls"),
        ('[TOOL_CALLS]a[ARGS]{"x": 1}b[ARGS]{"y": 2}', "text between calls"),
        ('[TOOL_CALLS]get_weather', "expected [ARGS]"),
        ('get_weather[ARGS]{"city": "Paris"}', "missing [TOOL_CALLS]"),
    ],
)
def test_v11_strict_errors(text, message):
    with pytest.raises(FormatError, match=message.replace("[", r"\[")):
        V11.parse_strict(text)


def test_v11_a_lost_token_between_calls_is_recovered_and_reported():
    got = V11.parse_lenient('[TOOL_CALLS]a[ARGS]{"x": 1}b[ARGS]{"y": 2}')
    assert got.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {"y": 2})]
    assert any(p.code == "missing_tag" for p in got.problems)


def test_v11_values_holding_the_control_tokens_are_text():
    text = '[TOOL_CALLS]echo[ARGS]{"text": "[TOOL_CALLS]x[ARGS]{} and [CALL_ID]"}'
    assert V11.parse_strict(text) == [ToolCall("echo", {"text": "[TOOL_CALLS]x[ARGS]{} and [CALL_ID]"})]
    assert detect_format(text) == "mistral_v11"


def test_magistral_reasoning_may_quote_the_token():
    text = '[THINK]I could answer with [TOOL_CALLS] later.[/THINK][TOOL_CALLS]get_time[ARGS]{}'
    assert V11.parse_strict(text) == [ToolCall("get_time", {})]
    assert detect_format(text) == "mistral_v11"
    v3 = '[THINK]Use [TOOL_CALLS] once.[/THINK][TOOL_CALLS] [{"name": "get_time", "arguments": {}}]'
    assert V3.parse_strict(v3) == [ToolCall("get_time", {})]


def test_prose_naming_the_token_is_no_call():
    for text in ("The [TOOL_CALLS] token starts calls, but I make none.", "[TOOL_CALLS], then nothing {at all}."):
        assert detect_format(text) in ("mistral", "mistral_v11")
        assert formats.get(detect_format(text)).parse_lenient(text).calls == []
        assert Refiner().refine({"upstream": text})["calls"] == []


def test_detection_between_the_two_shapes_and_the_other_formats():
    assert detect_format('[TOOL_CALLS] [{"name": "a", "arguments": {"q": "<tool_call>"}}]') == "mistral"
    assert detect_format('[TOOL_CALLS]a[ARGS]{"q": "</func_call>"}') == "mistral_v11"
    # broken texts: the token alone decides
    assert detect_format('[TOOL_CALLS] [{"name": "a", "arguments": {"q": ') == "mistral"
    assert detect_format('[TOOL_CALLS]a[ARGS]{"q": ') == "mistral_v11"
    assert detect_format('a[ARGS]{"q": 1}') == "mistral_v11"  # the token lost: [ARGS] still names the format
    # other formats quoting the token stay themselves
    hermes = '<tool_call>\n{"name": "a", "arguments": {"q": "[TOOL_CALLS]"}}\n</tool_call>'
    assert detect_format(hermes) == "hermes"
    # a marker quoted inside an untagged format's calls names the marker's format (detect's documented rule); the
    # format given with the request still reads it
    nestful = '[{"name": "a", "arguments": {"q": "[TOOL_CALLS]"}}]'
    assert detect_format(nestful) in ("mistral", "mistral_v11")
    res = Refiner().refine({"upstream": nestful, "format": "nestful"})
    assert res["calls"] == [{"name": "a", "arguments": {"q": "[TOOL_CALLS]"}}] and res["stage"] == "unchanged"


def test_render_is_one_canonical_text_per_shape():
    calls = [ToolCall("a", {"x": [1, {"y": None}]}), ToolCall("b", {})]
    assert V3.render(calls) == '[TOOL_CALLS] [{"name": "a", "arguments": {"x": [1, {"y": null}]}}, {"name": "b", "arguments": {}}]'
    assert TEKKEN.render(calls) == V3.render(calls).replace("] [", "][", 1)
    assert V11.render(calls) == '[TOOL_CALLS]a[ARGS]{"x": [1, {"y": null}]}[TOOL_CALLS]b[ARGS]{}'
    for bad in ("a[b", "x{", " lead", "two\nlines"):
        with pytest.raises(RenderError):
            V11.render([ToolCall(bad, {})])


def test_pipeline_reads_v11_and_writes_the_requested_format():
    text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz": "CET"}'
    res = Refiner().refine({"upstream": text})
    assert res["stage"] == "unchanged" and res["format"] == "mistral_v11"
    res = Refiner().refine({"upstream": text, "format": "hermes"})
    assert formats.get("hermes").parse_strict(res["refined"]) == [
        ToolCall("get_weather", {"city": "Paris"}),
        ToolCall("get_time", {"tz": "CET"}),
    ]
    # cut short, with another format requested: read as Mistral all the same, the call it stops in left out
    res = Refiner().refine({"upstream": text[:-5], "format": "hermes"})
    assert [c["name"] for c in res["calls"]] == ["get_weather"]
    assert res["stage"] == "truncated" and res["cut"]["name"] == "get_time"


def test_v11_misspelt_tokens_are_read_as_the_tokens():
    call = ToolCall("get_weather", {"city": "Paris"})
    for bot in ("[tool_calls]", "[TOOLCALLS]", "[TOOL-CALLS]"):
        got = V11.parse_lenient(f'{bot}get_weather[ARGS]{{"city": "Paris"}}')
        assert got.calls == [call] and "missing_tag" in {p.code for p in got.problems}
    for args in ("[args]", "[AR_GS]", "[Args]"):
        assert V11.parse_lenient(f'[TOOL_CALLS]get_weather{args}{{"city": "Paris"}}').calls == [call]
    # a look-alike inside a value, or not where the token stands, is text
    text = '[TOOL_CALLS]echo[ARGS]{"text": "see [args] and [tool_calls]", "n": 1'
    assert V11.parse_lenient(text).calls[0].arguments["text"] == "see [args] and [tool_calls]"


def test_v11_calls_whose_token_was_lost_or_replaced_by_another_formats():
    a, b = ToolCall("a.b", {"x": 1}), ToolCall("c", {"y": [2]})
    leads = ("", "<tool_call>", "<｜tool▁calls▁begin｜>", "<|python_tag|>", '"tool_calls"', "]", "Calling:\n")
    for lead in leads:
        got = V11.parse_lenient(f'{lead}a.b[ARGS]{{"x": 1}}[TOOL_CALLS]c[ARGS]{{"y": [2]}}')
        assert got.calls == [a, b], lead
    # every token lost: NAME{...} one after another
    assert V11.parse_lenient('a.b{"x": 1}c{"y": [2]}').calls == [a, b]
    assert V11.parse_lenient('a.b{"x": 1}\nc{"y": [2]}').calls == [a, b]
    # a call whose arguments lost their "{" still reads its members
    assert V11.parse_lenient('[TOOL_CALLS]a.b[ARGS]"x": 1}').calls == [a]


def test_v11_prose_is_never_read_as_a_call():
    for text in ('I will call get_weather[ARGS]{"city": "Paris"} next.', "Use f{x} here.", "The set {1, 2} is small.",
                 'It returned {"city": "Paris"}.', "Fine, no calls {at all}."):
        assert V11.parse_lenient(text).calls == [], text


def test_pipeline_reads_v11_calls_with_every_token_lost():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    for text in ('get_weather{"city": "Paris"}', '<tool_calls>get_weather[ARGS]{"city": "Paris"}',
                 '<｜tool▁calls▁end｜>get_weather[ARGS]{"city": "Paris"}',
                 '[tool_calls]get_weather[ARGS]{"city": "Paris"}', '[TOOL_CALLS]get_weather[args]{"city": "Paris"}'):
        res = Refiner().refine({"upstream": text, "tools": tools, "format": "mistral_v11"})
        assert V11.parse_strict(res["refined"]) == [ToolCall("get_weather", {"city": "Paris"})], text


# Issue 20: a string value that holds [TOOL_CALLS] is text, also in a text the strict parser refuses (cut by the token
# limit, a broken value elsewhere): recovery read the value up to the token (the v11 reader split there, the v3-v7
# reader blanked the token out of the value).
QUOTED = "Use [TOOL_CALLS] to call tools."


@pytest.mark.parametrize(
    "text, want",
    [
        # cut by the token limit after the value
        (f'[TOOL_CALLS]post[ARGS]{{"text": "{QUOTED}", "n": 1', [ToolCall("post", {"text": QUOTED, "n": 1})]),
        # a broken value elsewhere, then a further call
        (f'[TOOL_CALLS]post[ARGS]{{"text": "{QUOTED}", }}[TOOL_CALLS]get_time[ARGS]{{"tz": "CET"}}',
         [ToolCall("post", {"text": QUOTED}), ToolCall("get_time", {"tz": "CET"})]),
        # the token and a call's shape inside a value whose JSON is whole
        ('[TOOL_CALLS]post[ARGS]{"text": "a [TOOL_CALLS]f[ARGS]{} b"}[TOOL_CALLS]g[ARGS]{"a": 1',
         [ToolCall("post", {"text": "a [TOOL_CALLS]f[ARGS]{} b"}), ToolCall("g", {"a": 1})]),
        # escaped quotes before the token inside the value
        ('[TOOL_CALLS]post[ARGS]{"text": "say \\"[TOOL_CALLS]\\" now", ', [ToolCall("post", {"text": 'say "[TOOL_CALLS]" now'})]),
    ],
)
def test_v11_a_value_holding_the_token_reads_whole_in_a_broken_text(text, want):
    assert V11.parse_lenient(text).calls == want


def test_v11_a_string_that_lost_its_closing_quote_still_ends_at_the_next_call():
    got = V11.parse_lenient('[TOOL_CALLS]f[ARGS]{"a": "x}[TOOL_CALLS]g[ARGS]{"b": "y"}')
    assert [c.name for c in got.calls] == ["f", "g"] and got.calls[1] == ToolCall("g", {"b": "y"})


@pytest.mark.parametrize(
    "text, want",
    [
        (f'[TOOL_CALLS] [{{"name": "post", "arguments": {{"text": "{QUOTED}"}}}}',
         [ToolCall("post", {"text": QUOTED})]),
        ((f'[TOOL_CALLS] [{{"name": "post", "arguments": {{"text": "{QUOTED}"}}}}, [TOOL_CALLS]'
          '{"name": "g", "arguments": {"a": 1}}'),
         [ToolCall("post", {"text": QUOTED}), ToolCall("g", {"a": 1})]),  # a repeated token between calls: noise
    ],
)
def test_v3_a_value_holding_the_token_reads_whole_in_a_broken_text(text, want):
    assert V3.parse_lenient(text).calls == want


def test_a_cut_render_of_a_value_holding_the_token_keeps_the_value():
    call = ToolCall("post", {"text": QUOTED, "then": "[TOOL_CALLS]get_time[ARGS]{}"})
    for fmt in (V3, V11):
        text = fmt.render([call, ToolCall("g", {"a": 1})])
        cut = text[: text.rindex("1")]  # the token limit hit inside the last call
        assert fmt.parse_lenient(cut).calls[0] == call, fmt.name


def test_v11_a_name_holding_another_formats_marker_is_no_name():
    """Phi-4-mini's call after a [TOOL_CALLS] written for its closer is no v11 call named '<|tool_call|>': the text
    is read in the format whose calls it holds."""
    text = ('<|tool_call|>{"name": "f", "arguments": {"a": 1}}[TOOL_CALLS]'
            '<|tool_call|>{"name": "g", "arguments": {"b": 2}}<|/tool_call|>')
    with pytest.raises(FormatError, match="marker"):
        V11.parse_strict(text[text.index("[TOOL_CALLS]"):])
    got = Refiner().refine({"upstream": text, "format": "phi4_mini_tags"})
    assert [c["name"] for c in got["calls"]] == ["f", "g"]


@pytest.mark.parametrize("name", ["ns:tool", "get-weather", "a/b.c"])
def test_v11_cut_call_keeps_the_name_the_strict_reading_takes(name):
    whole = V11.parse_strict(f'[TOOL_CALLS]{name}[ARGS]{{"a": 1}}')
    cut = V11.parse_lenient(f'[TOOL_CALLS]{name}[ARGS]{{"a": 1')
    assert [c.name for c in whole] == [c.name for c in cut.calls] == [name]
    assert [p.code for p in cut.problems] == ["truncated"]
