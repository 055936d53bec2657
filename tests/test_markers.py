"""The registry's marker table: the formats each hook is asked of are those that answer it (the others' answer is
the contract's no), in rank order, so detection and salvage walking the table decide as walking every format would;
the marker search finds what a plain search finds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refiner.formats import by_rank
from refiner.formats.base import marker_positions, marker_table
from refiner.formats.lenient import TokenFinder, lenient_json_in_prose
from refiner.formats.reasoning import read

FORMATS = by_rank()
EXAMPLES = [f.example for f in FORMATS] + [
    "Hello! How can I help you today?",
    '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    '[{"name": "f", "arguments": {}}]',
    "get_weather\n```json\n{\"city\": \"Paris\"}\n```",
    "[get_weather(city='Paris')]",
]


@pytest.mark.parametrize("text", EXAMPLES)
def test_the_hook_lists_ask_every_format_that_answers(text):
    table = marker_table()
    value = lenient_json_in_prose(text)
    if value is not None:
        assert [f.name for f in FORMATS if f.claims_value(value)] == [
            f.name for f in table.claiming_values if f.claims_value(value)]
    assert [f.name for f in FORMATS if f.claims_text(text)] == [f.name for f in table.claiming_texts if f.claims_text(text)]
    offered = {"get_weather": ["city"], "f": []}
    with_markers = [f for f in FORMATS if f.detection.markers]
    assert [f.name for f in with_markers if f.read_untagged(text, 0, offered) is not None] == [
        f.name for f in table.reading_untagged if f.read_untagged(text, 0, offered) is not None]


def test_the_format_lists_keep_rank_order():
    table = marker_table()
    rank = {f.name: i for i, f in enumerate(FORMATS)}
    for fmts in (table.bare, table.with_markers, table.claiming_values, table.claiming_texts, table.reading_untagged):
        assert [rank[f.name] for f in fmts] == sorted(rank[f.name] for f in fmts)
    assert [f.name for f in table.bare] == [f.name for f in FORMATS if f.detection.bare]
    assert [f.name for f in table.with_markers] == [f.name for f in FORMATS if f.detection.markers]


def test_tokens_by_last_character_hold_every_long_marker_and_closer_in_rank_order():
    table = marker_table()
    every = list(dict.fromkeys(m for f in FORMATS for m in (*f.detection.markers, *f.detection.closers) if len(m) > 2))
    assert sorted(m for ms in table.tokens_by_last.values() for m in ms) == sorted(every)
    for last, ms in table.tokens_by_last.items():
        assert list(ms) == [m for m in every if m[-1] == last]


@pytest.mark.parametrize("text", EXAMPLES)
def test_marker_positions_are_the_first_occurrences(text):
    text = read(text)
    known = marker_table().known
    assert marker_positions(text) == {m: text.find(m) for m in known if m in text}
    assert marker_table() is marker_table()


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="<t>u/ x\n", max_size=80), st.lists(st.integers(-6, 12), min_size=1, max_size=10))
def test_token_finder_gives_the_earliest_token_wherever_it_is_asked_from(text: str, steps: list[int]) -> None:
    """Outside a JSON value the finder's answer is the earliest token at or after the position (the first listed
    on a tie), asked from positions going forward and back."""
    tokens = ("<t>", "</t>", "<u>")
    finder, pos = TokenFinder(text, tokens), 0
    for step in steps:
        pos = max(0, min(len(text), pos + step))
        found = [(i, k) for k, t in enumerate(tokens) if (i := text.find(t, pos)) >= 0]
        i, k = min(found) if found else (len(text), None)
        assert finder.first(pos) == (i, None if k is None else tokens[k])
