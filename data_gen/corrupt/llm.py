"""LLM corruption: upstream models are asked to break correct tool calls on purpose (paper Appendix C.1, C.2).

Instruction kinds (our wording): ``format`` (the call format becomes wrong), ``name`` (tool or parameter names become
wrong), ``content`` (parameter values become wrong), ``order_full`` (the order of nested calls becomes wrong) and
``order_simplified`` (steps of a tool-name plan are split, merged or regrouped). The "original answer" given to the
model is the gold rendering in the task's wire format.

Generation goes through any :mod:`refiner.engines` engine (``vllm`` offline batched, ``openai`` for ``vllm serve``),
one engine per corrupting model. Results are cached in a JSONL file keyed by (sample, model, prompt, sampling), written
batch by batch with fsync, so a killed run restarted with the same arguments continues without losing or duplicating
samples.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from refiner import formats
from refiner.prompt import extract_answer
from rewards import compute_score, make_ground_truth

# The instruction kind for each error group (erroneous rows) and each shuffled data type.
LLM_KIND: dict[str, str] = {"format": "format", "name": "name", "content": "content",
                            "shuffled_full": "order_full", "shuffled_simplified": "order_simplified"}

INSTRUCTIONS: dict[str, str] = {
    "format": (
        "Change the tool call below so that its format is no longer correct: for example break the brackets, "
        "quotes or JSON syntax, or drop or misspell its special tags. Keep the tools and values recognisable."
    ),
    "name": (
        "Change the tool call below so that a tool name or a parameter name is no longer correct: for example "
        "misspell it, or use a similar but different name. Keep the format and the values as they are."
    ),
    "content": (
        "Change the tool call below so that the content of one or more parameters is no longer correct: for "
        "example a different value, a value of the wrong type, a missing or an extra parameter. Keep the format."
    ),
    "order_full": (
        "The tool calls below must run in the given order, because later calls use the results of earlier ones. "
        "Change them so that the order of the calls is no longer correct. Keep each call itself as it is."
    ),
    "order_simplified": (
        "The plan below lists which tools run at each step. Change it so that the order and the number of steps "
        'are no longer correct: either split the tools of one step over several steps (e.g. [{"step": 1, '
        '"tool_list": ["a", "b"]}] becomes [{"step": 1, "tool_list": ["a"]}, {"step": 2, "tool_list": ["b"]}]), '
        "or merge tools from different steps, or move tools into the wrong step."
    ),
}

TEMPLATE = "{instruction}\n\nOriginal answer:\n{original}\n\nReply with only the changed answer and nothing else."


def corruption_messages(kind: str, original: str) -> list[dict[str, str]]:
    """The chat asking a model to corrupt ``original`` in the way ``kind`` names."""
    if kind not in INSTRUCTIONS:
        raise ValueError(f"unknown corruption kind {kind!r}; known: {', '.join(INSTRUCTIONS)}")
    return [{"role": "user", "content": TEMPLATE.format(instruction=INSTRUCTIONS[kind], original=original)}]


def cache_key(sample_key: str, model: str, messages: Sequence[dict[str, str]], sampling: dict[str, Any]) -> str:
    blob = json.dumps([sample_key, model, list(messages), sampling], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Cache:
    """Append-only JSONL of ``{"key", "model", "text"}``; a torn last line (a killed write) is ignored."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.data: dict[str, str] = {}
        self._torn = False
        if self.path.exists():
            text = self.path.read_text(encoding="utf-8")
            self._torn = bool(text) and not text.endswith("\n")
            for line in text.splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the line a killed run was writing
                if isinstance(rec, dict) and "key" in rec and isinstance(rec.get("text"), str):
                    self.data[rec["key"]] = rec["text"]

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def add_many(self, items: Sequence[tuple[str, str, str]]) -> None:
        """Appends ``(key, model, text)`` items durably."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            if self._torn:  # end the line a killed run left half-written
                fh.write("\n")
                self._torn = False
            for key, model, text in items:
                fh.write(json.dumps({"key": key, "model": model, "text": text}, ensure_ascii=False) + "\n")
                self.data[key] = text
            fh.flush()
            os.fsync(fh.fileno())


# vLLM on CPU (0.32) fails with "CPU Generator does not use offset" when a seeded request's prompt is prefilled over
# several engine steps, i.e. when a batch's prompts exceed the step budget (max_num_batched_tokens, 4096 by default).
_CPU_SEED_HINT = (
    "vLLM on CPU failed on a batch of {n} seeded corruption requests for {model}: a prompt was prefilled over several "
    "steps, which vLLM's CPU sampler cannot do with a seed. Raise llm.engine_kwargs.max_num_batched_tokens above the "
    "batch's total prompt tokens, or lower llm.batch_size; the cache keeps every finished batch, so rerun to resume."
)


class LLMCorruptor:
    """Runs corruption requests ``(sample_key, model, kind, original)`` through one engine per model, cached."""

    def __init__(
        self,
        engine_factory: Callable[[str], Any],
        cache_path: str | Path,
        *,
        temperature: float = 0.7,
        max_tokens: int = 1024,
        batch_size: int = 64,
        seed: int = 0,
        progress: bool = True,
    ) -> None:
        self.engine_factory = engine_factory
        self.cache = Cache(cache_path)
        self.sampling = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
        self.batch_size = batch_size
        self.progress = progress
        self.generated = 0

    def run(self, requests: Sequence[tuple[str, str, str, str]]) -> list[str]:
        """The raw generation for each request (from the cache, or generated now), in request order."""
        keyed = []
        for sample_key, model, kind, original in requests:
            msgs = corruption_messages(kind, original)
            keyed.append((cache_key(sample_key, model, msgs, self.sampling), model, msgs))
        by_model: dict[str, dict[str, list[dict[str, str]]]] = {}
        for key, model, msgs in keyed:
            if key not in self.cache:
                by_model.setdefault(model, {})[key] = msgs
        for model, pending in by_model.items():
            engine = self.engine_factory(model)
            items = list(pending.items())
            bar = tqdm(total=len(items), desc=f"corrupt with {model}", unit="req", disable=not self.progress)
            for i in range(0, len(items), self.batch_size):
                chunk = items[i : i + self.batch_size]
                try:
                    outs = engine.chat(
                        [m for _, m in chunk],
                        n=1,
                        temperature=self.sampling["temperature"],
                        max_tokens=self.sampling["max_tokens"],
                        enable_thinking=False,
                        seed=self.sampling["seed"],
                    )
                except RuntimeError as e:
                    if "does not use offset" in str(e):
                        raise RuntimeError(_CPU_SEED_HINT.format(model=model, n=len(chunk))) from e
                    raise
                self.cache.add_many([(k, model, o[0] if o else "") for (k, _), o in zip(chunk, outs)])
                self.generated += len(chunk)
                bar.update(len(chunk))
            bar.close()
            close = getattr(engine, "close", None)
            if callable(close):
                close()
        return [self.cache.get(key) or "" for key, _, _ in keyed]


def default_engine_factory(llm_cfg: dict[str, Any]) -> Callable[[str], Any]:
    from refiner.engines import make_engine

    def factory(model: str) -> Any:
        return make_engine(llm_cfg["engine"], model=model, base_url=llm_cfg.get("base_url"),
                           **(llm_cfg.get("engine_kwargs") or {}))

    return factory


def llm_upstreams(cfg, jobs, samples, engine_factory, report, progress=True):
    """``(upstream | None, label, error_classes)`` per job: LLM corruptions labelled by the reward (an output that
    still scores 1.0 is labelled ``correct``); ``correct`` jobs are left to the builder."""
    llm_cfg = cfg["llm"]
    cache = llm_cfg.get("cache") or str(Path(report.out_dir) / "llm_cache.jsonl")
    corruptor = LLMCorruptor(
        engine_factory or default_engine_factory(llm_cfg), cache, temperature=llm_cfg["temperature"],
        max_tokens=llm_cfg["max_tokens"], batch_size=llm_cfg["batch_size"], seed=cfg["seed"], progress=progress,
    )
    requests, where = [], []
    for k, (job, sample) in enumerate(zip(jobs, samples)):
        if job.dtype == "correct":
            continue
        kind = job.group if job.dtype == "erroneous" else job.dtype
        original = formats.get(sample.fmt).render(sample.calls)
        model = job.model or llm_cfg.get("order_model") or "Qwen/Qwen3-14B"
        job.model = model
        sample_key = f"{sample.source}:{sample.record_id}:{job.dtype}:{job.group}:{job.seed}"
        requests.append((sample_key, model, LLM_KIND[kind], original))
        where.append(k)
    texts = corruptor.run(requests)
    out: list[tuple[str | None, str, tuple[str, ...]]] = [(None, "", ())] * len(jobs)
    for k, (raw, req) in zip(where, zip(texts, requests)):
        text = extract_answer(raw).strip()
        if not text:
            report.rejected["empty LLM output"] += 1
            continue
        sample = samples[k]
        gt = make_ground_truth(sample.fmt, sample.calls)
        if compute_score(cfg["data_source"], text, gt, variant=cfg["reward_variant"])["score"] >= 1.0:
            report.rejected["LLM output unchanged (kept as correct)"] += 1
            out[k] = (text, "correct", ())
        else:
            out[k] = (text, "corrupted", (f"llm_{req[2]}",))
    report.llm = {"requests": len(requests), "generated": corruptor.generated,
                  "from_cache": len(requests) - corruptor.generated, "cache": str(cache)}
    return out
