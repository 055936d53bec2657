"""Registry of training sources: one module each (glaive, toolace, xlam, nestools), loaded by name.

    from data_gen import sources
    samples = sources.load("nestools", path="../shared/data/nestools/test_data.jsonl", skips=log)

By default a source loads from the Hugging Face Hub through ``datasets``; ``path`` reads a local file or folder
instead. Records that cannot be used are counted in the :class:`SkipLog` (or raised with ``strict``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from data_gen.sources.base import (
    BadRecord,
    Sample,
    SkipLog,
    SourceUnavailable,
    ensure_format,
    read_hub,
    read_local,
    roundtrip_ok,
)


@dataclass(frozen=True)
class SourceDef:
    name: str
    hub_id: str | None
    fmt: str
    normalise: Callable[[str, dict[str, Any]], Sample]
    local_names: tuple[str, ...] = ()
    description: str = ""


_SOURCES: dict[str, SourceDef] = {}


def register(src: SourceDef) -> SourceDef:
    if src.name in _SOURCES:
        raise ValueError(f"source {src.name!r} registered twice")
    _SOURCES[src.name] = src
    return src


def get(name: str) -> SourceDef:
    try:
        return _SOURCES[name]
    except KeyError:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(sorted(_SOURCES))}") from None


def names() -> list[str]:
    return list(_SOURCES)


def load(
    name: str,
    path: str | Path | None = None,
    *,
    limit: int | None = None,
    skips: SkipLog | None = None,
    progress: bool = True,
    fmt: str | None = None,
) -> list[Sample]:
    """Normalised samples of source ``name`` (from ``path`` when given, else the Hub). Bad records are counted in
    ``skips`` (raised when ``skips.strict``); samples whose calls do not round-trip in their format are skipped too. ``fmt`` re-targets
    the samples to another wire format (the calls are format-independent; records in a source's own call syntax are
    still parsed with the source's format).
    Raises :class:`SourceUnavailable` when the data cannot be obtained."""
    src = get(name)
    skips = skips if skips is not None else SkipLog()
    try:
        ensure_format(fmt or src.fmt)
    except SourceUnavailable as e:
        raise SourceUnavailable(f"source {name!r}: {e}") from None
    if path is not None:
        raw = read_local(path, prefer=src.local_names)
    elif src.hub_id:
        raw = read_hub(name, src.hub_id)
    else:
        raise SourceUnavailable(f"source {name!r} has no Hub dataset; pass --source-path {name}=PATH")
    out: list[Sample] = []
    for i, rec in enumerate(tqdm(raw, desc=f"load {name}", unit="rec", disable=not progress, leave=False)):
        rid = str(rec.get("id", rec.get("test_id", i))) if isinstance(rec, dict) else str(i)
        try:
            if not isinstance(rec, dict):
                raise BadRecord(name, rid, "<record>", f"a record must be an object, got {type(rec).__name__}")
            sample = src.normalise(rid, rec)
            if fmt:
                sample.fmt = fmt
            if not roundtrip_ok(sample.calls, sample.fmt):
                raise BadRecord(name, rid, "calls", f"gold calls do not round-trip in the {sample.fmt} format")
        except BadRecord as e:
            skips.skip(e)
            continue
        out.append(sample)
        if limit is not None and len(out) >= limit:
            break
    return out


from data_gen.sources import glaive, nestools, toolace, xlam  # noqa: F401  (register)
