"""Upstream outputs: from a JSONL file of ``{id, output}``, from an OpenAI-compatible endpoint behind an on-disk cache
keyed by (model, messages, sampling settings), or scripted from the gold."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from data_gen.corrupt.rules import CorruptionError, corrupt
from refiner.engines import UPSTREAM_KEY_ENV, make_engine
from refiner.engines.cache import ChatCache, cache_key
from refiner.eval.common import BenchItem, read_jsonl


def read_outputs_file(path: str | Path, items: Sequence[BenchItem]) -> dict[str, str]:
    """``{sample id: output}`` for ``items`` from a JSONL file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"upstream file {path} does not exist")
    by_id: dict[str, str] = {}
    for i, row in enumerate(read_jsonl(path), 1):
        if not isinstance(row, Mapping) or not isinstance(row.get("id"), str):
            raise ValueError(f"{path}: record {i}: field 'id' missing or not a string")
        if not isinstance(row.get("output"), str):
            raise ValueError(f"{path}: record {i} ({row['id']}): field 'output' missing or not a string")
        by_id[row["id"]] = row["output"]
    missing = [s.id for s in items if s.id not in by_id]
    if missing:
        raise ValueError(f"{path}: no output for {len(missing)} sample(s), e.g. {missing[:5]}")
    return {s.id: by_id[s.id] for s in items}


def endpoint_outputs(items: Sequence[BenchItem], base_url: str, model: str, cache_file: str | Path | None, *,
                     engine: Any = None, temperature: float = 0.0, max_tokens: int = 1024,
                     enable_thinking: bool | None = None, seed: int | None = None) -> dict[str, str]:
    """``{sample id: output}`` from an OpenAI-compatible endpoint (its key: ``$UPSTREAM_API_KEY``), each answer cached
    under a hash of model, messages and sampling settings (``engine`` replaces the HTTP engine, for tests)."""
    if engine is None:
        engine = make_engine("openai", model=model, base_url=base_url, api_key_env=UPSTREAM_KEY_ENV)
    settings = {"temperature": temperature, "max_tokens": max_tokens, "enable_thinking": enable_thinking, "seed": seed}
    keys = [cache_key({"model": model, "messages": list(s.messages), "settings": settings}) for s in items]
    texts = ChatCache(cache_file).chat(engine, [s.messages for s in items], keys, **settings)
    return {s.id: t for s, t in zip(items, texts)}


def scripted_outputs(bench: Any, items: Sequence[BenchItem], corrupt_ratio: float = 0.5, seed: int = 0,
                     classes: Sequence[str] | None = None) -> dict[str, str]:
    """Upstream outputs made from the gold: each sample's gold calls, corrupted by the rule corruptor with
    probability ``corrupt_ratio`` (a seeded error of a random class; kept clean when no class applies)."""
    rng = random.Random(seed)
    out = {}
    for s in items:
        text = bench.render(s, s.gold_calls)
        if rng.random() < corrupt_ratio:
            try:
                text = corrupt(s.gold_calls, s.fmt, s.tools, random.Random(f"{seed}-{s.id}"), classes=classes).text
            except CorruptionError:
                pass
            except Exception as e:  # a corruptor bug must not stop the evaluation; the sample stays clean
                bench.notes.append(f"{s.id}: the rule corruptor failed ({type(e).__name__}: {e}); left clean")
        out[s.id] = text
    return out

