"""The data-build configuration (``configs/data/*.yaml``): defaults follow the paper's mix (Section 3.2, App. C)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from rewards.components import VARIANTS

PAPER_MODELS = ["Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "meta-llama/Llama-3.1-8B-Instruct",
                "meta-llama/Llama-3.2-3B-Instruct"]

DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "corruptor": "rules",  # rules | llm
    "data_source": "tool_refiner",
    "ability": "tool_call_refinement",
    "missing_sources": "error",  # error | substitute (other sources of the same type stand in) | skip
    "sources": {"glaive": {}, "toolace": {}, "xlam": {}, "nestools": {}},
    "types": {
        "erroneous": {"sources": ["glaive", "toolace", "xlam"], "error_types": ["format", "name", "content"],
                      "models": PAPER_MODELS, "per_source": 50},
        "correct": {"sources": ["glaive", "toolace", "xlam"], "per_source": 150},
        "shuffled_full": {"sources": ["nestools"], "count": 1000},
        "shuffled_simplified": {"sources": ["nestools"], "count": 1000},
    },
    "split": {"validation": 0.05},
    "max_prompt_length": 4096,
    # The reward variant that checks rows (rewards.compute_score): "paper" (recall-based, Section 3.3) drops
    # corruptions the paper reward cannot see (an extra parameter scores 1.0); "strict" keeps them.
    "reward_variant": "paper",
    "llm": {"engine": "vllm", "base_url": None, "temperature": 0.7, "max_tokens": 1024, "batch_size": 64,
            "cache": None, "engine_kwargs": {}},
}


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "types" else v
    return out


def load_config(path: str | Path | None = None, **overrides: Any) -> dict[str, Any]:
    """Defaults, then the YAML file, then keyword overrides. ``types`` in a file replaces the default mix."""
    cfg = copy.deepcopy(DEFAULTS)
    if path is not None:
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            raise FileNotFoundError(f"data config not found: {p}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{p}: a data config must be a mapping")
        unknown = set(data) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"{p}: unknown keys {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        cfg = _merge(cfg, data)
    cfg = _merge(cfg, overrides)
    if cfg["corruptor"] not in ("rules", "llm"):
        raise ValueError(f"corruptor must be 'rules' or 'llm', got {cfg['corruptor']!r}")
    if cfg["reward_variant"] not in VARIANTS:
        raise ValueError(f"reward_variant must be one of {', '.join(VARIANTS)}, got {cfg['reward_variant']!r}")
    for name, t in cfg["types"].items():
        if name not in ("erroneous", "correct", "shuffled_full", "shuffled_simplified"):
            raise ValueError(f"unknown data type {name!r} in 'types'")
        if not t.get("sources"):
            raise ValueError(f"data type {name!r} needs a non-empty 'sources' list")
    return cfg


def type_counts(cfg: dict[str, Any]) -> dict[str, int]:
    """Rows each data type asks for."""
    out = {}
    for name, t in cfg["types"].items():
        if name == "erroneous":
            out[name] = len(t["error_types"]) * len(t["models"]) * len(t["sources"]) * int(t["per_source"])
        elif "count" in t:
            out[name] = int(t["count"])
        else:
            out[name] = len(t["sources"]) * int(t["per_source"])
    return out
