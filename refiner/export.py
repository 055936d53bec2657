"""Export a verl FSDP checkpoint to a Hugging Face folder (``python -m verl.model_merger merge``) with a model card
(README.md: the base model, the recipe recorded at launch, the data mix, the reward and the first and last metrics)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from refiner.train.errors import TrainConfigError
from refiner.train.launch import MANIFEST
from refiner.train.overrides import override_value

_STEP_DIR = re.compile(r"^global_step_(\d+)$")
METHODS = {"dapo": "DAPO (GRPO advantages, decoupled clip, dynamic sampling, overlong penalty)",
           "sft": "supervised fine-tuning"}


class ExportError(TrainConfigError):
    """A checkpoint folder that cannot be exported; the message names the folder and what is missing."""


def resolve_actor_dir(ckpt: str | Path) -> Path:
    """The folder holding ``fsdp_config.json`` + shards: given directly, as ``<step>/actor``, or the latest
    ``global_step_N`` (``latest_checkpointed_iteration.txt`` first) under a trainer's checkpoint root."""
    root = Path(ckpt)
    if not root.is_dir():
        raise ExportError(f"checkpoint folder not found: {root}")
    latest = root / "latest_checkpointed_iteration.txt"
    step = latest.read_text().strip() if latest.is_file() else ""
    step_dir = root / f"global_step_{step}"
    if not step.isdigit() or not step_dir.is_dir():
        steps = sorted((int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _STEP_DIR.match(p.name)))
        step_dir = steps[-1][1] if steps else root
    for cand in (root, root / "actor", step_dir / "actor", step_dir):
        if (cand / "fsdp_config.json").is_file():
            return cand
    raise ExportError(f"{root}: no FSDP checkpoint found (looked for fsdp_config.json in it, in actor/, and in the "
                      "latest global_step_N[/actor])")


def merge_command(actor_dir: str | Path, out_dir: str | Path, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir",
            str(actor_dir), "--target_dir", str(out_dir)]


def _find_up(actor_dir: Path, names: tuple[str, ...]) -> Path | None:
    """The first of ``names`` in the actor folder or one of its four parents, nearest first."""
    for d in (actor_dir, *actor_dir.parents[:4]):
        for name in names:
            if (d / name).is_file():
                return d / name
    return None


def model_card(out_dir: Path, *, actor_dir: Path, manifest: Mapping[str, Any] | None,
               metrics: Mapping[str, Sequence[tuple[int, float]]] | None) -> str:
    """Markdown model card text."""
    overrides: list[str] = list((manifest or {}).get("overrides") or [])
    base = override_value(overrides, "actor_rollout_ref.model.path") or override_value(overrides, "model.path")
    kind = (manifest or {}).get("kind", "dapo")
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: text-generation",
        "tags: [tool-calling, tool-refiner, verl, dapo]",
        "---",
        "",
        f"# {out_dir.name}",
        "",
        ("A small *tool-call refiner*: it reads the tools, the user's request and another model's tool calls, "
         "and answers with corrected calls in the same wire format (tool-refiner project)."),
        "",
        "## Training",
        f"- Method: {METHODS.get(kind, METHODS['sft'])} on verl 0.9.1",
        f"- Base model: `{base or 'unknown (no launch record found)'}`",
        f"- Exported from: `{actor_dir}`",
    ]
    if manifest:
        lines.append(f"- Recipe: `{manifest.get('recipe')}`, profile `{manifest.get('profile')}`")
        for key, label in (
            ("actor_rollout_ref.actor.optim.lr", "learning rate"),
            ("data.train_batch_size", "prompts per step"),
            ("actor_rollout_ref.rollout.n", "responses per prompt"),
            ("actor_rollout_ref.actor.clip_ratio_low", "clip ratio low"),
            ("actor_rollout_ref.actor.clip_ratio_high", "clip ratio high"),
            ("actor_rollout_ref.actor.loss_agg_mode", "loss aggregation"),
            ("data.max_response_length", "response cap (tokens)"),
            ("reward.reward_kwargs.overlong_buffer_cfg.len", "overlong buffer (tokens)"),
            ("trainer.total_epochs", "epochs"),
        ):
            if (value := override_value(overrides, key)) is not None:
                lines.append(f"- {label}: {value}")
        lines += ["", "## Reward"]
        variant = override_value(overrides, "reward.custom_reward_function.reward_kwargs.variant")
        fn = override_value(overrides, "reward.custom_reward_function.path")
        if kind == "dapo":
            lines.append(f"Rule-based `compute_score` from `{fn}` (variant `{variant}`): format, tool name, parameter "
                         "name, parameter content and order components, normalised to [0, 1], regression penalty; "
                         "plus the DAPO overlong penalty on the response length.")
        else:
            lines.append("Cross-entropy on the correct tool calls (warm start before DAPO).")
        data = manifest.get("data") or {}
        if data.get("train"):
            mix = data["train"].get("mix") or {}
            total = sum(mix.values()) or 1
            lines += ["", "## Data", f"Train: `{data['train']['path']}` ({data['train']['rows']} rows)", "",
                      "| data_source / format / source | rows | share |", "| --- | ---: | ---: |"]
            lines += [f"| {k} | {n} | {100 * n / total:.1f}% |" for k, n in sorted(mix.items(), key=lambda kv: -kv[1])]
        if data.get("val"):
            lines += ["", f"Validation: `{data['val']['path']}` ({data['val']['rows']} rows)"]
        lines += ["", "## Launch command", "```", str(manifest.get("command", "")), "```"]
    if metrics:
        lines += ["", "## Training metrics (first -> last logged step)", "| metric | first | last | steps |",
                  "| --- | ---: | ---: | ---: |"]
        for name, series in metrics.items():
            if series:
                lines.append(f"| {name} | {series[0][1]:.4g} | {series[-1][1]:.4g} | {len(series)} |")
    lines += ["", "## Use", "```", f"tool-refiner refine --model {out_dir} ...", "```", ""]
    return "\n".join(lines)


def export_checkpoint(ckpt: str | Path, out_dir: str | Path, *, metrics_log: str | Path | None = None,
                      run_merge: bool = True) -> Path:
    """Merges the FSDP shards into ``out_dir`` (a Hugging Face folder) and writes its README.md model card."""
    from refiner.plot import CARD_METRICS, read_metrics

    actor_dir = resolve_actor_dir(ckpt)
    out = Path(out_dir)
    if run_merge:
        if not (actor_dir / "huggingface" / "config.json").is_file():
            raise ExportError(f"{actor_dir}: no huggingface/config.json (verl saves it with every FSDP checkpoint)")
        proc = subprocess.run(merge_command(actor_dir, out), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout)[-3000:]
            raise ExportError(f"verl.model_merger failed on {actor_dir} (exit {proc.returncode}):\n{tail}")
    out.mkdir(parents=True, exist_ok=True)
    log = Path(metrics_log) if metrics_log else _find_up(actor_dir, ("metrics.jsonl", "train.log"))
    metrics = None
    if log is not None:
        series = read_metrics(log)
        metrics = {k: series[k] for k in CARD_METRICS if k in series}
    manifest = _find_up(actor_dir, (MANIFEST,))  # the launch record written by ``tool-refiner train``
    card = model_card(out, actor_dir=actor_dir, manifest=manifest and json.loads(manifest.read_text(encoding="utf-8")),
                      metrics=metrics)
    (out / "README.md").write_text(card, encoding="utf-8")
    return out
