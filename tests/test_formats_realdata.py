"""Every ground-truth call in the real data (../shared/data) parses strictly in its format: rendered from the raw
record, and from the raw text where the data has text. Counts are asserted so that nothing is silently skipped.

Exclusions: none are needed; every record of every file below parses (the counts prove it).
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import shared_path

from refiner import formats
from refiner.calls import ToolCall

NESTFUL_FILES = {
    "executable/executable-data.json": (85, 318),
    "non-executable/non-executable-glaive-data.json": (169, 638),
    "non-executable/non-executable-sgd-data.json": (46, 144),
}


def _check(fmt_name: str, calls: list[ToolCall], raw_text: str | None = None) -> None:
    fmt = formats.get(fmt_name)
    text = fmt.render(calls)
    assert fmt.parse_strict(text) == calls
    assert formats.detect_format(text) == fmt_name
    if raw_text is not None:
        assert fmt.parse_strict(raw_text) == calls
        assert formats.detect_format(raw_text) == fmt_name


def test_nestools_all_records(nestools_records):
    n_calls = 0
    for rec in nestools_records:
        calls = [ToolCall(c["api_name"], c["parameters"], outputs=tuple(c["responses"])) for c in rec["call"]]
        raw = f"<nested function>{json.dumps(rec['call'], ensure_ascii=False)}</nested function>"
        _check("nestools", calls, raw)
        # the simplified order format of the same record: one step per call
        order = [ToolCall(c.name, {}, step=i + 1) for i, c in enumerate(calls)]
        _check("order", order)
        n_calls += len(calls)
    assert (len(nestools_records), n_calls) == (1000, 3036)


def test_glaive_subset(glaive_records):
    n_calls = 0
    for rec in glaive_records:
        for turn in rec["conversations"]:
            if turn["from"] != "function_call":
                continue
            obj = json.loads(turn["value"])
            calls = [ToolCall(obj["name"], obj["arguments"])]
            # the converted text as an assistant turn, and the same call in the raw single-quoted Glaive form
            _check("glaive", calls, f"ASSISTANT: <functioncall> {turn['value']} <|endoftext|>")
            raw = (
                f'ASSISTANT: <functioncall> {{"name": "{obj["name"]}", '
                f"\"arguments\": '{json.dumps(obj['arguments'])}'}} <|endoftext|>\n\n\nFUNCTION RESPONSE: {{}}"
            )
            assert formats.get("glaive").parse_strict(raw) == calls
            for other in ("xlam", "hermes", "toolace", "openai", "anthropic"):
                _check(other, calls)
            n_calls += 1
    assert n_calls == 211


_BLOCK = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)


def test_api_bank_levels(api_bank_levels):
    answers, history_blocks, history_calls = {}, 0, 0
    for level, records in api_bank_levels.items():
        answers[level] = 0
        for rec in records:
            gold = rec["answer"] if isinstance(rec["answer"], list) else [rec["answer"]]  # level 2: a dict
            calls = [ToolCall(c["name"], c["parameters"]) for c in gold]
            # ToolRL's answer text: optional reasoning, the block, a response
            text = (
                "<think>The user wants this.</think>\n"
                + formats.get("apibank").render(calls)
                + "\n<response>Done.</response>"
            )
            _check("apibank", calls, text)
            answers[level] += len(calls)
            # real text: the <tool_call> blocks of the dialogue history
            for block in _BLOCK.findall(rec["user"]):
                got = formats.get("apibank").parse_strict(block)
                assert got and all(isinstance(c, ToolCall) for c in got)
                assert formats.detect_format(block) == "apibank"
                assert not formats.get("hermes").is_valid(block)
                history_blocks += 1
                history_calls += len(got)
    assert answers == {1: 399, 2: 67, 3: 131}
    assert (history_blocks, history_calls) == (HISTORY_BLOCKS, HISTORY_CALLS)


# <tool_call> blocks in the dialogue histories of all three levels, one call each (counted independently as the
# number of "<tool_call>" substrings and of non-blank lines inside them).
HISTORY_BLOCKS, HISTORY_CALLS = 423, 423


def _nestful_calls(output: list[dict]) -> list[ToolCall]:
    return [ToolCall(c["name"], c["arguments"], outputs=(c["label"],) if "label" in c else ()) for c in output]


@pytest.mark.parametrize("rel", sorted(NESTFUL_FILES))
def test_nestful_v1(nestful_dir, rel):
    records = json.loads((nestful_dir / rel).read_text(encoding="utf-8"))
    n_calls = 0
    for rec in records:
        calls = _nestful_calls(rec["output"])
        _check("nestful", calls, json.dumps(rec["output"], ensure_ascii=False))
        n_calls += len(calls)
    assert (len(records), n_calls) == NESTFUL_FILES[rel]


def test_nestful_v2_toy():
    p = shared_path("nestful", "data_v2_toy", "toy_data.jsonl")
    records = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    for rec in records:
        _check("nestful", _nestful_calls(rec["output"]), json.dumps(rec["output"]))
    assert sum(len(r["output"]) for r in records) == 25
