"""LLM corruption throughput through our corruptor against vLLM's own offline throughput, same process, same model.

Peer: plain ``vllm.LLM.chat`` on the same corruption prompts with the same ``SamplingParams`` (temperature, max
tokens, seed, thinking off). Ours: :class:`data_gen.corrupt.llm.LLMCorruptor` (prompt building, cache keys, batching,
the ``refiner.engines`` vLLM engine, the fsync'd JSONL cache) with a fresh cache each round. Both use one ``vllm.LLM``
instance, so loading costs nothing to either side; rounds alternate peer/ours and the median is reported. Target:
ours >= 80% of the peer's prompts/s at the paper config's batch size (256). A smaller ``batch_size`` is also
measured: it makes resuming finer-grained but costs throughput, since vLLM's per-step cost is then paid per batch.

The model defaults to the tiny random Qwen3 of ``tests/tiny_qwen.py`` (real tokenizer, random weights, nonsense
outputs): on CPU it measures the pipeline's overhead around vLLM, not a real model's speed.

    .venv/bin/python benchmarks/bench_data_llm.py [--model DIR] [--prompts 64] [--max-tokens 32] [--rounds 3]

``--engine echo`` replaces vLLM by an in-process stand-in that answers every conversation with its last message
(no model, no tokenizer): it measures nothing about vLLM and exists so that the test suite can run every line of
this script but the engine in seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from data_gen import sources
from data_gen.corrupt.llm import LLMCorruptor, corruption_messages
from data_gen.sources.nestools import to_order
from refiner import formats


def corruption_requests(shared: Path, n: int) -> list[tuple[str, str, str, str]]:
    """``(sample_key, model, kind, original)`` for ``n`` real samples: Glaive calls (format/name/content) and
    NesTools chains (order_full, and order_simplified on the step plan), in turn."""
    glaive = sources.load("glaive", shared / "glaive_demo", progress=False)
    nest = sources.load("nestools", shared / "nestools" / "test_data.jsonl", progress=False)
    sources.ensure_format("order")
    out = []
    for i in range(n):
        kind = ("format", "name", "content", "order_full", "order_simplified")[i % 5]
        if kind.startswith("order"):
            s = nest[i % len(nest)]
            s = to_order(s) if kind == "order_simplified" else s
        else:
            s = glaive[i % len(glaive)]
        out.append((f"{s.source}:{s.record_id}:{kind}:{i}", "bench-model", kind,
                    formats.get(s.fmt).render(s.calls)))
    return out


class EchoEngine:
    """A stand-in for an engine (``--engine echo``): every conversation's answer is its last message, cut to 200
    characters; ``encode`` counts words (it stands in for the tokenizer too)."""

    def chat(self, conversations, *, n=1, temperature=0.0, max_tokens=1024, enable_thinking=None, seed=None):
        return [[conv[-1]["content"][:200]] * n for conv in conversations]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[str]:
        return text.split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--model", default=None, help="model folder (default: build the tiny random Qwen3)")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--batch-sizes", default="256,16", help="our corruptor's batch sizes to measure")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--step-tokens", type=int, default=131072, help="vLLM max_num_batched_tokens")
    ap.add_argument("--engine", choices=("vllm", "echo"), default="vllm",
                    help="echo: an in-process stand-in for vLLM (a smoke run of the script, no measurement)")
    args = ap.parse_args()

    from refiner.engines import make_engine

    tmp = Path(tempfile.mkdtemp(prefix="bench_data_llm_"))
    requests = corruption_requests(Path(args.shared), args.prompts)
    convs = [corruption_messages(kind, original) for _, _, kind, original in requests]
    seed = 0
    if args.engine == "echo":
        engine = EchoEngine()
        model = "echo (no model)"
        tok = engine

        def peer() -> list[str]:
            return [texts[0] for texts in engine.chat(convs, temperature=args.temperature,
                                                      max_tokens=args.max_tokens, seed=seed)]
    else:
        model = args.model
        if model is None:
            from tiny_qwen import make_tiny_qwen3

            model = str(make_tiny_qwen3(tmp / "tiny_qwen3"))
        # vLLM 0.32 on CPU fails ("CPU Generator does not use offset") when a seeded request's prefill is split over
        # steps, so the step budget holds a whole batch's prompts; peer and ours share this engine and its settings.
        engine = make_engine("vllm", model=model, in_process=True, dtype="float32", max_model_len=4096,
                             cpu_kvcache_gib=2, use_tqdm=False, max_num_batched_tokens=args.step_tokens)
        llm, vllm = engine.llm, engine._vllm
        tok = llm.get_tokenizer()
        params = vllm.SamplingParams(n=1, temperature=args.temperature, max_tokens=args.max_tokens, seed=seed)

        def peer() -> list[str]:
            outs = llm.chat(convs, params, use_tqdm=False, chat_template_kwargs={"enable_thinking": False})
            return [o.outputs[0].text for o in outs]

    counter = iter(range(10**6))

    def ours(batch: int) -> list[str]:
        c = LLMCorruptor(lambda m: engine, tmp / f"cache_{next(counter)}.jsonl", temperature=args.temperature,
                         max_tokens=args.max_tokens, batch_size=batch, seed=seed, progress=False)
        return c.run(requests)

    def timed(fn, *a) -> tuple[float, int]:
        t0 = time.perf_counter()
        texts = fn(*a)
        dt = time.perf_counter() - t0
        assert len(texts) == len(requests)
        return dt, sum(len(tok.encode(t, add_special_tokens=False)) for t in texts)

    batches = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    timed(peer)  # warm-up (first-call allocations)
    timed(ours, batches[0])
    results: dict[str, list[tuple[float, int]]] = {"peer": []}
    for _ in range(args.rounds):
        results["peer"].append(timed(peer))
        for b in batches:
            results.setdefault(f"ours b={b}", []).append(timed(ours, b))
    # a rerun over a full cache: what a resumed build pays for finished work
    cached = LLMCorruptor(lambda m: engine, tmp / "cache_0.jsonl", temperature=args.temperature,
                          max_tokens=args.max_tokens, batch_size=batches[0], seed=seed, progress=False)
    t0 = time.perf_counter()
    cached.run(requests)
    cache_s = time.perf_counter() - t0

    n = len(requests)
    peer_med = statistics.median(s for s, _ in results["peer"])
    peer_best = min(s for s, _ in results["peer"])
    print(f"model: {model}  (cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}, prompts: {n}, "
          f"max_tokens: {args.max_tokens}, temperature: {args.temperature}, rounds: {args.rounds}, alternating)")
    print()
    print("| run | median s | prompts/s | tokens/s | prompts/s vs vLLM (median) | vs vLLM (best of rounds) | target |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        med = statistics.median(x for x, _ in runs)
        best = min(x for x, _ in runs)
        toks = statistics.median(t for _, t in runs)
        ratio, ratio_best = peer_med / med, peer_best / best
        target = "-" if name == "peer" else ("PASS" if ratio >= 0.8 else "FAIL") + " (>= 80%)"
        if args.engine == "echo":
            target = "- (smoke run: no model)"
        peer_label = "vLLM LLM.chat" if args.engine == "vllm" else "the echo stand-in called directly"
        label = (f"{peer_label}, all prompts in one call (peer)" if name == "peer"
                 else f"our LLMCorruptor, batch_size {name.split('=')[1]}")
        print(f"| {label} | {med:.2f} | {n / med:.1f} | {toks / med:.0f} | {ratio:.0%} | {ratio_best:.0%} | {target} |")
    print(f"| our LLMCorruptor, rerun over a full cache | {cache_s:.3f} | {n / cache_s:.0f} | - | - | - | - |")
    if cached.generated:
        print(f"warning: the cached rerun generated {cached.generated} prompts")


if __name__ == "__main__":
    main()
