"""What a launch reads, checked before anything starts: the data builder's parquet files, the model, the reward
function and the logger's packages. Every error names the file, the row and the field."""

from __future__ import annotations

import importlib
import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refiner.train.errors import TrainConfigError
from refiner.train.overrides import override_value
from rewards.ground_truth import GroundTruthError
from rewards.ground_truth import parse_ground_truth as read_ground_truth

# Columns verl's RLHFDataset and reward loop read from every row (the data builder writes exactly these).
RL_COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
# The validation file, by preference; a held-out ``test.parquet`` only when there is nothing else.
VAL_NAMES = ("validation.parquet", "val.parquet", "test.parquet")


def find_data_files(data_dir: str | Path) -> tuple[Path, Path]:
    """``(train, val)`` parquet paths in a data builder output folder."""
    d = Path(data_dir)
    if not d.is_dir():
        raise TrainConfigError(f"data folder not found: {d}")
    train = d / "train.parquet"
    if not train.is_file():
        raise TrainConfigError(f"{d}: no train.parquet (expected the data builder's output folder)")
    for name in VAL_NAMES:
        if (d / name).is_file():
            return train, d / name
    raise TrainConfigError(f"{d}: no validation parquet (looked for {', '.join(VAL_NAMES)})")


def validate_rl_parquet(path: str | Path, *, min_rows: int = 1) -> dict[str, Any]:
    """Checks one RL parquet: columns, per-row shape of ``prompt`` and ``reward_model.ground_truth``.
    Returns a summary (rows, data mix); raises :class:`TrainConfigError` naming file, row and field."""
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise TrainConfigError(f"parquet file not found: {p}")
    try:
        table = pq.read_table(p)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a corrupt/non-parquet file
        raise TrainConfigError(f"{p}: not a readable parquet file: {e}") from None
    missing = [c for c in RL_COLUMNS if c not in table.column_names]
    if missing:
        raise TrainConfigError(f"{p}: missing column(s) {', '.join(missing)}; verl needs {', '.join(RL_COLUMNS)} "
                               f"(found: {', '.join(table.column_names)})")
    if table.num_rows < min_rows:
        raise TrainConfigError(f"{p}: {table.num_rows} rows, need at least {min_rows} (one full train batch)")
    mix: Counter[str] = Counter()
    for i, row in enumerate(table.select(list(RL_COLUMNS)).to_pylist()):
        where = f"{p}, row {i}"
        prompt = row["prompt"]
        messages_ok = all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                          for m in prompt) if isinstance(prompt, list) else False
        if not prompt or not messages_ok:
            raise TrainConfigError(f"{where}, field 'prompt': must be a non-empty list of {{role, content}} messages")
        rm = row["reward_model"]
        if not isinstance(rm, dict) or rm.get("ground_truth") is None:
            raise TrainConfigError(f"{where}, field 'reward_model': needs a 'ground_truth'")
        gt = parse_ground_truth(rm["ground_truth"], where)
        extra = row["extra_info"] if isinstance(row["extra_info"], dict) else {}
        mix[f"{row['data_source']}/{gt.get('format', '?')}/{extra.get('source', '?')}"] += 1
    return {"path": str(p), "rows": table.num_rows, "mix": dict(sorted(mix.items()))}


def parse_ground_truth(gt: Any, where: str) -> dict[str, Any]:
    """``reward_model.ground_truth`` (a JSON string, or already a dict) read and checked by the reward's own reader:
    ``{"format", "answer", "order_sensitive"}``, or :class:`TrainConfigError` naming the row and the field."""
    try:
        return read_ground_truth(gt).fields()
    except GroundTruthError as e:
        raise TrainConfigError(f"{where}, field 'reward_model.ground_truth': {e}") from None


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def validate_model_path(model: str | None) -> str:
    """A local model folder must exist and hold config.json; ``org/name`` that is not a local path is a hub id."""
    if not model:
        raise TrainConfigError("no model given: pass --model PATH_OR_HUB_ID (or set 'model' in the recipe)")
    p = Path(os.path.expanduser(model))
    if p.exists():
        if not (p / "config.json").is_file():
            raise TrainConfigError(f"model folder {p} has no config.json (not a Hugging Face model folder)")
        return "local"
    if model.startswith(("/", ".", "~")) or not _HUB_ID.match(model):
        raise TrainConfigError(f"model path does not exist: {model}")
    return "hub"


def validate_reward_function(path: str | None, name: str | None) -> None:
    """The custom reward function verl will load (``pkg://module`` or a file) exists and is callable."""
    if not path:
        return
    name = name or "compute_score"
    if path.startswith("pkg://"):
        module_name = path[len("pkg://") :].replace("/", ".")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise TrainConfigError(f"reward module {module_name!r} cannot be imported: {e}") from None
        if not callable(getattr(module, name, None)):
            raise TrainConfigError(f"reward module {module_name!r} has no function {name!r}")
        return
    file_path = path.removeprefix("file://")
    if not Path(file_path).is_file():
        raise TrainConfigError(f"reward function file not found: {file_path}")


def validate_inputs(overrides: Sequence[str]) -> dict[str, Any]:
    """Checks what a DAPO launch reads: train/val parquet, model path, reward function. Returns a summary."""
    train = override_value(overrides, "data.train_files")
    val = override_value(overrides, "data.val_files")
    if not train:
        raise TrainConfigError("no training data: pass --data DIR (with train.parquet) or data.train_files=...")
    min_rows = int(override_value(overrides, "data.train_batch_size") or 1)  # one full train batch
    summary: dict[str, Any] = {"train": validate_rl_parquet(train, min_rows=min_rows)}
    if val:
        summary["val"] = validate_rl_parquet(val)
    model = override_value(overrides, "actor_rollout_ref.model.path")
    summary["model"] = {"path": model, "kind": validate_model_path(model)}
    validate_reward_function(override_value(overrides, "reward.custom_reward_function.path"),
                             override_value(overrides, "reward.custom_reward_function.name"))
    loggers = override_value(overrides, "trainer.logger") or ""
    if "wandb" in loggers and importlib.util.find_spec("wandb") is None and not os.environ.get("WANDB_DISABLED"):
        raise TrainConfigError("trainer.logger includes wandb but wandb is not installed: pip install wandb, or "
                               "--no-wandb")
    return summary


def rl_to_sft_parquet(src: str | Path, dst: str | Path) -> int:
    """Writes verl SFT rows (``messages``: the RL prompt, then the correct answer as the assistant turn) from an RL
    parquet; returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    validate_rl_parquet(src)
    out = []
    for i, row in enumerate(pq.read_table(src).to_pylist()):
        gt = parse_ground_truth(row["reward_model"]["ground_truth"], f"{src}, row {i}")
        messages = [{"role": m["role"], "content": m["content"]} for m in row["prompt"]]
        messages.append({"role": "assistant", "content": gt["answer"]})
        out.append({"messages": messages, "data_source": row["data_source"], "prompt": messages[:-1],
                    "response": gt["answer"], "extra_info": row["extra_info"]})
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(out), dst)
    return len(out)
