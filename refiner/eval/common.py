"""What every benchmark shares: the item record, the benchmark interface, data-folder lookup and small helpers."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from data_gen.corrupt.rules import Corruption, CorruptionError, corrupt
from refiner import PROJECT_ROOT, formats
from refiner.calls import ToolCall
from refiner.engines.base import batches
from refiner.formats.text import reasoning_offset
from refiner.pipeline import error_result

# Start of the error message of a sample the refiner model failed on (see refine_safely).
REFINER_FAILED = "refiner failed"
BATCH = 64  # requests per refine_batch call


def default_data_dir() -> Path:
    """``$TOOL_REFINER_SHARED_DATA`` if set, else ``../shared/data`` next to the project root."""
    env = os.environ.get("TOOL_REFINER_SHARED_DATA")
    return Path(env) if env else PROJECT_ROOT.parent / "shared" / "data"


def read_records(path: Path, what: str) -> list:
    """The JSON array of a data file (of ``what``); a clear error when it is missing, not JSON or not an array."""
    if not path.exists():
        raise FileNotFoundError(f"{what}: {path} does not exist (set --data-dir or TOOL_REFINER_SHARED_DATA)")
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a JSON array of records")
    return records


def parse_jsonl(text: str, where: str | Path) -> list[dict]:
    """The JSON object of every non-blank line; ``ValueError`` naming ``where`` and the line otherwise."""
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: line {i}: invalid JSON: {e.msg}") from None
    return rows


def read_jsonl(path: Path) -> list[dict]:
    return parse_jsonl(path.read_text(encoding="utf-8"), path)


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object a line, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


@dataclass
class BenchItem:
    """One benchmark item: the upstream is prompted with ``messages`` (default: ``system``, then ``query``);
    ``system`` and ``query`` are the task the refiner is shown; ``fmt`` is the answer's wire format; ``gold`` is the
    benchmark's own answer, ``gold_calls`` one correct call list (default: ``gold``)."""

    id: str
    bench: str
    subset: str
    system: str
    query: str | list[dict]
    tools: Any
    fmt: str
    gold: Any
    gold_calls: list[ToolCall] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    messages: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.gold_calls:
            self.gold_calls = self.gold
        if not self.messages:
            turns = [{"role": "user", "content": self.query}] if isinstance(self.query, str) else list(self.query)
            self.messages = [{"role": "system", "content": self.system}, *turns]

    def refine_request(self, upstream: str) -> dict:
        """The pipeline request for this item and an upstream output."""
        return {"tools": self.tools, "system": self.system, "query": self.query, "upstream": upstream,
                "format": self.fmt, **{k: self.meta[k] for k in ("format_hint", "value_style") if self.meta.get(k)}}


class Benchmark:
    """Interface of a benchmark. Subclasses set ``name``, ``metrics`` (ordered metric names; the first is the headline)
    and implement ``load`` and ``score``."""

    name: ClassVar[str]
    title: ClassVar[str] = ""
    metrics: ClassVar[tuple[str, ...]]
    # Metrics reported on a 0-100 scale (the paper's Tables 1 and 4) rather than 0-1 (Table 2).
    percent: ClassVar[bool] = True
    # Data quirks met while loading (kept samples with something missing), shown in the report.
    notes: list[str]

    def __init__(self) -> None:
        self.notes = []

    def load(self, limit: int | None = None) -> list[BenchItem]:  # pragma: no cover - interface
        raise NotImplementedError

    def score(self, item: BenchItem, text: str) -> dict[str, float]:  # pragma: no cover - interface
        raise NotImplementedError

    def answer_format(self, item: BenchItem) -> Retagged:
        """How ``item``'s answers are read and written: its wire format, re-tagged where the benchmark's differ."""
        return Retagged(item.fmt)

    def read(self, item: BenchItem, text: str) -> list[ToolCall] | None:
        """The calls of a strictly valid answer; None for any other text."""
        try:
            return self.answer_format(item).parse_strict(text)
        except formats.FormatError:
            return None

    def render(self, item: BenchItem, calls: Sequence[ToolCall]) -> str:
        """``calls`` as a correct answer text for ``item`` (used to script upstream outputs)."""
        return self.answer_format(item).render(calls)

    def postprocess_refined(self, item: BenchItem, refined: str) -> str:
        """The refiner's answer (written in the wire format) in the benchmark's own tags."""
        return self.answer_format(item).from_wire(refined)

    def summarize(self, items: Sequence[BenchItem], scores: Sequence[Mapping[str, float]]) -> dict[str, dict]:
        """Mean of every metric, overall and per subset: ``{"overall": {...,"n"}, subset: {...}}``; ``<metric>_n``
        counts the rows that have the metric when some do not."""
        groups: dict[str, list[Mapping[str, float]]] = {"overall": list(scores)}
        for s, sc in zip(items, scores):
            groups.setdefault(s.subset, []).append(sc)
        out: dict[str, dict] = {}
        for g, rows in groups.items():
            out[g] = means = {"n": len(rows)}
            for m in self.metrics:
                vals = [float(r[m]) for r in rows if r.get(m) is not None]
                means[m] = sum(vals) / len(vals) if vals else float("nan")
                if len(vals) != len(rows):
                    means[f"{m}_n"] = len(vals)
        return out


def spread(items: Sequence[Any], limit: int | None) -> list[Any]:
    """Up to ``limit`` items spread evenly over the sequence (so a small slice still covers every part)."""
    items = list(items)
    if limit is None or limit < 0 or limit >= len(items):
        return items
    step = len(items) / max(limit, 1)
    return [items[int(i * step)] for i in range(limit)]


@dataclass(frozen=True)
class Retagged:
    """The registered format ``wire`` with its tags replaced by ``tags`` (``None``: the bare body, e.g. BFCL's
    ``[f(a=1)]``); parsed by wrapping the body back in the format's own tags."""

    wire: str
    tags: tuple[str, str] | None = ("", "")

    @property
    def _own(self) -> tuple[str, str] | None:
        """The wire format's own tag pair, or None when there is nothing to re-tag (no pair, or the same tags)."""
        t = formats.get(self.wire).tags
        own = (t[0], t[1]) if len(t) == 2 and t[0].startswith("<") else None
        return None if self.tags in (("", ""), own) else own

    def render(self, calls: Sequence[ToolCall]) -> str:
        return self.from_wire(formats.get(self.wire).render(calls))

    def from_wire(self, text: str) -> str:
        """A strictly valid text of the wire format, re-tagged with this object's tags (other texts unchanged)."""
        own = self._own
        if own is None or not formats.get(self.wire).is_valid(text):
            return text
        a, b = text.find(own[0]), text.rfind(own[1])
        if a < 0 or b < a:
            return text
        new = self.tags or ("", "")
        return text[:a] + new[0] + text[a + len(own[0]) : b] + new[1] + text[b + len(own[1]) :]

    def parse_strict(self, text: str) -> list[ToolCall]:
        """Calls of a strictly valid text with this object's tags; raises ``FormatError`` otherwise."""
        fmt = formats.get(self.wire)
        own = self._own
        if own is None:
            return fmt.parse_strict(text)
        start = reasoning_offset(text)
        if self.tags is None:
            body = text[start:].strip()
            if not body.startswith("["):
                raise formats.FormatError(self.wire, "expected a bare list of calls", start)
            if own[0] in body:
                raise formats.FormatError(self.wire, f"{own[0]} is not part of this format", start)
            return fmt.parse_strict(f"{own[0]}{body}{own[1]}")
        spans = _tagged_spans(text, self.tags[0], self.tags[1], start)
        if len(spans) != 1:
            raise formats.FormatError(self.wire, f"expected one {self.tags[0]}...{self.tags[1]} block, found "
                                                 f"{len(spans)}", start)
        a, b = spans[0]
        return fmt.parse_strict(f"{own[0]}{text[a:b]}{own[1]}")


def _tagged_spans(text: str, open_tag: str, close_tag: str, start: int) -> list[tuple[int, int]]:
    """Spans ``(content start, content end)`` of every ``open_tag ... close_tag`` at or after ``start``, in order."""
    spans = []
    while (i := text.find(open_tag, start)) >= 0 and (j := text.find(close_tag, i + len(open_tag))) >= 0:
        spans.append((i + len(open_tag), j))
        start = j + len(close_tag)
    return spans


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def json_call(item: Any, args_key: str, where: str) -> tuple[str, dict]:
    """``(name, arguments)`` of a ``{"name", args_key}`` object of a benchmark's gold; ``ValueError`` naming
    ``where`` (the record and field) otherwise."""
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        raise ValueError(f"{where} is not a {{name, {args_key}}} object: {item!r}")
    args = item.get(args_key) or {}
    if not isinstance(args, Mapping):
        raise ValueError(f"{where}.{args_key} is not an object: {args!r}")
    return item["name"], dict(args)


def corrupt_one(calls: Sequence[ToolCall], fmt: str, tools: Any, rng: Any, cls: str) -> tuple[Corruption | None, str]:
    """One seeded error of class ``cls`` by the rule corruptor, or ``(None, why)``: ``cls`` when the class does not
    apply, ``"cls (corruptor error)"`` when the corruptor failed on it."""
    try:
        return corrupt(calls, fmt, tools, rng, classes=[cls]), ""
    except CorruptionError:
        return None, cls
    except Exception:  # noqa: BLE001 - a corruptor bug on this class and sample: counted apart
        return None, f"{cls} (corruptor error)"


def per_part(limit: int | None, parts: int) -> int | None:
    """An even share of ``limit`` for each of ``parts`` subsets, at least one (None: no limit)."""
    return None if limit is None else max(1, limit // max(1, parts))


def refine_safely(refiner: Any, requests: Sequence[Mapping[str, Any]]) -> list[dict]:
    """``refiner.refine_batch(requests, errors="result")``, where a request the model failed on (``model_error``)
    becomes an error result starting with :data:`REFINER_FAILED`: reported as not refined, not credited to tier 1."""
    results = list(refiner.refine_batch(list(requests), errors="result"))
    if len(results) != len(requests):
        raise RuntimeError(f"the refiner returned {len(results)} results for {len(requests)} requests")
    return [error_result(req, f"{REFINER_FAILED}: {res['model_error']}") if res.get("model_error") else res
            for req, res in zip(requests, results)]


def refine_all(refiner: Any, requests: Sequence[Mapping[str, Any]], desc: str, progress: bool = True) -> list[dict]:
    """:func:`refine_safely` over ``requests``, :data:`BATCH` at a time, with a progress bar."""
    return [result for chunk in batches(requests, BATCH, desc, progress=progress, leave=False)
            for result in refine_safely(refiner, chunk)]
