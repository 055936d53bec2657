"""What one reading of a request's text proves is not looked for again: json_repair is not run where it can only
read what the decoder reads (a text with none of the characters it starts a value at)."""

from __future__ import annotations

import json
import random

import json_repair

from refiner.formats.jsonfix import _REPAIR_STARTS, lenient_json, repair_budget

# characters of prose and of broken values, none a value start of json_repair's
_PLAIN = "abcdefgnlrstuxyz ABCXYZ 0123456789 -+.,:;!?\n\t)]}\\`~@$%^&*=<>|_"
_WORDS = ["true", "false", "null", "NaN", "Infinity", "-5", "1e5", "0.25", "-", "tru", "12 apples", "x: 1", "a, b"]


def _texts(n: int) -> list[str]:
    rng = random.Random(27)
    out = list(_WORDS)
    for _ in range(n):
        parts = [rng.choice(_WORDS) if rng.random() < 0.3 else rng.choice(_PLAIN) for _ in range(rng.randint(1, 30))]
        out.append("".join(parts))
    return out


def _decoded(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return ""


def test_json_repair_reads_a_text_without_a_value_start_as_the_decoder_does():
    for text in _texts(3000):
        assert _REPAIR_STARTS.search(text) is None
        got, want = json_repair.loads(text), _decoded(text)
        assert json.dumps(got) == json.dumps(want), text


def test_each_value_start_is_one_json_repair_reads_from():
    for text, value in (("say {'a': 1}", {"a": 1}), ("(1, 2)", [1, 2]), ('"a": 1}', {"a": 1}), ("# x\n[1]", [1])):
        assert _REPAIR_STARTS.search(text) is not None
        assert json_repair.loads(text) == value
        with repair_budget(text):
            assert lenient_json(text) == value


def test_lenient_json_of_prose_reads_nothing_and_spends_the_same_budget():
    for text in ("Hello! How can I help you today?", "It is 12 degrees: cold, windy) and wet.", "-"):
        with repair_budget(text) as parse:
            assert lenient_json(text) is None
            assert parse.used > 0  # (the repair was charged as before: later reads see the same budget)
    with repair_budget("42"):
        assert lenient_json("42") == 42


def test_a_shared_marker_is_judged_once_by_detection_and_salvage(monkeypatch):
    """A broken text whose marker several formats share: detection chooses among them by their sniff hooks, and
    salvage takes that choice for the same marker at the same place instead of asking them again."""
    from refiner.formats.base import marker_table
    from refiner.formats.reading import read_upstream

    text = 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    table = marker_table()
    sharing = table.naming["markers"]["<tool_call>"]
    assert len(sharing) > 1
    asked: list[tuple[str, int]] = []
    for fmt in sharing:
        def counted(body: str, at: int, _own=fmt.sniff, _name=fmt.name) -> bool:
            asked.append((_name, at))
            return _own(body, at)

        monkeypatch.setattr(fmt, "sniff", counted)
    got = read_upstream(text, None, None)
    assert got.fmt == "hermes" and got.cut is not None
    assert asked and len(asked) == len(set(asked))
