"""What a training source yields, how skipped records are accounted for, and how raw records are read.

A source turns raw records (from the Hugging Face Hub through ``datasets``, or a local file or folder) into
normalised :class:`Sample` objects. A record that cannot be used is either an error (:class:`BadRecord`, naming the
source, record and field) or a counted skip in a :class:`SkipLog`, never silently dropped.
"""

from __future__ import annotations

import json
import os
import socket
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_gen.corrupt.rules import same_calls
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
    """A source record that is not used: names the source, the record and the field. ``policy`` is set when the
    skip is a deliberate filter rather than a defect of the record: it says why, and how to change it if one can."""

    def __init__(self, source: str, record: str, fld: str, reason: str, detail: str = "", *, policy: str = "") -> None:
        self.source, self.record, self.field, self.reason, self.detail = source, record, fld, reason, detail
        self.policy = policy
        more = f" ({detail})" if detail else ""
        super().__init__(f"{source} record {record}: field {fld!r}: {reason}{more}")


class SourceUnavailable(RuntimeError):
    """The source's data cannot be obtained here (no Hub access and no local copy)."""


@dataclass
class SkipLog:
    """Per source: records read, samples kept, and skips counted per reason with the first few records named.
    Reasons that are deliberate filters (:attr:`BadRecord.policy`) are kept apart from defects. ``strict`` raises
    on the first defective record instead of counting it (deliberate filters are still counted)."""

    counts: Counter = field(default_factory=Counter)  # (source, reason) -> skipped records
    examples: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    strict: bool = False
    read: Counter = field(default_factory=Counter)  # source -> records read
    kept: Counter = field(default_factory=Counter)  # source -> samples kept
    policies: dict[tuple[str, str], str] = field(default_factory=dict)  # (source, reason) -> why it is filtered
    origins: dict[str, str] = field(default_factory=dict)  # source -> where its records came from

    def skip(self, err: BadRecord) -> None:
        if self.strict and not err.policy:
            raise err
        key = (err.source, err.reason)
        self.counts[key] += 1
        if err.policy:
            self.policies[key] = err.policy
        ex = self.examples.setdefault(key, [])
        if len(ex) < 3:
            ex.append(f"record {err.record}, field {err.field!r}")

    def total(self, source: str | None = None) -> int:
        return sum(n for (s, _), n in self.counts.items() if source is None or s == source)

    def summary(self) -> list[dict[str, Any]]:
        """One entry per (source, reason): ``{source, reason, count, examples, filter}`` (``filter``: the policy
        text of a deliberate filter, else empty)."""
        return [
            {"source": s, "reason": r, "count": n, "examples": self.examples.get((s, r), []),
             "filter": self.policies.get((s, r), "")}
            for (s, r), n in sorted(self.counts.items())
        ]

    def by_source(self) -> dict[str, dict[str, Any]]:
        """Per source: ``origin``, ``read``, ``kept``, ``skipped`` and ``skipped_by_reason`` (most frequent first),
        ``filters`` (the deliberate ones, with why) and ``examples``."""
        names = sorted(set(self.read) | {s for s, _ in self.counts} | set(self.origins))
        out: dict[str, dict[str, Any]] = {}
        for name in names:
            reasons = sorted(((r, n) for (s, r), n in self.counts.items() if s == name), key=lambda x: (-x[1], x[0]))
            out[name] = {
                "origin": self.origins.get(name, ""),
                "read": self.read[name],
                "kept": self.kept[name],
                "skipped": self.total(name),
                "skipped_by_reason": dict(reasons),
                "filters": {r: self.policies[(name, r)] for r, _ in reasons if (name, r) in self.policies},
                "examples": {r: self.examples.get((name, r), []) for r, _ in reasons},
            }
        return out

    def describe(self, source: str) -> str:
        """One human-readable paragraph: what was read from ``source``, kept, and skipped why."""
        info = self.by_source().get(source)
        if info is None:
            return f"{source}: nothing read"
        head = (f"{source}: read {info['read']} records from {info['origin'] or '?'}, kept {info['kept']}, "
                f"skipped {info['skipped']}")
        lines = [head]
        for reason, n in info["skipped_by_reason"].items():
            pct = f" ({100 * n / info['read']:.0f}%)" if info["read"] else ""
            policy = info["filters"].get(reason)
            lines.append(f"  {n:6d}{pct} {reason}" + (f"\n         filter: {policy}" if policy else ""))
        return "\n".join(lines)


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


def _hint(source: str) -> str:
    return (f"pass --source-path {source}=PATH to a local copy, or use a config with local sources only "
            f"(configs/data/local.yaml)")


def _no_datasets(source: str, err: ImportError) -> str:
    return (f"source {source!r}: the 'datasets' package is missing ({err}): pip install 'tool-refiner[data]'; "
            f"{_hint(source)}")


def _has_token() -> bool | None:
    """Whether a Hugging Face token is configured (HF_TOKEN or ``hf auth login``); None if that cannot be told."""
    try:
        from huggingface_hub import get_token
    except ImportError:
        return None
    try:
        return bool(get_token())
    except Exception:  # noqa: BLE001 - an unreadable token file is the same as none for this message
        return False


def hub_access_problem(source: str, hub_id: str, err: BaseException, *, gated: bool = False) -> str | None:
    """What to do when reading ``hub_id`` failed with ``err`` because the dataset is gated, missing or unreachable
    (the errors ``huggingface_hub`` and ``datasets`` raise for those); None for any other error. ``gated``: the
    source is known to be gated on the Hub."""
    page = f"https://huggingface.co/datasets/{hub_id}"
    try:
        from huggingface_hub.errors import GatedRepoError, OfflineModeIsEnabled, RepositoryNotFoundError
    except ImportError:  # pragma: no cover - huggingface_hub comes with datasets
        GatedRepoError = RepositoryNotFoundError = OfflineModeIsEnabled = ()  # type: ignore[assignment,misc]
    try:
        from datasets.exceptions import DatasetNotFoundError
    except ImportError:  # pragma: no cover
        DatasetNotFoundError = ()  # type: ignore[assignment,misc]
    text = str(err)
    is_gated = isinstance(err, GatedRepoError) or (isinstance(err, DatasetNotFoundError) and "gated" in text)
    missing = isinstance(err, (RepositoryNotFoundError, DatasetNotFoundError)) and not is_gated
    if isinstance(err, (OfflineModeIsEnabled, ConnectionError)) and not missing:
        return (f"source {source!r}: cannot reach {hub_id!r} on the Hugging Face Hub ({type(err).__name__}) and no "
                f"cached copy exists; {_hint(source)}")
    if not (is_gated or missing):
        return None
    token = _has_token()
    status = getattr(getattr(err, "response", None), "status_code", None)
    terms = (f"accept the dataset's terms at {page} with your Hugging Face account, then log in (`hf auth login`) or "
             f"set HF_TOKEN to a token of that account")
    if is_gated or (missing and gated):
        if status == 403 or (token and status is None):
            why = (f"{hub_id} is a gated dataset and the account of the token in use has no access to it: accept its "
                   f"terms at {page} (if its owner reviews requests, wait for the approval), or use another token")
        elif token:
            why = (f"{hub_id} is a gated dataset and the Hub refused the token in use (HTTP {status}): check HF_TOKEN "
                   f"or log in again (`hf auth login`) with an account that accepted the terms at {page}")
        else:
            why = f"{hub_id} is a gated dataset and no token was sent: {terms}"
        return f"source {source!r}: {why}; or {_hint(source)}"
    extra = "" if token else f" If it is private or gated, {terms}."
    return (f"source {source!r}: dataset {hub_id!r} was not found on the Hugging Face Hub (or it is private or gated "
            f"and the request had no access). Check the id in the data config.{extra} Or {_hint(source)}")


def check_hub_access(source: str, hub_id: str, *, gated: bool = False) -> None:
    """Checks, without downloading anything, that ``hub_id`` can be read here; raises :class:`SourceUnavailable`
    saying what to do (token, terms, ``--source-path``) when it is gated, missing or the Hub is unreachable. With
    ``HF_HUB_OFFLINE=1`` nothing is checked (a cached copy decides)."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false"):
        return
    if not hub_reachable():
        raise SourceUnavailable(f"source {source!r}: the Hugging Face Hub is unreachable, cannot load {hub_id!r} "
                                f"(set HF_HUB_OFFLINE=1 to use a cached copy); {_hint(source)}")
    try:
        from huggingface_hub import HfApi
    except ImportError as e:
        raise SourceUnavailable(_no_datasets(source, e)) from None
    try:
        HfApi().auth_check(hub_id, repo_type="dataset")
    except Exception as e:  # noqa: BLE001 - every failure is reported, the access ones with what to do
        msg = hub_access_problem(source, hub_id, e, gated=gated)
        raise SourceUnavailable(msg or f"source {source!r}: could not check access to {hub_id!r} on the Hub: "
                                f"{type(e).__name__}: {str(e)[:200]}; {_hint(source)}") from None


def read_hub(source: str, hub_id: str, split: str = "train", *, gated: bool = False) -> list[dict[str, Any]]:
    """Records of a Hub dataset through ``datasets.load_dataset``, after :func:`check_hub_access`; a
    :class:`SourceUnavailable` saying what to do when the dataset is gated, missing or unreachable."""
    try:
        import datasets
    except ImportError as e:
        raise SourceUnavailable(_no_datasets(source, e)) from None
    check_hub_access(source, hub_id, gated=gated)
    try:
        ds = datasets.load_dataset(hub_id, split=split)
    except Exception as e:  # any loading failure means the source is not available here
        msg = hub_access_problem(source, hub_id, e, gated=gated)
        raise SourceUnavailable(msg or f"source {source!r}: could not load {hub_id!r}: {str(e)[:200]}; "
                                f"{_hint(source)}") from None
    return [dict(r) for r in ds]


# ---------------------------------------------------------------------------------------------------------------
# Helpers shared by the source modules


def ensure_format(name: str) -> None:
    """Checks a configured wire-format name; raises ``ValueError`` listing the known ones."""
    if name not in formats.names():
        raise ValueError(f"unknown wire format {name!r} (known: {', '.join(formats.names())})")


def parse_calls(source: str, record: str, fld: str, fmt: str, text: str) -> list[ToolCall]:
    """Gold calls from a record's call text, through the wire format's strict parser; the format's special tags
    are added when the source writes the bare body. Raises :class:`BadRecord`."""
    f = formats.get(fmt)
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
    f = formats.get(fmt)
    try:
        return same_calls(f.parse_strict(f.render(calls)), calls, f)
    except Exception:  # a call the format cannot express
        return False
