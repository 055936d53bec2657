"""A call's name read leniently must be a tool name: markup read as a name (a run of tags or sentinel tokens, another
format's marker) is no call, in every registered format; honest names (dotted, hyphenated, colon-namespaced, spaced
where a row writes them so) stay."""

import json
import sys
from functools import cache
from pathlib import Path

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.base import RenderError, markup_name
from refiner.pipeline import Refiner

sys.path.insert(0, str(Path(__file__).parent))
import hostile

HONEST = ("get_weather", "weather.lookup", "send-mail", "ns:tool", "Files.read_v2", "get weather")
MARKUP = ("starttoolcall", "a|b", "to=functions.get", "x<y>", "begin_calls|><|begin_call|>", "<tool_call>",
          "lookup</name>", "f{x}", 'say "hi"', "a\nb")
# rows of each grammar that reads names (JSON objects, XML parameters, named JSON, harmony, [TOOL_CALLS], pythonic)
ROWS = ("hermes", "apertus", "qwen3_coder", "glm45", "hunyuan_v3", "telechat4", "kimi_k2", "deepseek_v3",
        "deepseek_v31", "glm53_flash", "functionary_v31", "harmony", "mistral_v11", "toolace")


def holds_markup(name: str) -> bool:
    """Whether a name holds a tag's character or any registered format's marker."""
    return bool(set(name) & set("<>|")) or any(m in name for m in formats.all_markers())


@cache
def storm_texts() -> list[tuple[str, str]]:
    return hostile.hostile_texts(1000)


@pytest.mark.parametrize("family", formats.names())
def test_storms_read_no_markup_name(family):
    fmt = formats.get(family)
    bad = [(kind, c.name[:60]) for kind, text in storm_texts() for c in fmt.parse_lenient(text).calls
           if holds_markup(c.name)]
    assert not bad


@pytest.mark.parametrize("family", formats.names())
def test_refine_with_the_format_given_returns_no_markup_name_on_the_storms(family):
    """Salvage (what ``refine`` reads when the format's own reading finds nothing) takes no name holding a marker."""
    text = dict(hostile.storms(3000))["tag_storm"]
    calls = Refiner().refine({"upstream": text, "format": family})["calls"]
    assert not [call["name"][:60] for call in calls if holds_markup(call["name"])]


def cut_render(family: str, name: str) -> str | None:
    """``family``'s text of one call to ``name``, less its last character (read by the recovering reader); None when
    the row cannot write the name."""
    try:
        text = formats.get(family).render([ToolCall("zzname", {"city": "Oslo"})])
    except RenderError:
        return None
    return text.replace("zzname", name)[:-1]


@pytest.mark.parametrize("family", ROWS)
@pytest.mark.parametrize("name", MARKUP)
def test_markup_name_is_no_call(family, name):
    if family == "toolace" and name.isidentifier():
        pytest.skip("a pythonic call's identifier name is read by the fast call-list reader, which the rule skips")
    out = formats.get(family).parse_lenient(cut_render(family, name))
    assert not [c.name for c in out.calls if holds_markup(c.name) or c.name == name]


@pytest.mark.parametrize("family", [r for r in ROWS if r != "mistral_v11"])
@pytest.mark.parametrize("name", HONEST)
def test_honest_names_stay(family, name):
    try:
        formats.get(family).check_renderable([ToolCall(name, {"city": "Oslo"})])
    except RenderError:
        pytest.skip(f"{family} does not write {name!r}")
    out = formats.get(family).parse_lenient(cut_render(family, name))
    assert [c.name for c in out.calls] == [name]
    assert "bad_name" not in [p.code for p in out.problems]


def hermes_read(item):
    return formats.get("hermes").parse_lenient(f"<tool_call>\n{json.dumps(item)[:-1]}")  # cut: read leniently


@pytest.mark.parametrize("name", MARKUP)
def test_markup_json_name_is_no_call(name):
    out = hermes_read({"name": name, "arguments": {}})
    assert not out.calls
    assert "markup_name" in [p.code for p in out.problems]


def test_markup_name_under_function_is_no_call():
    out = hermes_read({"function": "open|><|next_marker|>"})
    assert not out.calls
    assert "markup_name" in [p.code for p in out.problems]


@pytest.mark.parametrize("name", HONEST)
def test_honest_json_names_stay(name):
    out = hermes_read({"name": name, "arguments": {"city": "Oslo"}})
    assert [(c.name, c.arguments) for c in out.calls] == [(name, {"city": "Oslo"})]
    assert "bad_name" not in [p.code for p in out.problems]


def test_repaired_unquoted_markup_in_hermes_is_no_call():
    text = '<tool_call>\n{"name": <|tool_call_begin|><|tool_call_end|>, "arguments": {}}\n</tool_call>'
    out = formats.get("hermes").parse_lenient(text)
    assert not out.calls
    assert "markup_name" in [p.code for p in out.problems]


def test_kimi_call_id_names_its_tool():
    text = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
            '{"city": "Oslo"}<|tool_call_end|>')
    assert [c.name for c in formats.get("kimi_k2").parse_lenient(text).calls] == ["get_weather"]


@pytest.mark.parametrize("name", MARKUP)
def test_predicate_refuses_markup(name):
    assert markup_name(name)


@pytest.mark.parametrize("name", [*HONEST, " get_weather\n", "functions.get_weather:0", "Ünïcode_tool"])
def test_predicate_keeps_names(name):
    assert not markup_name(name)
