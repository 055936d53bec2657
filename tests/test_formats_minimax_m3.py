"""MiniMax-M3's namespaced XML calls (``refiner.formats.minimax_m3``): nested elements, lists as ``<item>``, typing by
the tool specs (nested values included), keys the tag syntax cannot hold, recovery of broken and cut texts, and
bounded work on hostile texts. Texts are written the way SGLang's ``minimax_m3.py`` / ``_llm_nom/m3_text.py`` read
and write them; the per-family corpus (``tests/corpus/families/minimax-m3.jsonl``) covers whole completions."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import minimax_m3
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS
from refiner.formats.reading import tool_index
from refiner.pipeline import Refiner
from refiner.specs import load_tools

M3 = formats.get("minimax_m3")
NS = "]<]minimax[>["


def el(key: str, body: str) -> str:
    return f"{NS}<{key}>{body}{NS}</{key}>"


def invoke(name: str, *elements: str) -> str:
    return f'{NS}<invoke name="{name}">\n' + "\n".join(elements) + f"\n{NS}</invoke>\n"


def block(*invokes: str) -> str:
    return f"{NS}<tool_call>\n" + "".join(invokes) + f"{NS}</tool_call>"


TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "s": {"type": "string"}, "n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
    "opts": {"type": "object", "properties": {"unit": {"type": "string"}, "max": {"type": "integer"}}},
    "pts": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}}}},
    "empty_list": {"type": "array"}, "empty_obj": {"type": "object"}}}}}]


def test_nested_objects_and_lists_of_items():
    text = block(invoke("f", el("s", "hi"), el("tags", el("item", "a") + el("item", "b")),
                        el("opts", el("unit", "C") + el("max", "3")),
                        el("pts", el("item", el("x", "1") + el("y", "2.5")))))
    assert M3.parse_strict(text) == [ToolCall("f", {"s": "hi", "tags": ["a", "b"], "opts": {"unit": "C", "max": 3},
                                                    "pts": [{"x": 1, "y": 2.5}]})]
    assert formats.detect_format("Sure.\n" + text) == "minimax_m3"


def test_values_take_the_declared_types_nested_ones_included():
    text = block(invoke("f", el("s", "true"), el("n", "7"), el("tags", el("item", "2024") + el("item", "null")),
                        el("opts", el("unit", "10")), el("empty_list", ""), el("empty_obj", "")))
    calls = M3.parse_strict(text)
    assert calls[0].arguments["s"] is True  # without the specs: typed as the template writes a boolean
    typed = M3.retype(calls, tool_index(load_tools(TOOLS)))
    assert typed == [ToolCall("f", {"s": "true", "n": 7, "tags": ["2024", "null"], "opts": {"unit": "10"},
                                    "empty_list": [], "empty_obj": {}})]
    res = Refiner().refine({"upstream": text, "tools": TOOLS})
    assert res["calls"][0]["arguments"] == typed[0].arguments


@pytest.mark.parametrize("args", [
    {"item": 1}, {"o": {"item": [1, 2]}}, {"a>b": {"/c": 1, "": None}}, {" pad ": "  spaced  "},
    {"invoke x": 1, "tool_call": 2}, {"l": [[], {}, "", None, [None]]}, {"s": f"has {NS}<tag> inside"},
    {"q": '"quoted"', "n": "5", "j": "{}"},
])
def test_what_the_tag_syntax_cannot_hold_round_trips(args):
    calls = [ToolCall("f", args)]
    text = M3.render(calls)
    assert M3.parse_strict(text) == calls
    assert M3.parse_lenient(text).problems == []


@pytest.mark.parametrize("text, why", [
    (block(invoke("f", f"{NS}<a>1{NS}</b>")), "expected"),
    (block(invoke("f", el("a", "1"), el("a", "2"))), "given twice"),
    (block(f'{NS}<invoke name="f">{el("a", "1")}' + invoke("g")), "missing"),
    (block(invoke("f", f"{NS}<a>" * 70 + "1" + f"{NS}</a>" * 70)), "deeper than 64"),
    (block(f"{NS}<invoke>{NS}</invoke>"), "without a name"),
    ("no calls here", "no ]<]minimax"),
])
def test_strict_errors(text, why):
    with pytest.raises(formats.FormatError, match=why.replace("[", r"\[").replace("]", r"\]")):
        M3.parse_strict(text)


def test_recovery_closes_what_lost_its_closing_tags():
    text = (f'{NS}<invoke name="f">{NS}<opts>{NS}<unit>C{NS}</opts>'  # </unit> lost
            f'{NS}<invoke name="g">{el("a", "1")}'  # </invoke> lost before the next call
            f'{NS} <invoke name="h">{el("b", "x")}{NS}</stray>{NS}</invoke>{NS}</tool_call>')  # a space after the token
    got = M3.parse_lenient(text)
    assert got.calls == [ToolCall("f", {"opts": {"unit": "C"}}), ToolCall("g", {"a": 1}), ToolCall("h", {"b": "x"})]
    assert {p.code for p in got.problems} >= {"missing_tag", "unreadable"}
    assert got.cut is None


@pytest.mark.parametrize("tail, clean, whole", [
    (f"{NS}<city>Par", False, {}),  # mid-value
    (f"{el('city', 'Paris')}{NS}<un", False, {"city": "Paris"}),  # inside the next tag
    (f"{el('city', 'Paris')}\n", True, {"city": "Paris"}),  # only the closing tags are lost
])
def test_a_cut_text_says_where_it_stops(tail, clean, whole):
    got = M3.parse_lenient(f'{NS}<tool_call>\n{NS}<invoke name="get_weather">\n{tail}')
    assert got.cut is not None and got.cut.index == 0 and got.cut.clean is clean and got.cut.arguments == whole


def test_the_pipeline_leaves_a_cut_call_out_and_keeps_the_whole_ones():
    text = block(invoke("a", el("x", "1")))[: -len(f"{NS}</tool_call>")] + f'{NS}<invoke name="b">{NS}<y>To'
    res = Refiner().refine({"upstream": text, "finish_reason": "length"})
    assert res["stage"] == "truncated" and res["calls"] == [{"name": "a", "arguments": {"x": 1}}]


def test_text_that_only_quotes_the_token_is_no_call():
    for text in (f"The token {NS} starts every tag.", block("nah uhg\n"), f"{NS}<tool_call>"):
        assert M3.parse_lenient(text).calls == []
        assert Refiner().refine({"upstream": text})["calls"] == []


def _hostile(size: int) -> list[tuple[str, str]]:
    head = f'{NS}<tool_call>{NS}<invoke name="f">'
    return [
        ("open_storm", head + f"{NS}<a>" * (size // 17)),
        ("close_storm", head + f"{NS}</a>" * (size // 18)),
        ("token_storm", head + NS * (size // 13)),
        ("quoted_key_storm", head + f'{NS}<"aaaaaaa' * (size // 23)),
        ("invoke_storm", f'{NS}<invoke name="f">' * (size // 31)),
        ("deep", head + f"{NS}<a>" * 5_000 + "1" + f"{NS}</a>" * 5_000),
        ("leaf_storm", head + el("a", "x" * 50) * (size // 80)),
    ]


@pytest.mark.parametrize("kind, text", _hostile(formats.MAX_LENIENT_CHARS), ids=[k for k, _ in _hostile(100)])
def test_hostile_texts_are_read_with_bounded_work(kind, text, monkeypatch):
    """On a 200 KB hostile text, each namespace token is read as a tag at most twice (once by the strict parse,
    once by recovery), at most 8 * MAX_RECOVERED_ITEMS tags are kept, and nesting is cut at the depth bound."""
    seen = []
    real = minimax_m3.NsXml._tag_at

    def counting(self, text, p, nxt, *, lenient):
        seen.append(p)
        return real(self, text, p, nxt, lenient=lenient)

    monkeypatch.setattr(minimax_m3.NsXml, "_tag_at", counting)
    got = M3.parse_lenient(text)
    assert len(seen) <= 2 * text.count(NS) + 2, (kind, len(seen))
    assert len(got.calls) <= MAX_RECOVERED_ITEMS
    for c in got.calls:
        assert formats.MAX_ARGUMENT_DEPTH >= _depth(c.arguments)


def _depth(value, d=0):
    if isinstance(value, dict):
        return max((_depth(v, d + 1) for v in value.values()), default=d + 1)
    if isinstance(value, list):
        return max((_depth(v, d + 1) for v in value), default=d + 1)
    return d


@pytest.mark.parametrize("wrong", ["]<]]minimax[>[", "]<minimax[>[", "]<]minimax>[", "]<,]minimax[>[", "]<]MINIMAX[>[",
                                   "]<]minimax[>"])
def test_a_namespace_token_written_wrong_is_read_as_the_token(wrong):
    text = block(invoke("f", el("s", "hi"), el("n", "3")))
    broken = text.replace(f"{NS}</s>", f"{wrong}</s>", 1)
    got = M3.parse_lenient(broken)
    assert got.calls == [ToolCall("f", {"s": "hi", "n": 3})]
    assert any(f"written as {wrong!r}" in p.message for p in got.problems)
    with pytest.raises(formats.FormatError):
        M3.parse_strict(broken)


def test_a_call_tag_in_another_case_a_name_in_single_quotes_or_without_its_equals_sign_is_read():
    text = block(invoke("f", el("n", "1")), invoke("g", el("n", "2")), invoke("h", el("n", "3")))
    broken = text.replace(f'{NS}<invoke name="f"', "]<]MINIMAX[>[<INVOKE name='f'", 1).replace('name="g"', 'name"g"')
    assert M3.parse_lenient(broken).calls == [ToolCall(n, {"n": i}) for i, n in enumerate("fgh", 1)]
    with pytest.raises(formats.FormatError):
        M3.parse_strict(text.replace('name="g"', "name='g'"))


def test_a_call_whose_token_and_tag_were_lost_is_read_from_its_name_at_a_line_start():
    text = block(invoke("f", el("n", "1")), invoke("g", el("n", "2")))
    broken = text.replace(f"{NS}<invoke ", "", 1)
    got = M3.parse_lenient(broken)
    assert got.calls == [ToolCall("f", {"n": 1}), ToolCall("g", {"n": 2})]
    assert any("without" in p.message for p in got.problems)


def test_the_word_in_a_value_or_a_token_far_from_it_is_left_alone():
    value = "see ]<]minimax docs, minimax[>[ or MiniMax"
    text = block(invoke("f", el("s", value)))
    assert M3.parse_lenient(text.replace(f"{NS}</invoke>", f"{NS}</invoke", 1)).calls == [ToolCall("f", {"s": value})]
    for far in ("]<]minimx[>[", "]<>minimax<>[", "minimax"):  # the word misspelt, two marks changed, no marks
        got = M3.parse_lenient(text.replace(f"{NS}</s>", f"{far}</s>", 1))
        assert not any("written as" in p.message for p in got.problems), far


def test_calls_after_a_lost_block_close_are_all_read():
    text = block(invoke("f", el("n", "1")), invoke("g", el("n", "2")), invoke("h", el("n", "3")))
    got = M3.parse_lenient(text.replace(f"{NS}</tool_call>", ""))
    assert got.calls == [ToolCall(n, {"n": i}) for i, n in enumerate("fgh", 1)]
    assert [p.message for p in got.problems] == [f"missing {NS}</tool_call> after the last call"]
