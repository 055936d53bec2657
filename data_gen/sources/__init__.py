"""Registry of training sources: one module each (glaive, toolace, xlam, nestools), loaded by name.

    from data_gen import sources
    samples = sources.load("nestools", path="../shared/data/nestools/test_data.jsonl", skips=log)

By default a source loads from the Hugging Face Hub through ``datasets``; ``path`` reads a local file or folder
instead. :func:`check` tells, without reading anything, whether a source can be loaded here (and what to do when it
cannot: a token, a dataset's terms, ``--source-path``). Records read, kept and skipped (per reason) are counted in
the :class:`SkipLog`; a defective record raises instead with ``strict``.
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
    check_hub_access,
    ensure_format,
    read_hub,
    read_local,
    roundtrip_ok,
)


@dataclass(frozen=True)
class SourceDef:
    """A training source: its Hub dataset (``None``: no Hub copy, ``obtain`` says where to get it), whether that
    dataset is gated, its wire format, and the function that turns one raw record into a :class:`Sample`."""

    name: str
    hub_id: str | None
    fmt: str
    normalise: Callable[[str, dict[str, Any]], Sample]
    local_names: tuple[str, ...] = ()
    description: str = ""
    hub_gated: bool = False
    obtain: str = ""


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


def _no_hub_copy(src: SourceDef) -> str:
    how = f" ({src.obtain})" if src.obtain else ""
    return f"source {src.name!r} has no Hub dataset{how}; pass --source-path {src.name}=PATH"


def check(name: str, path: str | Path | None = None) -> None:
    """Raises :class:`SourceUnavailable`, saying what to do, when source ``name`` cannot be loaded here: ``path``
    does not exist, the source has no Hub copy and no ``path`` was given, or its Hub dataset is gated, missing or
    unreachable. Reads no record and downloads nothing."""
    src = get(name)
    if path is not None:
        if not Path(path).exists():
            raise SourceUnavailable(f"source {name!r}: data file not found: {path}")
        return
    if not src.hub_id:
        raise SourceUnavailable(_no_hub_copy(src))
    check_hub_access(name, src.hub_id, gated=src.hub_gated)


def load(
    name: str,
    path: str | Path | None = None,
    *,
    limit: int | None = None,
    skips: SkipLog | None = None,
    progress: bool = True,
    fmt: str | None = None,
) -> list[Sample]:
    """Normalised samples of source ``name`` (from ``path`` when given, else the Hub). Records read, samples kept and
    bad records (per reason) are counted in ``skips`` (a defective record raises when ``skips.strict``); samples whose
    calls do not round-trip in their format are skipped too. ``fmt`` re-targets the samples to another wire format
    (the calls are format-independent; records in a source's own call syntax are still parsed with the source's
    format).
    Raises :class:`SourceUnavailable` when the data cannot be obtained, ``ValueError`` for an unknown ``fmt``."""
    src = get(name)
    skips = skips if skips is not None else SkipLog()
    try:
        ensure_format(fmt or src.fmt)
    except ValueError as e:
        raise ValueError(f"source {name!r}: {e}") from None
    if path is not None:
        raw = read_local(path, prefer=src.local_names)
        skips.origins[name] = str(path)
    elif src.hub_id:
        raw = read_hub(name, src.hub_id, gated=src.hub_gated)
        skips.origins[name] = f"hf://datasets/{src.hub_id}"
    else:
        raise SourceUnavailable(_no_hub_copy(src))
    out: list[Sample] = []
    for i, rec in enumerate(tqdm(raw, desc=f"load {name}", unit="rec", disable=not progress, leave=False)):
        skips.read[name] += 1
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
        skips.kept[name] += 1
        if limit is not None and len(out) >= limit:
            break
    return out


from data_gen.sources import glaive, nestools, toolace, xlam  # noqa: F401  (register)
