"""Launches: :func:`plan_dapo` and :func:`plan_sft` run every check (cheap input checks first, then verl's own) and
return a :class:`Launch` (``main_ppo``, ``ray job submit`` or ``torchrun``); :func:`start` records and runs it."""

from __future__ import annotations

import datetime as _dt
import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refiner import PROJECT_ROOT
from refiner.train.errors import TrainConfigError
from refiner.train.inputs import find_data_files, rl_to_sft_parquet, validate_inputs, validate_model_path
from refiner.train.overrides import override_value
from refiner.train.recipe import DEFAULT_RECIPE, DEFAULT_SFT_RECIPE, Recipe, load_recipe, plan_overrides
from refiner.train.verl_config import check_verl_config, compose_verl_config

MANIFEST = "tool_refiner_run.json"
# What --no-wandb puts in place of the recipe's logger list.
NO_WANDB_LOGGERS = "trainer.logger=[console,file]"


# The reward code's own runtime needs (rewards/ imports refiner.formats); shipped to a cluster that lacks them.
REWARD_PIP = ("json-repair>=0.30", "rapidfuzz>=3.0", "pyyaml>=6.0")
RAY_RUNTIME_ENV = {
    "working_dir": str(PROJECT_ROOT),  # ships the repository (rewards/, refiner/)
    "excludes": [".venv/", ".git/", "checkpoints/", "outputs/", "wandb/", ".cache/", "*.parquet", "*.safetensors"],
    "env_vars": {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN", "VLLM_LOGGING_LEVEL": "WARN"},
    "pip": list(REWARD_PIP),
}


def format_command(cmd: Sequence[str]) -> str:
    """A copy-pasteable shell rendering, one override per line."""
    for i, part in enumerate(cmd):
        if part in ("verl.trainer.main_ppo", "verl.trainer.sft_trainer"):
            return " \\\n    ".join([shlex.join(cmd[: i + 1]), *(shlex.quote(r) for r in cmd[i + 1 :])])
    return shlex.join(cmd)


def write_manifest(directory: str | Path, record: Mapping[str, Any]) -> Path:
    """Records what was launched (command, overrides, data summary) next to the checkpoints, for export's card."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = d / MANIFEST
    out.write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    return out


def checkpoint_dir(overrides: Sequence[str]) -> Path:
    """``trainer.default_local_dir`` of an override list, else verl's default pattern."""
    value = override_value(overrides, "trainer.default_local_dir")
    if value:
        return Path(value)
    project = override_value(overrides, "trainer.project_name") or "verl_examples"
    name = override_value(overrides, "trainer.experiment_name") or "gsm8k"
    return Path("checkpoints") / project / name


def sft_command(overrides: Sequence[str], *, nproc_per_node: int = 1, nnodes: int = 1) -> list[str]:
    """``torchrun ... -m verl.trainer.sft_trainer`` (verl 0.9.1's engine-based SFT trainer)."""
    nodes = ["--standalone", "--nnodes=1"] if nnodes == 1 else [f"--nnodes={nnodes}"]
    return [sys.executable, "-m", "torch.distributed.run", *nodes, f"--nproc_per_node={nproc_per_node}", "-m",
            "verl.trainer.sft_trainer", *overrides]


@dataclass
class Launch:
    """A checked launch: the command, the override list it carries, where checkpoints go, and the launch record
    (written into the checkpoint folder by :func:`start`; ``export`` reads it for the model card)."""

    command: list[str]
    overrides: list[str]
    checkpoint_dir: Path
    record: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # progress lines for the user (e.g. the SFT data written)

    @property
    def text(self) -> str:
        return format_command(self.command)


def plan_dapo(*, config: str | Path | None = None, profile: str | None = None,
              choices: Mapping[str, str] | None = None, data: str | Path | None = None, model: str | None = None,
              extra: Sequence[str] = (), no_wandb: bool = False, ray_address: str | None = None,
              skip_checks: bool = False) -> Launch:
    """The DAPO launch (``main_ppo`` locally, or ``ray job submit`` with ``ray_address``) after every check."""
    recipe = load_recipe(config or DEFAULT_RECIPE)
    extra = [*extra, *([NO_WANDB_LOGGERS] if no_wandb else [])]
    ov = plan_overrides(recipe, profile=profile, choices=choices, data_dir=data, model=model, extra=extra)
    ckpt = checkpoint_dir(ov)
    if ray_address is None:
        # Local run: absolute checkpoint dir (created with the launch record) and the JSONL metrics file inside
        # it. On a cluster both stay verl's defaults, relative to the job's working dir.
        if override_value(ov, "trainer.default_local_dir") is None:
            ov.append(f"trainer.default_local_dir={ckpt.resolve()}")
        metrics = (ckpt / "metrics.jsonl").resolve()
        ov.append(f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={metrics}")
    summary = {} if skip_checks else validate_inputs(ov)  # cheap checks first
    check_verl_config(compose_verl_config(ov, recipe.base))
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *ov]
    if ray_address:  # ``ray job submit`` on an existing cluster: data and model paths must be visible from it
        cmd = ["ray", "job", "submit", "--address", ray_address, "--no-wait", "--runtime-env-json",
               json.dumps(RAY_RUNTIME_ENV), "--", "python3", "-m", "verl.trainer.main_ppo", *ov]
    record = {"kind": "dapo", "recipe": str(recipe.path), "profile": profile or recipe.default_profile,
              "overrides": ov, "command": format_command(cmd), "data": summary}
    return Launch(command=cmd, overrides=ov, checkpoint_dir=ckpt, record=record)


def plan_sft(*, data: str | Path, config: str | Path | None = None, profile: str | None = None,
             choices: Mapping[str, str] | None = None, model: str | None = None, extra: Sequence[str] = (),
             no_wandb: bool = False) -> Launch:
    """The SFT warm start (``torchrun -m verl.trainer.sft_trainer``): converts the RL rows under ``DATA/sft/``, then
    checks the recipe against verl's SFT config and the model path."""
    recipe: Recipe = load_recipe(config or DEFAULT_SFT_RECIPE)
    train_rl, val_rl = find_data_files(data)
    sft_dir = Path(data) / "sft"
    n_train = rl_to_sft_parquet(train_rl, sft_dir / "train.parquet")
    n_val = rl_to_sft_parquet(val_rl, sft_dir / "val.parquet")
    extra = [*extra, *([NO_WANDB_LOGGERS] if no_wandb else [])]
    ov = plan_overrides(recipe, profile=profile, choices=choices, train_files=sft_dir / "train.parquet",
                        val_files=sft_dir / "val.parquet", model=model, extra=extra)
    compose_verl_config(ov, recipe.base)
    validate_model_path(override_value(ov, "model.path"))
    nproc = int(override_value(ov, "trainer.n_gpus_per_node") or 1)
    nnodes = int(override_value(ov, "trainer.nnodes") or 1)
    cmd = sft_command(ov, nproc_per_node=nproc, nnodes=nnodes)
    record = {"kind": "sft", "recipe": str(recipe.path), "profile": profile, "overrides": ov,
              "command": format_command(cmd)}
    note = f"SFT data: {n_train} train / {n_val} val rows in {sft_dir}"
    return Launch(command=cmd, overrides=ov, checkpoint_dir=checkpoint_dir(ov), record=record, notes=[note])


def start(launch: Launch) -> int:
    """Writes the launch record into the checkpoint folder, then runs the command in the foreground; its exit code."""
    record = dict(launch.record)
    if record.get("kind") == "dapo":
        record["launched"] = _dt.datetime.now(_dt.timezone.utc).isoformat()
    write_manifest(launch.checkpoint_dir, record)
    if shutil.which(launch.command[0]) is None and not Path(launch.command[0]).exists():
        raise TrainConfigError(f"{launch.command[0]!r} not found on PATH")
    return subprocess.call(list(launch.command))
