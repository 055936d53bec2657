"""Tier-1 repair throughput and latency, side by side with ``json_repair`` alone on the same broken inputs.

Gold calls from ../shared/data (NesTools, Glaive, API-Bank) are corrupted by the rule corruptor (one seeded error per
class per record) and rendered in the source's wire format. Each broken text then goes through
(a) the no-model pipeline (``Refiner().refine``: parse, gate, tier 1, guard), and
(b) ``json_repair.repair_json`` on the whole text (the peer),
both timed per request on one core. A result counts as fixed when its text parses strictly to the gold calls.
``json_repair`` returns bare JSON (it drops the format's special tags and cannot snap names or coerce to a schema), so
on its own it fixes none of these texts; the comparison shows what the format-aware, schema-aware layer adds and costs.
Tier 1 runs twice: with the default spec policy (a call whose only findings are soft ones keeps undeclared parameters
and its value types; see refiner.repair) and with ``trust_spec=True`` (every spec believed).
Targets: tier 1 ≥ 2,000 requests/s per core, p99 ≤ 5 ms.

    .venv/bin/python benchmarks/bench_repair.py [--per-source 300]

The records and their formats are read the way ``tests/test_repair_real.py`` reads them (the data builder's own source
readers; API-Bank's value style "text" passed as its request field).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import json_repair

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_repair_real import VALUE_STYLE, apibank_cases, source_cases  # noqa: E402

from data_gen.corrupt import rules  # noqa: E402
from refiner import formats  # noqa: E402
from refiner.calls import same_calls  # noqa: E402
from refiner.pipeline import Refiner  # noqa: E402
from refiner.specs import load_tools  # noqa: E402

DATA = Path(os.environ.get("TOOL_REFINER_SHARED_DATA", ROOT.parent / "shared" / "data"))
# the value style each case's format stands for (API-Bank's gold writes every value as text)
STYLE_BY_FORMAT = dict(VALUE_STYLE)  # (each source's cases are in the wire format of its own name)


def load_cases(per_source: int) -> list[tuple[str, object, list]]:
    if not (DATA / "nestools" / "test_data.jsonl").exists():
        sys.exit(f"no data under {DATA} (set TOOL_REFINER_SHARED_DATA)")
    nestools = [json.loads(x) for x in (DATA / "nestools" / "test_data.jsonl").read_text().splitlines() if x.strip()]
    glaive = json.loads((DATA / "glaive_demo" / "glaive_toolcall_en_demo.json").read_text())
    levels = {lvl: json.loads((DATA / "api_bank" / f"level-{lvl}-api_processed.json").read_text()) for lvl in (1, 2, 3)}
    out = []
    for cases in (source_cases("nestools", nestools), source_cases("glaive", glaive), apibank_cases(levels)):
        out += [c for _, c in zip(range(per_source), cases)]
    return out


def broken_inputs(cases) -> list[dict]:
    items = []
    for i, (fmt, tools, gold) in enumerate(cases):
        specs = load_tools(tools)
        for k, cls in enumerate(rules.ERROR_CLASSES):
            try:
                bad = rules.corrupt(gold, fmt, specs, random.Random(1000 * i + k), classes=[cls])
            except rules.CorruptionError:
                continue
            items.append({"fmt": fmt, "specs": specs, "gold": gold, "cls": cls, "text": bad.text})
    return items


def is_fixed(text: str, item: dict) -> bool:
    try:
        fmt = formats.get(item["fmt"])
        return same_calls(fmt.parse_strict(text), item["gold"], fmt)
    except Exception:
        return False


def run(items: list[dict], fix) -> tuple[list[float], list[bool]]:
    times, fixed = [], []
    for item in items:
        t0 = time.perf_counter()
        text = fix(item)
        times.append(time.perf_counter() - t0)
        fixed.append(is_fixed(text, item))
    return times, fixed


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-source", type=int, default=300)
    args = ap.parse_args()
    items = broken_inputs(load_cases(args.per_source))
    refiner, trusting = Refiner(), Refiner(trust_spec=True)

    def request(item):
        req = {"tools": item["specs"], "upstream": item["text"], "format": item["fmt"]}
        if item["fmt"] in STYLE_BY_FORMAT:
            req["value_style"] = STYLE_BY_FORMAT[item["fmt"]]
        return req

    def tier1(item):
        return refiner.refine(request(item))["refined"]

    def tier1_trust(item):
        return trusting.refine(request(item))["refined"]

    def peer(item):
        try:
            return json_repair.repair_json(item["text"])
        except Exception:
            return item["text"]

    run(items[:200], tier1)  # warm-up
    t_times, t_fixed = run(items, tier1)
    s_times, s_fixed = run(items, tier1_trust)
    j_times, j_fixed = run(items, peer)

    print(f"{len(items)} broken inputs ({args.per_source} records per source x {len(rules.ERROR_CLASSES)} classes), 1 core\n")
    print(f"{'':<16}{'req/s':>10}{'mean ms':>10}{'p50 ms':>10}{'p99 ms':>10}{'fixed':>10}")
    for name, ts, fx in (("tier 1", t_times, t_fixed), ("tier 1 trusted", s_times, s_fixed),
                         ("json_repair", j_times, j_fixed)):
        print(f"{name:<16}{len(ts) / sum(ts):>10.0f}{1e3 * statistics.mean(ts):>10.3f}{1e3 * pct(ts, .5):>10.3f}"
              f"{1e3 * pct(ts, .99):>10.3f}{sum(fx) / len(fx):>10.1%}")
    print(f"\nratio tier 1 / json_repair: speed {sum(j_times) / sum(t_times):.2f}x, "
          f"fixed {sum(t_fixed)} vs {sum(j_fixed)}")
    print(f"targets: >= 2,000 req/s per core: {'met' if len(t_times) / sum(t_times) >= 2000 else 'NOT met'}; "
          f"p99 <= 5 ms: {'met' if pct(t_times, .99) <= 0.005 else 'NOT met'}\n")
    print(f"{'class':<24}{'n':>6}{'tier 1':>9}{'trusted':>9}{'json_repair':>13}")
    for cls in rules.ERROR_CLASSES:
        idx = [i for i, it in enumerate(items) if it["cls"] == cls]
        if idx:
            print(f"{cls:<24}{len(idx):>6}{sum(t_fixed[i] for i in idx) / len(idx):>9.1%}"
                  f"{sum(s_fixed[i] for i in idx) / len(idx):>9.1%}{sum(j_fixed[i] for i in idx) / len(idx):>13.1%}")


if __name__ == "__main__":
    main()
