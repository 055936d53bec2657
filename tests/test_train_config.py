"""The DAPO recipe composes with verl 0.9.1's own trainer config (strictly) and passes verl's own validation for every
hardware profile; the launch command validates its inputs before anything starts."""

# ruff: noqa: F811  (fixtures imported from test_train_rows are redefined as test arguments)

from __future__ import annotations

import copy
import functools
from pathlib import Path

import pytest
import yaml
from test_train_rows import built_dir, rl_data_dir, rl_rows, write_parquet  # noqa: F401  (fixtures)

from refiner import PROJECT_ROOT
from refiner.train.errors import TrainConfigError
from refiner.train.launch import sft_command
from refiner.train.recipe import DEFAULT_RECIPE, DEFAULT_SFT_RECIPE, load_recipe, plan_overrides
from refiner.train.verl_config import check_verl_config, compose_verl_config

pytest.importorskip("verl")
pytest.importorskip("hydra")

pytestmark = pytest.mark.verl

RECIPE = load_recipe(DEFAULT_RECIPE)
DATA = {"train_files": "/data/train.parquet", "val_files": "/data/val.parquet"}


def composed(profile=None, choices=None, extra=()):
    ov = plan_overrides(RECIPE, profile=profile, choices=choices, extra=extra, **DATA)
    return ov, copy.deepcopy(_compose(tuple(ov)))


@functools.cache
def _compose(ov: tuple[str, ...]):
    return compose_verl_config(list(ov), RECIPE.base)


@pytest.fixture(scope="module")
def paper_cfg():
    return composed()[1]


@pytest.mark.parametrize("profile", sorted(RECIPE.profiles))
def test_every_profile_composes_and_passes_verl_validation(profile):
    _, cfg = composed(profile)
    check_verl_config(cfg)
    gpus = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    assert gpus == {"gpu24": 1, "gpu80": 1, "paper4x24": 4, "multinode": 16, "cpu-rehearsal": 1}[profile]
    assert cfg.data.train_batch_size * cfg.actor_rollout_ref.rollout.n % gpus == 0


def test_the_cpu_rehearsal_profile_keeps_the_algorithm():
    """The rehearsal shrinks sizes and switches off what a CPU lacks; the algorithm is the paper's."""
    from omegaconf import OmegaConf

    _, paper = composed()
    _, cpu = composed("cpu-rehearsal")
    for key in (
        "algorithm.adv_estimator",
        "algorithm.filter_groups.enable",
        "algorithm.filter_groups.metric",
        "algorithm.use_kl_in_reward",
        "actor_rollout_ref.actor.optim.lr",
        "actor_rollout_ref.actor.clip_ratio_low",
        "actor_rollout_ref.actor.clip_ratio_high",
        "actor_rollout_ref.actor.loss_agg_mode",
        "actor_rollout_ref.actor.use_kl_loss",
        "reward.reward_manager.name",
        "reward.custom_reward_function.path",
        "reward.custom_reward_function.name",
        "reward.reward_kwargs.overlong_buffer_cfg.enable",
        "actor_rollout_ref.rollout.name",
        "actor_rollout_ref.rollout.temperature",
    ):
        assert OmegaConf.select(cpu, key) == OmegaConf.select(paper, key), key
    assert cpu.reward.reward_kwargs.max_resp_len == cpu.data.max_response_length
    assert cpu.trainer.device == "cpu" and cpu.actor_rollout_ref.rollout.enable_sleep_mode is False


def test_composed_config_is_the_paper_recipe(paper_cfg):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy

    c = paper_cfg
    a = c.actor_rollout_ref.actor
    assert c.algorithm.adv_estimator == "grpo"
    assert c.algorithm.use_kl_in_reward is False and a.use_kl_loss is False
    assert not need_reference_policy(c) and not need_critic(c)  # no KL anywhere -> no reference model, no critic
    assert (a.clip_ratio_low, a.clip_ratio_high) == (0.2, 0.28)
    assert a.loss_agg_mode == "token-mean" and a.policy_loss.loss_mode == "vanilla"
    assert a.optim.lr == 1e-6 and c.trainer.total_epochs == 1
    assert c.data.train_batch_size == 16 and c.actor_rollout_ref.rollout.n == 16
    assert c.data.max_response_length == 4096 and c.data.max_prompt_length == 4096
    assert c.algorithm.filter_groups.enable is True and c.algorithm.filter_groups.metric == "acc"
    assert c.actor_rollout_ref.rollout.name == "vllm"
    assert c.reward.reward_manager.name == "dapo"
    assert c.reward.custom_reward_function.path == "pkg://rewards"
    assert c.reward.custom_reward_function.name == "compute_score"
    assert c.reward.custom_reward_function.reward_kwargs.variant == "paper"
    rk = c.reward.reward_kwargs
    assert rk.max_resp_len == 4096
    assert dict(rk.overlong_buffer_cfg) == {"enable": True, "len": 3072, "penalty_factor": 1.0, "log": True}
    # penalty starts at max_resp_len - len = 1024 tokens, as in the paper
    assert rk.max_resp_len - rk.overlong_buffer_cfg.len == 1024
    assert c.data.apply_chat_template_kwargs.enable_thinking is True
    assert "wandb" in c.trainer.logger and "console" in c.trainer.logger


def test_switches_change_thinking_and_reward_variant():
    _, cfg = composed(choices={"thinking": "off", "reward": "strict"})
    assert cfg.data.apply_chat_template_kwargs.enable_thinking is False
    assert cfg.reward.custom_reward_function.reward_kwargs.variant == "strict"
    with pytest.raises(TrainConfigError, match="switch 'reward' has no choice 'lenient'"):
        composed(choices={"reward": "lenient"})


def test_every_rendered_override_parses_back_to_the_yaml_value():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    raw = yaml.safe_load(DEFAULT_RECIPE.read_text())
    expected = {**raw["overrides"], **raw["additions"], **raw["profiles"]["gpu24"]}
    for ov in plan_overrides(RECIPE, **DATA):
        parsed = parser.parse_override(ov)
        key = parsed.key_or_group
        if key in expected:
            value = parsed.value()
            want = expected[key]
            assert (list(value) if isinstance(want, list) else value) == want, ov


def test_unknown_key_fails_composition():
    with pytest.raises(TrainConfigError, match="clip_ratio_hi"):
        composed(extra=["actor_rollout_ref.actor.clip_ratio_hi=0.3"])


def test_user_override_replaces_recipe_value_and_keeps_addition_prefix():
    ov, cfg = composed(extra=["actor_rollout_ref.actor.optim.lr=2e-6", "reward.reward_kwargs.max_resp_len=4096"])
    assert cfg.actor_rollout_ref.actor.optim.lr == 2e-6
    assert sum(o.split("=")[0].lstrip("+") == "actor_rollout_ref.actor.optim.lr" for o in ov) == 1
    assert "+reward.reward_kwargs.max_resp_len=4096" in ov


STATIC_BSZ = [
    "actor_rollout_ref.actor.use_dynamic_bsz=false",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
]


def test_static_batch_layout_is_checked_by_verl_for_each_gpu_count():
    _, cfg = composed(extra=STATIC_BSZ)
    for gpus in (1, 2, 4, 8, 16):
        cfg.trainer.n_gpus_per_node = gpus
        check_verl_config(cfg)
    cfg.trainer.n_gpus_per_node = 3
    with pytest.raises(TrainConfigError, match=r"real_train_batch_size \(256\) must be divisible"):
        check_verl_config(cfg)


def test_verl_validation_rejects_an_unknown_loss_aggregation():
    _, cfg = composed()
    cfg.actor_rollout_ref.actor.loss_agg_mode = "token-avg"
    with pytest.raises(TrainConfigError, match="token-avg"):
        check_verl_config(cfg)


def test_overlong_buffer_must_match_the_response_cap():
    _, cfg = composed()
    cfg.data.max_response_length = 2048
    with pytest.raises(TrainConfigError, match="max_resp_len .4096. must equal data.max_response_length .2048."):
        check_verl_config(cfg)


def test_unregistered_reward_manager_is_rejected():
    _, cfg = composed()
    cfg.reward.reward_manager.name = "dapoo"
    with pytest.raises(TrainConfigError, match="not a registered verl reward manager"):
        check_verl_config(cfg)


def test_sft_recipe_composes_with_verl_sft_trainer_config(tmp_path):
    recipe = load_recipe(DEFAULT_SFT_RECIPE)
    for profile in recipe.profiles:
        ov = plan_overrides(recipe, profile=profile, train_files=tmp_path / "t.parquet", model="Qwen/Qwen3-1.7B")
        cfg = compose_verl_config(ov, recipe.base)
        assert cfg.model.path == "Qwen/Qwen3-1.7B" and cfg.data.messages_key == "messages"
        assert cfg.data.enable_thinking_default is False
    cmd = sft_command(ov, nproc_per_node=8, nnodes=2)
    assert cmd[1:3] == ["-m", "torch.distributed.run"] and "verl.trainer.sft_trainer" in cmd


# ---------------------------------------------------------------------------------------------------------------
# The CLI: dry run prints the command, bad inputs fail before launch


def run_cli(*args):
    from typer.testing import CliRunner

    from refiner.cli import app

    return CliRunner().invoke(app, list(args))


def test_train_dry_run_prints_main_ppo_command(rl_data_dir, tiny_qwen3_dir):
    res = run_cli(
        "train",
        "--data",
        str(rl_data_dir),
        "--model",
        str(tiny_qwen3_dir),
        "--no-wandb",
        "--dry-run",
        "trainer.experiment_name=unit",
    )
    assert res.exit_code == 0, res.output
    assert "-m verl.trainer.main_ppo" in res.output
    ckpt = (Path.cwd() / "checkpoints" / "tool-refiner" / "unit").resolve()
    assert f"trainer.default_local_dir={ckpt}" in res.stdout
    assert f"VERL_FILE_LOGGER_PATH={ckpt / 'metrics.jsonl'}" in res.stdout
    assert not ckpt.exists()  # a dry run writes nothing
    assert f"data.train_files={rl_data_dir / 'train.parquet'}" in res.output
    assert f"actor_rollout_ref.model.path={tiny_qwen3_dir}" in res.output
    assert "trainer.logger=[console,file]" in res.output


def test_train_ray_submit_ships_the_repo(rl_data_dir, tiny_qwen3_dir):
    import json
    import shlex

    res = run_cli(
        "train",
        "--data",
        str(rl_data_dir),
        "--model",
        str(tiny_qwen3_dir),
        "--no-wandb",
        "--dry-run",
        "--profile",
        "multinode",
        "--ray-address",
        "http://head:8265",
    )
    assert res.exit_code == 0, res.output
    words = shlex.split(res.stdout.replace("\\\n", " "))
    assert words[:6] == ["ray", "job", "submit", "--address", "http://head:8265", "--no-wait"]
    renv = json.loads(words[words.index("--runtime-env-json") + 1])
    assert renv["working_dir"] == str(PROJECT_ROOT) and ".venv/" in renv["excludes"]
    assert words[words.index("--") + 1 : words.index("--") + 4] == ["python3", "-m", "verl.trainer.main_ppo"]
    assert "trainer.nnodes=2" in words
    assert not any("VERL_FILE_LOGGER_PATH" in w or w.startswith("trainer.default_local_dir=") for w in words)


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing_parquet", "no train.parquet"),
        ("wrong_columns", "missing column(s) reward_model"),
        ("missing_model", "model path does not exist: /nonexistent/qwen"),
        ("model_without_config", "has no config.json"),
    ],
)
def test_bad_inputs_fail_before_launch(tmp_path, rl_rows, tiny_qwen3_dir, case, message):
    data = tmp_path / "data"
    model = str(tiny_qwen3_dir)
    if case == "missing_parquet":
        write_parquet(rl_rows[:20], data / "val.parquet")
    else:
        rows = (
            rl_rows[:20]
            if case != "wrong_columns"
            else [{k: v for k, v in r.items() if k != "reward_model"} for r in rl_rows[:20]]
        )
        write_parquet(rows, data / "train.parquet")
        write_parquet(rl_rows[:4], data / "val.parquet")
    if case == "missing_model":
        model = "/nonexistent/qwen"
    if case == "model_without_config":
        (tmp_path / "empty_model").mkdir()
        model = str(tmp_path / "empty_model")
    res = run_cli("train", "--data", str(data), "--model", model, "--no-wandb", "--dry-run")
    assert res.exit_code == 2
    assert message in res.output
    assert "verl.trainer.main_ppo" not in res.output


def test_wandb_logger_requires_wandb(rl_data_dir, tiny_qwen3_dir, monkeypatch):
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb installed")
    monkeypatch.delenv("WANDB_DISABLED", raising=False)
    res = run_cli("train", "--data", str(rl_data_dir), "--model", str(tiny_qwen3_dir), "--dry-run")
    assert res.exit_code == 2 and "wandb is not installed" in res.output


def test_sft_dry_run_converts_the_data_and_prints_torchrun(rl_data_dir, tiny_qwen3_dir):
    res = run_cli("sft", "--data", str(rl_data_dir), "--model", str(tiny_qwen3_dir), "--no-wandb", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "torch.distributed.run" in res.stdout and "-m verl.trainer.sft_trainer" in res.stdout
    assert f"data.train_files={rl_data_dir / 'sft' / 'train.parquet'}" in res.stdout
    assert (rl_data_dir / "sft" / "validation.parquet").is_file() or (rl_data_dir / "sft" / "val.parquet").is_file()
