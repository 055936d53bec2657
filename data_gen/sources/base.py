"""What a training source yields, how skipped records are accounted for, and how raw records are read.

A source turns raw records (from the Hugging Face Hub through ``datasets``, or a local file or folder) into
normalised :class:`Sample` objects. A record that cannot be used is either an error (:class:`BadRecord`, naming the
source, record and field) or a counted skip in a :class:`SkipLog`, never silently dropped.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import FormatError


@dataclass
class Sample:
    """One task with its gold calls. ``query`` is the user's request, or the dialogue (chat messages) up to the
    call; ``tools`` are the tool specs as the source wrote them; ``system`` is the task's system prompt with the tool
    list (paper Appendix B)."""

    source: str
    record_id: str
    system: str
    query: str | list[dict[str, Any]]
    tools: list[dict[str, Any]]
    calls: list[ToolCall]
    fmt: str
    meta: dict[str, Any] = field(default_factory=dict)


class BadRecord(ValueError):
    """A source record that cannot be used: names the source, the record and the field."""

    def __init__(self, source: str, record: str, fld: str, reason: str, detail: str = "") -> None:
        self.source, self.record, self.field, self.reason, self.detail = source, record, fld, reason, detail
        more = f" ({detail})" if detail else ""
        super().__init__(f"{source} record {record}: field {fld!r}: {reason}{more}")


class SourceUnavailable(RuntimeError):
    """The source's data cannot be obtained here (no Hub access and no local copy)."""


@dataclass
class SkipLog:
    """Counted skips per (source, reason), with the first few records named for each."""

    counts: Counter = field(default_factory=Counter)
    examples: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    strict: bool = False

    def skip(self, err: BadRecord) -> None:
        if self.strict:
            raise err
        key = (err.source, err.reason)
        self.counts[key] += 1
        ex = self.examples.setdefault(key, [])
        if len(ex) < 3:
            ex.append(f"record {err.record}, field {err.field!r}")

    def total(self, source: str | None = None) -> int:
        return sum(n for (s, _), n in self.counts.items() if source is None or s == source)

    def summary(self) -> list[dict[str, Any]]:
        return [
            {"source": s, "reason": r, "count": n, "examples": self.examples.get((s, r), [])}
            for (s, r), n in sorted(self.counts.items())
        ]


# ---------------------------------------------------------------------------------------------------------------
# Reading raw records


def read_local(path: str | Path, *, prefer: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Records from a local ``.json`` (array), ``.jsonl`` or ``.parquet`` file, or from a folder holding one (the
    names in ``prefer`` first). Raises ``FileNotFoundError``/``ValueError`` naming the file."""
    p = Path(path)
    if p.is_dir():
        files = [p / n for n in prefer if (p / n).is_file()]
        files += sorted(f for f in p.iterdir() if f.suffix in (".json", ".jsonl", ".parquet") and f not in files)
        if not files:
            raise FileNotFoundError(f"no .json/.jsonl/.parquet data file in {p}")
        p = files[0]
    if not p.exists():
        raise FileNotFoundError(f"data file not found: {p}")
    if p.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(p).to_dict(orient="records")
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".jsonl" or (not text.lstrip().startswith("[") and "\n{" in text):
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{p}: line {n} is not valid JSON: {e.msg}") from None
        return out
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not valid JSON: {e.msg} at line {e.lineno}") from None
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list):
        raise ValueError(f"{p}: expected a JSON array of records")
    return data


_HUB_OK: bool | None = None


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether huggingface.co answers (cached); ``HF_HUB_OFFLINE=1`` means no."""
    global _HUB_OK
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false"):
        return False
    if _HUB_OK is None:
        try:
            with socket.create_connection(("huggingface.co", 443), timeout=timeout):
                _HUB_OK = True
        except OSError:
            _HUB_OK = False
    return _HUB_OK


def read_hub(source: str, hub_id: str, split: str = "train") -> list[dict[str, Any]]:
    """Records of a Hub dataset through ``datasets.load_dataset``; a clear :class:`SourceUnavailable` when the
    Hub is unreachable and no cached copy exists."""
    hint = (f"pass --source-path {source}=PATH to a local copy, or use a config with local sources only "
            f"(configs/data/local.yaml)")
    try:
        import datasets
    except ImportError as e:
        raise SourceUnavailable(f"source {source!r}: the 'datasets' package is missing ({e}); {hint}") from None
    if not hub_reachable() and os.environ.get("HF_HUB_OFFLINE") in (None, "", "0", "false"):
        raise SourceUnavailable(f"source {source!r}: the Hugging Face Hub is unreachable, cannot load {hub_id!r} "
                                f"(set HF_HUB_OFFLINE=1 to use a cached copy); {hint}")
    try:
        ds = datasets.load_dataset(hub_id, split=split)
    except Exception as e:  # any loading failure means the source is not available here
        raise SourceUnavailable(f"source {source!r}: could not load {hub_id!r}: {str(e)[:200]}; {hint}") from None
    return [dict(r) for r in ds]


# ---------------------------------------------------------------------------------------------------------------
# Helpers shared by the source modules


def ensure_format(name: str) -> None:
    """Registers wire format ``name`` from its module if the registry has not imported it; raises
    :class:`SourceUnavailable` when no such format exists."""
    if name not in formats.names():
        try:
            importlib.import_module(f"refiner.formats.{name}")
        except ImportError:
            pass
    if name not in formats.names():
        raise SourceUnavailable(f"the {name!r} wire format is not registered (known: {', '.join(formats.names())})")


def parse_calls(source: str, record: str, fld: str, fmt: str, text: str) -> list[ToolCall]:
    """Gold calls from a record's call text, through the wire format's strict parser; the format's special tags
    are added when the source writes the bare body. Raises :class:`BadRecord`."""
    try:
        f = formats.get(fmt)
    except KeyError as e:
        raise SourceUnavailable(f"source {source!r} needs the {fmt!r} wire format: {e}") from None
    attempts = [text]
    if len(f.tags) >= 2 and f.tags[0] not in text:
        attempts.append(f"{f.tags[0]}{text}{f.tags[-1]}")
    last: Exception | None = None
    for t in attempts:
        try:
            calls = f.parse_strict(t)
        except FormatError as e:
            last = e
            continue
        if not calls:
            raise BadRecord(source, record, fld, "no tool call in the call text")
        return calls
    raise BadRecord(source, record, fld, f"calls not parseable in the {fmt} format", str(last))


def roundtrip_ok(calls: list[ToolCall], fmt: str) -> bool:
    """Whether the format renders these calls into text that parses back to them."""
    from data_gen.corrupt.rules import same_calls

    f = formats.get(fmt)
    try:
        return same_calls(f.parse_strict(f.render(calls)), calls, f)
    except Exception:  # a call the format cannot express
        return False


def records(records_iter: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, rec in enumerate(records_iter):
        yield str(rec.get("id", rec.get("test_id", i)) if isinstance(rec, dict) else i), rec
