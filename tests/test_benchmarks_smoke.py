"""Every script in ``benchmarks/`` runs, at a tiny size, in the default test run, so a benchmark that breaks (an
import that moved, an option renamed) fails here instead of rotting. These are not timed tests: each run only has to
finish and print its table.

``bench_proxy.py`` is left out: the proxy's benchmark is being reworked with the proxy (request isolation, body
limits) and gets its own smoke run there. ``bench_data_llm.py`` runs with ``--engine echo`` (an in-process stand-in
for vLLM, so no model starts in the default run); the same script on the tiny random Qwen3 under vLLM is the slow
variant.
"""

from __future__ import annotations

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
    "bench_rewards.py": (["--limit", "6", "--joined", "3", "--repeat", "1", "--passes", "1"], "1 KB outputs", True),
    "bench_worst_case.py": (["--size", "400", "--repeat", "1"], "entry points within 50 ms", False),
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
    out = _run(script, args)
    assert out.returncode == 0 or (script == "bench_worst_case.py" and out.returncode == 1), out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert expected in out.stdout, out.stdout[-2000:]
    if script == "bench_worst_case.py":  # every entry point measured, and no undocumented exception
        assert "FAILURE" not in out.stdout, out.stdout[-3000:]
        assert "Refiner.refine" in out.stdout and "rewards.compute_score" in out.stdout


@pytest.mark.slow
@pytest.mark.vllm
def test_bench_data_llm_on_vllm_at_a_tiny_size():
    pytest.importorskip("vllm")
    if not (SHARED_DATA / "nestools" / "test_data.jsonl").exists():
        pytest.skip(f"shared data not available: {SHARED_DATA}")
    out = _run("bench_data_llm.py", ["--prompts", "4", "--max-tokens", "4", "--rounds", "1", "--batch-sizes", "4",
                                     "--shared", str(SHARED_DATA)])
    assert out.returncode == 0, out.stderr[-3000:]
    assert "vLLM LLM.chat" in out.stdout
