"""Upstream outputs: from a JSONL file of ``{id, output}``, from an OpenAI-compatible endpoint behind an on-disk cache
keyed by (model, messages, sampling settings), or scripted from the gold."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from data_gen.corrupt.rules import CorruptionError, corrupt
from refiner.engines import make_engine
from refiner.eval.common import BenchItem, read_jsonl, write_jsonl


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


def cache_key(model: str, messages: Sequence[Mapping[str, Any]], settings: Mapping[str, Any]) -> str:
    blob = json.dumps({"model": model, "messages": list(messages), "settings": dict(settings)}, sort_keys=True,
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedChat:
    """An engine's ``chat`` (n=1) behind a JSONL cache: ``generate(conversations) -> texts``."""

    def __init__(self, engine: Any, model: str, cache_file: str | Path | None, *, temperature: float = 0.0,
                 max_tokens: int = 1024, enable_thinking: bool | None = None, seed: int | None = None) -> None:
        self.engine = engine
        self.model = model
        self.cache_file = Path(cache_file) if cache_file else None
        self.settings = {"temperature": temperature, "max_tokens": max_tokens, "enable_thinking": enable_thinking,
                         "seed": seed}
        self.cache: dict[str, str] = {}
        if self.cache_file and self.cache_file.exists():
            for row in read_jsonl(self.cache_file):
                self.cache[row["key"]] = row["output"]

    def generate(self, conversations: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
        keys = [cache_key(self.model, conv, self.settings) for conv in conversations]
        todo = [i for i, k in enumerate(keys) if k not in self.cache]
        # the same prompt twice in one batch is sent once
        first: dict[str, int] = {}
        for i in todo:
            first.setdefault(keys[i], i)
        if first:
            order = list(first.values())
            outs = self.engine.chat([list(conversations[i]) for i in order], n=1, **self.settings)
            if len(outs) != len(order):
                raise RuntimeError(f"engine returned {len(outs)} results for {len(order)} conversations")
            new = {keys[i]: texts[0] for i, texts in zip(order, outs)}
            self.cache.update(new)
            if self.cache_file:
                write_jsonl(self.cache_file, ({"key": k, "output": v} for k, v in new.items()), mode="a")
        return [self.cache[k] for k in keys]


def endpoint_outputs(items: Sequence[BenchItem], base_url: str, model: str, cache_file: str | Path | None, *,
                     engine: Any = None, **settings: Any) -> dict[str, str]:
    """``{sample id: output}`` from an OpenAI-compatible endpoint (``engine`` overrides the HTTP engine, for
    tests)."""
    if engine is None:
        engine = make_engine("openai", model=model, base_url=base_url)
    chat = CachedChat(engine, model, cache_file, **settings)
    texts = chat.generate([s.messages for s in items])
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
                rng_s = random.Random(f"{seed}-{s.id}")
                text = corrupt(s.gold_calls, s.fmt, s.tools, rng_s, classes=classes).text
            except CorruptionError:
                pass
            except Exception as e:  # a corruptor bug must not stop the evaluation; the sample stays clean
                bench.notes.append(f"{s.id}: the rule corruptor failed ({type(e).__name__}: {e}); left clean")
        out[s.id] = text
    return out

