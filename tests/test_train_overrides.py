"""Override planning and input checks that need no verl: rendering, user overrides, recipe errors, model paths."""

# ruff: noqa: F811  (fixtures imported from test_train_rows are redefined as test arguments)

from __future__ import annotations

import pytest
from test_train_rows import built_dir, rl_data_dir, rl_rows  # noqa: F401  (fixtures)

from refiner.train.errors import TrainConfigError
from refiner.train.inputs import validate_inputs, validate_model_path, validate_reward_function
from refiner.train.overrides import override_value, render_value
from refiner.train.recipe import DEFAULT_RECIPE, load_recipe, plan_overrides


def test_render_value_uses_hydra_grammar():
    assert render_value(True) == "true" and render_value(None) == "null"
    assert render_value(1e-6) == "1e-06" and render_value(16) == "16"
    assert render_value(["console", "wandb"]) == "[console,wandb]"
    assert render_value("pkg://rewards") == "pkg://rewards"
    assert render_value("/a b/c's") == "'/a b/c\\'s'"
    assert render_value("true") == "'true'"  # the string, not the bool


def test_user_overrides_replace_delete_and_reject_garbage():
    recipe = load_recipe(DEFAULT_RECIPE)
    ov = plan_overrides(recipe, extra=["data.train_batch_size=32", "~trainer.test_freq", "+x.y=1"])
    assert "data.train_batch_size=32" in ov and "data.train_batch_size=16" not in ov
    assert "~trainer.test_freq" in ov and not any(o.startswith("trainer.test_freq=") for o in ov)
    assert "+x.y=1" in ov
    assert override_value(ov, "actor_rollout_ref.model.path") == "Qwen/Qwen3-1.7B"
    with pytest.raises(TrainConfigError, match="not of the form key=value"):
        plan_overrides(recipe, extra=["justakey"])
    with pytest.raises(TrainConfigError, match="unknown profile 'gpu7'"):
        plan_overrides(recipe, profile="gpu7")
    with pytest.raises(TrainConfigError, match="unknown switch 'temperature'"):
        plan_overrides(recipe, choices={"temperature": "hot"})


def test_recipe_errors_name_the_file(tmp_path):
    with pytest.raises(TrainConfigError, match="recipe file not found"):
        load_recipe(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("overrides: {a: 1}\n")
    with pytest.raises(TrainConfigError, match=r"bad.yaml: missing 'base'"):
        load_recipe(bad)
    bad.write_text("base: ppo_trainer\nswitches: {t: {default: x, choices: {y: {}}}}\n")
    with pytest.raises(TrainConfigError, match="switch 't' default 'x' is not one of its choices"):
        load_recipe(bad)


def test_model_paths(tmp_path):
    assert validate_model_path("Qwen/Qwen3-1.7B") == "hub"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    assert validate_model_path(str(tmp_path / "m")) == "local"
    for bad, msg in (("", "no model given"), ("./models/missing", "does not exist"), ("a/b/c", "does not exist")):
        with pytest.raises(TrainConfigError, match=msg):
            validate_model_path(bad)


def test_reward_function_checks(tmp_path):
    validate_reward_function("pkg://rewards", "compute_score")
    with pytest.raises(TrainConfigError, match="has no function 'nope'"):
        validate_reward_function("pkg://rewards", "nope")
    with pytest.raises(TrainConfigError, match="cannot be imported"):
        validate_reward_function("pkg://no_such_module_xyz", "compute_score")
    with pytest.raises(TrainConfigError, match="reward function file not found"):
        validate_reward_function(str(tmp_path / "r.py"), "compute_score")


def test_validate_inputs_summarises_the_data_mix(rl_data_dir, tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    recipe = load_recipe(DEFAULT_RECIPE)
    ov = plan_overrides(recipe, data_dir=rl_data_dir, model=str(tmp_path / "m"), extra=["trainer.logger=[console]"])
    summary = validate_inputs(ov)
    assert summary["model"] == {"path": str(tmp_path / "m"), "kind": "local"}
    assert summary["train"]["rows"] >= 16 and summary["val"]["path"].endswith("validation.parquet")
    ov_big = [*ov, "data.train_batch_size=4096"]
    with pytest.raises(TrainConfigError, match="need at least 4096"):
        validate_inputs(ov_big)
