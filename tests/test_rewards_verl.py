"""Integration: this reward inside verl 0.9.1's own reward path, exactly as the trainer wires it.

The 0.9.1 trainer builds a ``RewardLoopManager`` whose Ray actors are ``RewardLoopWorker`` objects; each loads the
tokenizer and the reward manager from the composed ``ppo_trainer`` config (``reward.reward_manager.name=dapo`` selects
``verl.experimental.reward_loop.reward_manager.dapo.DAPORewardManager``) and scores one sample at a time. Here the
worker class runs in-process (no Ray) on a config composed from verl's real ``ppo_trainer.yaml``, with the real Qwen3
tokenizer, and the token-level ``rm_scores`` tensor is assembled the way the manager does it.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from conftest import qwen_tokenizer_dir

from refiner import formats
from refiner.calls import ToolCall
from rewards import make_ground_truth

pytestmark = pytest.mark.verl

MAX_RESP = 4096
BUFFER = 3072  # the paper: penalty grows linearly from 1024 to 4096 response tokens


def _compose(tokenizer_dir, variant: str):
    pytest.importorskip("verl")
    pytest.importorskip("hydra")
    import verl
    from hydra import compose, initialize_config_dir

    cfg_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[
                f"actor_rollout_ref.model.path={tokenizer_dir}",
                f"data.max_response_length={MAX_RESP}",
                "reward.reward_manager.name=dapo",
                "reward.custom_reward_function.path=pkg://rewards",
                "reward.custom_reward_function.name=compute_score",
                f"+reward.custom_reward_function.reward_kwargs.variant={variant}",
                "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
                f"+reward.reward_kwargs.overlong_buffer_cfg.len={BUFFER}",
                "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
                "+reward.reward_kwargs.overlong_buffer_cfg.log=true",
                f"+reward.reward_kwargs.max_resp_len={MAX_RESP}",
            ],
        )


def _batch(tokenizer, prompts: list[str], responses: list[str], non_tensor: dict):
    import numpy as np
    import torch
    from verl import DataProto

    p_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    r_ids = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in responses]
    P, R = max(map(len, p_ids)), max(map(len, r_ids))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    prompts_t = torch.full((len(prompts), P), pad, dtype=torch.long)
    resp_t = torch.full((len(prompts), R), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), P + R), dtype=torch.long)
    for i, (p, r) in enumerate(zip(p_ids, r_ids)):
        prompts_t[i, P - len(p) :] = torch.tensor(p)  # prompts left-padded, responses right-padded
        resp_t[i, : len(r)] = torch.tensor(r)
        mask[i, P - len(p) : P + len(r)] = 1
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts_t,
            "responses": resp_t,
            "input_ids": torch.cat([prompts_t, resp_t], dim=1),
            "attention_mask": mask,
        },
        non_tensors={k: np.array(v, dtype=object) for k, v in non_tensor.items()},
    )
    return data, [len(r) for r in r_ids]


def test_dapo_reward_loop_scores_with_overlong_penalty():
    tok_dir = qwen_tokenizer_dir()
    pytest.importorskip("verl")
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.experimental.reward_loop.reward_manager.dapo import DAPORewardManager

    h = formats.get("hermes")
    gold = [ToolCall("get_weather", {"city": "Paris", "days": 3}), ToolCall("convert", {"amount": 12, "to": "EUR"})]
    gt = make_ground_truth("hermes", gold, order_sensitive=False)
    right = h.render(gold)
    upstream = h.render([ToolCall("get_weather", {"city": "Paris", "days": "3"}), gold[1]])
    dup = h.render([gold[0], gold[0], gold[1]])
    think_short = "<think>\nThe days value must be an integer.\n</think>\n\n"
    filler = "<think>\n" + "Checking each parameter against the schema once more. " * 200 + "\n</think>\n\n"
    responses = [
        think_short + right,  # correct, short: 1.0
        filler + right,  # correct but long: overlong penalty on top
        think_short + upstream,  # unchanged upstream: not a regression, partial score
        think_short + h.render(gold[:1]),  # worse than upstream: penalised to 0
        think_short + right.replace("</tool_call>", "", 1),  # broken tags: content credit only
        think_short + dup,  # duplicate call: the strict variant (from reward_kwargs) costs it
    ]
    n = len(responses)

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        cfg = _compose(tok_dir, "strict")
        worker = RewardLoopWorker(cfg)
        assert isinstance(worker.reward_manager, DAPORewardManager)
        data, lengths = _batch(
            worker.input_tokenizer,
            ["<|im_start|>user\nFix these calls.<|im_end|>\n<|im_start|>assistant\n"] * n,
            responses,
            {
                "data_source": ["toy"] * n,
                "reward_model": [{"ground_truth": gt, "style": "rule"}] * n,
                "extra_info": [{"upstream": upstream, "index": i} for i in range(n)],
            },
        )
        outputs = loop.run_until_complete(worker.compute_score_batch(data))
    finally:
        loop.close()
        asyncio.set_event_loop(None)

    assert lengths[0] < 1024 < lengths[1] < MAX_RESP
    info = [o["reward_extra_info"] for o in outputs]
    scores = [o["reward_score"] for o in outputs]
    # every sample carries the same keys (verl builds its arrays from the first sample's keys)
    assert all(set(i) == set(info[0]) for i in info)
    assert {"score", "acc", "format", "tool_name", "penalized", "overlong_reward"} <= set(info[0])

    assert (info[0]["score"], info[0]["acc"], scores[0]) == (1.0, 1.0, 1.0)
    expected_overlong = -(lengths[1] - (MAX_RESP - BUFFER)) / BUFFER * 1.0
    assert info[1]["score"] == 1.0 and info[1]["acc"] == 1.0
    assert info[1]["overlong_reward"] == pytest.approx(expected_overlong)
    assert scores[1] == pytest.approx(1.0 + expected_overlong) and scores[1] < 1.0
    assert info[2]["penalized"] == 0.0 and 0.0 < scores[2] < 1.0 and info[2]["acc"] == 0.0
    assert info[3]["penalized"] == 1.0 and scores[3] == 0.0
    assert info[4]["format"] == 0.0 and info[4]["tool_name"] == 2.0 and 0.0 < scores[4] < 1.0
    assert info[5]["strict_variant"] == 1.0 and scores[5] < 1.0  # kwargs reached compute_score
    assert all(i["overlong_reward"] == 0.0 for k, i in enumerate(info) if k != 1)

    # the token-level reward tensor puts each score on the last valid response token
    rm = DAPORewardManager.assemble_rm_scores(data, scores)
    for i, L in enumerate(lengths):
        assert rm[i, L - 1].item() == pytest.approx(scores[i])
        assert rm[i].abs().sum().item() == pytest.approx(abs(scores[i]))
    # our own keys are plain floats (verl stacks them into numpy arrays for metrics)
    ours = {k: v for k, v in info[0].items() if not k.startswith("overlong")}
    json.dumps(ours)
    assert all(type(v) is float for v in ours.values())
