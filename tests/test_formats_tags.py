"""The tag speller (refiner/formats/tags.py): which tokens a lenient reader may take for one of its format's tags."""

from __future__ import annotations

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import tags
from refiner.formats.base import Lenient
from refiner.formats.tags import MAX_FUZZY, Speller, osa_distance

GLM = Speller(("<tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "</tool_call>"))
QWEN = Speller(("<tool_call>", "<function=", "<parameter=", "</parameter>", "</function>", "</tool_call>"))


def _one(speller: Speller, text: str):
    hits = list(speller.scan(text))
    assert len(hits) == 1, hits
    return hits[0]


@pytest.mark.parametrize(
    ("written", "word", "closing"),
    [
        ("<arg_key>", "arg_key", False),
        ("</arg_value>", "arg_value", True),
        ("<ARG_VALUE>", "arg_value", False),
        ("<arg-key>", "arg_key", False),
        ("<argvalue>", "arg_value", False),
        ("[arg_key]", "arg_key", False),
        ("[/arg_value]", "arg_value", True),
        ("<toolcall>", "tool_call", False),
        ("<arg_kye>", "arg_key", False),  # two letters swapped
        ("</arg_valu>", "arg_value", True),  # a letter lost
        ("<arg_vallue>", "arg_value", False),  # a letter added
    ],
)
def test_look_alikes_of_the_formats_tags(written, word, closing):
    hit = _one(GLM, f"x{written}y")
    assert (hit.word, hit.closing, hit.exact) == (word, closing, written in GLM.tags)
    assert (hit.start, hit.end) == (1, 1 + len(written))


def test_exact_tags_and_equals_tags():
    hit = _one(GLM, "a<arg_key>b")
    assert hit.exact and hit.word == "arg_key" and not hit.closing
    for written, eq in [("<PARAMETER=", True), ("<param_eter=", True), ("<func_tion=", True), ("[function=", True),
                        ("</para_meter>", False), ("<parameter>", False)]:
        hit = _one(QWEN, f"{written}k>")
        assert hit.eq == eq and not hit.exact, written


def test_a_tag_that_lost_its_end_when_text_follows():
    hit = _one(GLM, "<arg_keytable</arg_key>".replace("</arg_key>", ""))
    assert hit.word == "arg_key" and hit.end == len("<arg_key")
    hit = _one(GLM, "<tool_callget_weather\n")
    assert hit.word == "tool_call" and hit.end == len("<tool_call")
    assert list(GLM.scan("value <arg_value")) == []  # cut inside the tag: not read as one
    assert list(GLM.scan("x </arg_value  \n ")) == []


def test_words_that_run_on_are_other_tags():
    # <tool_calls> is MiniMax's tag, not <tool_call> followed by text; <function_list> is ToolACE's
    hit = _one(GLM, "<tool_calls>")
    assert hit.foreign
    hit = _one(QWEN, "<function_list>")
    assert hit.foreign


def test_other_formats_tags_are_foreign_and_plain_markup_is_text():
    for tag in ["<|tool_call_begin|>", "<｜tool▁sep｜>", "[TOOL_CALLS]", "</function_calls>", "<|endoftext|>"]:
        assert _one(GLM, f"a{tag}b").foreign, tag
    assert list(GLM.scan("<b>bold</b> [1, 2] <think> a < b [x]")) == []
    assert list(GLM.scan("<argument>")) == []  # too far from any tag of the format


def test_osa_distance():
    assert osa_distance("argkey", "argkye") == 1
    assert osa_distance("argkey", "argkey") == 0
    assert osa_distance("argkey", "argvalue") == 2  # beyond the cutoff
    assert osa_distance("toolcall", "toolcalls") == 1


def test_scanning_is_linear_and_bounds_its_one_letter_off_comparisons():
    text = "<arg-value>" * 20_000 + "[" * 50_000 + "<" * 50_000 + "<a" * 20_000
    assert len(list(GLM.scan(text))) == 20_000
    # a word one letter off is compared at most MAX_FUZZY times per scan; past that such tokens are text
    assert len(list(GLM.scan("<arg_valu>" * 1_000))) == MAX_FUZZY
    assert GLM.written_wrong("x <arg-key> y") and not GLM.written_wrong("<arg_key>a</arg_key> <b> [1] </arg_value>")


def test_json_block_tags_are_put_right_only_where_the_grammar_places_them():
    from refiner.formats.tags import respell_json_tags

    sp = Speller(("<tool_call>", "</tool_call>"))
    body = '{"name": "f", "parameters": {"q": "[/tool_call] <TOOL_CALL>"}}\n{"name": "g", "parameters": {}}'
    fixed, notes = respell_json_tags(f"<TOOL_CALL>\n{body}\n[/tool_call]\n<response>ok</response>", 0, sp,
                                     "<tool_call>", "</tool_call>")
    assert fixed == f"<tool_call>\n{body}\n</tool_call>\n<response>ok</response>" and len(notes) == 2
    # a look-alike not followed by JSON is prose; one inside a string stays
    assert respell_json_tags("I would write <TOOL_CALL> blocks.", 0, sp, "<tool_call>", "</tool_call>") is None
    assert respell_json_tags(f"<tool_call>\n{body}\n</tool_call>", 0, sp, "<tool_call>", "</tool_call>") is None


# ----------------------------------------------------------------------------------------------------------------
# Sentinel tokens: look-alikes of a sentinel format's own tokens, and the counted bound

DEEPSEEK = ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>"]


def test_look_alikes_are_written_as_the_token_and_reported():
    text = "<|tool_calls_begin|><｜tool▁call▁begin｜>function<｜TOOL-SEP｜get_time\n"
    out = Lenient()
    got = tags.respell_tokens(text, DEEPSEEK, out)
    assert got == "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
    assert [p.code for p in out.problems] == ["missing_tag", "missing_tag"]


def test_exact_tokens_and_other_formats_tokens_are_left_as_written():
    text = "<｜tool▁sep｜> <|im_end|> <|call|> [TOOL_CALLS]"
    assert tags.respell_tokens(text, DEEPSEEK) == text
    assert tags.respell_tokens("[tool_calls]f[args]{}", ["[TOOL_CALLS]", "[ARGS]"]) == "[TOOL_CALLS]f[ARGS]{}"


def test_a_look_alike_inside_a_json_string_is_the_values_text():
    """'0|RETURN|' in a value stays as written (a cut gpt-oss text read it as '0' and a <|return|>); a look-alike
    after the string closes is still the token."""
    text = '<｜tool▁sep｜>f\n{"note": "0|TOOL_SEP| and \\"|tool_sep|\\"", "n": 1}<|TOOL_CALL_END|>'
    got = tags.respell_tokens(text, DEEPSEEK)
    assert got == text.replace("<|TOOL_CALL_END|>", "<｜tool▁call▁end｜>")
    f = formats.get("llm_jp_harmony")
    gold = [ToolCall("get_weather", {}), ToolCall("get_weather", {"city": "0|RETURN|"}), ToolCall("get_weather", {})]
    text = f.render(gold)
    cut = text[: text.index('"}') + len('"}<|end|><|start|>')]
    assert f.parse_lenient(cut).calls == gold[:2]


def test_a_token_storm_is_looked_at_up_to_the_counted_bound():
    spelt = "<|TOOL_SEP|>"
    text = "<｜tool▁sep｜>" * (tags.MAX_SCANNED - 1) + spelt * 3
    got = tags.respell_tokens(text, DEEPSEEK)
    # the first look-alike is inside the bound, the two after it are not
    assert got == "<｜tool▁sep｜>" * tags.MAX_SCANNED + spelt * 2


@pytest.mark.parametrize("word", ["functıon", "ſtart", "tool_\u212aey"])
def test_a_letter_that_matches_only_by_case_folding_is_not_a_tag_word(word):
    """Python's case-insensitive matching pairs ı with i, ſ with s and the Kelvin sign with k; such a spelling is not a
    tag word of the format, and reading it is no internal error."""
    from refiner import formats

    text = f"<zyphra_tool_call>\n<{word}=f>\n<parameter=a>1</parameter>\n</{word}>\n</zyphra_tool_call>"
    got = formats.get("zaya_xml").parse_lenient(text)
    assert "internal" not in [p.code for p in got.problems]


def test_a_tag_without_letters_matches_no_other_token() -> None:
    """A fence tag (```) has no word to misspell: a '<' before a word is no look-alike of it; another format's tag
    is still reported."""
    speller = Speller(("**Tool Call:**\n```json\n", "```"))
    assert list(speller.scan("note <b c and <think tea")) == []
    assert [(h.start, h.word) for h in speller.scan("see <tool_call>")] == [(4, None)]
