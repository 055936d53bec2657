"""Statistics of a built data folder: the mix per split, source, data type and error class, and prompt lengths."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any


def _tokenizer(path: str | None):
    if not path:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def data_stats(data_dir: str | Path, *, tokenizer: str | None = None, max_prompt_length: int | None = None,
               ) -> dict[str, Any]:
    """Counts per split/source/type/label/error class and prompt lengths (tokens with ``tokenizer``, applying its
    chat template; characters otherwise). ``warnings`` lists prompts longer than ``max_prompt_length`` (default:
    the build's configured length from manifest.json)."""
    import pandas as pd

    d = Path(data_dir)
    files = sorted(d.glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no parquet files in {d}")
    manifest = json.loads((d / "manifest.json").read_text()) if (d / "manifest.json").exists() else {}
    if max_prompt_length is None:
        max_prompt_length = (manifest.get("config") or {}).get("max_prompt_length")
    tok = _tokenizer(tokenizer)
    out: dict[str, Any] = {"splits": {}, "warnings": []}
    for f in files:
        df = pd.read_parquet(f)
        info = df["extra_info"].tolist()
        lengths = []
        for i, msgs in enumerate(df["prompt"].tolist()):
            msgs = [dict(m) for m in msgs]
            if tok is not None:
                text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
                n = len(tok(text, add_special_tokens=False)["input_ids"])
            else:
                n = sum(len(m["content"]) for m in msgs)
            lengths.append(n)
            if tok is not None and max_prompt_length and n > max_prompt_length:
                out["warnings"].append(f"{f.name} row {i}: prompt has {n} tokens > max_prompt_length "
                                       f"{max_prompt_length}")
        classes = Counter(c for e in info for c in (list(e["error_classes"]) if e.get("error_classes") is not None else []))
        s = sorted(lengths)
        out["splits"][f.stem] = {
            "rows": len(df),
            "source": dict(Counter(e["source"] for e in info)),
            "data_type": dict(Counter(e["data_type"] for e in info)),
            "label": dict(Counter(e.get("label", "") for e in info)),
            "format": dict(Counter(e.get("format", "") for e in info)),
            "error_class": dict(classes),
            "prompt_length": {
                "unit": "tokens" if tok is not None else "chars",
                "mean": round(sum(s) / len(s), 1) if s else 0,
                "p50": s[len(s) // 2] if s else 0,
                "p95": s[min(len(s) - 1, int(len(s) * 0.95))] if s else 0,
                "max": s[-1] if s else 0,
            },
        }
    return out


def format_stats(stats: dict[str, Any]) -> str:
    lines = []
    for split, st in stats["splits"].items():
        lines.append(f"== {split}: {st['rows']} rows")
        for key in ("source", "data_type", "label", "format", "error_class"):
            items = ", ".join(f"{k}={v}" for k, v in sorted(st[key].items()))
            lines.append(f"  {key:<11} {items}")
        pl = st["prompt_length"]
        lines.append(f"  prompt ({pl['unit']}): mean {pl['mean']}, p50 {pl['p50']}, p95 {pl['p95']}, max {pl['max']}")
    for w in stats["warnings"][:20]:
        lines.append(f"warning: {w}")
    if len(stats["warnings"]) > 20:
        lines.append(f"warning: ... and {len(stats['warnings']) - 20} more prompts over the limit")
    return "\n".join(lines)
