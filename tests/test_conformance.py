"""canitoolcall's fixtures (469 raw outputs of 9 open families, with the parse a correct engine returns), judged with
canitoolcall's own checks: the pipeline alone (calls only), and the real proxy in front of a scripted upstream
(content, reasoning and calls; non-streamed and streamed with several chunkings). The replay, the judging and the
tables are ``benchmarks/bench_conformance.py``; these tests assert floors (raise them as parsers
land) and write the table to ``$CONFORMANCE_TABLE`` (default: pytest's temporary directory; the path is printed)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest
from fake_upstream import create_fake_upstream, serve_in_thread

from refiner.formats.reasoning import pairs
from refiner.proxy import create_app

pytest.importorskip("canitoolcall")
pytest.importorskip("jsonschema")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_conformance as bc

# Floors of fixtures that pass or soft pass. What fails: library 3 (deepseek vllm-v3-malformed-missing-brace /
# -missing-call-tokens give a call where none is well formed; llama l4-truncated-missing-close-bracket, below); the
# proxy 4: those 3 and, under load, one answer whose tier-1 refinement passed the proxy's deadline and came back as
# the upstream wrote it (glm47-truncated-inside-arg-value streamed). Counts, not times; the proxy floor keeps that one
# deadline fallback of room. Raise them as fixes land.
LIBRARY_FLOOR = 466  # of 469 pass or soft pass, calls only
PROXY_FLOOR = 465  # of 469 pass or soft pass through the proxy: content, reasoning and calls, streamed and not
PROXY_LEAKS = 0  # fixtures with a family marker in content, reasoning or calls
CUT_CALLS = 1  # truncated fixtures expected to give no call that gave one (llama/l4-truncated-missing-close-bracket:
# the complete first call of a cut list is returned, the cut one is not)


def _write(tmp_path_factory, name: str, text: str) -> Path:
    out = Path(os.environ["CONFORMANCE_TABLE"]) if os.environ.get("CONFORMANCE_TABLE") else (
        tmp_path_factory.mktemp("conformance") / name)
    with out.open("a", encoding="utf-8") as f:
        f.write(text + "\n\n")
    print(f"\n{text}\n(written to {out})")
    return out


@pytest.fixture(scope="module")
def every_fixture():
    cases = bc.fixtures()
    assert len(cases) >= 469  # the package ships them all
    return cases


def test_library_calls_meet_the_floor(every_fixture, tmp_path_factory):
    cases, _ = bc.run_library(every_fixture)
    s = bc.summary(cases)
    _write(tmp_path_factory, "conformance-library.md", bc.table("library, calls only", cases))
    assert s["ok"] >= LIBRARY_FLOOR, bc.failures(cases, 40)
    assert s["leaks"] == 0 and s["cut_calls"] <= CUT_CALLS


# The whole replays: every fixture non-streamed and streamed, in one or two chunkings in the slow suite (1-8
# characters at random), in all of them in the long one
SOME, ALL = bc.STRATEGIES[3:4], bc.STRATEGIES
SOME_HARD, ALL_HARD = bc.STRATEGIES[4:5] + bc.MORE_STRATEGIES[:1], bc.STRATEGIES + bc.MORE_STRATEGIES


@pytest.mark.parametrize("strategies", [pytest.param(SOME, marks=pytest.mark.slow, id="one-chunking"),
                                        pytest.param(ALL, marks=pytest.mark.long, id="five-chunkings")])
def test_every_fixture_through_the_proxy_meets_the_floor(every_fixture, tmp_path_factory, strategies):
    """The real proxy app (tier 1 in a worker process) on loopback in front of the scripted upstream: raw output as
    content (and, for fixtures with reasoning, reasoning already separated), non-streamed and streamed."""
    cases, timing = bc.run_proxy(every_fixture, strategies, workers=1)
    s = bc.summary(cases)
    _write(tmp_path_factory, "conformance-proxy.md", bc.table("proxy", cases) + "\n\n" + timing.describe())
    assert s["ok"] >= PROXY_FLOOR, bc.failures(cases, 40)
    assert s["leaks"] <= PROXY_LEAKS and s["cut_calls"] <= CUT_CALLS
    assert s["error"] == 0


def test_a_few_fixtures_of_every_family_through_the_proxy(tmp_path_factory):
    """The same replay on two fixtures per family (the default run; the whole set is the slow test above)."""
    cases, _ = bc.run_proxy(bc.fixtures(limit=2), bc.STRATEGIES[:3], workers=0)
    assert len(cases) == 18
    failed = [c for c in cases if c.status.value not in ("pass", "soft_pass")]
    assert {c.fixture.family for c in failed} <= {"deepseek", "gemma4", "kimi"}, bc.failures(failed)


def test_reasoning_with_no_hint_never_reaches_content():
    """Every fixture with reasoning, its raw output as ``content``, no ``chat_template_kwargs`` (a client's default),
    non-streamed through the real proxy: no reasoning closer reaches ``content``, and every answer whose raw output
    shows where its reasoning ends (a closer) passes canitoolcall's judge. (Before the proxy split at the closer, 96
    of these 173 returned their reasoning as content.) The rest have no closer (cut inside the reasoning, or a block
    a call ends): only the prompt can tell those, and their text comes back as the upstream wrote it."""
    closers = {c for _, c in pairs()} | set(bc.REASONING_ENDS) - {"<|end|>"}
    chosen = [(fx, fam) for fx, fam in bc.fixtures() if fx.expected is not None and fx.expected.reasoning_content]
    assert len(chosen) >= 173
    leaked, failed = [], []
    with serve_in_thread(create_fake_upstream()) as upstream, \
            serve_in_thread(create_app(upstream + "/v1", workers=0)) as proxy, httpx.Client(timeout=120) as client:
        for fx, fam in chosen:
            body = bc.request_body(fx, fx.raw_output, None, None)
            body.pop("chat_template_kwargs", None)
            parse, _ = bc._exchange(client, proxy, body)
            if any(c in (parse.content or "") for c in closers):
                leaked.append(fx.id)
            case = bc.judge(fx, fam, parse)
            if case.status.value not in ("pass", "soft_pass"):
                failed.append(case)
    assert not leaked
    assert len(chosen) - len(failed) >= 163  # 77 before
    with_closer = [c for c in failed if any(m in c.fixture.raw_output for m in closers)]
    assert not with_closer, bc.failures(with_closer)


def test_canitoolcall_probe_passes_through_the_proxy():
    """``canitoolcall probe`` (9 scenarios, non-streamed, streamed and their equivalence) against the proxy in front
    of a scripted upstream that answers as a Qwen3 thinking model writes, with no tool or reasoning parser."""
    text = bc.run_probe(workers=0)
    assert "summary: 27 pass, 0 fail, 0 error, 0 skip" in text, text


def test_no_hints_streamed_equals_whole_under_hard_chunkings():
    """Two fixtures per family, no hints (each fixture's model new to the proxy), streamed in one delta, in 64-token
    deltas (two whole calls in one), and per character with the markers split: every stream equals the non-streamed
    answer, and no reasoning reaches content."""
    strategies = bc.STRATEGIES[:1] + bc.MORE_STRATEGIES
    cases, timing = bc.run_proxy(bc.fixtures(limit=2), strategies, workers=0, hints=False)
    assert len(cases) == 18 and not timing.leaked
    assert all(n > 0 and same == n for same, n in timing.same.values()), timing.consistency()


@pytest.mark.parametrize("strategies", [pytest.param(SOME_HARD, marks=pytest.mark.slow, id="two-chunkings"),
                                        pytest.param(ALL_HARD, marks=pytest.mark.long, id="eight-chunkings")])
def test_every_fixture_with_no_hints_through_the_proxy(every_fixture, tmp_path_factory, strategies):
    """Every fixture as a client sends it by default (no chat_template_kwargs, each fixture's model new to the proxy),
    non-streamed and streamed (two whole calls in one delta among the chunkings): at least 460 of 469 pass or soft
    pass (DeepSeek's 3 and Kimi K3's 2 cut inside reasoning that their model's name does not say is open need a hint,
    and the library's 3 fail), every stream equals its non-streamed answer, no reasoning closer in content."""
    cases, timing = bc.run_proxy(every_fixture, strategies, workers=1, hints=False)
    s = bc.summary(cases)
    _write(tmp_path_factory, "conformance-proxy-no-hints.md", bc.table("proxy, no hints", cases) + "\n\n"
           + timing.consistency())
    assert s["ok"] >= 460 and s["error"] == 0 and not timing.leaked, bc.failures(cases, 40)
    assert all(same == n for same, n in timing.same.values()), timing.consistency()
