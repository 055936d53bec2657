"""Export (verl.model_merger on an FSDP checkpoint + model card) and the training-curve plot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from refiner.export import ExportError, export_checkpoint, merge_command, resolve_actor_dir
from refiner.plot import PlotError, plot_run, read_metrics
from refiner.train.launch import write_manifest
from refiner.train.recipe import DEFAULT_RECIPE, load_recipe, plan_overrides

CONSOLE = (
    "(TaskRunnerV1 pid=1) step:1 - actor/pg_loss:0.01 - critic/score/mean:0.40 - response_length/mean:741.0 - "
    "training/filter_groups/evicted_samples:3\n"
    "some other line - with:colons\n"
    "(TaskRunnerV1 pid=1) step:2 - critic/score/mean:0.62 - response_length/mean:650.5 - actor/entropy:nan\n"
    "step:3 - critic/score/mean:0.9 - response_length/mean:402.25\n"
)


def fake_fsdp_checkpoint(model_dir: Path, root: Path, step: int = 2) -> Path:
    """A verl FSDP checkpoint layout (world size 1) holding the tiny model's weights, as the trainer saves it."""
    import torch
    from transformers import AutoModelForCausalLM

    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    torch.save(model.state_dict(), actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 1, "world_size": 1}))
    for f in model_dir.iterdir():
        if f.suffix in (".json", ".txt", ".jinja") and f.name != "model.safetensors":
            shutil.copy(f, actor / "huggingface" / f.name)
    (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return actor


def test_read_metrics_parses_console_and_jsonl(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(CONSOLE)
    s = read_metrics(log)
    assert s["critic/score/mean"] == [(1, 0.40), (2, 0.62), (3, 0.9)]
    assert s["response_length/mean"] == [(1, 741.0), (2, 650.5), (3, 402.25)]
    assert "actor/entropy" not in s  # nan dropped
    jl = tmp_path / "metrics.jsonl"
    jl.write_text(
        "\n".join(
            json.dumps({"step": i, "data": {"critic/score/mean": v, "x": "str"}}) for i, v in ((2, 0.5), (1, 0.25))
        )
        + "\n"
    )
    assert read_metrics(jl) == {"critic/score/mean": [(1, 0.25), (2, 0.5)]}


def test_plot_writes_both_panels(tmp_path):
    pytest.importorskip("matplotlib")
    log = tmp_path / "train.log"
    log.write_text(CONSOLE)
    out = tmp_path / "fig.png"
    counts = plot_run(log, out)
    assert out.stat().st_size > 5000 and out.read_bytes()[:4] == b"\x89PNG"
    assert list(counts.values()) == [3, 3]


def test_plot_rejects_a_log_without_curves(tmp_path):
    log = tmp_path / "empty.log"
    log.write_text("nothing to see\n")
    with pytest.raises(PlotError, match="no critic/score/mean"):
        plot_run(log, tmp_path / "x.png")
    with pytest.raises(PlotError, match="run log not found"):
        read_metrics(tmp_path / "missing.log")


def test_resolve_actor_dir_layouts(tmp_path):
    root = tmp_path / "ckpt"
    for step in (1, 10, 2):
        d = root / f"global_step_{step}" / "actor"
        d.mkdir(parents=True)
        (d / "fsdp_config.json").write_text("{}")
    assert resolve_actor_dir(root) == root / "global_step_10" / "actor"  # highest step without a latest file
    (root / "latest_checkpointed_iteration.txt").write_text("2")
    assert resolve_actor_dir(root) == root / "global_step_2" / "actor"
    assert resolve_actor_dir(root / "global_step_1") == root / "global_step_1" / "actor"
    with pytest.raises(ExportError, match="no FSDP checkpoint found"):
        resolve_actor_dir(tmp_path)
    with pytest.raises(ExportError, match="checkpoint folder not found"):
        resolve_actor_dir(tmp_path / "nope")
    assert merge_command("A", "B")[1:] == [
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        "fsdp",
        "--local_dir",
        "A",
        "--target_dir",
        "B",
    ]


def test_card_only_uses_the_launch_record_and_metrics(tmp_path):
    root = tmp_path / "ckpt"
    actor = root / "global_step_5" / "actor"
    actor.mkdir(parents=True)
    (actor / "fsdp_config.json").write_text("{}")
    recipe = load_recipe(DEFAULT_RECIPE)
    ov = plan_overrides(recipe, train_files="/d/train.parquet", val_files="/d/val.parquet")
    write_manifest(
        root,
        {
            "kind": "dapo",
            "recipe": str(recipe.path),
            "profile": "gpu24",
            "overrides": ov,
            "command": "python -m verl.trainer.main_ppo ...",
            "data": {
                "train": {
                    "path": "/d/train.parquet",
                    "rows": 3,
                    "mix": {"glaive/hermes/g": 2, "nestools/nestools/n": 1},
                }
            },
        },
    )
    (root / "train.log").write_text(CONSOLE)
    out = export_checkpoint(root, tmp_path / "hf", run_merge=False)
    card = (out / "README.md").read_text()
    assert "Base model: `Qwen/Qwen3-1.7B`" in card
    assert "learning rate: 1e-06" in card and "clip ratio high: 0.28" in card
    assert "overlong buffer (tokens): 3072" in card
    assert "variant `paper`" in card and "pkg://rewards" in card
    assert "| glaive/hermes/g | 2 | 66.7% |" in card
    assert "| critic/score/mean | 0.4 | 0.9 | 3 |" in card
    assert "| response_length/mean | 741 | 402.2 | 3 |" in card


@pytest.mark.slow
@pytest.mark.verl
def test_export_merges_an_fsdp_checkpoint_into_a_loadable_hf_model(tmp_path, tiny_qwen3_dir):
    """verl.model_merger (real, subprocess) on a world-size-1 FSDP checkpoint gives back the same weights (bf16)."""
    pytest.importorskip("verl")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    fake_fsdp_checkpoint(Path(tiny_qwen3_dir), tmp_path / "ckpt")
    out = export_checkpoint(tmp_path / "ckpt", tmp_path / "hf")
    merged = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32)
    orig = AutoModelForCausalLM.from_pretrained(tiny_qwen3_dir, torch_dtype=torch.float32)
    got = merged.state_dict()
    assert set(got) == set(orig.state_dict())
    for k, a in orig.state_dict().items():  # the merger writes bfloat16 shards: equal after the same rounding
        assert torch.equal(a.bfloat16().float(), got[k].float()), k
    assert AutoTokenizer.from_pretrained(out).chat_template
    assert (out / "README.md").read_text().startswith("---")
