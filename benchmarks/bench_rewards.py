"""Reward throughput on real samples, against ToolRL's reward (verl's port, ``verl.utils.reward_score.rlla``).

Samples: the NesTools test split and the three API-Bank levels (../shared/data), gold calls rendered in every
registered wire format that can carry them, plus rule-style perturbations made here (dropped argument, value typed as a
string, renamed tool, swapped calls, duplicated call, missing closing tag, reasoning prefix). Each sample is scored by
``rewards.compute_score`` with its upstream text (the unperturbed gold) and by ToolRL's ``compute_score`` on the same
calls written in ToolRL's own ``<tool_call>`` layout. Timings are CPU time of the scoring thread, on one core (the
process is pinned when possible), best of ``--repeat``.

Prints: per-sample and per-KB median / p99 in µs (warm caches: each ground truth and upstream scored before, as in
GRPO where a prompt's rollouts share them; and cold: caches cleared), the 100 KB adversarial times, and the ratio
against ToolRL. Run: ``.venv/bin/python benchmarks/bench_rewards.py [--limit N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from refiner import formats
from refiner.calls import ToolCall
from rewards import compute_score, make_ground_truth
from rewards.ground_truth import _gold_cached, _parse_cached
from rewards.score import _upstream_breakdown

DATA = Path(os.environ.get("TOOL_REFINER_SHARED_DATA", ROOT.parent / "shared" / "data"))


def load_gold_lists(limit: int | None) -> list[tuple[str, list[ToolCall]]]:
    out: list[tuple[str, list[ToolCall]]] = []
    nt = DATA / "nestools" / "test_data.jsonl"
    if nt.exists():
        for line in nt.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                calls = [
                    ToolCall(c["api_name"], c.get("parameters") or {}, outputs=tuple(c.get("responses") or ()))
                    for c in rec["call"]
                ]
                out.append(("nestools", calls))
    for lvl in (1, 2, 3):
        p = DATA / "api_bank" / f"level-{lvl}-api_processed.json"
        if p.exists():
            for rec in json.loads(p.read_text(encoding="utf-8")):
                items = rec["answer"] if isinstance(rec["answer"], list) else [rec["answer"]]
                out.append((f"api_bank_l{lvl}", [ToolCall(a["name"], a.get("parameters") or {}) for a in items]))
    if not out:
        sys.exit(f"no data under {DATA}")
    random.Random(0).shuffle(out)
    return out[:limit] if limit else out


def perturb(calls: list[ToolCall], rng: random.Random) -> tuple[str, list[ToolCall] | None]:
    """One rule-style error: ``(kind, calls)``; calls None means a text-level error applied after rendering."""
    kinds = ["drop_arg", "str_value", "rename", "swap", "duplicate", "no_close", "think"]
    kind = rng.choice(kinds)
    c = list(calls)
    i = rng.randrange(len(c))
    if kind == "drop_arg" and c[i].arguments:
        k = rng.choice(sorted(c[i].arguments))
        c[i] = ToolCall(c[i].name, {a: v for a, v in c[i].arguments.items() if a != k}, c[i].outputs, c[i].step)
    elif kind == "str_value" and c[i].arguments:
        k = rng.choice(sorted(c[i].arguments))
        args = dict(c[i].arguments)
        args[k] = json.dumps(args[k]) if not isinstance(args[k], str) else args[k] + "x"
        c[i] = ToolCall(c[i].name, args, c[i].outputs, c[i].step)
    elif kind == "rename":
        c[i] = ToolCall(c[i].name + "s", dict(c[i].arguments), c[i].outputs, c[i].step)
    elif kind == "swap" and len(c) > 1:
        c[0], c[1] = c[1], c[0]
    elif kind == "duplicate":
        c.insert(i, c[i])
    elif kind in ("no_close", "think"):
        return kind, None
    return kind, c


def toolrl_text(calls: list[ToolCall]) -> str:
    body = "\n".join(json.dumps({"name": c.name, "parameters": dict(c.arguments)}, ensure_ascii=False) for c in calls)
    return f"<tool_call>\n{body}\n</tool_call>"


def build_samples(limit: int | None) -> list[dict]:
    rng = random.Random(1)
    samples = []
    fmts = formats.all_formats()
    for source, gold in load_gold_lists(limit):
        for fmt in fmts:
            try:
                answer = fmt.render(gold)
                parsed = fmt.parse_strict(answer)
            except (formats.FormatError, ValueError, TypeError):
                continue  # this format cannot carry these calls
            gt = make_ground_truth(fmt.name, parsed, order_sensitive=fmt.order_sensitive or source == "nestools")
            kind, pert = perturb(parsed, rng)
            if pert is None:
                text = answer
                t_text = toolrl_text(parsed)
                if kind == "no_close":
                    cut = max(text.rfind("</"), len(text) // 2)
                    text, t_text = text[:cut], t_text[: t_text.rfind("</tool_call>")]
                else:
                    text = "<think>\nChecking the calls.\n</think>\n\n" + text
                    t_text = "<think>\nChecking the calls.\n</think>\n" + t_text
            else:
                try:
                    text = fmt.render(pert)
                except (formats.FormatError, ValueError, TypeError):
                    continue
                t_text = toolrl_text(pert)
            for out, t_out, k in ((answer, toolrl_text(parsed), "gold"), (text, t_text, kind)):
                samples.append(
                    {
                        "fmt": fmt.name,
                        "kind": k,
                        "gt": gt,
                        "text": out,
                        "upstream": answer,
                        "toolrl_text": "<think>ok</think>\n" + t_out if not t_out.startswith("<think>") else t_out,
                        "toolrl_gt": toolrl_text(parsed),
                    }
                )
    return samples


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def time_call(fn, repeat: int) -> float:
    """Best-of-``repeat`` CPU time of this thread in µs (robust to other processes sharing the machine)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time_ns()
        fn()
        best = min(best, time.thread_time_ns() - t)
    return best / 1000.0


def clear_caches() -> None:
    _parse_cached.cache_clear()
    _gold_cached.cache_clear()
    _upstream_breakdown.cache_clear()


def adversarial() -> dict[str, str]:
    rng = random.Random(0)
    call = '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
    bad = '<tool_call>{"name": "a", "arguments": {"x": 1,}</tool_call>'
    size = 100_000
    return {
        "repeated open tags": "<tool_call>" * (size // 11),
        "unclosed brackets": '<tool_call>{"name": "a", "arguments": {"x": ' + "[" * (size - 40),
        "deeply nested object": "<tool_call>" + '{"a":' * (size // 12) + "1" + "}" * (size // 12) + "</tool_call>",
        "one 100 KB string value": '<tool_call>{"name": "a", "arguments": {"x": "' + "z" * size + '"}}</tool_call>',
        "2000 valid calls": (call * (size // len(call) + 1))[:size],
        "2000 broken calls": (bad * (size // len(bad) + 1))[:size],
        "bracket/tag junk": "".join(rng.choice('{}[]":,<>/tool_call 0123abc\n') for _ in range(size)),
        "unbalanced quotes": "<tool_call>" + '"' * size,
        "100 KB reasoning only": "<think>" + "x" * size + "</think>",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="gold call lists to use (default: all)")
    ap.add_argument("--repeat", type=int, default=5, help="timing repeats per sample (best of)")
    args = ap.parse_args()
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    from verl.utils.reward_score import rlla

    class _NoPrint:  # ToolRL prints 1 sample in 64; that I/O is not part of the reward
        @staticmethod
        def randint(a: int, b: int) -> int:
            return 0

    rlla.random = _NoPrint

    samples = build_samples(args.limit)
    print(f"samples: {len(samples)} over formats {sorted({s['fmt'] for s in samples})}")
    ours_warm, ours_cold, theirs, per_kb, sizes = [], [], [], [], []
    score_sum = {"ours": 0.0, "toolrl": 0.0}
    sink = io.StringIO()
    for s in samples:
        info = {"upstream": s["upstream"]}
        tinfo = {"experiment_name": "qwen"}

        def ours(s=s, info=info) -> dict:
            return compute_score("b", s["text"], s["gt"], info)

        def toolrl(s=s, tinfo=tinfo) -> dict:
            return rlla.compute_score("b", s["toolrl_text"], s["toolrl_gt"], tinfo)

        clear_caches()
        ours_cold.append(time_call(ours, 1))
        score_sum["ours"] += ours()["score"]
        w = time_call(ours, args.repeat)
        ours_warm.append(w)
        kb = max(len(s["text"].encode()), 1) / 1024
        sizes.append(kb)
        per_kb.append(w / kb)
        with contextlib.redirect_stdout(sink):
            theirs.append(time_call(toolrl, args.repeat))
            score_sum["toolrl"] += toolrl()["score"]

    n = len(samples)
    print(f"output size: median {statistics.median(sizes):.2f} KB, max {max(sizes):.2f} KB")
    print()
    print(f"{'reward':38s} {'median µs':>10s} {'p99 µs':>10s} {'mean µs':>10s}")
    rows = [
        ("ours, per sample (warm caches)", ours_warm),
        ("ours, per sample (cold caches)", ours_cold),
        ("ours, per KB of output (warm)", per_kb),
        ("ToolRL rlla.compute_score, per sample", theirs),
    ]
    big = [w for w, kb in zip(ours_warm, sizes) if kb >= 0.75]
    if big:
        rows.insert(3, (f"ours, outputs of 0.75-1.25 KB (n={len(big)})", big))
    for name, xs in rows:
        print(f"{name:38s} {statistics.median(xs):10.1f} {pct(xs, 0.99):10.1f} {statistics.fmean(xs):10.1f}")
    print()
    print(
        f"ratio ours/ToolRL (median per sample, warm): {statistics.median(ours_warm) / statistics.median(theirs):.2f}x"
    )
    print(f"ratio ours/ToolRL (mean per sample, warm):   {statistics.fmean(ours_warm) / statistics.fmean(theirs):.2f}x")
    print(
        f"mean score: ours {score_sum['ours'] / n:.3f} (in [0, 1]), ToolRL {score_sum['toolrl'] / n:.3f} (in [-3, 4])"
    )
    print()
    by_fmt: dict[str, list[float]] = {}
    for s, w in zip(samples, per_kb):
        by_fmt.setdefault(s["fmt"], []).append(w)
    print(f"{'format':12s} {'n':>6s} {'median µs/KB':>13s} {'p99 µs/KB':>10s}")
    for f, xs in sorted(by_fmt.items()):
        print(f"{f:12s} {len(xs):6d} {statistics.median(xs):13.1f} {pct(xs, 0.99):10.1f}")
    print()
    gold = [ToolCall("a", {"x": 1, "y": "abc"})]
    fmts = formats.all_formats()
    gts = {f.name: make_ground_truth(f.name, f.parse_strict(f.render(gold))) for f in fmts}
    print("100 KB adversarial output, ms per reward, gold in each format:")
    print(f"{'case':26s}" + "".join(f"{f.name[:9]:>10s}" for f in fmts))
    worst = (0.0, "", "")
    for name, text in adversarial().items():
        row = f"{name:26s}"
        for f in fmts:
            ms = time_call(lambda text=text, f=f: compute_score("b", text, gts[f.name]), 3) / 1000
            worst = max(worst, (ms, name, f.name))
            row += f"{ms:10.2f}"
        print(row)
    print(f"worst: {worst[0]:.2f} ms ({worst[1]}, {worst[2]})")
    print()
    print("targets: median ≤ 50 µs/KB, p99 ≤ 1000 µs/KB, 100 KB adversarial ≤ 20 ms")


if __name__ == "__main__":
    main()
