"""``benchmarks/bench_proxy.py`` at a tiny size: the script runs end to end and prints its three tables (a smoke test; the
speed targets live in the benchmark itself, not here)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_proxy.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_proxy", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_proxy_runs_at_a_tiny_size(capsys, tmp_path) -> None:
    bench = load_bench()
    results = tmp_path / "bench_proxy.json"
    out = bench.main(["--requests", "4", "--warmup", "2", "--rounds", "1", "--concurrency", "2", "--normal", "8",
                      "--rate", "40", "--hostile-share", "0.3", "--max-body-mb", "0.05", "--refine-timeout", "5",
                      "--latency-runs", "3", "--latency-tail", "40", "--latency-pace", "0.005", "--out", str(results)])
    printed = capsys.readouterr().out
    assert "Added time" in printed
    written = json.loads(results.read_text())
    assert [r["requests"] for r in written["added"]] == ["valid calls", "broken calls"]
    assert written["latency"]["n"] == 3 and written["isolation"][0]["with"]["n"] == 8
    assert "1. Overhead" in printed and "2. Isolation" in printed and "target (p99 x <= 2" in printed
    assert "3. Call to delta" in printed and "target (median <= 5 ms)" in printed
    latency = out["latency"]
    assert latency["n"] == 3 and latency["before_end_ms"] > 50  # the call went out well before the generation ended
    assert [row[0] for row in out["overhead"]] == ["direct upstream", "proxy, valid calls", "proxy, broken calls"]
    assert all(row[4] == 0 for row in out["overhead"])  # no failed request
    (run,) = out["isolation"]
    for phase in ("without", "with"):
        assert run[phase]["n"] == 8 and run[phase]["ok"] == 8  # every normal request answered 200 and refined
    outcomes = {kind: h["outcomes"] for kind, h in run["hostile"].items()}
    assert outcomes and all(o.split()[0] in ("200", "413") for c in outcomes.values() for o in c)
    assert all(o.startswith("413") for o in outcomes.get("over the limit", {}))
