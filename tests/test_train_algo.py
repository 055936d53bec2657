"""verl 0.9.1's own DAPO pieces, run on CPU on rewards from our compute_score for real rows: GRPO advantages, the
vanilla policy loss with the recipe's decoupled clip and token-mean aggregation, the DAPO reward manager's overlong
penalty, and which groups dynamic sampling drops."""

# ruff: noqa: F811  (fixtures imported from test_train_rows are redefined as test arguments)

from __future__ import annotations

import json

import numpy as np
import pytest
from test_train_rows import built_dir, rl_rows  # noqa: F401  (fixtures)

from refiner.train.recipe import DEFAULT_RECIPE, load_recipe, plan_overrides
from refiner.train.verl_config import compose_verl_config

torch = pytest.importorskip("torch")

pytest.importorskip("verl")
pytestmark = pytest.mark.verl

N = 4  # responses per prompt in these tests


@pytest.fixture(scope="module")
def cfg():
    recipe = load_recipe(DEFAULT_RECIPE)
    ov = plan_overrides(recipe, train_files="/d/train.parquet", val_files="/d/val.parquet")
    return compose_verl_config(ov, recipe.base)


@pytest.fixture(scope="module")
def actor_cfg(cfg):
    from verl.utils.config import omega_conf_to_dataclass

    return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)


def group_responses(row: dict) -> dict[str, list[str]]:
    """Three kinds of groups of N responses for one prompt: all right, all wrong, and mixed."""
    answer = json.loads(row["reward_model"]["ground_truth"])["answer"]
    upstream = row["extra_info"]["upstream"]
    return {
        "allright": [f"<think>fine</think>{answer}"] * N,
        "allwrong": ["no calls here", upstream, "<tool_call>{broken", upstream],
        "mixed": [answer, upstream, answer, "nothing"],
    }


@pytest.fixture(scope="module")
def scored(rl_rows):
    """``(uids, texts, results)`` for 3 prompts x 3 group kinds x N responses, scored by our compute_score."""
    from rewards import compute_score

    uids, texts, results = [], [], []
    corrupted = [r for r in rl_rows if r["extra_info"].get("label", "corrupted") == "corrupted"]
    for p, row in enumerate(corrupted[:3]):
        for kind, responses in group_responses(row).items():
            for text in responses:
                uids.append(f"p{p}-{kind}")
                texts.append(text)
                results.append(
                    compute_score(
                        row["data_source"],
                        text,
                        row["reward_model"]["ground_truth"],
                        row["extra_info"],
                        variant="paper",
                    )
                )
    return uids, texts, results


def token_level(scores: list[float], lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(lengths)
    rewards = torch.zeros(len(scores), width)
    mask = torch.zeros(len(scores), width)
    for i, (s, n) in enumerate(zip(scores, lengths)):
        mask[i, :n] = 1
        rewards[i, n - 1] = s
    return rewards, mask


def test_grpo_advantages_are_zero_exactly_for_groups_dynamic_sampling_drops(scored):
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    uids, texts, results = scored
    scores = [r["score"] for r in results]
    lengths = [max(1, len(t) // 4) for t in texts]
    rewards, mask = token_level(scores, lengths)
    adv, _ = compute_grpo_outcome_advantage(rewards, mask, np.array(uids, dtype=object))
    per_seq = (adv * mask).sum(-1) / mask.sum(-1)
    by_group: dict[str, list[int]] = {}
    for i, u in enumerate(uids):
        by_group.setdefault(u, []).append(i)
    zero_var = {u for u, idx in by_group.items() if np.std([results[i]["acc"] for i in idx]) == 0}
    assert zero_var == {f"p{p}-{k}" for p in range(3) for k in ("allright", "allwrong")}
    for u, idx in by_group.items():
        if u.endswith("allright"):
            assert torch.all(per_seq[idx] == 0), u  # no learning signal
        if u.endswith("mixed"):
            right = [i for i in idx if results[i]["acc"] == 1.0]
            wrong = [i for i in idx if results[i]["acc"] == 0.0]
            assert right and wrong
            # right answers get the group's highest advantage; partial credit can still sit above the mean
            assert per_seq[right].min() > per_seq[wrong].max() and torch.all(per_seq[right] > 0), u
            s = torch.tensor([scores[i] for i in idx])
            assert torch.allclose(per_seq[idx], (s - s.mean()) / (s.std() + 1e-6), atol=1e-5)
        # the advantage is constant over each response's tokens (outcome reward)
        for i in idx:
            vals = adv[i][mask[i] == 1]
            assert torch.allclose(vals, vals[0].expand_as(vals))


def test_verl_replay_buffer_drops_the_zero_variance_acc_groups(scored, monkeypatch):
    """verl's own DAPO filter (ReplayBuffer._dapo_filtered_keys, metric=acc) on our reward extra info."""
    pytest.importorskip("transfer_queue")  # verl's V1 trainer dependencies (not pulled by verl --no-deps)
    pytest.importorskip("peft")
    from verl.trainer.ppo.v1 import replay_buffer as rb_mod

    uids, _, results = scored
    keys = [f"{u}_{i % N}_0" for i, u in enumerate(uids)]
    store = {k: {"reward_extra_info": r} for k, r in zip(keys, results)}

    def kv_batch_get(keys, partition_id, select_fields):
        assert select_fields == ["extra_fields"]
        return {"extra_fields": [store[k] for k in keys]}

    monkeypatch.setattr(rb_mod.tq, "kv_batch_get", kv_batch_get)
    rb = rb_mod.ReplayBuffer(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        refill_fn=lambda n: None,
        filter_groups_metric="acc",
        train_batch_size=16,
        gen_batch_size=1,
    )
    rb.finished_keys["train"] = set(uids)
    rb.partitions["train"] = {k: {} for k in keys}
    dropped, counts = rb._dapo_filtered_keys("train")
    assert dropped == {f"p{p}-{k}" for p in range(3) for k in ("allright", "allwrong")}
    assert counts == {1.0: 3, 0.0: 3}


def test_policy_loss_uses_the_decoupled_clip(actor_cfg):
    """ratio above 1 + 0.28 is clipped for A > 0; below 1 - 0.2 for A < 0; in between it is not."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    loss_fn = get_policy_loss_fn("vanilla")
    assert (actor_cfg.clip_ratio_low, actor_cfg.clip_ratio_high) == (0.2, 0.28)
    cases = [  # (advantage, ratio, expected per-token loss, gradient flows)
        (1.0, 1.25, -1.25, True),  # inside the raised upper bound (a symmetric 0.2 clip would stop at 1.2)
        (1.0, 1.50, -1.28, False),  # clipped at 1 + clip_ratio_high
        (-1.0, 0.90, 0.90, True),
        (-1.0, 0.50, 0.80, False),  # clipped at 1 - clip_ratio_low
    ]
    for adv, ratio, expected, grad_flows in cases:
        old = torch.zeros(1, 1)
        new = torch.full((1, 1), float(np.log(ratio)), requires_grad=True)
        loss, metrics = loss_fn(old, new, torch.full((1, 1), adv), torch.ones(1, 1), "token-mean", actor_cfg)
        assert loss.item() == pytest.approx(expected, abs=1e-5), (adv, ratio)
        loss.backward()
        assert (abs(new.grad.item()) > 0) == grad_flows, (adv, ratio)
        assert metrics["actor/pg_clipfrac"] == (0.0 if grad_flows else 1.0)


def test_policy_loss_is_token_mean_over_the_batch(actor_cfg):
    """A 1-token response with A=-1 and a 3-token response with A=+1: token-mean weighs tokens, not responses."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    assert actor_cfg.loss_agg_mode == "token-mean"
    mask = torch.tensor([[1.0, 0, 0], [1, 1, 1]])
    adv = torch.tensor([[-1.0, 0, 0], [1, 1, 1]])
    zeros = torch.zeros(2, 3)
    loss, _ = get_policy_loss_fn("vanilla")(zeros, zeros, adv, mask, actor_cfg.loss_agg_mode, actor_cfg)
    assert loss.item() == pytest.approx((1 * 1 - 1 * 3) / 4)  # -0.5 (per-token loss is -A at ratio 1)
    seq_mean, _ = get_policy_loss_fn("vanilla")(zeros, zeros, adv, mask, "seq-mean-token-mean", actor_cfg)
    assert seq_mean.item() == pytest.approx(0.0)  # what a per-response average would have given


def test_dapo_reward_manager_applies_the_overlong_penalty(cfg, rl_rows, tiny_qwen3_dir):
    """verl's DAPO reward manager, loaded from the composed config with our compute_score: penalty 0 up to 1,024
    response tokens, then linear to -1 at 4,096; reward components pass through as extra info."""
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    tok = AutoTokenizer.from_pretrained(tiny_qwen3_dir)
    manager = load_reward_manager(cfg, tok)
    assert type(manager).__name__ == "DAPORewardManager"
    row = next(r for r in rl_rows if decodes_unchanged(tok, json.loads(r["reward_model"]["ground_truth"])["answer"]))
    answer = json.loads(row["reward_model"]["ground_truth"])["answer"]
    answer_ids = tok(answer, add_special_tokens=False)["input_ids"]
    filler = tok("\n", add_special_tokens=False)["input_ids"][0]
    width = cfg.data.max_response_length
    out = {}
    for length in (len(answer_ids), 1024, 2560, 4096):
        ids = torch.full((1, width), tok.pad_token_id)
        ids[0, : len(answer_ids)] = torch.tensor(answer_ids)
        ids[0, len(answer_ids) : length] = filler
        prompt = torch.full((1, 8), filler)
        attn = torch.cat([torch.ones(1, 8), (torch.arange(width) < length).float()[None]], dim=1).long()
        data = DataProto.from_dict(
            tensors={"prompts": prompt, "responses": ids, "attention_mask": attn},
            non_tensors={
                "data_source": np.array([row["data_source"]], dtype=object),
                "reward_model": np.array([row["reward_model"]], dtype=object),
                "extra_info": np.array([row["extra_info"]], dtype=object),
            },
        )
        out[length] = manager.loop.run_until_complete(manager.run_single(data))
    short = out[len(answer_ids)]
    assert short["reward_score"] == 1.0 and short["reward_extra_info"]["acc"] == 1.0
    assert {"format", "tool_name", "param_name", "param_content"} <= set(short["reward_extra_info"])
    penalties = {n: float(r["reward_extra_info"]["overlong_reward"]) for n, r in out.items()}
    assert penalties[1024] == 0.0 and penalties[len(answer_ids)] == 0.0
    assert penalties[2560] == pytest.approx(-0.5)
    assert penalties[4096] == pytest.approx(-1.0)
    assert float(out[4096]["reward_score"]) == pytest.approx(out[4096]["reward_extra_info"]["score"] - 1.0)


def decodes_unchanged(tok, text: str) -> bool:
    """Whether ``text`` survives verl's decode of the response ids (``skip_special_tokens=True``)."""
    return tok.decode(tok(text, add_special_tokens=False)["input_ids"], skip_special_tokens=True) == text


def test_every_gold_answer_scores_perfectly_after_verl_decoding(rl_rows, tiny_qwen3_dir):
    from transformers import AutoTokenizer

    from rewards import compute_score

    tok = AutoTokenizer.from_pretrained(tiny_qwen3_dir)
    bad = {}
    for row in rl_rows:
        gt = row["reward_model"]["ground_truth"]
        answer = json.loads(gt)["answer"]
        decoded = tok.decode(tok(answer, add_special_tokens=False)["input_ids"], skip_special_tokens=True)
        result = compute_score(row["data_source"], decoded, gt, row["extra_info"])
        if result["acc"] != 1.0:
            bad.setdefault(json.loads(gt)["format"], result["score"])
    assert bad == {}
