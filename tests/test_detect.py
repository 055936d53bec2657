"""Detection's shortcuts hold: a text without ``{``, ``[`` or an untagged format's own marker is read strictly by no
untagged format (so detection does not try them on prose), and the markers found after the reasoning are those the whole text's search found there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from refiner import formats
from refiner.formats import detect as detect_module
from refiner.formats.base import FormatError, marker_positions
from refiner.formats.text import strip_reasoning

CORPUS = Path(__file__).parent / "corpus"
BARE = [f for f in formats.by_rank() if f.detection.bare]


def _corpus_texts() -> list[str]:
    texts = []
    for path in sorted(CORPUS.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            text = row.get("text") or row.get("raw_output")
            if isinstance(text, str):
                texts.append(text)
    return texts


def _unbracketed() -> list[str]:
    """Texts with no ``{`` or ``[``: every format's example and every corpus text with their brackets taken out, and
    prose."""
    drop = str.maketrans("", "", "{}[]")
    texts = [f.example.translate(drop) for f in formats.all_formats()]
    texts += [t.translate(drop) for t in _corpus_texts()]
    texts += ["Paris is the capital of France.", "<think>\nNo tool needed.\n</think>\n\n2 + 2 = 4.",
              ">>>get_weather\ncity: Paris", "get_weather(city='Paris')", '"name": "get_weather", "arguments": 1',
              'Search: brave_search.call(query="Paris")']
    return sorted(set(texts))


@pytest.mark.parametrize("fmt", BARE, ids=lambda f: f.name)
def test_no_untagged_format_reads_a_text_without_brackets_or_its_marker(fmt):
    for text in _unbracketed():
        if any(m in text for m in fmt.detection.markers):
            continue
        with pytest.raises(FormatError):
            fmt.parse_strict(text)


def test_prose_is_detected_without_a_strict_parse():
    tried: dict = {}
    name, calls = detect_module.detect_with_calls("<think>\nNo tool needed.\n</think>\n\nIt is 20 C in Paris.", tried)
    assert (name, calls, tried) == (None, None, {})


def test_an_unbracketed_text_holding_an_untagged_formats_marker_is_still_tried_in_that_format():
    text = '<think>I write <|python_tag|> first.</think>\nbrave_search.call(query="Paris")'
    tried: dict = {}
    detect_module.detect_with_calls(text, tried)
    # (the one untagged format whose marker occurs, after the tagged one whose marker it is too)
    assert list(tried) == ["functionary_v31", "llama3_json"]


def test_a_bracketed_text_is_still_read_by_the_untagged_formats():
    text = 'I will call it.\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    tried: dict = {}
    name, calls = detect_module.detect_with_calls(text, tried)
    assert name is not None and calls and calls[0].name == "get_weather"
    assert tried and all(formats.get(n).detection.bare for n in tried)


@pytest.mark.parametrize("text", [
    '<think>\nI will write <tool_call> next.\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
    "<think>\n[TOOL_CALLS] is the token.\n</think>\nNo call here.",
    '<think>\nplain\n</think>\n<tool_call>\n{"name": "f"}\n</tool_call>',
    "no reasoning <tool_call> at all",
])
def test_markers_after_the_reasoning_are_taken_from_the_whole_texts_search(text):
    body = strip_reasoning(text)
    at = len(text) - len(body)
    assert at > 0 or text == body
    assert detect_module._after(text, at, marker_positions(text)) == marker_positions(body)


def test_a_format_its_sniff_rejects_is_not_read_strictly_before_the_one_it_accepts():
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    tried: dict = {}
    name, calls = detect_module.detect_with_calls(text, tried)
    assert name == "hermes" and calls and list(tried) == ["hermes"]  # (not qwen3_coder, glm45, apibank first)


@pytest.mark.parametrize(("text", "want"), [
    ("<tool_call>ping</tool_call>\n<tool_call>lookup<param_key>q</param_key><param_value>rain</param_value></tool_call>",
     "telechat4"),
    ("<tool_call>ping\n</tool_call>\n<tool_call>lookup\n<arg_key>q</arg_key>\n<arg_value>rain</arg_value>\n</tool_call>",
     "glm45"),
])
def test_calls_without_arguments_before_the_first_key_leave_the_key_tag_to_decide(text, want):
    name, calls = detect_module.detect_with_calls(text)
    assert name == want and [c.name for c in calls] == ["ping", "lookup"]


@pytest.mark.parametrize("fmt", [f for f in formats.by_rank() if f.detection.strict_needs], ids=lambda f: f.name)
def test_a_format_reads_no_text_strictly_without_the_strings_it_needs(fmt):
    needs = fmt.detection.strict_needs
    assert any(n in fmt.example for n in needs)
    assert fmt.detection.bare or all(n in fmt.detection.markers for n in needs)
    text = fmt.example
    for n in needs:
        text = text.replace(n, "")
    with pytest.raises(FormatError):
        fmt.parse_strict(text)


def _rank_order_winner(text: str) -> str | None:
    """Rule 1 as written: the first tagged format, in rank order, whose marker occurs and that reads the text."""
    found = marker_positions(text)
    for fmt in formats.by_rank():
        if fmt.detection.bare or not any(m in found for m in (*fmt.detection.markers, *fmt.detection.also_read)):
            continue
        try:
            fmt.parse_strict(text)
        except FormatError:
            continue
        return fmt.name
    return None


@pytest.mark.parametrize("fmt", formats.by_rank(), ids=lambda f: f.name)
def test_rule_one_finds_the_first_format_in_rank_order_that_reads_the_text(fmt):
    texts = [fmt.example]
    calls = fmt.parse_strict(fmt.example)
    for g in formats.by_rank():
        try:
            texts.append(g.render(calls))
        except formats.RenderError:
            pass
    for text in texts:
        want = _rank_order_winner(text)
        if want is not None:
            tried: dict = {}
            assert detect_module.detect_with_calls(text, tried)[0] == want, text
