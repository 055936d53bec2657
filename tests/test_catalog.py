"""The catalog (refiner/formats/catalog.py): every format is a row of one ordered table, its rank the row's place;
the further markers a row leaves to others are computed over the whole table (family.markers_left)."""

from __future__ import annotations

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import glm45, qwen3_coder
from refiner.formats.base import Detection
from refiner.formats.catalog import CATALOG, rows_of
from refiner.formats.catalog import CALL_BEGIN
from refiner.formats.family import EXAMPLE_CALLS, Family, Row, make_row, markers_left
from refiner.formats.json_calls import JsonCalls
from refiner.formats.named_json import NamedJson, NamedSpelling


def test_every_format_is_a_row_and_its_rank_is_its_place():
    assert all(isinstance(row, Row) for row in CATALOG)
    assert [f.name for f in formats.by_rank()] == [row.family.name for row in CATALOG]
    assert sorted(formats.names()) == sorted(row.family.name for row in CATALOG)
    for i, row in enumerate(CATALOG):
        fmt = formats.get(row.family.name)
        assert fmt.detection.rank == i and fmt.row is row.family and fmt.spelling is row.spelling
        assert isinstance(fmt, row.grammar)


def test_rows_of_a_grammar_are_in_table_order():
    names = [row.family.name for row in rows_of(JsonCalls)]
    assert names.index("xlam") < names.index("hermes") < names.index("minimax") < names.index("jamba")


def test_a_hook_is_a_value_of_the_spelling():
    assert formats.get("qwen3_coder").spelling.hook is qwen3_coder.HOOK
    assert formats.get("glm45").spelling.hook is glm45.HOOK
    assert formats.get("seed_oss").spelling.hook is None


def test_further_markers_go_to_one_row():
    """A call or key tag shared by rows points at one of them: the earlier row keeps it (Seed-OSS leaves <function=
    to Qwen3-Coder), a row wrapping another's calls in its own section leaves their tags to it (Hunyuan v3 and GLM),
    and rows sharing their first marker keep theirs (DeepSeek V3 and V3.1, told apart by sniff)."""
    assert "<function=" in formats.get("qwen3_coder").detection.markers
    assert "<function=" not in formats.get("seed_oss").detection.markers
    assert "<arg_key>" in formats.get("glm45").detection.markers
    assert formats.get("hunyuan_v3").detection.markers == ("<tool_calls>",)
    assert CALL_BEGIN in formats.get("deepseek_v3").detection.markers
    assert CALL_BEGIN in formats.get("deepseek_v31").detection.markers


def test_markers_left_by_rule():
    rows = [Detection(markers=("<s>", "<c>", "<k>")),  # wraps the third row's calls (<t> is one of its tags)
            Detection(markers=("<a>", "<c>")),  # <c> already kept by the first row
            Detection(markers=("<t>", "<k>")),
            Detection(markers=("<t>", "<k>"))]  # same first marker as the third: keeps <k> too
    tags = [("<s>", "<t>", "<c>", "<k>"), ("<a>", "<c>"), ("<t>", "<k>"), ("<t>", "<k>")]
    assert markers_left(rows, tags) == [frozenset({"<k>"}), frozenset({"<c>"}), frozenset(), frozenset()]


def test_hermes_is_a_json_calls_row():
    hermes = formats.get("hermes")
    assert isinstance(hermes, JsonCalls) and hermes.trained
    assert hermes.render([ToolCall("f", {"a": 1})]) == '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    assert hermes.claims_value({"name": "f", "arguments": {}})
    assert not hermes.claims_value({"name": "f", "parameters": {}})  # Llama 3's JSON call
    assert not formats.get("longcat_json").claims_value({"name": "f", "arguments": {}})


def test_deepseek_rows_are_named_json_spellings():
    """DeepSeek's rows are the named-JSON grammar's spellings: the grammar alone, without DeepSeek's readers, writes
    and reads their calls as they do."""
    for name in ("deepseek_v3", "deepseek_v31"):
        fmt = formats.get(name)
        assert isinstance(fmt, NamedJson) and isinstance(fmt.spelling, NamedSpelling)
        plain = make_row(NamedJson, Family(f"{name}_plain", "the grammar alone"), fmt.spelling, 999)()
        text = fmt.render(list(EXAMPLE_CALLS))
        assert plain.render(list(EXAMPLE_CALLS)) == text
        assert plain.parse_strict(text) == fmt.parse_strict(text) == list(EXAMPLE_CALLS)
