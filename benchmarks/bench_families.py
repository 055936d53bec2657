"""Every model family's raw outputs, read by the refiner and by a peer parser on the same texts: read rate and time
per parse, one table row per family; then ``refiner/formats/`` lines per registered format.

Texts: ``tests/corpus/dialects/*.jsonl`` (our corpus: outputs written the way each family's chat template and published
parser define them, see ``tests/dialect_corpus.py``) and canitoolcall's fixtures (real raw outputs with the parse a
correct engine must return: template renders, engine tests, bug reports; the fixtures whose expectation is a
graceful error rather than calls are left out). A text is *read* when the calls equal the expected ones (names and
canonical arguments, in order; for a prose row, no call).

- ``ours``: the public path, ``Refiner().refine`` (tier 1, no model, format auto-detected, the tools given when the
  text has them); ``parse µs`` is detection plus the lenient parse in the detected format, ``refine µs`` the whole
  tier-1 pipeline (gate and repair included);
- ``peer``: ``agent_tool_parser.try_parse_tool_calls`` (PyPI ``agent-tool-parser``, its Rust engine when installed,
  its pure-Python one with ``--peer-python``), default settings; it claims DeepSeek/DSML, Qwen, Llama, Mistral,
  ChatGLM and ReAct formats. ``peer raised``: texts on which it raised instead of returning (its Rust engine panics
  on some texts holding multi-byte characters: a ``BaseException``), counted as not read.

Times are per text on one core, best of ``--repeat`` passes, medians over the family's texts.

    python benchmarks/bench_families.py [--repeat 3] [--limit N] [--family glm45]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from bench_dialects import best_time
from dialect_corpus import load

from refiner import formats
from refiner.calls import canonical_json
from refiner.pipeline import Refiner


@dataclass
class Text:
    family: str  # corpus family, or "cit:<canitoolcall family>"
    text: str
    calls: list[dict]
    tools: Any = None


def corpus_texts() -> list[Text]:
    return [Text(r.family, r.text, r.calls, r.tools) for r in load() if r.kind != "broken"]


def fixture_texts() -> list[Text]:
    try:
        from canitoolcall.fixtures import default_fixtures_dir
    except ImportError:
        return []
    out = []
    for path in sorted(default_fixtures_dir().glob("*/*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            fx = json.loads(line)
            if "expected" not in fx:  # a graceful-error expectation, not calls
                continue
            calls = [{"name": c["name"], "arguments": c.get("arguments") or {}} for c in fx["expected"]["tool_calls"]]
            out.append(Text(f"cit:{fx['family']}", fx["raw_output"], calls, fx.get("tools")))
    return out


def _key(calls: list[dict]) -> list[tuple[str, str]]:
    return [(c["name"], canonical_json(c.get("arguments") or {})) for c in calls]


def ours_parse(text: str) -> None:
    name = formats.detect_format(text)
    if name is not None:
        formats.get(name).parse_lenient(text)


RAISED = "<peer raised>"


def peer_calls(peer: Any, text: str) -> list[dict]:
    try:
        return [{"name": c.name, "arguments": dict(c.args)} for c in peer(text)]
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 (its Rust core panics with a BaseException: a text it did not read)
        return [{"name": RAISED, "arguments": {}}]


def run(texts: list[Text], repeat: int, peer: Any) -> str:
    refiner = Refiner()
    rows: dict[str, list[dict]] = defaultdict(list)
    for t in texts:
        req: dict[str, Any] = {"upstream": t.text}
        if t.tools:
            req["tools"] = t.tools
        try:
            got = [{"name": c["name"], "arguments": c["arguments"]} for c in refiner.refine(req)["calls"]]
        except Exception as e:  # noqa: BLE001 (a request the pipeline refuses is a text it did not read)
            got = [{"name": f"<{type(e).__name__}>", "arguments": {}}]
        r = {"ours": _key(got) == _key(t.calls),
             "parse": best_time(lambda t=t: ours_parse(t.text), repeat),
             "refine": best_time(lambda req=req: refiner.refine(req), repeat)}
        if peer is not None:
            got_peer = peer_calls(peer, t.text)
            r["peer"] = _key(got_peer) == _key(t.calls)
            r["peer_raised"] = any(c["name"] == RAISED for c in got_peer)
            r["peer_us"] = best_time(lambda t=t: peer_calls(peer, t.text), repeat)
        rows[t.family].append(r)
    head = (f"{'family':<22}{'texts':>6}{'ours read':>11}{'parse µs':>10}{'refine µs':>11}"
            f"{'peer read':>11}{'peer µs':>9}{'peer raised':>13}")
    lines = [head, "-" * len(head)]
    total: dict[str, list] = defaultdict(list)
    for family in sorted(rows):
        rs = rows[family]

        def rate(key: str, rs: list[dict] = rs) -> str:
            return f"{sum(r[key] for r in rs) / len(rs):.1%}" if key in rs[0] else "-"

        def med(key: str, rs: list[dict] = rs) -> str:
            return f"{statistics.median(r[key] for r in rs) * 1e6:.1f}" if key in rs[0] else "-"

        for r in rs:
            for k, v in r.items():
                total[k].append(v)
        raised = str(sum(r["peer_raised"] for r in rs)) if "peer_raised" in rs[0] else "-"
        lines.append(f"{family:<22}{len(rs):>6}{rate('ours'):>11}{med('parse'):>10}{med('refine'):>11}"
                     f"{rate('peer'):>11}{med('peer_us'):>9}{raised:>13}")
    n = len(total["ours"])
    if n:
        peer_rate = f"{sum(total['peer']) / n:.1%}" if total.get("peer") else "-"
        peer_us = f"{statistics.median(total['peer_us']) * 1e6:.1f}" if total.get("peer_us") else "-"
        raised = str(sum(total["peer_raised"])) if total.get("peer_raised") else "-"
        lines.append(f"{'all':<22}{n:>6}{sum(total['ours']) / n:>11.1%}"
                     f"{statistics.median(total['parse']) * 1e6:>10.1f}{statistics.median(total['refine']) * 1e6:>11.1f}"
                     f"{peer_rate:>11}{peer_us:>9}{raised:>13}")
    return "\n".join(lines)


def lines_per_format() -> str:
    """``refiner/formats/`` source lines against the formats registered from it (derivation included, a family
    costs no module when it is a row)."""
    base = ROOT / "refiner" / "formats"
    files = sorted(p for p in base.rglob("*.py"))
    total = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files)
    by_module: dict[str, list[str]] = defaultdict(list)
    for f in formats.all_formats():
        by_module[type(f).__module__].append(f.name)
    n = len(formats.names())
    derive = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files if "derive" in p.parts)
    head = (f"refiner/formats/: {total} lines in {len(files)} files, {n} registered formats: "
            f"{total / max(n, 1):.0f} lines per registered format ({(total - derive) / max(n, 1):.0f} without "
            f"derive/, {derive} lines, which reads a new family from its chat template)")
    out = [head, f"{'module':<40}{'lines':>7}  formats"]
    for p in files:
        mod = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        names = by_module.get(mod, [])
        out.append(f"{mod:<40}{len(p.read_text(encoding='utf-8').splitlines()):>7}  {', '.join(names)}")
    return "\n".join(out)


def invented_table() -> str:
    """Per invented family (``tests/invented_families.py``, each with its own chat template): call outputs read
    exactly by ``Refiner(chat_template=...).refine`` (tier 1, tools offered); by ``Refiner().refine`` without the
    template (format detected); by the anchored reader alone (:mod:`refiner.formats.anchored`); calls returned that
    the text does not hold, on every output (calls, prose, broken), in each of the three; how the dialect was
    derived."""
    from invented_families import CALL_CASES, FAMILIES, TOOLS, _norm, invented, measure, outputs

    from refiner.formats import base
    from refiner.formats.anchored import anchored_calls
    from refiner.formats.derive import derive
    from refiner.formats.xmlvalues import retype_calls
    from refiner.specs import load_tools

    specs = {s.name: s for s in load_tools(TOOLS)}
    offered = {s.name: s.params for s in specs.values()}
    full = tuple(c for case, calls in CALL_CASES if case == "parallel three" for c in calls)
    rows = ["| family | derived as | with template | invented | without template | invented | anchored reader alone"
            " | invented |", "|---|---|---|---|---|---|---|---|"]
    for fam in FAMILIES:
        d = derive(fam.template)
        how = "record reader" if d.from_record else (d.same_as or (d.plan.grammar.__name__ if d.plan else "-"))
        saved = dict(base._REGISTRY)
        with_t = measure(fam, True)
        base._REGISTRY.clear()
        base._REGISTRY.update(saved)  # (the derived row is not left for the reading without the template)
        without = measure(fam, False)
        exact = total = made_up = 0
        for o in outputs(fam):
            got = retype_calls([f.call for f in anchored_calls(o.text, 0, offered)[0]], specs)
            made_up += invented(got, o.calls, full if o.kind == "broken" else ())
            if o.kind == "call":
                total += 1
                exact += _norm(got) == _norm(o.calls)
        rows.append(f"| {fam.name} | {how} | {with_t['exact']}/{with_t['calls_outputs']} | {with_t['invented']} | "
                    f"{without['exact']}/{without['calls_outputs']} | {without['invented']} | {exact}/{total} | "
                    f"{made_up} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="at most this many texts per family (a smoke run)")
    ap.add_argument("--family", action="append", help="only these families (corpus names, or cit:<family>)")
    ap.add_argument("--peer-python", action="store_true", help="the peer's pure-Python engine, not its Rust one")
    ap.add_argument("--invented", action="store_true", help="only the table of the families nobody registered "
                    "(tests/invented_families.py): read with their chat template, and without it")
    args = ap.parse_args(argv)
    if args.invented:
        print(invented_table())
        return 0
    if args.peer_python:
        os.environ["AGENT_TOOL_PARSER_NO_EXT"] = "1"  # read when the package is imported
    try:
        from agent_tool_parser import ACCELERATED, try_parse_tool_calls
    except ImportError:
        try_parse_tool_calls, ACCELERATED = None, False
    texts = corpus_texts() + fixture_texts()
    by_family: dict[str, list[Text]] = defaultdict(list)
    for t in texts:
        if not args.family or t.family in args.family:
            by_family[t.family].append(t)
    chosen = [t for fam in sorted(by_family) for t in by_family[fam][: args.limit]]
    peer = "agent-tool-parser " + ("(accelerated)" if ACCELERATED else "(pure Python)") if try_parse_tool_calls \
        else "agent-tool-parser not installed"
    print(f"{len(chosen)} texts; peer: {peer}")
    print(run(chosen, args.repeat, try_parse_tool_calls))
    print()
    print(lines_per_format())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
