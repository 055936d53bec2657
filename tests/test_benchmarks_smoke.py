"""Every script in ``benchmarks/`` runs, at a tiny size, in the default test run, so a benchmark that breaks (an
import that moved, an option renamed) fails here instead of rotting. These are not timed tests: each run only has to
finish and print its table.

``bench_proxy.py`` is left out: the proxy's benchmark is being reworked with the proxy (request isolation, body
limits) and gets its own smoke run there. ``bench_data_llm.py`` runs with ``--engine echo`` (an in-process stand-in
for vLLM, so no model starts in the default run); the same script on the tiny random Qwen3 under vLLM is the slow
variant.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
LEFT_OUT = {
    "bench_proxy.py": "reworked with the proxy; smoke-tested there",
    "bench_tier1.py": "smoke-tested in tests/test_tier1_suite.py, which skips without the bfcl-eval wheel",
    "bench_public_templates.py": "needs the llama-cpp-python sdist; smoke-tested in tests/test_public_templates.py",
}

# script -> (arguments for a tiny run, text its output must hold, needs ../shared/data)
RUNS = {
    "bench_conformance.py": (["--limit", "1", "--workers", "0"], "added p50", False),
    "bench_data_build.py": (["--scale", "0.002", "--shared", str(SHARED_DATA)], "full build", True),
    "bench_data_llm.py": (
        ["--engine", "echo", "--prompts", "5", "--rounds", "1", "--batch-sizes", "4,2", "--shared", str(SHARED_DATA)],
        "our LLMCorruptor",
        True,
    ),
    "bench_dialects.py": (["--limit", "3", "--repeat", "1"], "read as meant", False),
    "bench_families.py": (["--limit", "1", "--repeat", "1"], "ours read", False),
    "bench_formats.py": (["--texts", "5", "--seconds", "0.01"], "hermes", False),
    "bench_repair.py": (["--per-source", "2"], "tier 1", True),
    "bench_salvage.py": (["--limit", "1"], "naive", False),
    "bench_tools.py": (["--sizes", "4,60", "--params", "3", "--repeat", "1"], "misspelled, seen", False),
    "bench_refine_peer.py": (["--limit", "1", "--repeat", "1", "--out", "/dev/null"], "refine / peer", False),
    "bench_rewards.py": (["--limit", "6", "--joined", "3", "--repeat", "1", "--passes", "1"], "1 KB outputs", True),
    # three formats of three grammars reach every entry point; every format against every format's texts is the
    # benchmark's own run (tests/test_bounds.py holds each format's readers to their errors on the storms)
    "bench_worst_case.py": (["--size", "400", "--repeat", "1", "--format", "hermes", "--format", "qwen3_coder",
                             "--format", "harmony"], "entry points within 50 ms", False),
}


def test_every_benchmark_has_a_smoke_run():
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    assert scripts - set(LEFT_OUT) == set(RUNS), "add the new benchmark to RUNS (a tiny run) or LEFT_OUT (and why)"


def _run(script: str, args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TOOL_REFINER_SHARED_DATA": str(SHARED_DATA), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, str(BENCH / script), *args], check=False, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("script", sorted(RUNS))
def test_benchmark_runs_at_a_tiny_size(script):
    args, expected, needs_data = RUNS[script]
    if needs_data and not (SHARED_DATA / "nestools" / "test_data.jsonl").exists():
        pytest.skip(f"shared data not available: {SHARED_DATA}")
    if script == "bench_rewards.py":  # its peer is verl's own ToolRL reward
        pytest.importorskip("verl")
    out = _run(script, args)
    assert out.returncode == 0 or (script == "bench_worst_case.py" and out.returncode == 1), out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert expected in out.stdout, out.stdout[-2000:]
    if script == "bench_worst_case.py":  # every entry point measured, and no undocumented exception
        assert "FAILURE" not in out.stdout, out.stdout[-3000:]
        assert "Refiner.refine" in out.stdout and "rewards.compute_score" in out.stdout


@pytest.mark.slow
@pytest.mark.vllm
def test_bench_script_writes_one_results_file_per_benchmark(tmp_path):
    """``scripts/bench.sh`` (the one command that rewrites ``benchmarks/results/``) keeps what a benchmark prints, and
    lets one that writes its own file write it in the same folder."""
    env = {**os.environ, "BENCH_OUT": str(tmp_path), "BENCH_ARGS": "--limit 1 --repeat 1"}
    out = subprocess.run(["bash", str(ROOT / "scripts" / "bench.sh"), "dialects", "refine_peer"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0 and not (ROOT / ".cache" / "peers" / "sglang").is_dir():  # no registry: no peer fetched
        pytest.skip(out.stderr[-300:])
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench_dialects.txt", "bench_refine_peer.md"]
    assert "read as meant" in (tmp_path / "bench_dialects.txt").read_text()
    assert "refine / peer" in (tmp_path / "bench_refine_peer.md").read_text()
    assert "bench_dialects: " in out.stdout and "bench_refine_peer: " in out.stdout


def test_bench_data_llm_on_vllm_at_a_tiny_size():
    pytest.importorskip("vllm")
    if not (SHARED_DATA / "nestools" / "test_data.jsonl").exists():
        pytest.skip(f"shared data not available: {SHARED_DATA}")
    out = _run("bench_data_llm.py", ["--prompts", "4", "--max-tokens", "4", "--rounds", "1", "--batch-sizes", "4",
                                     "--shared", str(SHARED_DATA)])
    assert out.returncode == 0, out.stderr[-3000:]
    assert "vLLM LLM.chat" in out.stdout


def test_worst_case_bench_measures_an_input_over_the_bound_again():
    """An input the sweep finds over the bound is measured again, each run between two peers of its own, and the
    entry point is judged by that: one truly over stays over (and is counted missed), one under is never taken
    over, and an input the sweep's stale peer made look over is judged by the fresh peers."""
    sys.path.insert(0, str(BENCH))
    try:
        import bench_worst_case as bench
    finally:
        sys.path.remove(str(BENCH))
    text = json.dumps([{"name": "f", "arguments": {"a": 1}}] * 4000)
    table = bench.Table(1)
    table.CONFIRM_RUNS = 3
    slow = int(bench.BOUND_X_PEER * 2 * bench.PEER_CHARS / len(text)) + 1  # about twice the bound
    table.measure("slow", "input", len(text), lambda: [json.loads(text) for _ in range(slow)])
    table.measure("fast", "input", len(text), lambda: json.loads(text))
    table.peer /= 100  # a peer the machine's speed has left far behind: every input looks over
    table.measure("stale", "input", len(text), lambda: json.loads(text))
    # ("fast" may be measured again too: one sweep run of a test process can take a whole-heap garbage collection)
    confirmed = {c[0]: c for c in table.confirmed}
    assert {"slow", "stale"} <= set(confirmed) <= {"slow", "fast", "stale"}
    assert table.rows["slow"][0] > bench.BOUND_X_PEER and table.rows["fast"][0] < bench.BOUND_X_PEER
    assert table.rows["stale"][0] < bench.BOUND_X_PEER < confirmed["stale"][2]
    assert table.print() == 1
