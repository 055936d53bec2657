"""The override list composed against the installed verl's own config (unknown keys fail), and verl's own checks
on the result, plus the DAPO recipe's invariants verl does not check."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refiner.train.errors import TrainConfigError


def compose_verl_config(overrides: Sequence[str], base: str = "ppo_trainer") -> Any:
    """Composes ``base`` from the installed verl with the overrides, strictly (unknown keys fail)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        import verl
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise TrainConfigError("verl is not installed: pip install 'tool-refiner[train]' (verl==0.9.1)") from e
    config_dir = Path(verl.__file__).resolve().parent / "trainer" / "config"
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
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
            raise TrainConfigError(f"reward.reward_manager.name={manager.name!r} is not a registered verl reward "
                                   f"manager; known: {', '.join(sorted(REWARD_MANAGER))}")
    # What verl does not check itself but the DAPO recipe relies on.
    if cfg.reward.reward_manager.name == "dapo":
        reward_kwargs = cfg.reward.get("reward_kwargs") or {}
        overlong = reward_kwargs.get("overlong_buffer_cfg") or {}
        if overlong.get("enable"):
            max_resp = reward_kwargs.get("max_resp_len")
            if max_resp != cfg.data.max_response_length:
                raise TrainConfigError(f"reward.reward_kwargs.max_resp_len ({max_resp}) must equal "
                                       f"data.max_response_length ({cfg.data.max_response_length}), or the overlong "
                                       "penalty never reaches its full value")
            if not 0 < overlong.get("len", 0) <= max_resp:
                raise TrainConfigError(f"overlong_buffer_cfg.len ({overlong.get('len')}) must be in (0, {max_resp}]")
    filter_groups = cfg.algorithm.get("filter_groups") or {}
    if filter_groups.get("enable") and cfg.actor_rollout_ref.rollout.n < 2:
        raise TrainConfigError("algorithm.filter_groups needs rollout.n >= 2 (a group of one never has variance)")
