"""The anchored reader's values: where a value starts and ends is learned from the text, never guessed.

Each text below is markup no catalog row knows (spellings made up for this file), around offered tool and
parameter names. A value is either read exactly or not read at all.
"""

from __future__ import annotations

import pytest

from refiner.formats.anchored import anchored_calls
from refiner.pipeline import Refiner

OFFERED = {"get_weather": ["city", "days"], "copy_file": ["src", "dst"], "lookup": ["term", "limit"]}


def _read(text: str) -> list[tuple[str, dict]]:
    found, _ = anchored_calls(text, 0, OFFERED)
    return [(f.call.name, f.call.arguments) for f in found]


CASES = {
    # value opened and closed by literals of its own, everything on one line
    "inline value tags": (
        "<<qq>>get_weather[[k]]city[[/k]][[v]]Lyon[[/v]][[k]]days[[/k]][[v]]3[[/v]]<</qq>>",
        [("get_weather", {"city": "Lyon", "days": 3})],
    ),
    "inline value tags, two calls": (
        "<<qq>>get_weather[[k]]city[[/k]][[v]]Oslo[[/v]][[k]]days[[/k]][[v]]2[[/v]]<</qq>>\n"
        "<<qq>>lookup[[k]]term[[/k]][[v]]a>b[[/v]][[k]]limit[[/k]][[v]]7[[/v]]<</qq>>",
        [("get_weather", {"city": "Oslo", "days": 2}), ("lookup", {"term": "a>b", "limit": 7})],
    ),
    # the value's opening literal on the line after its key
    "value tag on its own line": (
        "%%call lookup\n(key)term(/key)\n(val)tides(/val)\n(key)limit(/key)\n(val)4(/val)\n%%end",
        [("lookup", {"term": "tides", "limit": 4})],
    ),
    # tokens with words inside them between key and value: not a quote token
    "word tokens": (
        "<|op.begin|>get_weather\n<|kv.key|>city<|kv.val|>Lyon<|kv.end|>\n<|kv.key|>days<|kv.val|>3<|kv.end|>\n"
        "<|op.end|>",
        [("get_weather", {"city": "Lyon", "days": 3})],
    ),
    # a word between the key and the value that changes per value (a type written beside it)
    "per-value attribute": (
        '{{op get_weather}}\n{{arg key="city" as="str"}}Lyon{{/arg}}\n{{arg key="days" as="num"}}3{{/arg}}\n{{/op}}',
        [("get_weather", {"city": "Lyon", "days": 3})],
    ),
    # the name in an element of its own, the arguments as JSON on the lines after it
    "JSON arguments after the name's element": (
        'Sure.\n<<do>>\n<<fn>>get_weather<</fn>>\n<<with>>\n{"city": "Lyon", "days": 3}\n<</with>>\n<</do>>',
        [("get_weather", {"city": "Lyon", "days": 3})],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_values_are_read_exactly(case):
    text, want = CASES[case]
    assert _read(text) == want


def test_a_prefix_values_share_is_not_taken_for_markup():
    # both paths start with "/srv/": that is part of the values, not a literal before them
    text = "<<qq>>copy_file[[k]]src[[/k]][[v]]/srv/a.txt[[/v]][[k]]dst[[/k]][[v]]/srv/b.txt[[/v]]<</qq>>"
    assert _read(text) == [("copy_file", {"src": "/srv/a.txt", "dst": "/srv/b.txt"})]


def test_json_after_the_name_is_not_read_across_a_line_of_prose():
    text = "Call get_weather.\nFor example you could pass {\"city\": \"Lyon\", \"days\": 3} to it."
    assert _read(text) == []


def test_a_call_quoted_in_a_sentence_is_not_read():
    assert _read("You'd call lookup(term=..., limit=...) with your own values.") == []
    assert _read("You\u2019d call lookup(term=..., limit=...) with your own values.") == []


def test_no_value_holds_the_markup_around_it():
    # every value read from any of the texts above holds none of the literals that delimit it
    for text, _ in CASES.values():
        for _, args in _read(text):
            for v in args.values():
                if isinstance(v, str):
                    assert not any(t in v for t in ("[[", "]]", "(val)", "(/val)", "{{", "}}", "<<", ">>")), v


def test_a_parameter_attribute_written_empty_is_left_out():
    """``city=""`` in an element naming an offered tool is a parameter written without a value: left out, as an
    empty element is, never read as a value (it once reached the call as the reader's marker for no value)."""
    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}]
    for text in ('Checking.\n<<get_weather city="" days="3">>\n', "<get_weather days='3'><city> </city></get_weather>"):
        result = Refiner().refine({"tools": tools, "upstream": text, "format": "hermes"})
        assert result["calls"] == [{"name": "get_weather", "arguments": {"days": 3}}], text


def test_two_calls_that_disagree_on_their_markup_take_the_first_calls():
    """Two calls whose text from the name to the first key differs tie: the first call's markup wins, in either order
    (the choice once followed the iteration order of a set of strings, the same markup in both texts)."""
    lisbon = "@@get_weather :: city => Lisbon ;; days => 3\n"
    porto = "@@get_weather -- city => Porto ;; days => 4\n"
    assert _read(lisbon + porto) == [("get_weather", {"city": "Lisbon ;;", "days": 3})]
    assert _read(porto + lisbon) == [("get_weather", {"city": "Porto ;;", "days": 4})]
