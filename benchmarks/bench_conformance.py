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
    .venv/bin/python benchmarks/bench_conformance.py --mode proxy --no-hints --more-strategies   # a client's defaults

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
# Harder chunkings: many tokens per delta (speculative decoding and multi-token prediction: two whole calls in one
# delta), and characters with the family's markers split (``char``: canitoolcall's synthetic stress strategy).
MORE_STRATEGIES: tuple[ChunkStrategy, ...] = (ChunkStrategy("rand", seed=3, max_group=64), ChunkStrategy("char", seed=0),
                                              ChunkStrategy("char", seed=3))

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


# ------------------------------------------------------------------------------------------------------- proxy

# Where the family's reasoning parser ends a block: an upstream that separated the reasoning sends what follows.
REASONING_ENDS = ("</think>", "[/THINK]", "<channel|>", "<|end|>", "<|close|>think<|sep|>", "</seed:think>")
PREFILLED_TAGS = {"reasoning-prefilled", "x-think-no-open-tag"}


def units(text: str, markers: Sequence[str]) -> list[str]:
    """The text as stream units: characters, a marker of the family kept whole (as a tokenizer keeps a special
    token)."""
    ordered = sorted(set(markers), key=len, reverse=True)
    out, i = [], 0
    while i < len(text):
        m = next((m for m in ordered if text.startswith(m, i)), None)
        out.append(m or text[i])
        i += len(m) if m else 1
    return out


def pieces(text: str, strategy: ChunkStrategy, markers: Sequence[str]) -> list[str]:
    from canitoolcall.chunking import split, split_text

    if strategy.kind == "char":  # characters, markers split too
        return split_text(text, strategy)
    u = units(text, markers)
    return ["".join(g) for g in split(u, strategy, special=set(markers))] if u else []


def thinking_kwargs(fx: Fixture) -> dict:
    """What a client of a thinking model sends: thinking off (the fixture says so, or its generation prompt closed the
    block) or on (the fixture says so, its generation prompt opened the block, or it is tagged as prefilled)."""
    gp = (fx.generation_prompt or "").rstrip()
    if gp.endswith(("</think>", "</seed:think>")) or fx.thinking is False:
        return {"chat_template_kwargs": {"enable_thinking": False, "thinking": False}}
    if PREFILLED_TAGS & set(fx.tags) or gp.endswith(("<think>", "<seed:think>")) or fx.thinking:
        return {"chat_template_kwargs": {"enable_thinking": True, "thinking": True}}
    return {}


def separated(fx: Fixture) -> tuple[str, str] | None:
    """``(reasoning, content)`` as an upstream running the family's reasoning parser (but not its tool parser)
    sends it: the expected reasoning, and the raw output after the marker that ends it. None when the fixture has no
    reasoning or its reasoning is not found in the raw output."""
    want = fx.expected.reasoning_content if fx.expected is not None else None
    if not want:
        return None
    raw = fx.raw_output
    at = raw.find(want)
    if at < 0:
        at, want = raw.find(want.strip()), want.strip()
        if at < 0:
            return None
    end = at + len(want)
    found = [(j, m) for m in REASONING_ENDS if (j := raw.find(m, end)) >= 0]
    if not found:  # a block no closer ends (vLLM's Qwen3 reader ends it where a call begins)
        return want, raw[end:]
    j, m = min(found)
    return want, raw[j + len(m) :]


def request_body(fx: Fixture, content: str, reasoning: str | None, stream_pieces: tuple | None,
                 hints: bool = True) -> dict:
    """What a client sends; ``hints`` False: no ``chat_template_kwargs`` (a client's default), and the model named
    after the fixture, so the proxy knows nothing of it before its first answer (what it learns of one fixture's model
    is not carried to the next fixture's)."""
    fake: dict[str, Any] = {"content": content}
    if reasoning:
        fake["reasoning"] = reasoning
    if fx.truncated:
        fake["finish_reason"] = "length"
    if stream_pieces is not None:
        fake["content_pieces"], fake["reasoning_pieces"] = stream_pieces
    body = {"model": fx.models[0] if hints else f"{fx.models[0]}@{fx.id}",
            "messages": [{"role": "user", "content": "Please help."}], "tools": [dict(t) for t in fx.tools],
            "tool_choice": "auto", "x_fake": fake, **(thinking_kwargs(fx) if hints else {})}
    if stream_pieces is not None:
        body["stream"] = True
    return body


def parse_message(message: dict) -> ParseResult:
    calls = tuple(ParsedToolCall((t.get("function") or {}).get("name", ""), (t.get("function") or {}).get("arguments"))
                  for t in message.get("tool_calls") or [])
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return ParseResult(message.get("content"), reasoning, calls)


def parse_stream(lines: Iterable[str]) -> ParseResult:
    """A streamed answer accumulated as an OpenAI client does (content and reasoning concatenated, tool-call deltas
    merged by index: id and name once, argument fragments concatenated)."""
    content, reasoning, calls = [], [], {}
    for line in lines:
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if "error" in chunk:
            return ParseResult(exception=f"StreamError: {chunk['error']}")
        for choice in chunk.get("choices") or []:
            d = choice.get("delta") or {}
            content.append(d.get("content") or "")
            reasoning.append(d.get("reasoning_content") or d.get("reasoning") or "")
            for t in d.get("tool_calls") or []:
                slot = calls.setdefault(t.get("index", 0), {"name": "", "args": []})
                fn = t.get("function") or {}
                if fn.get("name"):
                    slot["name"] = fn["name"]
                slot["args"].append(fn.get("arguments") or "")
    return ParseResult("".join(content) or None, "".join(reasoning) or None,
                       tuple(ParsedToolCall(s["name"], "".join(s["args"])) for _, s in sorted(calls.items())))


def _exchange(client: Any, url: str, body: dict) -> tuple[ParseResult, float]:
    t = time.perf_counter()
    if body.get("stream"):
        with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                r.read()
                return ParseResult(exception=f"HTTP {r.status_code}: {r.text[:200]}"), time.perf_counter() - t
            result = parse_stream(list(r.iter_lines()))
        return result, time.perf_counter() - t
    r = client.post(url + "/v1/chat/completions", json=body)
    elapsed = time.perf_counter() - t
    if r.status_code != 200:
        return ParseResult(exception=f"HTTP {r.status_code}: {r.text[:200]}"), elapsed
    return parse_message(r.json()["choices"][0]["message"]), elapsed


@dataclass
class Timing:
    direct: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    proxied: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    same: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # strategy -> [equal, all]
    leaked: set[str] = field(default_factory=set)  # fixtures with a reasoning closer in a parse's content

    def consistency(self) -> str:
        """Streams equal to the non-streamed answer (content, reasoning and calls, canitoolcall's comparison), per
        chunking."""
        return "stream = non-stream: " + ", ".join(f"{k} {a}/{n}" for k, (a, n) in self.same.items())

    def added(self, mode: str) -> list[float]:
        return [p - d for p, d in zip(self.proxied[mode], self.direct[mode])]

    def describe(self) -> str:
        rows = ["| request | n | upstream direct p50 | through the proxy p50 | added p50 | added p99 |",
                "|---|---:|---:|---:|---:|---:|"]
        for mode in ("non-stream", "stream"):
            add = self.added(mode)
            rows.append(f"| {mode} | {len(add)} | {1e3 * pct(self.direct[mode], 50):.2f} ms | "
                        f"{1e3 * pct(self.proxied[mode], 50):.2f} ms | {1e3 * pct(add, 50):.2f} ms | "
                        f"{1e3 * pct(add, 99):.2f} ms |")
        return "Time the proxy adds per request (scripted upstream on loopback, one client, sequential):\n\n" + \
            "\n".join(rows)


def leaks_reasoning(parse: ParseResult) -> bool:
    """A reasoning closer in ``content``: the reasoning came back as content."""
    from refiner.formats.reasoning import pairs

    closers = {c for _, c in pairs()} | set(REASONING_ENDS) - {"<|end|>"}
    return any(c in (parse.content or "") for c in closers)


def replay(fx: Fixture, fam: Family | None, client: Any, proxy: str, upstream: str,
           strategies: Sequence[ChunkStrategy], timing: Timing, hints: bool = True) -> list[Case]:
    """One fixture through the proxy: raw output as content, and (reasoning fixtures) reasoning separated; each
    non-streamed and streamed with every strategy; judged per upstream mode."""
    markers = fam.markers if fam is not None else ()
    modes = [(None, fx.raw_output)]
    sep = separated(fx)
    if sep is not None:
        modes.append(sep)
    cases = []
    from canitoolcall.checks import compare

    for k, (reasoning, content) in enumerate(modes):
        body = request_body(fx, content, reasoning, None, hints)
        nonstream, dt = _exchange(client, proxy, body)
        if leaks_reasoning(nonstream) and fx.expected is not None and fx.expected.reasoning_content:
            timing.leaked.add(fx.id)
        if k == 0:
            timing.proxied["non-stream"].append(dt)
            timing.direct["non-stream"].append(_exchange(client, upstream, body)[1])
        streams = {}
        for strategy in strategies:
            split_pieces = (pieces(content, strategy, markers), pieces(reasoning or "", strategy, markers))
            body = request_body(fx, content, reasoning, split_pieces, hints)
            streams[strategy.id], dt = _exchange(client, proxy, body)
            if leaks_reasoning(streams[strategy.id]) and fx.expected is not None and fx.expected.reasoning_content:
                timing.leaked.add(fx.id)
            same = timing.same[strategy.id]
            same[0] += compare(nonstream, streams[strategy.id]).name != "FAIL"
            same[1] += 1
            if k == 0 and strategy.kind == "one":
                timing.proxied["stream"].append(dt)
                timing.direct["stream"].append(_exchange(client, upstream, body)[1])
        case = judge(fx, fam, nonstream, streams)
        if k:
            case.details = [f"(reasoning separated upstream) {d}" for d in case.details]
        cases.append(case)
    worst = max(cases, key=lambda c: {Status.PASS: 0, Status.SOFT_PASS: 1, Status.ERROR: 2, Status.FAIL: 3}[c.status])
    worst.leaks, worst.cut_calls = sum(c.leaks for c in cases), sum(c.cut_calls for c in cases)
    return [worst]


def prompt_settings(cases: Iterable[tuple[Fixture, Family | None]]) -> dict[str, bool]:
    """What an operator who knows each model's template sets (``serve --opens-reasoning MODEL=yes|no``), for the
    no-hint replay's per-fixture model names: what :func:`thinking_kwargs` says of the fixture's prompt."""
    out = {}
    for fx, _ in cases:
        said = thinking_kwargs(fx).get("chat_template_kwargs")
        if said is not None:
            out[f"{fx.models[0]}@{fx.id}"] = said["enable_thinking"]
    return out


def run_proxy(cases: Iterable[tuple[Fixture, Family | None]], strategies: Sequence[ChunkStrategy] = STRATEGIES,
              *, workers: int | None = None, hints: bool = True,
              opens: dict[str, bool] | None = None) -> tuple[list[Case], Timing]:
    """Every fixture through the real proxy app (tier 1 in ``workers`` processes) in front of the scripted upstream,
    both served by uvicorn on loopback. A fixture's status is the worst over its upstream modes."""
    import httpx

    sys.path.insert(0, str(ROOT / "tests"))
    from fake_upstream import create_fake_upstream, serve_in_thread

    from refiner.proxy import create_app

    timing, out = Timing(), []
    with serve_in_thread(create_fake_upstream()) as upstream, \
            serve_in_thread(create_app(upstream + "/v1", workers=workers, opens_reasoning=opens)) as proxy, \
            httpx.Client(timeout=120) as client:
        for fx, fam in cases:
            out += replay(fx, fam, client, proxy, upstream, strategies, timing, hints)
    return out, timing


# ------------------------------------------------------------------------------------------------------- probe

_HERMES = '<tool_call>\n{{"name": "{}", "arguments": {}}}\n</tool_call>'


def _calls(*calls: tuple[str, dict]) -> str:
    return "\n".join(_HERMES.format(n, json.dumps(a, ensure_ascii=False)) for n, a in calls)


# What a Qwen3 thinking model writes for canitoolcall's probe scenarios (its chat template's format: a <think> block,
# then Hermes calls), keyed by words of the scenario's last user message; the scripted upstream returns it as content,
# as a server without a tool or reasoning parser does.
PROBE_ANSWERS = (
    ("Paris and in Tokyo", "<think>\nTwo cities, two calls.\n</think>\n\n" + _calls(
        ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"}))),
    ("17 + 25", "<think>\nSimple arithmetic.\n</think>\n\n42"),
    ("Design review", _calls(("create_event", {"title": "Design review", "start": "2026-10-01T15:00:00Z",
                                               "attendees": [{"name": "Ana", "email": "ana@example.com"},
                                                             {"name": "Bo", "email": "bo@example.com"}],
                                               "location": {"city": "Berlin", "room": "4.12"}}))),
    ("Grüße", "I'll save it.\n" + _calls(("save_note", {"title": "Grüße aus Zürich",
                                                         "body": "Café ☕ in 東京 — naïve résumé 🚀"}))),
    ("time is it", _calls(("get_server_time", {}))),
    ("Lisbon", _calls(("get_weather", {"city": "Lisbon"}))),
    ("9.11 or 9.9", "<think>\n9.9 is 9.90, larger than 9.11.\n</think>\n\n" + _calls(
        ("record_answer", {"answer": "9.9"}))),
    ("weather in Paris", "<think>\nThe user wants Paris.\n</think>\n\n" + _calls(("get_weather", {"city": "Paris"}))),
)


def probe_answer(body: dict) -> str:
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return "<think>\nThe tool answered.\n</think>\n\nIt is 18 °C and clear in Paris."
    last = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
    return next((answer for key, answer in PROBE_ANSWERS if key in last), "I can help with that.")


def run_probe(workers: int | None = None) -> str:
    """``canitoolcall probe`` (its scenarios, non-streamed and streamed) against the proxy in front of a scripted
    upstream that answers each scenario with a Qwen3 model's raw text as content; the probe's table."""
    from canitoolcall.probe import probe

    sys.path.insert(0, str(ROOT / "tests"))
    from fake_upstream import create_fake_upstream, serve_in_thread

    from refiner.proxy import create_app

    inner = create_fake_upstream()

    async def app(scope: dict, receive: Any, send: Any) -> None:  # the probe cannot send x_fake: answer by scenario
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            return await inner(scope, receive, send)
        parts, more = [], True
        while more:
            msg = await receive()
            parts.append(msg.get("body", b""))
            more = msg.get("more_body", False)
        body = json.loads(b"".join(parts))
        body["x_fake"] = {"content": probe_answer(body)}
        raw, given = json.dumps(body).encode(), False

        async def replay() -> dict:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        return await inner({**scope, "headers": [*headers, (b"content-length", str(len(raw)).encode())]}, replay,
                           send)

    with serve_in_thread(app) as upstream, serve_in_thread(create_app(upstream + "/v1", workers=workers)) as proxy:
        report = probe(proxy + "/v1", "qwen3-scripted", concurrency=2)
    return report.render_text()


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
    p.add_argument("--mode", choices=("library", "proxy", "both", "probe"), default="both")
    p.add_argument("--family", action="append", help="only these families (repeatable)")
    p.add_argument("--limit", type=int, default=None, help="fixtures per family")
    p.add_argument("--out", type=Path, default=None, help="write the tables (markdown) here")
    p.add_argument("--show-failures", action="store_true")
    p.add_argument("--workers", type=int, default=None, help="the proxy's tier-1 worker processes (default: its own)")
    p.add_argument("--no-hints", action="store_true", help="proxy: requests without chat_template_kwargs (a client's "
                   "default), each fixture's model new to the proxy")
    p.add_argument("--prompt-known", action="store_true", help="proxy, with --no-hints: the proxy is told each "
                   "model's prompt (serve --opens-reasoning), as an operator who gives its template")
    p.add_argument("--more-strategies", action="store_true", help="proxy: also stream in 64-token deltas and in "
                   "characters with markers split")
    args = p.parse_args(argv)
    if args.mode == "probe":
        print(run_probe(args.workers))
        return 0
    chosen = fixtures(args.family, args.limit)
    parts = [f"canitoolcall conformance: {len(chosen)} fixtures", "", engines_line(), ""]
    if args.mode in ("library", "both"):
        cases, times = run_library(chosen)
        parts += [table("library: the pipeline alone (tier 1, format auto-detected), calls only", cases), "",
                  f"refine per fixture: p50 {1e3 * pct(times, 50):.2f} ms, p99 {1e3 * pct(times, 99):.2f} ms", ""]
        if args.show_failures:
            parts += ["failures (library):", failures(cases), ""]
    if args.mode in ("proxy", "both"):
        strategies = STRATEGIES + (MORE_STRATEGIES if args.more_strategies else ())
        opens = prompt_settings(chosen) if args.no_hints and args.prompt_known else None
        cases, timing = run_proxy(chosen, strategies, workers=args.workers, hints=not args.no_hints, opens=opens)
        how = "no hints" if args.no_hints else "hints as clients of thinking models send them"
        how += ", each model's prompt told (--opens-reasoning)" if opens is not None else ""
        parts += [table(f"proxy ({how}): tool-refiner serve in front of a scripted upstream (content, reasoning, "
                        "calls; non-streamed and streamed)", cases), "", timing.describe(), "",
                  timing.consistency(), f"fixtures with reasoning returned as content (a closer in content, any "
                  f"parse): {len(timing.leaked)}", ""]
        if args.show_failures:
            parts += ["failures (proxy):", failures(cases), ""]
    text = "\n".join(parts)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
