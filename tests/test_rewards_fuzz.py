"""Fuzz: the reward never raises, and always returns the full float result, on 10,000+ hostile solution strings
(mutated valid answers in every format, tag/bracket soup, random unicode, and 100 KB adversarial texts)."""

from __future__ import annotations

import random
import time

from refiner import formats
from refiner.calls import ToolCall
from rewards import RESULT_KEYS, compute_score, make_ground_truth
from rewards.score import STRICT_ANSWER_CHARS

N_STRINGS = 10_000
# Not a speed target (see benchmarks/bench_rewards.py): a guard that catches a hang or super-linear blow-up.
HANG_GUARD_S = 5.0

GOLD = [
    ToolCall("get_weather", {"city": "Paris", "days": 3, "units": ["c", "f"]}, outputs=("API_call_0",)),
    ToolCall("convert", {"amount": "API_call_0", "opts": {"to": "EUR", "round": True}}, outputs=("API_call_1",)),
]


def _golds() -> list[tuple[str, str]]:
    out = []
    for fmt in formats.all_formats():
        answer = fmt.render(GOLD)
        out.append((make_ground_truth(fmt.name, fmt.parse_strict(answer)), answer))
    return out


def _pieces() -> list[str]:
    tags = [t for f in formats.all_formats() for t in f.tags]
    return tags + [
        "<think>",
        "</think>",
        "{",
        "}",
        "[",
        "]",
        '"',
        "'",
        ":",
        ",",
        "\\",
        "\\u",
        "\\ud800",
        "null",
        "true",
        "NaN",
        "Infinity",
        "-0",
        "1e999",
        '"name"',
        '"arguments"',
        '"parameters"',
        "get_weather",
        "API_call_0",
        "$var_1",
        "step",
        "tool_list",
        "(",
        ")",
        "=",
        "\n",
        "\t",
        " ",
        "\x00",
        "\u202e",
        "😀",
        "名字",
        "<|endoftext|>",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        "[get_weather(city='Paris')]",
    ]


def _mutate(text: str, rng: random.Random, pieces: list[str]) -> str:
    s = list(text)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        i = rng.randrange(len(s) + 1)
        if op < 0.35 and s:
            del s[min(i, len(s) - 1) : min(i + rng.randint(1, 8), len(s))]
        elif op < 0.7:
            s[i:i] = list(rng.choice(pieces))
        elif s:
            j = rng.randrange(len(s))
            s[i:i] = s[j : j + rng.randint(1, 30)]
    return "".join(s)


def _strings(golds: list[tuple[str, str]]) -> list[str]:
    rng = random.Random(20240601)
    pieces = _pieces()
    answers = [a for _, a in golds]
    out: list[str] = []
    while len(out) < N_STRINGS:
        kind = rng.random()
        if kind < 0.55:
            out.append(_mutate(rng.choice(answers), rng, pieces))
        elif kind < 0.8:
            out.append("".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))))
        elif kind < 0.95:
            out.append("".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(0, 200))))
        else:  # a valid answer of another format, or two glued together
            out.append(rng.choice(answers) + rng.choice(["", "\n", rng.choice(answers)]))
    call = answers[0]
    # 100 KB, and the longest answer the reward still parses strictly (longer ones are only read leniently)
    for size in (100_000, STRICT_ANSWER_CHARS):
        out += [
            "<tool_call>" * (size // 11),
            '<tool_call>{"name": "a", "arguments": {"x": ' + "[" * size,
            "<tool_call>" + '{"a":' * (size // 5) + "1" + "}" * (size // 5) + "</tool_call>",
            '<tool_call>{"name": "get_weather", "arguments": {"city": "' + "z" * size + '"}}</tool_call>',
            (call * (size // len(call) + 1))[:size],
            "".join(rng.choice(pieces) for _ in range(size // 4))[:size],
            '"' * size,
            "<think>" + "x" * size,
            "[" * size,
            "(" * size + "get_weather(" * 100,
            "<function_list>[" + "f(a=1), " * (size // 8),
            "<function_list>[" + "f(a=(1, 'x')), " * (size // 15) + "]</function_list>",
        ] + [(a * (size // len(a) + 1))[:size] for a in answers]
    return out


def test_reward_never_raises_on_hostile_strings():
    golds = _golds()
    strings = _strings(golds)
    assert len(strings) >= N_STRINGS and sum(len(s) >= 100_000 for s in strings) >= 10
    rng = random.Random(7)
    for i, text in enumerate(strings):
        gt, _ = golds[i % len(golds)]
        info = {"upstream": strings[rng.randrange(len(strings) - 30)]} if i % 3 == 0 else None
        t = time.monotonic()
        r = compute_score("fuzz", text, gt, info, variant="strict" if i % 2 else "paper")
        assert time.monotonic() - t < HANG_GUARD_S, f"string {i} ({len(text)} chars) took too long"
        assert tuple(r) == RESULT_KEYS, i
        assert 0.0 <= r["score"] <= 1.0, i
        assert r["acc"] in (0.0, 1.0)
