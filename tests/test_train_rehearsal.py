"""The CPU rehearsal of the real trainer (``tests/support/cpu_rehearsal.py``): verl's own ``main_ppo`` with the
recipe, ``rewards.compute_score``, rows from the data builder and the tiny Qwen3 through vLLM's CPU build, two DAPO
steps, then ``tool-refiner export`` and ``tool-refiner plot``. One run (3-9 minutes on 2 cores, 24 processes, ~11 GB)
is shared by every test here; slow, and marked ``rehearsal`` so it can be selected or left out on its own."""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import shared_path, skip_without_native_bf16

pytestmark = [pytest.mark.slow, pytest.mark.rehearsal, pytest.mark.verl, pytest.mark.vllm]

SUPPORT = Path(__file__).resolve().parent / "support"
# seconds a step may take before it is stopped: a hang inside a Ray actor fails the test, not CI's time limit
TRAIN_TIMEOUT = 900
STEPS = 2
OVERLONG_START = 64 - 16  # data.max_response_length - overlong_buffer_cfg.len in the cpu-rehearsal profile


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One rehearsal for the module; ``TOOL_REFINER_REHEARSAL_DIR=DIR`` re-checks a finished run in DIR instead."""
    for module in ("verl", "vllm", "ray", "transfer_queue", "psutil"):
        pytest.importorskip(module)
    sys.path.insert(0, str(SUPPORT))
    done = os.environ.get("TOOL_REFINER_REHEARSAL_DIR")
    if done:
        out = Path(done)
        return out, json.loads((out / "summary.json").read_text())
    skip_without_native_bf16()
    shared = shared_path("glaive_demo").parent
    from cpu_rehearsal import rehearse

    out = tmp_path_factory.mktemp("rehearsal")
    return out, rehearse(out, shared_data=shared, timeout=TRAIN_TIMEOUT)


def metrics(out: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in (out / "ckpt" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    by_step: dict[int, dict] = defaultdict(dict)
    for r in rows:
        by_step[r["step"]].update(r["data"])
    return dict(by_step)


def rollouts(out: Path) -> list[dict]:
    return [
        json.loads(line)
        for f in sorted((out / "rollouts").glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]


def test_main_ppo_ran_the_dapo_steps_and_saved_a_checkpoint(run):
    out, summary = run
    m = metrics(out)
    assert [s for s in m if s >= 1] == list(range(1, STEPS + 1))
    for step in range(1, STEPS + 1):
        assert m[step]["training/global_step"] == step
        for key in ("actor/pg_loss", "actor/grad_norm", "critic/score/mean", "response_length/mean"):
            assert key in m[step], key
    ckpt = out / "ckpt"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == str(STEPS)
    assert (ckpt / f"global_step_{STEPS}" / "actor" / "fsdp_config.json").is_file()
    record = json.loads((ckpt / "tool_refiner_run.json").read_text())
    assert record["profile"] == "cpu-rehearsal" and "verl.trainer.main_ppo" in record["command"]
    assert record["data"]["train"]["rows"] >= 2
    train = next(s for s in summary["steps"] if s["name"] == "train")
    assert train["returncode"] == 0 and train["peak_processes"] >= 5 and train["peak_rss_gb"] > 1


def test_the_reward_is_compute_score(run):
    """Every training sample's score in verl's rollout dump is ``rewards.compute_score`` on the decoded response (plus
    the DAPO overlong penalty, which only responses past 48 tokens get); validation logs its components."""
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    from rewards import compute_score

    out, _ = run
    tok = AutoTokenizer.from_pretrained(out / "model")
    # verl's dump holds the prompt as decoded text; map it back to the row (and its upstream, for the penalty)
    rows = {}
    for row in pq.read_table(out / "data" / "train.parquet").to_pylist():
        ids = tok.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False, enable_thinking=False)
        rows[tok.decode(tok(ids, add_special_tokens=False)["input_ids"], skip_special_tokens=True)] = row
    samples = rollouts(out)
    assert len(samples) == 2 * 4 * STEPS
    checked = 0
    for s in samples:
        if len(tok(s["output"], add_special_tokens=False)["input_ids"]) >= OVERLONG_START - 2:
            continue  # carries an overlong penalty (length in response tokens, not re-tokenized text)
        row = rows[s["input"]]
        assert s["gts"] == row["reward_model"]["ground_truth"]
        expected = compute_score("tool_refiner", s["output"], s["gts"], row["extra_info"], variant="paper")
        assert s["score"] == pytest.approx(expected["score"], abs=1e-6), s
        checked += 1
    assert checked >= 4
    val = metrics(out)[0]
    for component in ("format", "tool_name", "param_name", "param_content", "penalized", "overlong_reward"):
        assert f"val-aux/tool_refiner/{component}/mean@1" in val


def test_dynamic_sampling_kept_only_groups_whose_answers_differ(run):
    """With ``filter_groups`` on (metric ``acc``), every group in a training batch has both right and wrong answers
    (a warmed-up answer is right ~85% of the time, so 4 answers are all right about half the time: without the
    filter, four mixed groups in a row would be a ~2% event); verl counts the evicted groups
    (``training/filter_groups/evicted_samples`` is a number of groups, logged in the steps that evicted any)."""
    from rewards import compute_score

    out, _ = run
    groups: dict[str, list[float]] = defaultdict(list)
    for s in rollouts(out):
        groups[f"{s['step']}:{s['uid'].rsplit('_', 2)[0]}"].append(
            compute_score("tool_refiner", s["output"], s["gts"])["acc"]
        )
    assert len(groups) == 2 * STEPS
    for key, accs in groups.items():
        assert len(accs) == 4 and 0 < sum(accs) < 4, (key, accs)
    m = metrics(out)
    evicted = [m[s].get("training/filter_groups/evicted_samples", 0) for s in range(1, STEPS + 1)]
    assert all(n >= 0 and float(n).is_integer() for n in evicted), evicted


def checkpoint_state(out: Path) -> dict:
    """The actor's float32 weights from the last FSDP checkpoint (world size 1: each DTensor holds the whole tensor)."""
    import torch

    shard = out / "ckpt" / f"global_step_{STEPS}" / "actor" / "model_world_size_1_rank_0.pt"
    state = torch.load(shard, map_location="cpu", weights_only=False)
    return {k: (v.to_local() if hasattr(v, "to_local") else v) for k, v in state.items()}


def test_weight_sync_moves_the_rollout_log_probs_with_the_trained_weights(run):
    """After each update the rollout engine's log-probs of a fixed text change (two reads in a row agree), and from
    the first sync to the last they move exactly as transformers says the trained weights move them."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl_cpu_shims import PROBE_TEXT

    out, _ = run
    probes = [json.loads(line) for line in (out / "probe.jsonl").read_text().splitlines()]
    assert [p["global_steps"] for p in probes] == list(range(STEPS + 1)), probes
    for p in probes:
        assert "error" not in p, p
        assert p["logprobs"] == p["repeat"]
    for before, after in itertools.pairwise(probes):
        assert before["logprobs"] != after["logprobs"]

    tok = AutoTokenizer.from_pretrained(out / "model")
    ids = tok.encode(PROBE_TEXT, add_special_tokens=False)
    model = AutoModelForCausalLM.from_pretrained(out / "model", dtype=torch.float32).eval()

    def logprobs() -> torch.Tensor:
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1], -1)
        return logp.gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]

    initial = logprobs()
    model.load_state_dict(checkpoint_state(out))
    trained = logprobs()
    rollout_move = torch.tensor(probes[-1]["logprobs"]) - torch.tensor(probes[0]["logprobs"])
    trained_move = trained - initial
    assert trained_move.abs().max() > 1e-4  # the updates did change the model
    assert (rollout_move - trained_move).abs().max() < 0.05 * trained_move.abs().max()
    assert torch.nn.functional.cosine_similarity(rollout_move, trained_move, dim=0) > 0.99
    # the first sync loaded the initial weights (vLLM's CPU kernels and transformers agree to ~1e-3)
    assert torch.allclose(torch.tensor(probes[0]["logprobs"]), initial, atol=5e-3)


def test_export_and_plot_read_the_run(run):
    from transformers import AutoModelForCausalLM

    out, summary = run
    import torch

    model = AutoModelForCausalLM.from_pretrained(out / "hf")
    assert model.config.model_type == "qwen3"
    # verl's merger writes bfloat16 (verl/model_merger/fsdp_model_merger.py:187): the checkpoint, rounded
    exported = model.state_dict()
    for name, value in checkpoint_state(out).items():
        assert torch.equal(exported[name].to(torch.bfloat16), value.to(torch.bfloat16)), name
    card = (out / "hf" / "README.md").read_text()
    assert "critic/score/mean" in card and "cpu-rehearsal" in card
    assert (out / "curves.png").stat().st_size > 10_000
    plot_log = Path(next(s for s in summary["steps"] if s["name"] == "plot")["log"]).read_text()
    assert f"reward (mean per response): {STEPS} points" in plot_log
