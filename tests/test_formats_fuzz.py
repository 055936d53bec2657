"""``parse_lenient`` never raises and never hangs, and ``detect_format`` never raises, on random and mutated text.

Default run: 1,000 strings per format (mutated from that format's rendered text, with random
strings and tag/bracket soup mixed in), each parsed by its own format and detected, plus 100 KB inputs: each
format's own broken text, and tag soup and pathological repetitions parsed by every format. The slow variant runs
20,000 strings in all, every string through every format, and every format's broken 100 KB text, four soups and the
pathological repetitions through every format.
"""

from __future__ import annotations

import random

import pytest

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats.base import MAX_LENIENT_CHARS

ALL = sorted(formats.names())
# Every registered format's markers, closers and tags (so a format added later is fuzzed with its own), and the
# characters and fragments broken outputs are made of.
PIECES = list(
    dict.fromkeys(
        [
            *formats.all_markers(),
            *(t for f in formats.all_formats() for t in f.tags),
            "<think>",
            "</think>",
            "<response>",
            '{"',
            '"}',
            "{",
            "}",
            "[",
            "]",
            "(",
            ")",
            ",",
            ":",
            '"',
            "'",
            "\\",
            '"name"',
            '"arguments"',
            '"parameters"',
            '"api_name"',
            '"tool_calls"',
            '"tool_use"',
            "=",
            "true",
            "NaN",
            "1e999",
            "9" * 400,
            "\n",
            " ",
            "é",
            "😀",
            "\x00",
            "f(",
            "a=1",
            "'{",
            "}'",
            "$var_1.result$",
            "API_call_0",
        ]
    )
)


def _sample_calls(rng: random.Random, name: str) -> list[ToolCall]:
    """Calls the format can write, read from its attributes (names only, steps, output labels)."""
    fmt = formats.get(name)
    calls = []
    for i in range(rng.randint(1, 4)):
        args = {
            f"k{j}": rng.choice([1, -2.5, "s é", None, True, [1, {"a": "b"}], {"x": []}])
            for j in range(rng.randint(0, 3))
        }
        step = rng.randint(1, 3) if fmt.steps else None
        outputs = (f"API_call_{i}",) if fmt.outputs else ()
        calls.append(ToolCall(f"tool_{i}", {} if fmt.names_only else args, outputs=outputs, step=step))
    return calls


def _mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(6)
        i = rng.randint(0, len(text))
        if op == 0 and text:  # delete a span
            text = text[:i] + text[i + rng.randint(1, 8) :]
        elif op == 1:  # insert a piece
            text = text[:i] + rng.choice(PIECES) + text[i:]
        elif op == 2 and text:  # replace a character
            text = text[:i] + chr(rng.randint(0, 0x2FF)) + text[i + 1 :]
        elif op == 3:  # truncate
            text = text[:i]
        elif op == 4 and text:  # duplicate a span
            j = rng.randint(i, min(len(text), i + 40))
            text = text[:j] + text[i:j] + text[j:]
        else:  # swap quote styles
            text = text.replace('"', "'") if rng.random() < 0.5 else text.replace("'", '"')
    return text


def _random_text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))
    return "".join(chr(rng.randint(0, 0x7F if rng.random() < 0.8 else 0x10FFFF)) for _ in range(rng.randint(0, 80)))


def corpus(rng: random.Random, name: str, n: int) -> list[str]:
    fmt = formats.get(name)
    out = []
    for k in range(n):
        if k % 5 == 4:
            out.append(_random_text(rng))
        else:
            out.append(_mutate(rng, fmt.render(_sample_calls(rng, name))))
    return out


def big_inputs(rng: random.Random, name: str) -> list[str]:
    """~100 KB inputs: a huge valid call list broken near its end, and pathological repetitions."""
    fmt = formats.get(name)
    calls = _sample_calls(rng, name) * 400
    valid = fmt.render(calls)
    while len(valid) < 100_000:
        valid += "\n" + valid
    broken = valid[:100_000]
    soup = ""
    while len(soup) < 100_000:
        soup += "".join(rng.choice(PIECES) for _ in range(5_000))
    return [broken, soup, '{"' * 50_000, "{]" * 50_000, "[" * 100_000, "<tool_call>{" * 9_000, "f(" * 50_000]


def _check(fmt: formats.WireFormat, text: str) -> None:
    got = fmt.parse_lenient(text)
    assert isinstance(got, formats.Lenient)
    assert all(isinstance(c, ToolCall) for c in got.calls)
    assert all(isinstance(p, formats.Problem) and p.code in formats.PROBLEM_CODES for p in got.problems)
    # strict parsing raised only FormatError and recovery raised nothing (else lenient reports an internal problem)
    assert not [p for p in got.problems if p.code == "internal"], (fmt.name, text[:200], got.problems)
    if not got.problems:  # no problem reported means the text was strictly valid
        assert fmt.parse_strict(text) == got.calls


def test_fuzz_lenient_never_raises():
    """Every reading is well formed (time is bounded by count in test_bounds.py and measured by
    benchmarks/bench_worst_case.py)."""
    rng = random.Random(1234)
    n_strings = 0
    for name in ALL:
        fmt = formats.get(name)
        for text in corpus(rng, name, 1000):
            _check(fmt, text)
            formats.detect_format(text)
            n_strings += 1
    assert n_strings == 1000 * len(ALL)


def test_fuzz_huge_inputs_read_well_formed():
    """Each format's own huge text broken near its end, then tag soup and pathological repetitions through every
    format: well-formed readings (their time is benchmarks/bench_worst_case.py's)."""
    rng = random.Random(99)
    for name in ALL:
        broken = big_inputs(rng, name)[0]
        assert len(broken) >= 100_000
        _check(formats.get(name), broken)
    texts = big_inputs(rng, "hermes")[1:] + ["x" * (MAX_LENIENT_CHARS + 10)]
    assert all(len(t) >= 100_000 for t in texts)
    for text in texts:
        for name in ALL:
            _check(formats.get(name), text)
        formats.detect_format(text)


# ``strings`` in all, each through every format (the work grows with the formats, not with their square); then every
# ``every``-th format's own broken 100 KB text through every format
@pytest.mark.parametrize(("strings", "every"), [pytest.param(5_000, 4, marks=pytest.mark.slow, id="5k"),
                                                pytest.param(20_000, 1, marks=pytest.mark.long, id="20k")])
def test_fuzz_every_string_through_every_format(strings, every):
    rng = random.Random(777)
    texts = [t for name in ALL for t in corpus(rng, name, max(50, strings // len(ALL)))]
    for text in texts:
        for name in ALL:
            _check(formats.get(name), text)
    # the pathological repetitions (the same for every format but the random soup) once each, and four soups
    big = []
    for k, name in enumerate(ALL):
        inputs = big_inputs(rng, name)
        big += (inputs[:1] if k % every == 0 else []) + (inputs[1:2] if k % (len(ALL) // 4 or 1) == 0 else []) + (
            inputs[2:] if k == 0 else [])
    for text in big:
        for other in ALL:
            _check(formats.get(other), text)


def test_repair_work_is_bounded_by_count_not_time(monkeypatch):
    """json_repair only ever sees bounded regions and a bounded total per parse (counted, so the same text always
    gets the same result), on huge and pathological inputs through every format."""
    import json_repair
    from hostile import repair_cost

    from refiner.formats import jsonfix as base

    seen: list[str] = []
    real = json_repair.loads

    def recording(text, *a, **k):
        seen.append(text)
        return real(text, *a, **k)

    monkeypatch.setattr(json_repair, "loads", recording)
    rng = random.Random(7)
    texts = big_inputs(rng, "hermes")[1:] + ["<tool_call>{]" * 8_000, '{"a":' * 20_000]
    repaired_somewhere = False
    for text in texts:
        for name in ALL:
            fmt = formats.get(name)
            seen.clear()
            first = fmt.parse_lenient(text)
            regions = list(seen)
            repaired_somewhere |= bool(regions)
            assert all(len(r) <= base.REPAIR_REGION_CHARS for r in regions), name
            assert all(r.count("{") < base.REPAIR_REGION_OPENS for r in regions), name
            costs = [repair_cost(r) for r in regions]
            assert sum(costs[:-1]) < base.REPAIR_TOTAL_COST, (name, len(costs), sum(costs))
            seen.clear()
            again = fmt.parse_lenient(text)
            assert (again.calls, again.problems) == (first.calls, first.problems), name
            assert seen == regions, name
    assert repaired_somewhere
