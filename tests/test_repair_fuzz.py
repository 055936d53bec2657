"""Fuzzing the gate, tier 1 and the model-free pipeline: over 10,000 seeded inputs (mutated valid texts in every
registered format, random strings, deep nesting, random argument values against schemas) nothing raises, every result
is JSON-serialisable, and no single input takes long (a guard against pathological blow-ups, not a speed target)."""

from __future__ import annotations

import json
import random

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.gate import check_calls
from refiner.pipeline import Refiner
from refiner.repair import repair_calls
from refiner.specs import load_tools

TOOLS = [
    {
        "name": "book_table",
        "parameters": {
            "type": "object",
            "properties": {
                "restaurant": {"type": "string", "minLength": 1, "pattern": "^[A-Za-z ]+$"},
                "people": {"type": "integer", "minimum": 1, "maximum": 20},
                "time": {"type": "string"},
                "outdoor": {"type": "boolean"},
                "price": {"type": "number"},
                "dishes": {"type": "array", "items": {"type": "string", "enum": ["soup", "fish", "cake"]}},
                "contact": {
                    "type": "object",
                    "properties": {"phone": {"type": "string"}, "vip": {"type": "boolean"}},
                    "required": ["phone"],
                },
            },
            "required": ["restaurant", "people"],
        },
    },
    {"name": "cancel_booking", "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}}},
]
GOLD = [
    ToolCall("book_table", {"restaurant": "Chez Nous", "people": 4, "outdoor": True, "dishes": ["soup"]},
             outputs=("API_call_0",)),
    ToolCall("cancel_booking", {"booking_id": "API_call_0"}, outputs=("API_call_1",)),
]
ALPHABET = '{}[]()<>/":,=\\\'$ _-abcXYZ0123456789\n\ttool_callAPI_call_$var1.'
N_TEXT = 5_000
N_CALLS = 5_000


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(6)
        i = rng.randint(0, len(text))
        if op == 0 and text:
            text = text[:i] + text[i + 1 :]
        elif op == 1:
            text = text[:i] + rng.choice(ALPHABET) + text[i:]
        elif op == 2 and text:
            j = rng.randint(0, len(text))
            text = text[:i] + text[min(i, j) : max(i, j)] + text[i:]
        elif op == 3:
            text = text[:i]
        elif op == 4:
            text = text.replace('"', "'", rng.randint(1, 3))
        else:
            text = text[i:] + text[:i]
    return text


def random_text(rng: random.Random, renders: list[str]) -> str:
    kind = rng.randrange(10)
    if kind < 7:
        return mutate(rng.choice(renders), rng)
    if kind == 7:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 200)))
    if kind == 8:
        return rng.choice(["[", "{", '{"a":', "<tool_call>", '"', "]"]) * rng.randint(1, 40)
    return "".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(0, 100)))


def random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 4 else 6)
    return [
        lambda: rng.randint(-(10**12), 10**12),
        lambda: rng.choice([0.5, -1e300, float("inf"), float("nan"), 3.0]),
        lambda: rng.choice([True, False, None]),
        lambda: rng.choice(["", "4", "4.0", "true", "[1]", '{"phone": "1"}', "Chez", "soup", "API_call_9", "$v$"]),
        lambda: "x" * rng.randint(0, 3000),
        lambda: rng.choice(["API_call_0", "API_call_1", "$var1.x$"]),
        lambda: [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))],
        lambda: {rng.choice(["phone", "vip", "k", ""]): random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))},
        lambda: [[[random_value(rng, depth + 3)]]],
    ][kind]()


def random_calls(rng: random.Random) -> list[ToolCall]:
    names = ["book_table", "cancel_booking", "book_tabel", "BookTable", "", "x"]
    keys = ["restaurant", "people", "time", "outdoor", "price", "dishes", "contact", "peple", "booking_id", "zzz"]
    calls = []
    for i in range(rng.randint(0, 4)):
        args = {rng.choice(keys): random_value(rng) for _ in range(rng.randint(0, 5))}
        outputs = tuple(rng.sample(["API_call_0", "API_call_1", "API_call_2", "$var1"], rng.randint(0, 2)))
        calls.append(ToolCall(rng.choice(names), args, outputs=outputs))
    return calls


@pytest.fixture(scope="module")
def specs():
    return load_tools(TOOLS)


def _renders() -> list[tuple[str, str]]:
    out = []
    for f in formats.all_formats():
        try:
            out.append((f.name, f.render(GOLD)))
        except Exception:  # a format that cannot express these calls (e.g. output labels) is fuzzed with fewer
            out.append((f.name, f.render([ToolCall(c.name, dict(c.arguments)) for c in GOLD])))
    return out


def test_fuzz_texts_through_the_pipeline(specs):
    rng = random.Random(1234)
    renders = _renders()
    refiner = Refiner()
    for _ in range(N_TEXT):
        fmt, _ = rng.choice(renders)
        text = random_text(rng, [r for _, r in renders])
        request = {"tools": specs, "upstream": text, "format": fmt}
        res = refiner.refine(request)
        assert res["stage"] in ("unchanged", "repaired", "truncated")
        if res["stage"] == "truncated":  # a text that stops mid-value: the cut call is reported, not returned
            assert res["cut"]["clean"] is False and len(res["calls"]) <= len(res["upstream_diagnostics"]) + 99
        json.dumps({k: v for k, v in res.items() if k != "tools"})


@pytest.mark.parametrize("unit", ["[", "{", '{"a": ', "<tool_call>{", "((", '"'])
@pytest.mark.parametrize("depth", [500, 5000, 60_000])
def test_deep_nesting_is_bounded(specs, unit, depth):
    """Pathological nesting (costly for ``json_repair``) still ends with a reported result (its time is
    bench_worst_case.py's)."""
    res = Refiner().refine({"tools": specs, "upstream": unit * depth, "format": "hermes"})
    assert res["stage"] in ("unchanged", "truncated") and res["diagnostics"]


def test_fuzz_calls_through_gate_and_repair(specs):
    rng = random.Random(99)
    for _ in range(N_CALLS):
        calls = random_calls(rng)
        fmt = rng.choice([None, "hermes", "apibank", "order", "nestools"])
        diags = check_calls(calls, specs, fmt=fmt)
        fixed, actions = repair_calls(calls, specs, fmt=fmt)
        after = check_calls(fixed, specs, fmt=fmt)
        json.dumps([d.to_dict() for d in diags + after] + [a.to_dict() for a in actions], default=str)
        assert len(fixed) == len(calls)  # tier 1 never adds or drops calls
        assert not actions or fixed != calls or any(a.code == "coerce" for a in actions)
