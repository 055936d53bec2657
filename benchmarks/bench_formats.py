"""Strict-parse and render throughput per wire format, in calls per second on one core.

Each format parses texts of ``--per-text`` calls (real NesTools calls when ../shared/data is present, else
synthetic ones of the same shape). The peer, measured in the same run, is plain ``json.loads`` of the same calls
as a JSON list (``[{"name", "arguments"}, ...]``); the ratio column is format throughput / peer throughput.
Target: >= 20,000 calls/s strict parse for the JSON formats.

    python benchmarks/bench_formats.py [--per-text 3] [--seconds 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

from refiner import formats
from refiner.calls import ToolCall

TARGET = 20_000
JSON_FORMATS = {"hermes", "glaive", "xlam", "nestools", "order", "apibank", "openai", "anthropic", "nestful"}
DATA = Path(os.environ.get("TOOL_REFINER_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def sample_calls(n: int, seed: int = 0) -> tuple[list[ToolCall], str]:
    p = DATA / "nestools" / "test_data.jsonl"
    if p.exists():
        calls = [
            ToolCall(c["api_name"], c["parameters"], outputs=tuple(c["responses"]))
            for line in p.read_text(encoding="utf-8").splitlines()
            for c in json.loads(line)["call"]
        ]
        return calls[:n], f"real NesTools calls ({p})"
    rng = random.Random(seed)
    calls = [
        ToolCall(
            f"tool_{i}",
            {"query": f"text {i} é", "limit": rng.randint(1, 50), "flag": True, "tags": ["a", "b"]},
            outputs=(f"API_call_{i}",),
        )
        for i in range(n)
    ]
    return calls, "synthetic calls"


def for_format(name: str, calls: list[ToolCall]) -> list[ToolCall]:
    if name == "order":
        return [ToolCall(c.name, {}, step=i // 2 + 1) for i, c in enumerate(calls)]
    if name == "nestools":
        return calls
    if name == "nestful":  # one label per call
        return [ToolCall(c.name, c.arguments, outputs=c.outputs[:1]) for c in calls]
    return [ToolCall(c.name, c.arguments) for c in calls]


def rate(fn, items: list, n_calls: int, seconds: float) -> float:
    """Best of three runs: calls per second for ``fn`` over all ``items``, repeated for about ``seconds``."""
    best = 0.0
    for _ in range(3):
        loops, t0 = 0, time.perf_counter()
        while True:
            for it in items:
                fn(it)
            loops += 1
            spent = time.perf_counter() - t0
            if spent >= seconds:
                break
        best = max(best, loops * n_calls / spent)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-text", type=int, default=3, help="calls per text (a typical model answer has 1-5)")
    ap.add_argument("--texts", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    calls, origin = sample_calls(args.per_text * args.texts)
    n = len(calls)
    print(f"{n} calls ({origin}), {args.per_text} per text, one core, best of 3 x {args.seconds}s\n")
    header = f"{'format':<10} {'parse calls/s':>14} {'render calls/s':>15} {'json.loads calls/s':>19} {'parse/json':>11} {'target':>7}"
    print(header)
    print("-" * len(header))
    for name in sorted(formats.names()):
        fmt = formats.get(name)
        own = for_format(name, calls)
        groups = [own[i : i + args.per_text] for i in range(0, n, args.per_text)]
        texts = [fmt.render(g) for g in groups]
        for t, g in zip(texts, groups):
            assert fmt.parse_strict(t) == g, name
        peer_texts = [
            json.dumps([{"name": c.name, "arguments": dict(c.arguments)} for c in g], ensure_ascii=False)
            for g in groups
        ]
        parse = rate(fmt.parse_strict, texts, n, args.seconds)
        render = rate(fmt.render, groups, n, args.seconds)
        peer = rate(json.loads, peer_texts, n, args.seconds)
        target = ("ok" if parse >= TARGET else "MISS") if name in JSON_FORMATS else "-"
        print(f"{name:<10} {parse:>14,.0f} {render:>15,.0f} {peer:>19,.0f} {parse / peer:>11.2f} {target:>7}")


if __name__ == "__main__":
    main()
