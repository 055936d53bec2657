"""Time to build the paper's mix (the row counts of the data config) with the rule corruptor, against the target of
60 s on 2 cores.

Hub sources (ToolACE, xLAM, full Glaive) are unavailable offline: with ``missing_sources: substitute`` the local
sources (the Glaive subset, NesTools) stand in for them and the table says so. The peer measured in the same run is
the bare corruption step (rules.corrupt on the same jobs, no prompt/reward check/parquet), to show where time goes.

    .venv/bin/python benchmarks/bench_data_build.py [--shared ../shared/data] [--scale 1.0]

``--scale`` multiplies every row count of the mix (the test suite's smoke run builds a few rows; the 60 s target is
for the full mix, scale 1).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data_gen.builder import ORDER_CLASSES, BuildReport, _job_sample, build, load_pools, plan
from data_gen.config import load_config, type_counts
from data_gen.corrupt.rules import ERROR_GROUPS, CorruptionError, corrupt


def main() -> None:
    ap = argparse.ArgumentParser()
    default_shared = os.environ.get("TOOL_REFINER_SHARED_DATA", str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--shared", default=default_shared)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every row count of the mix (at least 1 each)")
    args = ap.parse_args()
    shared = Path(args.shared)
    paths = {"glaive": str(shared / "glaive_demo"), "nestools": str(shared / "nestools" / "test_data.jsonl")}
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cfg = load_config(ROOT / "configs" / "data" / "paper.yaml", missing_sources="substitute")
    if args.scale != 1.0:
        for t in cfg["types"].values():
            for key in ("per_source", "count"):
                if key in t:
                    t[key] = max(1, round(int(t[key]) * args.scale))
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        report = build(cfg, out, source_paths=paths, progress=False)
        total = time.perf_counter() - t0
    rows = sum(report.rows.values())
    # peer: bare corruption of the same plan
    rep2 = BuildReport(Path("."))
    pools = load_pools(cfg, paths, rep2, progress=False)
    jobs = plan(cfg, pools, random.Random(cfg["seed"]), rep2)
    t1 = time.perf_counter()
    for j in jobs:
        if j.dtype == "correct":
            continue
        s = _job_sample(j)
        classes = ERROR_GROUPS[j.group] if j.dtype == "erroneous" else ORDER_CLASSES[j.dtype]
        try:
            corrupt(s.calls, s.fmt, s.tools, random.Random(j.seed), classes)
        except CorruptionError:
            pass
    bare = time.perf_counter() - t1
    print(f"cores available: {os.cpu_count()}")
    print(f"unavailable (stood in for by local sources): {', '.join(report.unavailable) or 'none'}")
    for s in report.substitutions:
        print(f"  substitution: {s}")
    print()
    print("| step | rows | seconds | rows/s | target |")
    print("|---|---|---|---|---|")
    target = f"<= 60 s: {'PASS' if total <= 60 else 'FAIL'}" if args.scale == 1.0 else f"- (scale {args.scale})"
    print(f"| full build (load, corrupt, prompt, reward check, parquet) | {rows} | {total:.1f} | {rows / total:.0f} "
          f"| {target} |")
    print(f"| peer: bare rules.corrupt on the same jobs | {len(jobs)} | {bare:.1f} | {len(jobs) / bare:.0f} | - |")
    print(f"\nexpected rows {sum(type_counts(cfg).values())}, written {rows}; rejected attempts: "
          f"{dict(report.rejected)}")


if __name__ == "__main__":
    main()
