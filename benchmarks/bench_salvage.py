"""Reading calls wherever a model put them: tier 1 against a naive extractor, on the salvage corpus.

The corpus (``tests/corpus/salvage``, see ``tests/salvage_corpus.py``) holds answers to BFCL questions that were asked
for a bare pythonic list and answered otherwise: prose around the list, several lists, bare calls, code fences,
JSON-ish objects, native ``<tool_call>`` blocks, quoted call strings, markdown escapes, ...; and answers that only
talk. For each answer:

- ``tier 1``: ``Refiner().refine`` with the format given (``toolace``, BFCL's bare list), no model; the refined text
  is scored as BFCL scores an answer (``refiner.eval.bfcl``: its decoder, then its AST checker);
- ``before``: the same without salvage (the format's own lenient reading only), for reference;
- ``naive``: the peer, :func:`naive_extract` below: a regex for the offered tool names followed by ``(`` with
  ``ast.literal_eval`` of each keyword, else ``<tool_call>`` blocks, else json_repair over ``{...}`` objects with a
  name and ``arguments``/``parameters``; its calls go straight to BFCL's AST checker.

Printed per shape and overall: the share of answers that pass BFCL's checker (recovery), the share read exactly as
the corpus says a careful reader does (``as meant``), and on talk-only answers the number of calls each reader made
up (``invented``). Target: tier 1 recovers at least 1.1x what the naive extractor does, and invents no call.

    python benchmarks/bench_salvage.py [--shape fence_json] [--limit N]
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import json_repair
from salvage_corpus import Row, bfcl_samples, keys, load

from refiner.calls import ToolCall
from refiner.eval import bfcl_ast
from refiner.eval.bfcl import BFCL
from refiner.formats.reading import choose_formats
from refiner.gate import check_text
from refiner.pipeline import Refiner, load_request_tools
from refiner.repair import repair_parsed

TARGET_RATIO = 1.1


# ----------------------------------------------------------------------------------------------------------------
# The peer: a naive extractor, as a user would write one in an afternoon


def _close(text: str, i: int) -> int:
    """Index of the bracket closing the one at ``i`` (quotes respected), or -1."""
    depth, quote, escaped = 0, "", False
    for j in range(i, min(len(text), i + 20_000)):
        ch = text[j]
        if quote:
            escaped, quote = (False, quote) if escaped else (ch == "\\", "" if ch == quote else quote)
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _naive_pythonic(text: str, names: Sequence[str]) -> list[ToolCall]:
    if not names:
        return []
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")\s*\(")
    calls = []
    for m in pattern.finditer(text):
        end = _close(text, m.end() - 1)
        try:
            node = ast.parse(f"f({text[m.end():end]})", mode="eval").body if end > 0 else None
        except SyntaxError:
            continue
        if not isinstance(node, ast.Call):
            continue
        args = {}
        for kw in node.keywords:
            try:
                args[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError):
                pass
        calls.append(ToolCall(m.group(1), {k: v for k, v in args.items() if k}))
    return calls


def _naive_object(obj: object) -> list[ToolCall]:
    if isinstance(obj, list):
        return [c for o in obj for c in _naive_object(o)]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return []
    args = obj.get("arguments", obj.get("parameters"))
    if args is None:
        return []
    return [ToolCall(obj["name"], args if isinstance(args, dict) else {})]


def naive_extract(text: str, names: Sequence[str]) -> list[ToolCall]:
    """The peer: offered names followed by "(" (keywords read by literal_eval), else Hermes blocks, else json_repair
    over every top-level {...} object with a name and arguments/parameters."""
    text = text.replace("\\_", "_")
    calls = _naive_pythonic(text, names)
    if not calls:
        for block in re.findall(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL):
            calls += _naive_object(json_repair.loads(block))
    if not calls:
        i = text.find("{")
        while i >= 0:
            end = _close(text, i)
            if end < 0:
                break
            calls += _naive_object(json_repair.loads(text[i:end + 1]))
            i = text.find("{", end + 1)
    return calls


# ----------------------------------------------------------------------------------------------------------------
# Running the readers


def before_salvage(request: dict) -> str:
    """Tier 1 without salvage: the text the pipeline returned when it read only the format's own lenient parse."""
    upstream_fmt, out_fmt = choose_formats(request["upstream"], request.get("format"))[:2]
    tools = load_request_tools(request)
    report = check_text(request["upstream"], upstream_fmt, tools)
    t1 = repair_parsed(report, request["upstream"], upstream_fmt, tools, out_fmt=out_fmt)
    return t1.text if t1.changed and t1.after.n_errors <= report.n_errors else request["upstream"]


def judge(rows: list[Row], samples: dict) -> list[dict]:
    """One verdict per row: BFCL pass for each reader (None without a BFCL question), calls read, as meant."""
    bench = BFCL()
    refiner = Refiner()
    out = []
    for row in rows:
        req = row.request(samples)
        t0 = time.perf_counter()
        res = refiner.refine(req)
        t1 = time.perf_counter()
        got = [{"name": c["name"], "arguments": c["arguments"]} for c in res["calls"]]
        sample = samples.get(f"bfcl-{row.bfcl_id}") if row.bfcl_id else None
        names = [t["name"] for t in sample.tools] if sample else [t.get("name", "") for t in (row.tools or [])
                                                                    if isinstance(t, dict)]
        t2 = time.perf_counter()
        naive = naive_extract(row.text, names)
        t3 = time.perf_counter()
        v = {"row": row, "tier1_calls": got, "naive_calls": [c.to_dict() for c in naive],
             "tier1_as_meant": keys(got) == keys(row.calls), "naive_as_meant": keys([c.to_dict() for c in naive]) ==
             keys(row.calls), "tier1": None, "naive": None, "before": None, "stage": res["stage"],
             "tier1_s": t1 - t0, "naive_s": t3 - t2}
        if sample is not None:
            def passes(text: str, sample=sample) -> bool:
                return bench.score(sample, bench.postprocess_refined(sample, text))["acc"] == 1.0

            v["tier1"] = passes(res["refined"])
            v["before"] = passes(before_salvage(req))
            v["naive"] = bool(bfcl_ast.check(sample.meta["functions"], naive, sample.gold))
        out.append(v)
    return out


def _rate(vals: list) -> str:
    vals = [v for v in vals if v is not None]
    return f"{100 * sum(vals) / len(vals):5.1f}" if vals else "    -"


def table(verdicts: list[dict]) -> tuple[str, dict]:
    """The per-shape table and the overall figures."""
    by_shape: dict[str, list[dict]] = defaultdict(list)
    for v in verdicts:
        by_shape[v["row"].shape].append(v)
    head = (f"{'shape':<20}{'rows':>5}{'before %':>10}{'tier 1 %':>10}{'naive %':>9}"
            f"{'t1 meant %':>12}{'nv meant %':>12}{'invented t1/nv':>16}")
    lines = [head, "-" * len(head)]
    for shape in sorted(by_shape, key=lambda s: (s.startswith("talk"), s)):
        vs = by_shape[shape]
        talk = [v for v in vs if v["row"].kind == "talk"]
        inv = (f"{sum(len(v['tier1_calls']) for v in talk)}/{sum(len(v['naive_calls']) for v in talk)}"
               if talk else "")
        lines.append(f"{shape:<20}{len(vs):>5}{_rate([v['before'] for v in vs if v['row'].kind == 'call']):>10}"
                     f"{_rate([v['tier1'] for v in vs if v['row'].kind == 'call']):>10}"
                     f"{_rate([v['naive'] for v in vs if v['row'].kind == 'call']):>9}"
                     f"{_rate([v['tier1_as_meant'] for v in vs]):>12}{_rate([v['naive_as_meant'] for v in vs]):>12}"
                     f"{inv:>16}")
    calls = [v for v in verdicts if v["row"].kind == "call" and v["tier1"] is not None]
    talk = [v for v in verdicts if v["row"].kind == "talk"]
    summary = {
        "call_rows": len(calls),
        "talk_rows": len(talk),
        "before": sum(v["before"] for v in calls),
        "tier1": sum(v["tier1"] for v in calls),
        "naive": sum(v["naive"] for v in calls),
        "tier1_as_meant": sum(v["tier1_as_meant"] for v in verdicts),
        "naive_as_meant": sum(v["naive_as_meant"] for v in verdicts),
        "rows": len(verdicts),
        "invented_tier1": sum(len(v["tier1_calls"]) for v in talk),
        "invented_naive": sum(len(v["naive_calls"]) for v in talk),
        "invented_before": None,
    }
    summary["ratio"] = summary["tier1"] / summary["naive"] if summary["naive"] else float("inf")
    summary["tier1_ms"] = 1000 * sum(v["tier1_s"] for v in verdicts) / max(len(verdicts), 1)
    summary["naive_ms"] = 1000 * sum(v["naive_s"] for v in verdicts) / max(len(verdicts), 1)
    lines.append("-" * len(head))
    n = max(summary["call_rows"], 1)
    lines.append(f"{'all (call rows)':<20}{summary['call_rows']:>5}{100 * summary['before'] / n:>10.1f}"
                 f"{100 * summary['tier1'] / n:>10.1f}{100 * summary['naive'] / n:>9.1f}"
                 f"{100 * summary['tier1_as_meant'] / max(len(verdicts), 1):>12.1f}"
                 f"{100 * summary['naive_as_meant'] / max(len(verdicts), 1):>12.1f}"
                 f"{summary['invented_tier1']:>8}/{summary['invented_naive']}")
    lines.append(f"recovery tier 1 / naive = {summary['ratio']:.2f}x (target >= {TARGET_RATIO}x); invented calls on "
                 f"{summary['talk_rows']} talk-only answers: tier 1 {summary['invented_tier1']} (target 0), naive "
                 f"{summary['invented_naive']}")
    lines.append(f"time per answer: tier 1 (whole pipeline, no model) {summary['tier1_ms']:.2f} ms, naive "
                 f"{summary['naive_ms']:.2f} ms")
    return "\n".join(lines), summary


def run(rows: list[Row]) -> tuple[str, dict]:
    samples = bfcl_samples(rows)
    t = time.perf_counter()
    verdicts = judge(rows, samples)
    text, summary = table(verdicts)
    summary["seconds"] = time.perf_counter() - t
    summary["met"] = summary["ratio"] >= TARGET_RATIO and summary["invented_tier1"] == 0
    return text + f"\n{len(rows)} answers judged in {summary['seconds']:.1f} s", summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", action="append", help="only these shapes (repeatable)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many rows per shape")
    args = ap.parse_args(argv)
    rows = [r for r in load() if r.bfcl_id is not None and (not args.shape or r.shape in args.shape)]
    if args.limit is not None:
        per: dict[str, int] = defaultdict(int)
        kept = []
        for r in rows:
            per[r.shape] += 1
            if per[r.shape] <= args.limit:
                kept.append(r)
        rows = kept
    text, summary = run(rows)
    print(text)
    return 0 if summary["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
