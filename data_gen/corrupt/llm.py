"""LLM corruption: upstream models are asked to break correct tool calls on purpose (paper Appendix C.1, C.2), one
engine per corrupting model, each answer cached by (sample, model, prompt, sampling) so a killed run resumes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from refiner import formats
from refiner.engines.cache import ChatCache, cache_key
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
        self.cache = ChatCache(cache_path)
        self.sampling = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
        self.batch_size = batch_size
        self.progress = progress
        self.generated = 0

    def run(self, requests: Sequence[tuple[str, str, str, str]]) -> list[str]:
        """The raw generation for each request (from the cache, or generated now), in request order."""
        by_model: dict[str, tuple[list[str], list[list[dict[str, str]]]]] = {}
        keys = []
        for sample_key, model, kind, original in requests:
            msgs = corruption_messages(kind, original)
            keys.append(cache_key([sample_key, model, msgs, self.sampling]))
            if keys[-1] not in self.cache.texts:
                by_model.setdefault(model, ([], []))[0].append(keys[-1])
                by_model[model][1].append(msgs)
        for model, (model_keys, convs) in by_model.items():
            engine = self.engine_factory(model)
            before = len(self.cache.texts)
            try:
                self.cache.chat(engine, convs, model_keys, batch_size=self.batch_size, fields={"model": model},
                                desc=f"corrupt with {model}" if self.progress else None, enable_thinking=False,
                                **self.sampling)
            except RuntimeError as e:
                if "does not use offset" in str(e):
                    left = len(set(model_keys) - set(self.cache.texts))
                    raise RuntimeError(_CPU_SEED_HINT.format(model=model, n=min(left, self.batch_size))) from e
                raise
            finally:
                self.generated += len(self.cache.texts) - before
            close = getattr(engine, "close", None)
            if callable(close):
                close()
        return [self.cache.texts.get(key) or "" for key in keys]


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
