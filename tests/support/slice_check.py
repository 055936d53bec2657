"""Does DAPO teach the refiner what tier 1 leaves? SmolLM2-135M-Instruct on the ``left_to_model`` slice (test
support, run by hand through ``scripts/slice_check.sh``; a tiny version runs in the slow suite).

Every step goes through the ``tool-refiner`` CLI, as in ``learning_check.py`` (whose model conversion, warm start
and training sizes it reuses):

1. ``tool-refiner data build -c configs/data/left-to-model.yaml``: one class at a time of the rule corruptor's
   ``left_to_model`` group (a parameter name in another case convention, a number written as text, a value in a
   one-item list, an undeclared parameter, a required value the request states dropped, a value the request states
   altered) plus clean copies, from the real rows of ToolACE, xLAM, NesTools and Glaive in ``../shared/data``, split
   by source record into train / validation / test;
2. the warm start (transformers, on the training rows' gold answers only);
3. ``tool-refiner train --profile cpu-rehearsal --reward strict`` for ``--steps`` DAPO steps (validation on the
   validation split; the test split is never given to the trainer);
4. ``tool-refiner plot``;
5. the judgement (:func:`judge`), each configuration in its own process: per class on the held-out test, the raw
   upstream, tier 1 alone (``Refiner(engine=None)``), and ``Refiner`` with the warm-start model and with the DAPO
   model (vLLM's CPU engine), greedy and sampled (4 answers at 0.7, best of N by gate and vote), with the model run
   on every request (``bypass=False``: otherwise a call that passes the gate, such as a wrongly copied value, never
   reaches the model) and with the default bypass; how often the never-worse guard falls back.

    python tests/support/slice_check.py --out /tmp/slice --steps 30                  # data, warm start, train, plot
    python tests/support/slice_check.py --judge /tmp/slice [--split test] [--limit N] # the table (JSON + Markdown)
    python tests/support/slice_check.py --tier1 DATA_DIR [--split test]              # tier 1 alone, per class
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_rehearsal import ROOT, Step, cli, run_step, shim_env, train_command, warm_start
from learning_check import checkpoint_to_hf, smollm2_hf, smollm2_overrides

DATA_CONFIG = ROOT / "configs" / "data" / "left-to-model.yaml"
SOURCE_PATHS = {  # source -> path under ../shared/data
    "toolace": "toolace_real",
    "xlam": "xlam_real",
    "nestools": "nestools/test_data.jsonl",
    "glaive": "glaive_demo",
}
# SmolLM2 tokens; verl drops longer training prompts, and judge() leaves them out everywhere. 640 keeps Glaive's and
# xLAM's prompts and a few of ToolACE's (NesTools' system prompts are all longer): what 2 shared cores can train.
MAX_PROMPT = 640
MAX_RESPONSE = 128  # every gold answer of a prompt that fits (the longest is 121 tokens)
OVERRIDES = smollm2_overrides(MAX_PROMPT, MAX_RESPONSE, 32, test_freq=10, name="slice-check-smollm2")
BASE = "smollm2-135m-instruct"  # the model before the warm start, under the run's folder (its tokenizer too)
TITLE = "SmolLM2-135M-Instruct, what tier 1 leaves, DAPO on CPU"


def source_args(shared_data: str | Path) -> list[str]:
    shared = Path(shared_data).resolve()
    return [a for name, rel in SOURCE_PATHS.items() for a in ("--source-path", f"{name}={shared / rel}")]


# ---------------------------------------------------------------------------------------------------------------
# The held-out rows as pipeline requests


def row_class(row: dict[str, Any]) -> str:
    classes = row["extra_info"]["error_classes"]
    return classes[0] if len(classes) else "clean"


def load_rows(data_dir: str | Path, split: str, *, max_prompt: int | None = MAX_PROMPT,
              tokenizer: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """The rows of ``split`` whose prompt fits ``max_prompt`` tokens of ``tokenizer`` (what the trainer keeps)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(Path(data_dir) / f"{split}.parquet").to_pylist()
    if max_prompt and tokenizer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer)

        def length(row: dict[str, Any]) -> int:
            text = tok.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
            return len(tok(text, add_special_tokens=False)["input_ids"])

        rows = [r for r in rows if length(r) <= max_prompt]
    rows.sort(key=lambda r: r["extra_info"]["index"])
    return rows[:limit] if limit else rows


def requests_for(rows: list[dict[str, Any]], shared_data: str | Path) -> list[dict[str, Any]]:
    """Each row as a ``Refiner`` request: the source record's tools, system prompt and request (read again with the
    builder's loaders), the row's upstream and format. Checks that the pipeline's model prompt is the row's prompt,
    so the model is judged on the prompt it was trained on."""
    from data_gen import sources
    from refiner.pipeline import model_messages, prepare

    shared = Path(shared_data).resolve()
    wanted = {r["extra_info"]["source"] for r in rows}
    index = {}
    for name in wanted:
        for s in sources.load(name, shared / SOURCE_PATHS[name], progress=False):
            index[(name, str(s.record_id))] = s
    out = []
    for r in rows:
        info = r["extra_info"]
        s = index[(info["source"], str(info["record_id"]))]
        req = {"tools": s.tools, "system": s.system, "query": s.query, "upstream": info["upstream"],
               "format": info["format"]}
        shown = model_messages(prepare(req, None))
        if shown != list(r["prompt"]):
            raise AssertionError(f"row {info['index']}: the pipeline's model prompt differs from the training prompt")
        out.append(req)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Judging


def exact(text: str, row: dict[str, Any]) -> bool:
    from rewards import compute_score

    gt = row["reward_model"]["ground_truth"]
    return bool(compute_score(row["data_source"], text, gt, variant="strict")["acc"])


def per_class(rows: list[dict[str, Any]], texts: list[str], stages: list[str] | None = None) -> dict[str, Any]:
    """Exact answers per class (``compute_score``'s ``acc``: strict parse in the row's format equals the gold) and, for
    pipeline results, the stages per class; ``prompts`` holds each prompt's result."""
    hits: dict[str, list[int]] = defaultdict(list)
    st: dict[str, Counter] = defaultdict(Counter)
    prompts = []
    for k, (row, text) in enumerate(zip(rows, texts)):
        c = row_class(row)
        hit = int(exact(text, row))
        hits[c].append(hit)
        prompts.append({"index": row["extra_info"]["index"], "class": c, "exact": hit})
        if stages is not None:
            st[c][stages[k]] += 1
            st["all"][stages[k]] += 1
            prompts[-1]["stage"] = stages[k]
    out = {c: {"n": len(h), "exact": sum(h)} for c, h in sorted(hits.items())}
    out["all"] = {"n": len(rows), "exact": sum(sum(h) for h in hits.values())}
    if stages is not None:
        for c, cell in out.items():
            cell["stages"] = dict(st[c])
    out["prompts"] = prompts
    return out


def run_config(name: str, rows: list[dict[str, Any]], requests: list[dict[str, Any]], *, model: str | None = None,
               n: int = 1, bypass: bool = True, seed: int = 0) -> dict[str, Any]:
    """One configuration of the table: ``upstream`` (the raw text), ``tier1`` or a model (``Refiner`` over vLLM)."""
    from refiner.pipeline import Refiner

    if name == "upstream":
        return per_class(rows, [q["upstream"] for q in requests])
    engine = None
    if model is not None:
        from refiner.engines import make_engine

        engine = make_engine("vllm", model=model, dtype="float32", max_model_len=MAX_PROMPT + MAX_RESPONSE + 64,
                             seed=seed, in_process=True, cpu_kvcache_gib=2, use_tqdm=False)
    refiner = Refiner(engine=engine, n=n, bypass=bypass, max_tokens=MAX_RESPONSE, seed=seed, thinking=False)
    results = refiner.refine_batch(requests, errors="result")
    out = per_class(rows, [r.get("refined", r["upstream"]) for r in results], [r["stage"] for r in results])
    out["model_errors"] = sum("model_error" in r for r in results)
    return out


CONFIGS = {  # name -> (model key, n, bypass)
    "upstream": (None, 1, True),
    "tier1": (None, 1, True),
    "warm/greedy": ("warm", 1, False),
    "dapo/greedy": ("dapo", 1, False),
    "warm/sampled": ("warm", 4, False),
    "dapo/sampled": ("dapo", 4, False),
    "warm/greedy/bypass": ("warm", 1, True),
    "dapo/greedy/bypass": ("dapo", 1, True),
}


def judge(out: str | Path, *, shared_data: str | Path, split: str = "test", limit: int | None = None,
          configs: list[str] | None = None, timeout: float = 3600, seed: int = 0) -> dict[str, Any]:
    """The table: every configuration on ``split``, each model in its own process (one vLLM engine at a time); writes
    ``judge-<split>.json`` and ``judge-<split>.md`` under ``out``."""
    out = Path(out).resolve()
    names = configs or list(CONFIGS)
    if any(CONFIGS[n][0] == "dapo" for n in names) and not (out / "dapo-hf" / "config.json").is_file():
        checkpoint_to_hf(out / "ckpt", out / "model", out / "dapo-hf")  # the last checkpoint, float32
    table: dict[str, Any] = {}
    path = out / f"judge-{split}.json"
    if path.is_file():
        table = json.loads(path.read_text(encoding="utf-8"))
    for name in names:
        if name in table:
            continue
        if CONFIGS[name][0] is None:  # no model: no engine to keep apart
            table[name] = one(out, name, shared_data=shared_data, split=split, limit=limit)
            continue
        cmd = [sys.executable, __file__, "--one", str(out), name, "--split", split, "--shared-data", str(shared_data),
               "--seed", str(seed)]
        if limit:
            cmd += ["--limit", str(limit)]
        proc = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
                                  "PYTHONPATH", "")])})
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        table[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        path.write_text(json.dumps(table, indent=2), encoding="utf-8")
    (out / f"judge-{split}.md").write_text(markdown(table), encoding="utf-8")
    plot_classes(table, out / f"judge-{split}.png")
    return table


def one(out: Path, name: str, *, shared_data: str | Path, split: str, limit: int | None,
        seed: int = 0) -> dict[str, Any]:
    key, n, bypass = CONFIGS[name]
    model = None if key is None else str(out / ("model" if key == "warm" else "dapo-hf"))
    rows = load_rows(out / "data", split, tokenizer=str(out / BASE), limit=limit)
    return run_config(name.split("/")[0], rows, requests_for(rows, shared_data), model=model, n=n, bypass=bypass,
                      seed=seed)


def pct(cell: dict[str, int]) -> str:
    return f"{100 * cell['exact'] / cell['n']:.0f}% ({cell['exact']}/{cell['n']})" if cell["n"] else "-"


def markdown(table: dict[str, Any]) -> str:
    """Rows: classes; columns: configurations (exact answers), then the guard's fallbacks per model configuration."""
    names = [n for n in CONFIGS if n in table]
    classes = [c for c in next(iter(table.values())) if isinstance(table[names[0]][c], dict)] if names else []
    classes = sorted(c for c in classes if c != "all") + ["all"]
    lines = ["| class | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for c in classes:
        lines.append(f"| {c} | " + " | ".join(pct(table[n][c]) for n in names) + " |")
    model_names = [n for n in names if CONFIGS[n][0]]
    if model_names:
        lines += ["", "| never-worse guard (all classes) | " + " | ".join(model_names) + " |",
                  "|---" * (len(model_names) + 1) + "|"]
        for stage in ("model", "unchanged", "repaired", "fallback"):
            lines.append(f"| {stage} | " + " | ".join(str(table[n]["all"]["stages"].get(stage, 0))
                                                      for n in model_names) + " |")
    return "\n".join(lines) + "\n"


def plot_classes(table: dict[str, Any], out: str | Path, *, title: str = TITLE,
                 names: tuple[str, ...] = ("tier1", "warm/greedy", "dapo/greedy")) -> Path:
    """Exact answers per class on the held-out test, one bar per configuration in ``names`` that the table has."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = tuple(n for n in names if n in table)
    classes = sorted(c for c, cell in table[names[0]].items() if isinstance(cell, dict) and c != "all") + ["all"]
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        ys = [100 * table[name][c]["exact"] / table[name][c]["n"] for c in classes]
        ax.bar([i + k * width for i in range(len(classes))], ys, width, label=name)
    ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(classes))])
    ax.set_xticklabels([f"{c} ({table[names[0]][c]['n']})" for c in classes], fontsize=7, rotation=20, ha="right")
    ax.set_ylabel("% exact on the held-out test")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return Path(out)


# ---------------------------------------------------------------------------------------------------------------
# The run


def slice_check(out: str | Path, *, shared_data: str | Path, steps: int, target: float, timeout: float,
                extra: list[str] | None = None, warm_max_steps: int = 40, warm_min_steps: int = 8,
                warm_eval_every: int = 8, warm_eval_rows: int = 6, seed: int = 0, bf16: bool = True) -> dict[str, Any]:
    """Data, warm start, ``steps`` DAPO steps and the plot under ``out``. Each stage is skipped when its output is
    there, and the trainer resumes from its last saved step: run it again after an interruption. ``seed`` sets the
    warm start's shuffle and initialisation, the trainer's data order and the rollout's sampling."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    summary_path = out / "summary.json"
    summary: dict[str, Any] = {"out": str(out), "seed": seed, "steps": []}
    if summary_path.is_file():  # a resumed run keeps what its first part recorded
        summary = {**json.loads(summary_path.read_text(encoding="utf-8")), "steps": []}

    def record(step: Step) -> None:
        summary["steps"].append(step.__dict__)
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
        if step.returncode != 0:
            raise RuntimeError(f"step {step.name!r} failed (exit {step.returncode}); see {step.log}")

    data = out / "data"
    if not (data / "train.parquet").is_file():
        record(run_step("data", cli("data", "build", "-c", str(DATA_CONFIG), "--out", str(data),
                                    *source_args(shared_data), "-q"), out, timeout=600))
    base = smollm2_hf(out / BASE)
    model = out / "model"
    if not (model / "config.json").is_file():
        import torch

        threads = torch.get_num_threads()
        if os.cpu_count() and os.getloadavg()[0] > os.cpu_count():
            torch.set_num_threads(1)  # a busy machine: OpenMP threads waiting on each other cost more than they give
        summary["warm_start"] = warm_start(base, data, model, target=target, lr=2e-4, batch_size=2,
                                           max_steps=warm_max_steps, min_steps=warm_min_steps,
                                           eval_every=warm_eval_every, eval_rows=warm_eval_rows,
                                           max_prompt_tokens=MAX_PROMPT, bf16=bf16, seed=seed)
        torch.set_num_threads(threads)
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    ckpt = out / "ckpt"
    last = ckpt / "latest_checkpointed_iteration.txt"
    if not (last.is_file() and int(last.read_text().strip() or 0) >= steps):
        train = train_command(data, model, ["--reward", "strict", f"trainer.default_local_dir={ckpt}",
                                            f"trainer.total_training_steps={steps}", f"trainer.save_freq={SAVE_EVERY}",
                                            f"data.seed={seed}", f"actor_rollout_ref.rollout.seed={seed}",
                                            *OVERRIDES, *(extra or [])])
        record(run_step("train", train, out, env=shim_env(out / "probe.jsonl"), timeout=timeout))
    record(run_step("plot", cli("plot", str(ckpt / "metrics.jsonl"), "--out", str(out / "curves.png"),
                                "--title", TITLE), out, timeout=300))
    return summary


SAVE_EVERY = 5  # DAPO steps between checkpoints: what an interrupted run loses at most


TINY_OVERRIDES = [  # one step, no validation; dynamic sampling off so that a step ends whatever the rewards
    "algorithm.filter_groups.enable=false",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=1",
]
TINY_CONFIGS = ["upstream", "tier1", "warm/greedy", "dapo/greedy"]


def tiny(out: str | Path, *, shared_data: str | Path, limit: int = 4, timeout: float = 1800) -> dict[str, Any]:
    """The whole path at the smallest size, so that it cannot rot (the slow test suite runs it): the slice, 2 warm
    start steps, 1 DAPO step, the checkpoint as a Hugging Face folder, and the judgement of ``limit`` test prompts
    through the pipeline with tier 1, the warm start and the DAPO model. Checks plumbing, not learning."""
    summary = slice_check(out, shared_data=shared_data, steps=1, target=1.1, timeout=timeout, extra=TINY_OVERRIDES,
                          warm_max_steps=2, warm_min_steps=2, warm_eval_every=2, warm_eval_rows=2,
                          bf16=False)  # plumbing only: float32 runs at full speed on a CPU without native bf16
    summary["judge"] = judge(out, shared_data=shared_data, limit=limit, configs=TINY_CONFIGS, timeout=timeout)
    (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return summary


# ---------------------------------------------------------------------------------------------------------------
# Several seeds: the same protocol, then the comparison pooled over seeds

SEED_CONFIGS = ["upstream", "tier1", "warm/greedy", "warm/sampled", "dapo/greedy", "dapo/sampled"]
PAIRS = [("dapo/greedy", "warm/greedy"), ("dapo/sampled", "warm/sampled")]


def seeds(out: str | Path, *, shared_data: str | Path, steps: int, n: int, target: float, timeout: float,
          extra: list[str] | None = None, only: list[int] | None = None) -> dict[str, Any]:
    """Seeds ``0..n-1`` of the protocol (``only``: just these) under ``out/seed-K``, on one slice and one base
    model, each judged on the test split once it is trained; then :func:`collect` and :func:`report` write
    ``out/prompts.jsonl``, ``out/metrics-seed-K.jsonl``, ``out/seeds.md`` and ``out/seeds.png``. Finished stages
    are skipped, so the same command resumes an interrupted run; seeds run elsewhere join the report when their
    ``prompts.jsonl`` lines and ``metrics-seed-K.jsonl`` are in ``out``."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    first = out / "seed-0"
    for k in range(n) if only is None else only:
        run = out / f"seed-{k}"
        run.mkdir(exist_ok=True)
        if k:  # seed 0 builds the slice and converts the base model; the others link to them when it has
            for name in ("data", BASE):
                link = run / name
                if not link.exists() and not link.is_symlink() and (first / name).exists():
                    link.symlink_to(Path("..") / "seed-0" / name)
        slice_check(run, shared_data=shared_data, steps=steps, target=target, timeout=timeout, extra=extra, seed=k)
        judge(run, shared_data=shared_data, configs=SEED_CONFIGS, timeout=timeout, seed=k)
        collect(out)
        print(f"seed {k} of {n} done: {run}", file=sys.stderr, flush=True)
    return report(out)


def collect(out: str | Path) -> None:
    """The finished seeds' per-prompt results as ``out/prompts.jsonl`` (one line per seed, configuration and prompt)
    and their training logs as ``out/metrics-seed-K.jsonl``: all that :func:`report` reads. Lines already there of
    a seed with no finished folder here (a seed run elsewhere) are kept."""
    out = Path(out)
    path = out / "prompts.jsonl"
    here = {int(run.name.split("-")[1]) for run in out.glob("seed-*") if (run / "judge-test.json").is_file()}
    lines = [line for line in (path.read_text(encoding="utf-8").splitlines() if path.is_file() else [])
             if line and json.loads(line)["seed"] not in here]
    for run in sorted(out.glob("seed-*"), key=lambda p: int(p.name.split("-")[1])):
        table_path, log = run / "judge-test.json", run / "ckpt" / "metrics.jsonl"
        if not table_path.is_file():
            continue
        k = int(run.name.split("-")[1])
        table = json.loads(table_path.read_text(encoding="utf-8"))
        for name in SEED_CONFIGS:
            for rec in table.get(name, {}).get("prompts", []):
                lines.append(json.dumps({"seed": k, "config": name, **rec}))
        if log.is_file():
            (out / f"metrics-seed-{k}.jsonl").write_text(log.read_text(encoding="utf-8"), encoding="utf-8")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test (McNemar's exact test) on the discordant pairs: the chance of a split at least this
    uneven if either side were as likely to win."""
    m = wins + losses
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(wins, losses) + 1)) / 2**m
    return min(1.0, 2 * tail)


def report(src: str | Path) -> dict[str, Any]:
    """From ``src/prompts.jsonl`` and ``src/metrics-seed-K.jsonl`` alone (no model, no data): per class and overall,
    each configuration's exact-answer rate as mean and range over seeds; the paired test per prompt of DAPO against
    its own warm start, pooled over seeds; the reward and validation curves of every seed. Writes ``src/seeds.md``
    and ``src/seeds.png``."""
    src = Path(src)
    recs = [json.loads(line) for line in (src / "prompts.jsonl").read_text(encoding="utf-8").splitlines() if line]
    if not recs:
        raise ValueError(f"{src / 'prompts.jsonl'}: no results")
    seed_ids = sorted({r["seed"] for r in recs})
    names = [n for n in SEED_CONFIGS if any(r["config"] == n for r in recs)]
    classes = sorted({r["class"] for r in recs}) + ["all"]
    rate: dict[tuple[str, str, int], tuple[int, int]] = {}
    for name in names:
        for k in seed_ids:
            mine = [r for r in recs if r["config"] == name and r["seed"] == k]
            for c in classes:
                cell = [r["exact"] for r in mine if c in ("all", r["class"])]
                rate[(name, c, k)] = (sum(cell), len(cell))

    def cell(name: str, c: str) -> str:
        xs = [100 * e / t for e, t in (rate[(name, c, k)] for k in seed_ids) if t]
        if not xs:
            return "-"
        mean = sum(xs) / len(xs)
        return f"{mean:.0f}" + (f" ({min(xs):.0f}-{max(xs):.0f})" if len(xs) > 1 else "")

    n_of = {c: rate[(names[0], c, seed_ids[0])][1] for c in classes}
    lines = [f"Exact answers on the held-out test, % (mean over {len(seed_ids)} seeds, range in brackets)", "",
             "| class (prompts) | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines += [f"| {c} ({n_of[c]}) | " + " | ".join(cell(n, c) for n in names) + " |" for c in classes]
    tests: dict[str, Any] = {}
    lines += ["", ("Paired per prompt, pooled over seeds (DAPO against its own warm start; two-sided exact sign test "
                   "on the prompts where they differ)"), "",
              "| comparison | pairs | DAPO right, warm wrong | warm right, DAPO wrong | mean change, points | p |",
              "|---|---|---|---|---|---|"]
    for a, b in PAIRS:
        if a not in names or b not in names:
            continue
        ha = {(r["seed"], r["index"]): r["exact"] for r in recs if r["config"] == a}
        hb = {(r["seed"], r["index"]): r["exact"] for r in recs if r["config"] == b}
        keys = sorted(ha.keys() & hb.keys())
        wins = sum(ha[key] > hb[key] for key in keys)
        losses = sum(ha[key] < hb[key] for key in keys)
        p = sign_test(wins, losses)
        change = 100 * (wins - losses) / len(keys)
        tests[f"{a} vs {b}"] = {"pairs": len(keys), "wins": wins, "losses": losses, "p": p, "points": change}
        lines.append(f"| {a} vs {b} | {len(keys)} | {wins} | {losses} | {change:+.1f} | {p:.3f} |")
    (src / "seeds.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    plot_seeds(src, seed_ids, src / "seeds.png")
    return {"seeds": seed_ids, "rates": {f"{n}|{c}|{k}": v for (n, c, k), v in rate.items()}, "tests": tests}


def seed_curves(log: Path) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """A seed's training log as (training reward per step, validation exact-answer rate per evaluation)."""
    from refiner.plot import REWARD_KEYS, read_metrics

    series = read_metrics(log)
    key = next((key for key in REWARD_KEYS if series.get(key)), None)
    val = next((key for key in sorted(series) if key.startswith("val-core/") and "/acc/" in key), None)
    return (list(series[key]) if key else []), (list(series[val]) if val else [])


def plot_seeds(src: Path, seed_ids: list[int], out: Path) -> Path:
    """Training reward per step and validation exact answers per evaluation, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for k in seed_ids:
        log = src / f"metrics-seed-{k}.jsonl"
        if not log.is_file():
            continue
        for ax, points, marker in zip(axes, seed_curves(log), ("", "o")):
            if points:
                ax.plot(*zip(*points), marker=marker, label=f"seed {k}")
    axes[0].set_title("training reward (mean per response)", fontsize=9)
    axes[1].set_title("validation, exact answers (greedy, 27 prompts)", fontsize=9)
    for ax in axes:
        ax.set_xlabel("DAPO step")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(TITLE, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--shared-data",
                    default=os.environ.get("TOOL_REFINER_SHARED_DATA", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--target", type=float, default=0.3, help="Warm start: median chance of an exact answer.")
    ap.add_argument("--timeout", type=float, default=4 * 3600)
    ap.add_argument("--judge", metavar="OUT", help="Only the judgement of a finished run.")
    ap.add_argument("--configs", help="--judge: comma-separated configurations (default: all).")
    ap.add_argument("--one", nargs=2, metavar=("OUT", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--tier1", metavar="DATA_DIR", help="Only the raw upstream and tier 1 alone, per class.")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--tiny", action="store_true", help="The slow test's version: see tiny().")
    ap.add_argument("--seeds", type=int, help="Seeds 0..N-1 under OUT/seed-K, judged, then the table (see seeds()).")
    ap.add_argument("--only", help="--seeds: only these seeds (comma-separated), e.g. one seed per machine.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", metavar="DIR", help="Only the table and plot from DIR/prompts.jsonl (see report()).")
    args, extra = ap.parse_known_args(argv)
    if args.tiny:
        if not args.out:
            ap.error("--tiny needs --out")
        print(json.dumps(tiny(args.out, shared_data=args.shared_data), indent=2, default=str))
        return 0
    if args.one:
        print(json.dumps(one(Path(args.one[0]), args.one[1], shared_data=args.shared_data, split=args.split,
                             limit=args.limit, seed=args.seed)))
        return 0
    if args.tier1:
        rows = load_rows(args.tier1, args.split, max_prompt=None, limit=args.limit)
        reqs = requests_for(rows, args.shared_data)
        table = {name: run_config(name, rows, reqs) for name in ("upstream", "tier1")}
        print(json.dumps(table, indent=2))
        print(markdown(table))
        return 0
    if args.judge:
        table = judge(args.judge, shared_data=args.shared_data, split=args.split, limit=args.limit,
                      configs=args.configs.split(",") if args.configs else None)
        print(markdown(table))
        return 0
    if args.report:
        print(json.dumps(report(args.report)["tests"], indent=2))
        print((Path(args.report) / "seeds.md").read_text(encoding="utf-8"))
        return 0
    if not args.out:
        ap.error("--out is required (unless --judge, --tier1, --report)")
    if args.seeds:
        result = seeds(args.out, shared_data=args.shared_data, steps=args.steps, n=args.seeds, target=args.target,
                       timeout=args.timeout, extra=extra,
                       only=[int(k) for k in args.only.split(",")] if args.only else None)
        print(json.dumps(result["tests"], indent=2))
        print((Path(args.out) / "seeds.md").read_text(encoding="utf-8"))
        return 0
    print(json.dumps(slice_check(args.out, shared_data=args.shared_data, steps=args.steps, target=args.target,
                                 timeout=args.timeout, extra=extra,
                       only=[int(k) for k in args.only.split(",")] if args.only else None), indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
