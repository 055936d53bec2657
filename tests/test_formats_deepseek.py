"""DeepSeek-V3/R1 and V3.1 tool calls (catalog rows): the templates' exact text, grammar edge cases,
telling the two dialects apart, and recovery."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError

V3, V31 = formats.get("deepseek_v3"), formats.get("deepseek_v31")
B, E = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CB, CE, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
EOS = "<｜end▁of▁sentence｜>"


def test_render_is_the_templates_text():
    calls = [ToolCall("get_weather", {"location": "杭州"}), ToolCall("get_time", {})]
    assert V3.render(calls) == (
        f'{B}{CB}function{SEP}get_weather\n```json\n{{"location": "杭州"}}\n```{CE}\n'
        f"{CB}function{SEP}get_time\n```json\n{{}}\n```{CE}{E}"
    )
    assert V31.render(calls) == f'{B}{CB}get_weather{SEP}{{"location": "杭州"}}{CE}{CB}get_time{SEP}{{}}{CE}{E}'


def test_reasoning_content_and_end_of_sentence_around_the_calls():
    text = f"<think>\nweather\n</think>\n\nLet me check.{B}{CB}function{SEP}w\n```json\n{{\"a\": 1}}\n```{CE}{E}{EOS}"
    assert V3.parse_strict(text) == [ToolCall("w", {"a": 1})]
    text = f"Checking.{B}\n{CB}w{SEP} {{\"a\": 1}} {CE}\n{E}{EOS}"
    assert V31.parse_strict(text) == [ToolCall("w", {"a": 1})]


def test_fences_and_tokens_inside_strings_are_text():
    args = {"md": "```json\n{}\n```", "tok": CE + E + SEP}
    for fmt in (V3, V31):
        call = ToolCall("render", args)
        assert fmt.parse_strict(fmt.render([call])) == [call]


@pytest.mark.parametrize(
    ("fmt", "text", "message"),
    [
        ("deepseek_v3", f"{B}{CB}function{SEP}w\n```json\n[1]\n```{CE}{E}", "must be a JSON object"),
        ("deepseek_v3", f"{B}{CB}function{SEP}w\n```json\n{{}}\n{CE}{E}", "expected ```"),
        ("deepseek_v3", f"{B}{CB}w{SEP}{{}}{CE}{E}", "expected function"),
        ("deepseek_v3", f"{B}{CB}function{SEP}w\n```json\n{{}}\n```{CE}", "missing"),
        ("deepseek_v31", f"{B}{CB}w{SEP}{{\"a\": 1,}}{CE}{E}", "invalid JSON"),
        ("deepseek_v31", f"{B}{CB}w{SEP}{{}}{E}", "expected"),
        ("deepseek_v31", f"{B}{CB}bad name\n{SEP}{{}}{CE}{E}", "not allowed"),
        ("deepseek_v31", "no calls", "no <｜tool▁calls▁begin｜>"),
    ],
)
def test_strict_errors(fmt, text, message):
    with pytest.raises(FormatError, match=message):
        formats.get(fmt).parse_strict(text)


def test_detection_tells_the_dialects_apart():
    v3 = V3.render([ToolCall("a", {"x": 1})])
    v31 = V31.render([ToolCall("a", {"x": 1})])
    assert formats.detect_format(v3) == "deepseek_v3" and formats.detect_format(v31) == "deepseek_v31"
    assert formats.detect_format(v3[:60]) == "deepseek_v3" and formats.detect_format(v31[:40]) == "deepseek_v31"
    # a V3.1 call to a tool named "function" is not V3 (its strict parse fails first)
    assert formats.detect_format(f'{B}{CB}function{SEP}{{"x": 1}}{CE}{E}') == "deepseek_v31"
    assert formats.detect_format(f"{CB}function{SEP}a\n```json\n{{}}\n```{CE}") == "deepseek_v3"  # section token lost


def test_recovery_reads_either_dialect():
    mixed = f'{B}{CB}function{SEP}a\n```json\n{{"x": 1}}\n```{CE}{CB}b{SEP}{{"y": 2}}{CE}{E}'
    for fmt in (V3, V31):
        got = fmt.parse_lenient(mixed)
        assert got.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {"y": 2})] and got.problems


def test_recovery_of_cut_and_broken_texts():
    cut = V31.parse_lenient(f'{B}{CB}a{SEP}{{"x": 1}}{CE}{CB}b{SEP}{{"y": "te')
    assert cut.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {"y": "te"})]
    assert {p.code for p in cut.problems} >= {"unclosed", "missing_tag"}
    in_name = V3.parse_lenient(f'{B}{CB}function{SEP}a\n```json\n{{}}\n```{CE}\n{CB}function{SEP}get_wea')
    assert in_name.calls == [ToolCall("a", {})]
    lost_begin = V31.parse_lenient(f'a{SEP}{{"x": 1}}{CE}{E}')
    assert lost_begin.calls == [ToolCall("a", {"x": 1})] and lost_begin.problems
    bad_json = V3.parse_lenient(f"{B}{CB}function{SEP}a\n```json\n{{'x': 'y',}}\n```{CE}{E}")
    assert bad_json.calls == [ToolCall("a", {"x": "y"})]
    not_object = V31.parse_lenient(f"{B}{CB}a{SEP}[1, 2]{CE}{E}")
    assert not_object.calls == [ToolCall("a", {})] and "bad_arguments" in {p.code for p in not_object.problems}


def test_hostile_inputs_give_problems_not_errors():
    for fmt in (V3, V31):
        for text in [CB * 20_000, (CB + "a" + SEP + "{") * 8_000, B + CB + "function" + SEP + "a\n```json\n" + "{" * 50_000,
                     SEP * 30_000, B + (CB + "x" * 100) * 1_500]:
            got = fmt.parse_lenient(text)
            assert not [p for p in got.problems if p.code == "internal"]
            assert got.ok == fmt.is_valid(text)


def test_misspelt_tokens_are_read_as_the_tokens():
    want = [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    for bad in ("<｜TOOL▁CALL▁BEGIN｜>", "<｜tool▁call▁begin｜", "[｜tool▁call▁begin｜]", "<｜tool▁ca_ll▁begin｜>",
                "<|tool_call_begin|>", "<｜tool call begin｜>"):
        v31 = V31.parse_lenient(f'{B}{bad}a{SEP}{{"x": 1}}{CE}{CB}b{SEP}{{}}{CE}{E}')
        v3 = V3.parse_lenient(
            f'{B}{bad}function{SEP}a\n```json\n{{"x": 1}}\n```{CE}\n{CB}function{SEP}b\n```json\n{{}}\n```{CE}{E}'
        )
        assert v31.calls == want and v3.calls == want, bad
        assert "missing_tag" in {p.code for p in v31.problems}
    for bad in ("<｜tool▁sep｜", "<｜TOOL▁SEP｜>", "[｜tool▁sep｜]", "<｜tool_▁sep｜>"):
        assert V31.parse_lenient(f'{B}{CB}a{bad}{{"x": 1}}{CE}{E}').calls == want[:1], bad
    assert V31.parse_lenient(f'{B}{CB}a{SEP}{{"x": 1}}[｜tool▁call▁end｜]{CB}b{SEP}{{}}{CE}{E}').calls == want


def test_lost_call_token_separator_or_every_token():
    want = [ToolCall("a.b", {"x": 1}), ToolCall("c", {})]
    v3_calls = f'function{SEP}a.b\n```json\n{{"x": 1}}\n```{CE}\n{CB}function{SEP}c\n```json\n{{}}\n```{CE}{E}'
    assert V3.parse_lenient(B + v3_calls).calls == want  # the first call token lost
    assert V3.parse_lenient(B + "<tool_call>" + v3_calls).calls == want  # ... or another format's in its place
    no_sep = f'{B}{CB}functiona.b\n```json\n{{"x": 1}}\n```{CE}\n{CB}function{SEP}c\n```json\n{{}}\n```{CE}{E}'
    assert V3.parse_lenient(no_sep).calls == want
    bare_v3 = 'functiona.b\n```json\n{"x": 1}\n```\nfunctionc\n```json\n{}\n```'
    bare_v31 = 'a.b{"x": 1}c{}'
    for fmt in (V3, V31):
        assert fmt.parse_lenient(bare_v3).calls == want
        assert fmt.parse_lenient(bare_v31).calls == want
    # prose and a fenced JSON after a sentence are not calls
    assert V3.parse_lenient('The function returns\n```json\n{"x": 1}\n```').calls == []
    assert V31.parse_lenient('I would call a{x} later.').calls == []


def test_both_dialects_are_rows_of_the_named_json_grammar():
    from refiner.formats import catalog
    from refiner.formats.named_json import NamedJson

    for fmt, spelling in ((V3, catalog.DEEPSEEK_V3), (V31, catalog.DEEPSEEK_V31)):
        assert type(fmt).__bases__ == (NamedJson,) and fmt.spelling == spelling


def test_names_with_spaces_and_whitespace_between_the_tokens():
    want = [ToolCall("get weather", {"a": 1})]
    assert V31.parse_strict(f'{B} {CB}get weather{SEP}\n{{"a": 1}}\n{CE} {E}') == want
    assert V3.parse_strict(f'{B}\n{CB}function {SEP}get weather\n ```json\n{{"a": 1}}\n```\n{CE}\n{E}') == want
