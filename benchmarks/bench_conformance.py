"""canitoolcall's conformance fixtures (PyPI ``canitoolcall``: 469 raw outputs of 9 open families, each with the
parse a correct engine returns), judged with canitoolcall's own checks (``checks.run_checks``, ``case_status``).

Two runs:

1. **library** (``--mode library``): the pipeline alone (tier 1 + guard, no model, format auto-detected), calls
   only: the fixture's raw output is the upstream text (``finish_reason: "length"`` for the truncated ones) and the
   parse judged is ``content`` and ``reasoning_content`` as expected with the pipeline's ``calls`` (an
   ``expected_error`` fixture: no calls and the raw text passed through as content, or the calls it returned);
   issue 20's "canitoolcall calls" figure.
2. **proxy** (``--mode proxy``): the real proxy app (``create_app``, as ``tool-refiner serve`` builds it, tier 1 in
   worker processes) in front of a scripted upstream on loopback that answers with the raw output as ``content``
   (and, for fixtures whose expected parse has reasoning, a second time with the reasoning already separated into
   ``reasoning_content``, as an upstream running its reasoning parser but not its tool parser sends it),
   non-streaming and streamed with several chunkings; everything the client gets is judged: ``content``,
   ``reasoning_content``, ``tool_calls``, stream = non-stream, split invariance, marker leaks.

Streams: canitoolcall's chunkings group *tokens*; its fixtures carry token ids but no tokenizer is available offline,
so the units here are characters with every marker of the fixture's family (``family.json``'s ``markers``) kept
whole, as a tokenizer keeps a special token whole: ``one`` (the whole text in one delta), ``special`` (each marker
its own delta, the text between in one), ``token`` (one unit per delta: per character) and ``rand:S:8``.

The request a client sends: the fixture's tools, ``tool_choice: "auto"``, and, where the fixture's generation
prompt opened the reasoning block (``...<think>``) or says thinking was on, ``chat_template_kwargs:
{"enable_thinking": true, "thinking": true}`` (``false`` where the prompt closed it), as clients of thinking models
send it.

    .venv/bin/python benchmarks/bench_conformance.py                       # both runs, every fixture
    .venv/bin/python benchmarks/bench_conformance.py --mode library --family kimi --show-failures
    .venv/bin/python benchmarks/bench_conformance.py --limit 3 --out /tmp/conformance.md

The table (pass / soft pass / fail per family, with the engines' published figures beside it) is printed and, with
``--out``, written to a file; the proxy run also prints the time it adds per request (p50/p99, streamed and not,
against the scripted upstream called directly).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from canitoolcall.checks import case_status, run_checks
from canitoolcall.chunking import ChunkStrategy
from canitoolcall.fixtures import Family, Fixture, load_families, load_fixtures
from canitoolcall.results import Observation, ParsedToolCall, ParseResult, Status

STRATEGIES: tuple[ChunkStrategy, ...] = (ChunkStrategy("one"), ChunkStrategy("special"), ChunkStrategy("token"),
                                         ChunkStrategy("rand", seed=1, max_group=8),
                                         ChunkStrategy("rand", seed=2, max_group=8))

# canitoolcall's published run (its README, v0.1.1): cases passed (pass or soft pass) of those each engine ran.
ENGINES = {"vLLM 0.30": (354, 469), "llama.cpp": (324, 438), "SGLang": (251, 448)}

OPEN_REASONING = ("<think>", "<think>\n", "<seed:think>", "[THINK]")
CLOSED_REASONING = ("</think>", "</think>\n\n", "</seed:think>", "[/THINK]", "<channel|>")


@dataclass
class Case:
    """One fixture's outcome in one run."""

    fixture: Fixture
    status: Status
    details: list[str] = field(default_factory=list)
    leaks: int = 0  # parses with a family marker where the expected parse has none
    cut_calls: int = 0  # parses that returned a call for a truncated fixture expected to return none


def fixtures(families: Sequence[str] | None = None, limit: int | None = None) -> list[tuple[Fixture, Family | None]]:
    """The fixtures (each with its family), in file order; ``limit`` per family."""
    fams = load_families()
    out, seen = [], Counter()
    for fx in load_fixtures(families=families or None):
        if limit is not None and seen[fx.family] >= limit:
            continue
        seen[fx.family] += 1
        out.append((fx, fams.get(fx.family)))
    return out


def judge(fx: Fixture, fam: Family | None, nonstream: ParseResult, streams: dict[str, ParseResult] | None = None) -> Case:
    """canitoolcall's verdict on one fixture's parses."""
    rows = run_checks(fx, fam, Observation(nonstream=nonstream, streams=dict(streams or {})))
    status = case_status(rows)
    bad = [r for r in rows if r.status in (Status.FAIL, Status.ERROR)]
    case = Case(fx, status, [f"{r.check}[{r.strategy}]: {r.detail}" for r in bad])
    case.leaks = sum(1 for r in rows if r.check == "no_leakage" and r.status is Status.FAIL)
    if fx.truncated and fx.expected_error is not None:
        case.cut_calls = sum(1 for r in rows if r.check == "expected_error" and r.status is Status.FAIL
                             and "returned" in (r.detail or ""))
    return case


# ------------------------------------------------------------------------------------------------------- library


def library_request(fx: Fixture) -> dict:
    return {"tools": [dict(t) for t in fx.tools] or None, "query": "", "upstream": fx.raw_output, "format": None,
            "finish_reason": "length" if fx.truncated else None}


def library_parse(result: dict, fx: Fixture) -> ParseResult:
    """The pipeline's calls as canitoolcall's parse, content and reasoning taken as expected (calls only)."""
    calls = tuple(ParsedToolCall(c["name"], json.dumps(c.get("arguments") or {}, ensure_ascii=False))
                  for c in result.get("calls") or [])
    if fx.expected is not None:
        return ParseResult(fx.expected.content, fx.expected.reasoning_content, calls)
    return ParseResult(None if calls else fx.raw_output, None, calls)


def run_library(cases: Iterable[tuple[Fixture, Family | None]]) -> tuple[list[Case], list[float]]:
    """Every fixture through ``Refiner(engine=None).refine``; the cases and the seconds per refine."""
    from refiner.pipeline import Refiner

    ref = Refiner(engine=None)
    out, times = [], []
    for fx, fam in cases:
        t = time.perf_counter()
        result = ref.refine(library_request(fx))
        times.append(time.perf_counter() - t)
        out.append(judge(fx, fam, library_parse(result, fx)))
    return out, times


# ------------------------------------------------------------------------------------------------------- tables


def tally(cases: Iterable[Case]) -> dict[str, Counter]:
    by: dict[str, Counter] = defaultdict(Counter)
    for c in cases:
        by[c.fixture.family][c.status.value] += 1
        by[c.fixture.family]["leaks"] += bool(c.leaks)
        by[c.fixture.family]["cut_calls"] += bool(c.cut_calls)
    return by


def ok_count(counts: Counter) -> int:
    return counts[Status.PASS.value] + counts[Status.SOFT_PASS.value]


def table(title: str, cases: list[Case]) -> str:
    by = tally(cases)
    total: Counter = Counter()
    head = "| family | cases | pass | soft pass | fail | error | pass or soft | leaks | cut calls returned |"
    lines = [f"### {title}", "", head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for fam in sorted(by):
        c = by[fam]
        n = sum(c[s.value] for s in Status)
        total.update(c)
        lines.append(f"| {fam} | {n} | {c['pass']} | {c['soft_pass']} | {c['fail']} | {c['error']} | "
                     f"{ok_count(c)} ({100 * ok_count(c) / max(n, 1):.1f} %) | {c['leaks']} | {c['cut_calls']} |")
    n = sum(total[s.value] for s in Status)
    lines.append(f"| **all** | {n} | {total['pass']} | {total['soft_pass']} | {total['fail']} | {total['error']} | "
                 f"**{ok_count(total)} ({100 * ok_count(total) / max(n, 1):.1f} %)** | {total['leaks']} | "
                 f"{total['cut_calls']} |")
    return "\n".join(lines)


def engines_line() -> str:
    return "Engines' own parsers (canitoolcall's published run): " + ", ".join(
        f"{k} {a}/{b} ({100 * a / b:.1f} %)" for k, (a, b) in ENGINES.items())


def failures(cases: list[Case], limit: int = 400) -> str:
    out = []
    for c in cases:
        if c.status in (Status.FAIL, Status.ERROR):
            out.append(f"- {c.fixture.id}: " + " | ".join(d[:300] for d in c.details[:3]))
    return "\n".join(out[:limit])


def pct(xs: list[float], q: int) -> float:
    if not xs:
        return float("nan")
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else xs[0]


def summary(cases: list[Case]) -> dict[str, Any]:
    c: Counter = Counter(x.status.value for x in cases)
    return {"cases": len(cases), "pass": c["pass"], "soft_pass": c["soft_pass"], "fail": c["fail"],
            "error": c["error"], "ok": c["pass"] + c["soft_pass"], "leaks": sum(bool(x.leaks) for x in cases),
            "cut_calls": sum(bool(x.cut_calls) for x in cases)}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("library",), default="library")
    p.add_argument("--family", action="append", help="only these families (repeatable)")
    p.add_argument("--limit", type=int, default=None, help="fixtures per family")
    p.add_argument("--out", type=Path, default=None, help="write the tables (markdown) here")
    p.add_argument("--show-failures", action="store_true")
    args = p.parse_args(argv)
    chosen = fixtures(args.family, args.limit)
    parts = [f"canitoolcall conformance: {len(chosen)} fixtures", "", engines_line(), ""]
    if args.mode in ("library", "both"):
        cases, times = run_library(chosen)
        parts += [table("library: the pipeline alone (tier 1, format auto-detected), calls only", cases), "",
                  f"refine per fixture: p50 {1e3 * pct(times, 50):.2f} ms, p99 {1e3 * pct(times, 99):.2f} ms", ""]
        if args.show_failures:
            parts += ["failures (library):", failures(cases), ""]
    text = "\n".join(parts)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
