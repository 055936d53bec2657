"""A CPU rehearsal of the real trainer (test support; the project never imports this).

Runs, as a user would, each step of a training run at toy size on a CPU, every one through the ``tool-refiner`` CLI:

1. ``tool-refiner data build`` -- one Glaive record from the local public data, every error class the rule
   corruptor makes plus clean copies (16 rows, all with the same gold answer);
2. the tiny random Qwen3 of ``tests/tiny_qwen.py``, warmed up with transformers on that answer until a sampled
   answer is exactly right about :data:`TARGET_P` of the time (a random model is never right, so every group
   would have zero reward variance and verl's dynamic sampling -- which has no attempt cap in 0.9.1 -- would
   draw prompts forever);
3. ``tool-refiner train --profile cpu-rehearsal`` -- verl's own ``python -m verl.trainer.main_ppo`` with the recipe
   (``configs/verl/paper.yaml``), our reward (``rewards.compute_score``) and vLLM's CPU build, for
   ``trainer.total_training_steps`` DAPO steps, with the shims of ``verl_cpu_shims.py`` loaded through
   ``VERL_USE_EXTERNAL_MODULES``;
4. ``tool-refiner export`` of the last checkpoint and ``tool-refiner plot`` of the metrics file.

It writes ``summary.json`` (wall time, peak memory and process count of each step) into the output folder and
kills only the processes of its own run when it ends. ``tests/test_train_rehearsal.py`` runs it and checks the
result; ``scripts/rehearse_cpu.sh`` runs it by hand::

    python tests/support/cpu_rehearsal.py --out /tmp/rehearsal [--shared-data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).resolve().parent
ROOT = SUPPORT.parent.parent
PROFILE = "cpu-rehearsal"
# Chance that one sampled answer is exactly right after the warm start (the median over the training prompts of the
# answer's probability under the model). With 4 samples per prompt a group is all-right with p^4 ~ 0.52 at 0.85, so
# dynamic sampling visibly evicts groups, and keeps the mixed ones.
TARGET_P = 0.85
DATA_CONFIG = {
    "seed": 0,
    "corruptor": "rules",
    "sources": {"glaive": {"limit": 1}},
    "types": {
        "erroneous": {
            "sources": ["glaive"],
            "error_types": ["format", "name", "content"],
            "models": ["rules-a", "rules-b", "rules-c", "rules-d"],
            "per_source": 1,
        },
        "correct": {"sources": ["glaive"], "per_source": 4},
    },
    "split": {"validation": 0.2},
    "max_prompt_length": 4096,
    "reward_variant": "paper",
}


def shim_env(probe_file: Path) -> dict[str, str]:
    """What the launched trainer needs to load the shims (and nothing else changes)."""
    path = os.pathsep.join([str(ROOT), str(SUPPORT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {
        "PYTHONPATH": path,
        "VERL_USE_EXTERNAL_MODULES": "verl_cpu_shims",
        "VERL_PLATFORM": "cpu",
        # verl registers its FSDP engine for cuda/npu only (verl/workers/engine/fsdp/transformer_impl.py:1143);
        # verl's own switch picks it on any device (verl/workers/engine/base.py:405).
        "VERL_ENGINE_DEVICE": "cuda",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "REHEARSAL_PROBE_FILE": str(probe_file),
    }


# ----------------------------------------------------------------------------------------------------------------
# Running one step with its wall time, peak memory and process count


@dataclass
class Step:
    name: str
    command: list[str]
    returncode: int | None = None
    seconds: float = 0.0
    peak_rss_gb: float = 0.0  # sum of resident sets (counts shared pages once per process)
    peak_pss_gb: float = 0.0  # sum of proportional sets (shared pages split between their users): the real total
    peak_processes: int = 0
    peak_breakdown: list[str] = field(default_factory=list)  # the largest processes (PSS) at the peak
    log: str = ""
    leftovers_killed: list[int] = field(default_factory=list)


class TreeMonitor(threading.Thread):
    """Samples the process tree under one pid: peak total RSS and PSS and process count; remembers every process seen
    so that the ones still alive at the end (Ray, vLLM) can be killed by pid, and only those."""

    def __init__(self, pid: int, interval: float = 1.0):
        super().__init__(daemon=True)
        import psutil

        self.root = psutil.Process(pid)
        self.interval = interval
        self.seen: dict[int, float] = {}  # pid -> create_time
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_procs = 0
        self.peak_breakdown: list[str] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        import psutil

        while not self._stop_event.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                procs = []
            rss = pss = alive = 0
            sizes = []
            for p in procs:
                try:
                    self.seen.setdefault(p.pid, p.create_time())
                    mem = p.memory_full_info()
                    rss += mem.rss
                    pss += getattr(mem, "pss", mem.rss)
                    sizes.append((getattr(mem, "pss", mem.rss), p.name()))
                    alive += 1
                except psutil.Error:
                    continue
            self.peak_rss = max(self.peak_rss, rss)
            if pss > self.peak_pss:
                self.peak_pss = pss
                self.peak_breakdown = [
                    f"{name} {size / 2**30:.2f} GB" for size, name in sorted(sizes, reverse=True)[:8]
                ]
            self.peak_procs = max(self.peak_procs, alive)
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def kill_leftovers(self) -> list[int]:
        import psutil

        killed = []
        for pid, created in self.seen.items():
            try:
                p = psutil.Process(pid)
                if abs(p.create_time() - created) < 1e-3 and p.is_running():
                    p.kill()
                    killed.append(pid)
            except psutil.Error:
                continue
        return killed


def run_step(name: str, cmd: list[str], out: Path, *, env: dict[str, str] | None = None, timeout: float) -> Step:
    log = out / f"{name}.log"
    step = Step(name=name, command=cmd, log=str(log))
    t0 = time.monotonic()
    with log.open("w", encoding="utf-8") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=ROOT)
        mon = TreeMonitor(proc.pid)
        mon.start()
        try:
            step.returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            step.returncode = None
        finally:
            mon.stop()
            step.leftovers_killed = mon.kill_leftovers()
            proc.wait()
    step.seconds = round(time.monotonic() - t0, 1)
    step.peak_rss_gb = round(mon.peak_rss / 2**30, 2)
    step.peak_pss_gb = round(mon.peak_pss / 2**30, 2)
    step.peak_processes = mon.peak_procs
    step.peak_breakdown = mon.peak_breakdown
    return step


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "refiner.cli", *args]


def train_command(data: Path, model: Path | str, overrides: list[str]) -> list[str]:
    """``tool-refiner train`` on the rehearsal profile as a user runs it (no W&B, thinking off), plus ``overrides``."""
    return cli("train", "--profile", PROFILE, "--data", str(data), "--model", str(model), "--no-wandb",
               "--thinking", "off", *overrides)


# ----------------------------------------------------------------------------------------------------------------
# The warm start


BF16_EMULATED = 4  # bf16 this many times slower than float32: the CPU has no native bf16, torch emulates it


def bf16_slowdown() -> float:
    """How many times longer a bfloat16 matrix product takes than a float32 one here (about 1 where the CPU has
    native bf16, tens where torch emulates it)."""
    import torch

    a, b = torch.randn(256, 576), torch.randn(576, 576)
    took = {}
    for dtype in (torch.float32, torch.bfloat16):
        x, y = a.to(dtype), b.to(dtype)
        x @ y
        t = time.perf_counter()
        for _ in range(3):
            x @ y
        took[dtype] = time.perf_counter() - t
    return took[torch.bfloat16] / took[torch.float32]


def warm_start(
    model_dir: Path,
    data_dir: Path,
    out_dir: Path,
    *,
    target: float = TARGET_P,
    lr: float = 1e-2,
    batch_size: int = 4,
    max_steps: int = 200,
    min_steps: int = 10,
    eval_every: int = 2,
    eval_rows: int | None = None,
    max_prompt_tokens: int | None = None,
    train_last_layers: int | None = None,
    bf16: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Supervised steps on the training rows' gold answers (prompt as the trainer renders it, thinking off; loss on
    the answer and the end-of-turn token) until the median probability of the whole gold answer over ``eval_rows``
    training prompts reaches ``target`` -- the chance that one sampled answer is exactly right. Saves to
    ``out_dir``. ``train_last_layers`` trains only the last N decoder layers (and the final norm)."""
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    eos = model.generation_config.eos_token_id
    end = tok.convert_ids_to_tokens(eos[0] if isinstance(eos, list) else eos) if eos is not None else tok.eos_token
    examples = []
    for row in pq.read_table(data_dir / "train.parquet").to_pylist():
        prompt = tok.apply_chat_template(
            row["prompt"], add_generation_prompt=True, tokenize=False, enable_thinking=False
        )
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        if max_prompt_tokens and len(prompt_ids) > max_prompt_tokens:
            continue  # verl drops these too (data.filter_overlong_prompts)
        answer = json.loads(row["reward_model"]["ground_truth"])["answer"] + end
        examples.append((prompt_ids, tok(answer, add_special_tokens=False)["input_ids"]))
    if not examples:
        raise ValueError(f"{data_dir}: no training row fits {max_prompt_tokens} prompt tokens")
    probe = rng.sample(examples, min(eval_rows or len(examples), len(examples)))
    if train_last_layers is not None:
        model.requires_grad_(False)
        for layer in model.model.layers[-train_last_layers:]:
            layer.requires_grad_(True)
        model.model.norm.requires_grad_(True)

    def answer_logprob(prompt_ids: list[int], answer_ids: list[int]) -> torch.Tensor:
        ids = torch.tensor([prompt_ids + answer_ids])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            hidden = model.model(input_ids=ids).last_hidden_state[0, len(prompt_ids) - 1 : -1]
            logits = model.lm_head(hidden)
        logp = torch.log_softmax(logits.float(), -1)
        return logp.gather(-1, torch.tensor(answer_ids)[:, None]).sum()

    def median_p() -> float:
        model.eval()
        with torch.no_grad():
            ps = sorted(math.exp(answer_logprob(p, a).item()) for p, a in probe)
        model.train()
        return ps[len(ps) // 2]

    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    slower = bf16_slowdown() if bf16 else 1.0
    if slower > BF16_EMULATED:
        print(f"warm start: bf16 runs {slower:.0f}x slower than float32 on this CPU (no native bf16): expect hours, "
              "not minutes; a CPU with AVX-512 BF16 or AMX runs this protocol as documented", file=sys.stderr,
              flush=True)
    t0 = time.monotonic()
    history = []
    p, steps = 0.0, 0
    for steps in range(1, max_steps + 1):
        batch = rng.sample(examples, min(batch_size, len(examples)))
        loss = sum(-answer_logprob(pi, ai) for pi, ai in batch) / sum(len(ai) for _, ai in batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"warm start: step {steps}/{max_steps}, loss {loss.item():.3f}, "
              f"{(time.monotonic() - t0) / steps:.0f} s per step", file=sys.stderr, flush=True)
        if steps >= min_steps and steps % eval_every == 0:
            p = median_p()
            history.append((steps, round(p, 4)))
            print(
                f"warm start: step {steps}, median p(exact answer) {p:.3f} (target {target})",
                file=sys.stderr,
                flush=True,
            )
            if p >= target:
                break
    model.requires_grad_(True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    model.generation_config.save_pretrained(out_dir)
    return {
        "steps": steps,
        "median_p": round(p, 3),
        "history": history,
        "seconds": round(time.monotonic() - t0, 1),
        "examples": len(examples),
        "bf16_slowdown": round(slower, 1),
    }


# ----------------------------------------------------------------------------------------------------------------
# The rehearsal


def rehearse(
    out: str | Path,
    *,
    shared_data: str | Path,
    model: str | Path | None = None,
    extra: list[str] | None = None,
    timeout: float = 1800,
) -> dict[str, Any]:
    """Runs the four steps into ``out``; returns (and writes to ``out/summary.json``) what happened."""
    import yaml

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    shared = Path(shared_data).resolve()
    summary: dict[str, Any] = {"out": str(out), "profile": PROFILE, "steps": []}

    def record(step: Step) -> Step:
        summary["steps"].append(asdict(step))
        (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        if step.returncode != 0:
            tail = Path(step.log).read_text(encoding="utf-8", errors="replace")[-4000:]
            raise RuntimeError(f"rehearsal step {step.name!r} failed (exit {step.returncode}); log {step.log}:\n{tail}")
        return step

    # 1. data
    data = out / "data"
    cfg = out / "rehearsal-data.yaml"
    cfg.write_text(yaml.safe_dump(DATA_CONFIG, sort_keys=False), encoding="utf-8")
    record(
        run_step(
            "data",
            cli(
                "data",
                "build",
                "-c",
                str(cfg),
                "--out",
                str(data),
                "--source-path",
                f"glaive={shared / 'glaive_demo'}",
                "-q",
            ),
            out,
            timeout=600,
        )
    )

    # 2. model
    if model is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from tiny_qwen import make_tiny_qwen3

        tiny = make_tiny_qwen3(out / "tiny-qwen3")
        model = out / "model"
        if not (model / "config.json").is_file():
            summary["warm_start"] = warm_start(tiny, data, model, eval_every=4)
    model = Path(model)

    # 3. train: verl's main_ppo through the CLI, shims loaded by environment only
    ckpt = out / "ckpt"
    probe = out / "probe.jsonl"
    probe.unlink(missing_ok=True)
    overrides = [f"trainer.default_local_dir={ckpt}", f"trainer.rollout_data_dir={out / 'rollouts'}", *(extra or [])]
    train = train_command(data, model, overrides)
    record(run_step("train", train, out, env=shim_env(probe), timeout=timeout))

    # 4. export + plot, as a user runs them (no shims)
    record(run_step("export", cli("export", str(ckpt), "--out", str(out / "hf")), out, timeout=900))
    record(
        run_step("plot", cli("plot", str(ckpt / "metrics.jsonl"), "--out", str(out / "curves.png")), out, timeout=300)
    )
    summary["seconds"] = round(
        sum(s["seconds"] for s in summary["steps"]) + summary.get("warm_start", {}).get("seconds", 0), 1
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="Output folder (data, model, checkpoints, logs, summary.json).")
    ap.add_argument(
        "--shared-data", default=os.environ.get("TOOL_REFINER_SHARED_DATA", str(ROOT.parent / "shared" / "data"))
    )
    ap.add_argument("--model", default=None, help="A model folder to train instead of the warmed-up tiny Qwen3.")
    ap.add_argument("--timeout", type=float, default=1800, help="Seconds before the training step is stopped.")
    ap.add_argument("overrides", nargs="*", help="Extra verl overrides, key=value.")
    args = ap.parse_args(argv)
    summary = rehearse(
        args.out, shared_data=args.shared_data, model=args.model, extra=args.overrides, timeout=args.timeout
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
