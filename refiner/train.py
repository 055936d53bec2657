"""DAPO (and SFT warm-start) launch for the refiner on verl 0.9.1: recipe files, validation, commands, Ray submit.

A recipe (``configs/verl/*.yaml``, ``configs/sft/*.yaml``) is a map of Hydra overrides for one of verl's own trainer
configs, plus named switches and hardware profiles. :func:`plan_overrides` turns recipe + choices + the user's own
``key=value`` overrides into the override list; :func:`compose_verl_config` composes it against the installed verl
config (Hydra rejects unknown keys); :func:`check_verl_config` runs verl's own validation on the result; and
:func:`validate_inputs` checks the parquet files, the model path and the reward function before anything launches.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECIPE = ROOT / "configs" / "verl" / "paper.yaml"
DEFAULT_SFT_RECIPE = ROOT / "configs" / "sft" / "paper.yaml"

# Columns verl's RLHFDataset and reward loop read from every row (the data builder writes exactly these).
RL_COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
VAL_NAMES = ("val.parquet", "test.parquet", "validation.parquet")
MANIFEST = "tool_refiner_run.json"


class TrainConfigError(ValueError):
    """A recipe, override, data file or model path that cannot be launched; the message says which and why."""


# ----------------------------------------------------------------------------------------------------------------
# Recipes


@dataclass
class Recipe:
    path: Path
    base: str
    model: str | None
    overrides: dict[str, Any]
    additions: dict[str, Any]
    switches: dict[str, dict[str, Any]]
    profiles: dict[str, dict[str, Any]]
    default_profile: str | None
    launcher: str = "main_ppo"

    def switch_default(self, name: str) -> str:
        return str(self.switches[name].get("default"))


def load_recipe(path: str | Path) -> Recipe:
    """Reads a recipe YAML; raises :class:`TrainConfigError` naming the file and section when it is malformed."""
    p = Path(path)
    if not p.is_file():
        raise TrainConfigError(f"recipe file not found: {p}")
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise TrainConfigError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise TrainConfigError(f"{p}: a recipe is a mapping with 'base' and 'overrides'")
    if "base" not in raw:
        raise TrainConfigError(f"{p}: missing 'base' (the verl config name, e.g. ppo_trainer)")
    for section in ("overrides", "additions", "profiles", "switches"):
        if not isinstance(raw.get(section) or {}, dict):
            raise TrainConfigError(f"{p}: section '{section}' must be a mapping")
    switches = raw.get("switches") or {}
    for name, sw in switches.items():
        if not isinstance(sw, dict) or not isinstance(sw.get("choices"), dict):
            raise TrainConfigError(f"{p}: switch '{name}' needs a 'choices' mapping")
        if str(sw.get("default")) not in {str(k) for k in sw["choices"]}:
            raise TrainConfigError(f"{p}: switch '{name}' default {sw.get('default')!r} is not one of its choices")
    default_profile = raw.get("default_profile")
    profiles = raw.get("profiles") or {}
    if default_profile is not None and default_profile not in profiles:
        raise TrainConfigError(f"{p}: default_profile {default_profile!r} is not defined under 'profiles'")
    return Recipe(
        path=p,
        base=str(raw["base"]),
        model=raw.get("model"),
        overrides=dict(raw.get("overrides") or {}),
        additions=dict(raw.get("additions") or {}),
        switches={str(k): v for k, v in switches.items()},
        profiles={str(k): dict(v or {}) for k, v in profiles.items()},
        default_profile=default_profile,
        launcher=str(raw.get("launcher", "main_ppo")),
    )


# ----------------------------------------------------------------------------------------------------------------
# Overrides

_PLAIN = re.compile(r"^[A-Za-z0-9_.\-/:]+$")
_OVERRIDE = re.compile(r"^(?P<prefix>\+\+|\+|~)?(?P<key>[A-Za-z_][\w.@/\-]*)(?:=(?P<value>.*))?$", re.DOTALL)


def render_value(value: Any) -> str:
    """A Python/YAML value in Hydra's override grammar (lists, bools, null, quoted strings when needed)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{render_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if _PLAIN.match(text) and text not in ("true", "false", "null"):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class Overrides:
    """An ordered map ``key -> (prefix, rendered value)``; a key set twice keeps its first prefix, last value."""

    items: dict[str, tuple[str, str | None]] = field(default_factory=dict)

    def set(self, key: str, value: Any, prefix: str = "", *, rendered: bool = False) -> None:
        if key.startswith("+"):
            prefix, key = "+", key.lstrip("+")
        text = value if rendered else render_value(value)
        old = self.items.get(key)
        self.items[key] = ((old[0] if old and old[0] != "~" else prefix), text)

    def apply(self, text: str) -> None:
        """One user override: ``key=value``, ``+key=value``, ``++key=value`` or ``~key``."""
        m = _OVERRIDE.match(text.strip())
        if not m or (m.group("prefix") != "~" and m.group("value") is None):
            raise TrainConfigError(f"override {text!r} is not of the form key=value, +key=value or ~key")
        prefix, key, value = m.group("prefix") or "", m.group("key"), m.group("value")
        if prefix == "~":
            self.items[key] = ("~", None)
        else:
            self.set(key, value, prefix, rendered=True)

    def get(self, key: str) -> str | None:
        item = self.items.get(key)
        return None if item is None else item[1]

    def to_list(self) -> list[str]:
        return [f"~{k}" if p == "~" else f"{p}{k}={v}" for k, (p, v) in self.items.items()]


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


def plan_overrides(
    recipe: Recipe,
    *,
    profile: str | None = None,
    choices: Mapping[str, str] | None = None,
    data_dir: str | Path | None = None,
    train_files: str | Path | None = None,
    val_files: str | Path | None = None,
    model: str | None = None,
    extra: Iterable[str] = (),
) -> list[str]:
    """The full override list: recipe, switches, profile, data/model paths, then the user's own overrides."""
    ov = Overrides()
    for k, v in recipe.overrides.items():
        ov.set(k, v)
    for k, v in recipe.additions.items():
        ov.set(k, v, "+")
    choices = dict(choices or {})
    for name in choices:
        if name not in recipe.switches:
            raise TrainConfigError(f"{recipe.path}: unknown switch {name!r}; known: {', '.join(recipe.switches)}")
    for name, sw in recipe.switches.items():
        choice = str(choices.get(name) or sw.get("default"))
        table = {str(k): v for k, v in sw["choices"].items()}
        if choice not in table:
            raise TrainConfigError(
                f"{recipe.path}: switch {name!r} has no choice {choice!r}; known: {', '.join(table)}"
            )
        for k, v in (table[choice] or {}).items():
            ov.set(k, v)
    profile = profile or recipe.default_profile
    if profile is not None:
        if profile not in recipe.profiles:
            raise TrainConfigError(f"{recipe.path}: unknown profile {profile!r}; known: {', '.join(recipe.profiles)}")
        for k, v in recipe.profiles[profile].items():
            ov.set(k, v)
    if data_dir is not None:
        train_files, val_files = find_data_files(data_dir)
    train_key, val_key, model_key = _path_keys(recipe)
    if train_files is not None:
        ov.set(train_key, str(train_files))
    if val_files is not None and val_key:
        ov.set(val_key, str(val_files))
    model = model or recipe.model
    if model:
        ov.set(model_key, str(model))
    for text in extra:
        ov.apply(text)
    return ov.to_list()


def _path_keys(recipe: Recipe) -> tuple[str, str | None, str]:
    if recipe.launcher == "sft_trainer":
        return "data.train_files", "data.val_files", "model.path"
    return "data.train_files", "data.val_files", "actor_rollout_ref.model.path"


def override_value(overrides: Sequence[str], key: str) -> str | None:
    """The (raw, unquoted) value a key gets from an override list, or None."""
    value = None
    for text in overrides:
        m = _OVERRIDE.match(text)
        if m and m.group("key") == key and m.group("value") is not None:
            value = m.group("value")
    if value is not None and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value


# ----------------------------------------------------------------------------------------------------------------
# Composition against the installed verl config, and verl's own validation


def verl_config_dir() -> Path:
    try:
        import verl
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise TrainConfigError("verl is not installed: pip install 'tool-refiner[train]' (verl==0.9.1)") from e
    return Path(verl.__file__).resolve().parent / "trainer" / "config"


def compose_verl_config(overrides: Sequence[str], base: str = "ppo_trainer") -> Any:
    """Composes ``base`` from the installed verl with the overrides, strictly (unknown keys fail)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
            return compose(config_name=base, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as e:
        raise TrainConfigError(f"verl ({base}.yaml) rejects the overrides: {e}") from None
    finally:
        GlobalHydra.instance().clear()


def check_verl_config(cfg: Any) -> None:
    """Runs verl 0.9.1's own checks (``validate_config`` and the typed config dataclasses) plus the DAPO recipe's
    invariants; raises :class:`TrainConfigError` with verl's message."""
    import warnings

    from hydra.errors import InstantiationException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Disabled critic")
            use_ref, use_critic = need_reference_policy(cfg), need_critic(cfg)
        with contextlib.redirect_stdout(sys.stderr):  # verl prints its success line; keep stdout for the command
            validate_config(cfg, use_reference_policy=use_ref, use_critic=use_critic)
        omega_conf_to_dataclass(cfg.algorithm)
        omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    except (AssertionError, ValueError, TypeError, InstantiationException) as e:
        raise TrainConfigError(f"verl's config validation failed: {e}") from None
    # verl 0.9.1's RewardManagerConfig.__post_init__ calls a super().__post_init__ that does not exist, so the
    # reward section cannot be instantiated standalone; run the same registry check it would have run.
    manager = cfg.reward.reward_manager
    if manager.source == "register":
        from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

        if manager.name not in REWARD_MANAGER:
            raise TrainConfigError(
                f"reward.reward_manager.name={manager.name!r} is not a registered verl reward manager; "
                f"known: {', '.join(sorted(REWARD_MANAGER))}"
            )
    # What verl does not check itself but the DAPO recipe relies on.
    if cfg.reward.reward_manager.name == "dapo":
        rk = cfg.reward.get("reward_kwargs") or {}
        ob = rk.get("overlong_buffer_cfg") or {}
        if ob.get("enable"):
            max_resp = rk.get("max_resp_len")
            if max_resp != cfg.data.max_response_length:
                raise TrainConfigError(
                    f"reward.reward_kwargs.max_resp_len ({max_resp}) must equal data.max_response_length "
                    f"({cfg.data.max_response_length}), or the overlong penalty never reaches its full value"
                )
            if not 0 < ob.get("len", 0) <= max_resp:
                raise TrainConfigError(f"overlong_buffer_cfg.len ({ob.get('len')}) must be in (0, {max_resp}]")
    fg = cfg.algorithm.get("filter_groups") or {}
    if fg.get("enable") and cfg.actor_rollout_ref.rollout.n < 2:
        raise TrainConfigError("algorithm.filter_groups needs rollout.n >= 2 (a group of one never has variance)")


# ----------------------------------------------------------------------------------------------------------------
# Input validation (before launch)


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
        raise TrainConfigError(
            f"{p}: missing column(s) {', '.join(missing)}; verl needs {', '.join(RL_COLUMNS)} "
            f"(found: {', '.join(table.column_names)})"
        )
    if table.num_rows < min_rows:
        raise TrainConfigError(f"{p}: {table.num_rows} rows, need at least {min_rows} (one full train batch)")
    mix: Counter[str] = Counter()
    for i, row in enumerate(table.select(list(RL_COLUMNS)).to_pylist()):
        where = f"{p}, row {i}"
        prompt = row["prompt"]
        if (
            not isinstance(prompt, list)
            or not prompt
            or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in prompt
            )
        ):
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
    from rewards.ground_truth import GroundTruthError
    from rewards.ground_truth import parse_ground_truth as read_ground_truth

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


def validate_inputs(overrides: Sequence[str], *, min_train_rows: int | None = None) -> dict[str, Any]:
    """Checks what a DAPO launch reads: train/val parquet, model path, reward function. Returns a summary."""
    train = override_value(overrides, "data.train_files")
    val = override_value(overrides, "data.val_files")
    if not train:
        raise TrainConfigError("no training data: pass --data DIR (with train.parquet) or data.train_files=...")
    if min_train_rows is None:
        min_train_rows = int(override_value(overrides, "data.train_batch_size") or 1)
    summary: dict[str, Any] = {"train": validate_rl_parquet(train, min_rows=min_train_rows)}
    if val:
        summary["val"] = validate_rl_parquet(val)
    model = override_value(overrides, "actor_rollout_ref.model.path")
    summary["model"] = {"path": model, "kind": validate_model_path(model)}
    validate_reward_function(
        override_value(overrides, "reward.custom_reward_function.path"),
        override_value(overrides, "reward.custom_reward_function.name"),
    )
    loggers = override_value(overrides, "trainer.logger") or ""
    if "wandb" in loggers and importlib.util.find_spec("wandb") is None and not os.environ.get("WANDB_DISABLED"):
        raise TrainConfigError(
            "trainer.logger includes wandb but wandb is not installed: pip install wandb, or --no-wandb"
        )
    return summary


# ----------------------------------------------------------------------------------------------------------------
# Commands


def main_ppo_command(overrides: Sequence[str], python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "verl.trainer.main_ppo", *overrides]


def ray_runtime_env(working_dir: str | Path, *, pip: Sequence[str] = (), env: Mapping[str, str] | None = None) -> dict:
    """Runtime env for ``ray job submit``: ships the repository (rewards/, refiner/) as the working dir."""
    renv: dict[str, Any] = {
        "working_dir": str(working_dir),
        "excludes": [".venv/", ".git/", "checkpoints/", "outputs/", "wandb/", ".cache/", "*.parquet", "*.safetensors"],
        "env_vars": {
            "TOKENIZERS_PARALLELISM": "true",
            "NCCL_DEBUG": "WARN",
            "VLLM_LOGGING_LEVEL": "WARN",
            **(env or {}),
        },
    }
    if pip:
        renv["pip"] = list(pip)
    return renv


# The reward code's own runtime needs (rewards/ imports refiner.formats); shipped to a cluster that lacks them.
REWARD_PIP = ("json-repair>=0.30", "rapidfuzz>=3.0", "pyyaml>=6.0")


def ray_submit_command(
    overrides: Sequence[str],
    address: str,
    *,
    working_dir: str | Path = ROOT,
    pip: Sequence[str] = REWARD_PIP,
    env: Mapping[str, str] | None = None,
    submission_id: str | None = None,
) -> list[str]:
    """``ray job submit`` of main_ppo on an existing cluster; data/model paths must be visible from the cluster."""
    cmd = ["ray", "job", "submit", "--address", address, "--no-wait"]
    if submission_id:
        cmd += ["--submission-id", submission_id]
    cmd += ["--runtime-env-json", json.dumps(ray_runtime_env(working_dir, pip=pip, env=env))]
    return [*cmd, "--", "python3", "-m", "verl.trainer.main_ppo", *overrides]


def format_command(cmd: Sequence[str]) -> str:
    """A copy-pasteable shell rendering, one override per line."""
    head: list[str] = []
    rest: list[str] = []
    for i, part in enumerate(cmd):
        if part in ("verl.trainer.main_ppo", "verl.trainer.sft_trainer"):
            head, rest = list(cmd[: i + 1]), list(cmd[i + 1 :])
            break
    if not head:
        return shlex.join(cmd)
    return " \\\n    ".join([shlex.join(head), *(shlex.quote(r) for r in rest)])


def write_manifest(directory: str | Path, record: Mapping[str, Any]) -> Path:
    """Records what was launched (command, overrides, data summary) next to the checkpoints, for export's card."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = d / MANIFEST
    out.write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    return out


def checkpoint_dir(cfg_or_overrides: Any) -> Path:
    """``trainer.default_local_dir`` resolved (composed config or its default pattern)."""
    if isinstance(cfg_or_overrides, (list, tuple)):
        value = override_value(cfg_or_overrides, "trainer.default_local_dir")
        if value:
            return Path(value)
        project = override_value(cfg_or_overrides, "trainer.project_name") or "verl_examples"
        name = override_value(cfg_or_overrides, "trainer.experiment_name") or "gsm8k"
        return Path("checkpoints") / project / name
    return Path(str(cfg_or_overrides.trainer.default_local_dir))


def run_command(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> int:
    """Runs a launch command in the foreground, streaming its output; returns its exit code."""
    if shutil.which(cmd[0]) is None and not Path(cmd[0]).exists():
        raise TrainConfigError(f"{cmd[0]!r} not found on PATH")
    full_env = {**os.environ, **(env or {})}
    return subprocess.call(list(cmd), env=full_env, cwd=str(cwd) if cwd else None)


# ----------------------------------------------------------------------------------------------------------------
# SFT warm start


def rl_to_sft_parquet(src: str | Path, dst: str | Path) -> int:
    """Writes verl SFT rows (``messages`` = the RL prompt + the correct answer as the assistant turn) from an RL
    parquet. Returns the row count; raises :class:`TrainConfigError` naming file, row and field on bad rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    validate_rl_parquet(src)
    rows = pq.read_table(src).to_pylist()
    out = []
    for i, row in enumerate(rows):
        gt = parse_ground_truth(row["reward_model"]["ground_truth"], f"{src}, row {i}")
        messages = [{"role": m["role"], "content": m["content"]} for m in row["prompt"]]
        messages.append({"role": "assistant", "content": gt["answer"]})
        out.append(
            {
                "messages": messages,
                "data_source": row["data_source"],
                "prompt": messages[:-1],
                "response": gt["answer"],
                "extra_info": row["extra_info"],
            }
        )
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(out), dst)
    return len(out)


def sft_command(overrides: Sequence[str], *, nproc_per_node: int = 1, nnodes: int = 1) -> list[str]:
    """``torchrun ... -m verl.trainer.sft_trainer`` (verl 0.9.1's engine-based SFT trainer)."""
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    if nnodes == 1:
        torchrun += ["--standalone", "--nnodes=1"]
    else:
        torchrun += [f"--nnodes={nnodes}"]
    return [*torchrun, f"--nproc_per_node={nproc_per_node}", "-m", "verl.trainer.sft_trainer", *overrides]
