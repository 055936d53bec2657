"""Recipe files (``configs/verl/*.yaml``, ``configs/sft/*.yaml``): Hydra overrides for one of verl's trainer configs,
plus named switches and hardware profiles (format: docs/training.md); :func:`plan_overrides` turns one into a list."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from refiner import PROJECT_ROOT
from refiner.train.errors import TrainConfigError
from refiner.train.inputs import find_data_files
from refiner.train.overrides import Overrides

DEFAULT_RECIPE = PROJECT_ROOT / "configs" / "verl" / "paper.yaml"
DEFAULT_SFT_RECIPE = PROJECT_ROOT / "configs" / "sft" / "paper.yaml"


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
    return Recipe(path=p, base=str(raw["base"]), model=raw.get("model"), overrides=dict(raw.get("overrides") or {}),
                  additions=dict(raw.get("additions") or {}), switches={str(k): v for k, v in switches.items()},
                  profiles={str(k): dict(v or {}) for k, v in profiles.items()}, default_profile=default_profile,
                  launcher=str(raw.get("launcher", "main_ppo")))


def plan_overrides(recipe: Recipe, *, profile: str | None = None, choices: Mapping[str, str] | None = None,
                   data_dir: str | Path | None = None, train_files: str | Path | None = None,
                   val_files: str | Path | None = None, model: str | None = None,
                   extra: Iterable[str] = ()) -> list[str]:
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
            raise TrainConfigError(f"{recipe.path}: switch {name!r} has no choice {choice!r}; "
                                   f"known: {', '.join(table)}")
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
    for key, path in (("data.train_files", train_files), ("data.val_files", val_files)):
        if path is not None:
            ov.set(key, str(path))
    model = model or recipe.model
    if model:
        ov.set("model.path" if recipe.launcher == "sft_trainer" else "actor_rollout_ref.model.path", str(model))
    for text in extra:
        ov.apply(text)
    return ov.to_list()

