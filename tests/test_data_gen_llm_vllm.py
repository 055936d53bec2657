"""LLM corruption for real: ``tool-refiner data build --corruptor llm`` over the vLLM offline engine on CPU with the
tiny random Qwen3, killed with SIGKILL once its cache holds some batches and restarted with the same arguments.

The tiny model writes nonsense; that is fine here: every output becomes a labelled row or a counted rejection, and
what is checked is the mechanics (batching, two corrupting models plus the order model, the resumable cache).
Each build runs in its own process (vLLM binds CPU threads), as a user would run it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import shared_path

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

BATCH = 3
CLI = "from refiner.cli import app; app()"


def _config(tmp: Path, models: list[str], cache: Path) -> Path:
    cfg = {
        "seed": 0,
        "corruptor": "llm",
        "sources": {"glaive": {"path": str(shared_path("glaive_demo")), "limit": 40},
                    "nestools": {"path": str(shared_path("nestools", "test_data.jsonl")), "limit": 40}},
        "types": {
            "erroneous": {"sources": ["glaive"], "error_types": ["format", "name", "content"], "models": models,
                          "per_source": 2},
            "correct": {"sources": ["glaive"], "per_source": 2},
            "shuffled_full": {"sources": ["nestools"], "count": 3},
            "shuffled_simplified": {"sources": ["nestools"], "count": 3},
        },
        "split": {"validation": 0.2},
        "llm": {"engine": "vllm", "order_model": models[0], "temperature": 0.7, "max_tokens": 24,
                "batch_size": BATCH, "cache": str(cache),
                "engine_kwargs": {"in_process": True, "dtype": "float32", "max_model_len": 2048,
                                  "cpu_kvcache_gib": 1, "use_tqdm": False}},
    }
    path = tmp / f"{cache.stem}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _start(config: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "-c", CLI, "data", "build", "-c", str(config), "-o", str(out), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float = 600) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"data build did not finish in {timeout} s:\n{out[-4000:]}")
    assert proc.returncode == 0, f"data build failed (rc={proc.returncode}):\n{out[-4000:]}"
    return out


def _cache_lines(cache: Path) -> list[dict]:
    if not cache.exists():
        return []
    out = []
    for line in cache.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # the line the kill cut
    return out


def _rows(out: Path) -> list[dict]:
    import pandas as pd

    return [r for split in ("train", "validation")
            for r in pd.read_parquet(out / f"{split}.parquet").to_dict("records")]


def _row_id(r: dict) -> tuple:
    i = r["extra_info"]
    return i["source"], i["record_id"], i["data_type"], i["error_group"], i["model"], i["label"], i["upstream"]


@pytest.fixture(scope="module")
def runs(tiny_qwen3_dir, tmp_path_factory) -> dict:
    pytest.importorskip("vllm")
    tmp = tmp_path_factory.mktemp("llm_vllm")
    second = tmp / "tiny_qwen3_b"  # a second corrupting "model": same weights, another name in every key
    second.symlink_to(tiny_qwen3_dir, target_is_directory=True)
    models = [str(tiny_qwen3_dir), str(second)]

    # interrupted run: SIGKILL once the cache holds two batches
    cache = tmp / "cache.jsonl"
    config = _config(tmp, models, cache)
    proc = _start(config, tmp / "out")
    deadline = time.monotonic() + 420
    while len(_cache_lines(cache)) < 2 * BATCH and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    running = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    log, _ = proc.communicate()
    assert running, f"the build ended before it could be killed (rc={proc.returncode}):\n{log[-4000:]}"
    at_kill = _cache_lines(cache)
    resumed_log = _finish(_start(config, tmp / "out"))

    # uninterrupted run with its own cache
    ref_cache = tmp / "ref_cache.jsonl"
    _finish(_start(_config(tmp, models, ref_cache), tmp / "ref"))
    print(f"killed with {len(at_kill)} cached generations; resumed and uninterrupted runs finished")
    return {"tmp": tmp, "models": models, "at_kill": at_kill, "cache": cache, "ref_cache": ref_cache,
            "manifest": json.loads((tmp / "out" / "manifest.json").read_text()),
            "ref_manifest": json.loads((tmp / "ref" / "manifest.json").read_text()),
            "rows": _rows(tmp / "out"), "ref_rows": _rows(tmp / "ref"), "resumed_log": resumed_log}


def test_kill_then_resume_loses_and_duplicates_nothing(runs) -> None:
    at_kill, final, ref = runs["at_kill"], _cache_lines(runs["cache"]), _cache_lines(runs["ref_cache"])
    n_requests = runs["ref_manifest"]["llm"]["requests"]
    assert n_requests == 2 * 3 * 2 + 3 + 3
    assert 2 * BATCH <= len(at_kill) < n_requests  # killed part-way, with whole batches cached
    keys = [r["key"] for r in final]
    assert len(keys) == len(set(keys)) == n_requests  # nothing generated twice, nothing missing
    assert [r["key"] for r in final[: len(at_kill)]] == [r["key"] for r in at_kill]  # cached batches kept as written
    assert set(keys) == {r["key"] for r in ref}  # same (sample, model, prompt, sampling) keys as uninterrupted
    llm = runs["manifest"]["llm"]
    assert llm["requests"] == n_requests and llm["from_cache"] == len(at_kill)
    assert llm["generated"] == n_requests - len(at_kill)
    assert Counter(r["model"] for r in final) == Counter(r["model"] for r in ref)
    assert {r["model"] for r in final} == set(runs["models"])


def test_resumed_rows_equal_the_uninterrupted_run(runs) -> None:
    rows, ref_rows = runs["rows"], runs["ref_rows"]
    n_llm = runs["ref_manifest"]["llm"]["requests"]
    rejected = runs["manifest"]["rejected"]
    # every LLM request is a row or a counted rejection; the correct rows come on top
    assert len(rows) + rejected.get("empty LLM output", 0) == n_llm + 2
    assert rejected == runs["ref_manifest"]["rejected"]
    # same samples, models and data types (and, vLLM sampling being seeded per request, the same texts)
    assert sorted(map(_row_id, rows)) == sorted(map(_row_id, ref_rows))
    for r in rows:
        info = r["extra_info"]
        if info["data_type"] != "correct":
            assert info["corruptor"] == "llm" and info["model"] in runs["models"]
            if info["label"] == "corrupted":
                assert info["error_classes"] and all(c.startswith("llm_") for c in info["error_classes"])


def test_rows_are_reward_consistent(runs) -> None:
    from rewards import compute_score

    for r in runs["rows"]:
        gt, info = r["reward_model"]["ground_truth"], r["extra_info"]
        up = compute_score(r["data_source"], info["upstream"], gt)["score"]
        assert (up == 1.0) if info["label"] == "correct" else (up < 1.0)
        assert info["upstream"] in r["prompt"][1]["content"]
