"""One ``refine`` against a peer parser, side by side, on canitoolcall's 469 raw outputs (PyPI ``canitoolcall``).

Per fixture: one ``Refiner().refine`` (no model: detection, the gate and tier 1; the fixture's tools given as a list of
dicts, read in every request, the format detected), the same with the tools given as their JSON text, as a server
receives them (the catalog of a text is kept from one request to the next, :func:`refiner.specs.tool_catalog`, so
their specs are read once, as the peer's tool objects are built before it is timed), and the peer on the same text: SGLang's own detector for the fixture's family (``detect_and_parse``, told
the family, as a server started with ``--tool-call-parser`` is), and the family's own lenient read
(``formats.get(name).parse_lenient`` in the format the text is detected in) for reference, and one ``refine`` told
the format it detects (the request's ``format``), as the peer is told the family. Each text is timed as the
best of ``--repeat`` runs of each, interleaved (so a burst of load hits both); the table gives the median and p90
over the texts and the ratio of the medians, then the same for parts of the texts: those the refine leaves
unchanged with no finding (read as written), the rest (no call, broken or cut calls), and those the peer reads as
the refine does (the same calls, at least one), each against the peer's median on the same texts.

SGLang is imported from ``--sglang-path`` (a folder holding the ``sglang`` package, e.g. the site-packages of a
throwaway venv made with ``pip install --no-deps sglang``) or from the environment; only its
``srt/function_call`` detectors are loaded (the package's ``__init__`` is skipped, IPython stubbed). Without it the
peer is the family's lenient read, and the table says so.

    .venv/bin/python benchmarks/bench_refine_peer.py --sglang-path /tmp/sgl/lib/python3.11/site-packages
    .venv/bin/python benchmarks/bench_refine_peer.py --limit 3 --repeat 1 --out /tmp/peer.md

Results are written to ``benchmarks/results/bench_refine_peer.md`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import json
import math
import statistics
import sys
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from canitoolcall.fixtures import Fixture, load_fixtures

from refiner import formats
from refiner.pipeline import Refiner

OUT = ROOT / "benchmarks" / "results" / "bench_refine_peer.md"
TARGET_X = 3.0  # issue 27: a refine at most 3 times the peer's median

# canitoolcall's family and variant tag -> SGLang's --tool-call-parser name
_BY_TAG = {
    "x-deepseek-v3": "deepseekv3", "x-deepseek-v31": "deepseekv31", "x-deepseek-v32": "deepseekv32",
    "x-deepseek-v4": "deepseekv4", "x-deepseek-v41": "deepseekv41", "x-glm45": "glm45", "x-glm47": "glm47",
    "x-glm53": "glm47", "x-kimi-k2": "kimi_k2", "x-kimi-k3": "kimi_k3", "x-llama-json": "llama3",
    "x-llama-pythonic": "pythonic",
}
_BY_FAMILY = {"gemma4": "gemma4", "gpt-oss": "gpt-oss", "mistral": "mistral", "qwen3-hermes": "qwen25",
              "qwen3-xml": "qwen3_coder"}


def sglang_parser(fx: Fixture) -> str | None:
    for tag in fx.tags:
        if tag in _BY_TAG:
            return _BY_TAG[tag]
    return _BY_FAMILY.get(fx.family)


class _Dummy:
    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __call__(self, *a: Any, **k: Any) -> _Dummy:
        return _Dummy()

    def __getattr__(self, k: str) -> _Dummy:
        return _Dummy()


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty modules for SGLang's imports that the detectors never use (IPython, pulled in by ``sglang.utils``)."""

    tops = frozenset({"IPython"})

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] in self.tops:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = lambda k: _Dummy if k[:1].isupper() else _Dummy()  # type: ignore[attr-defined]
        return m

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def load_sglang(path: str | None) -> tuple[Any, Any] | str:
    """``(the parser enum, Tool)`` from SGLang's function_call package, or why it could not be loaded."""
    import importlib.util

    root = Path(path) / "sglang" if path else None
    if root is None:
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            return "sglang is not installed (give --sglang-path)"
        root = Path(next(iter(spec.submodule_search_locations)))
    if not (root / "srt" / "function_call").is_dir():
        return f"no sglang/srt/function_call under {root.parent}"
    for name, sub in (("sglang", ""), ("sglang.srt", "srt"), ("sglang.srt.entrypoints", "srt/entrypoints"),
                      ("sglang.srt.entrypoints.openai", "srt/entrypoints/openai")):
        m = types.ModuleType(name)
        m.__path__ = [str(root / sub)]
        sys.modules[name] = m
    sys.meta_path.append(_Stubs())
    try:
        from sglang.srt.entrypoints.openai.protocol import Tool
        from sglang.srt.function_call.function_call_parser import FunctionCallParser
    except Exception as e:  # noqa: BLE001 - reported, and the lenient read is the peer
        return f"sglang's detectors could not be imported: {type(e).__name__}: {e}"
    return FunctionCallParser.ToolCallParserEnum, Tool


def request_of(fx: Fixture, as_text: bool = False) -> dict:
    tools = [dict(t) for t in fx.tools] or None
    if as_text and tools:
        tools = json.dumps(tools)
    return {"tools": tools, "query": "", "upstream": fx.raw_output, "format": None}


def best_us(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        best = min(best, time.perf_counter_ns() - t0)
    return best / 1000


def p90(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.9 * len(xs)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="fixtures per family (default: all)")
    ap.add_argument("--repeat", type=int, default=7, help="timing runs per text and reader (best of)")
    ap.add_argument("--sglang-path", default=None, help="a folder holding the sglang package")
    ap.add_argument("--out", type=Path, default=OUT, help="the results file (markdown)")
    args = ap.parse_args(argv)

    fixtures: list[Fixture] = []
    seen: Counter = Counter()
    for fx in load_fixtures():
        if args.limit is not None and seen[fx.family] >= args.limit:
            continue
        seen[fx.family] += 1
        fixtures.append(fx)

    sgl = load_sglang(args.sglang_path)
    peer_name = "SGLang's detector, told the family" if not isinstance(sgl, str) else "the family's lenient read"
    refiner = Refiner()
    rows: list[tuple[float, float, float, float, float]] = []  # (refine, sglang or nan, lenient, refine with tools
    # as text, refine told its format)
    as_written: list[bool] = []  # per text: the refine leaves it unchanged with no finding
    peer_same: list[bool] = []  # per text: the peer reads the refine's calls (at least one)
    skipped: Counter = Counter()
    for fx in fixtures:
        req, req_text = request_of(fx), request_of(fx, as_text=True)
        text = fx.raw_output
        got = refiner.refine(req)  # warm: regexes compiled
        as_written.append(got["stage"] == "unchanged" and bool(got["calls"]) and not got["upstream_diagnostics"])
        refiner.refine(req_text)  # (and the text's catalog kept)
        req_told = {**req, "format": got["format"]}
        refiner.refine(req_told)
        ours = [(c["name"], c["arguments"]) for c in got["calls"]]
        same = False
        fmt = formats.get(formats.detect_format(text) or "hermes")
        lenient = lambda fmt=fmt, text=text: fmt.parse_lenient(text)
        sglang_fn = None
        if not isinstance(sgl, str):
            enum, tool_cls = sgl
            name = sglang_parser(fx)
            if name in enum:
                try:
                    det = enum[name]()
                    tools = [tool_cls(**t) for t in fx.tools]
                    theirs = det.detect_and_parse(text, tools).calls
                    same = bool(ours) and [(c.name, json.loads(c.parameters or "{}")) for c in theirs] == ours
                    sglang_fn = lambda det=det, tools=tools, text=text: det.detect_and_parse(text, tools)
                except Exception as e:  # noqa: BLE001 - a detector that raises on a fixture is not timed
                    skipped[f"{name}: {type(e).__name__}"] += 1
            else:
                skipped[f"no parser for {fx.family}"] += 1
        r = best_us(lambda req=req: refiner.refine(req), args.repeat)
        s = best_us(sglang_fn, args.repeat) if sglang_fn is not None else float("nan")
        le = best_us(lenient, args.repeat)
        rt = best_us(lambda req_text=req_text: refiner.refine(req_text), args.repeat)
        rf = best_us(lambda req_told=req_told: refiner.refine(req_told), args.repeat)
        rows.append((r, s, le, rt, rf))
        peer_same.append(same)

    refine_t = [row[0] for row in rows]
    lenient_t = [row[2] for row in rows]
    sglang_t = [row[1] for row in rows if not math.isnan(row[1])]
    text_t = [row[3] for row in rows]
    told_t = [row[4] for row in rows]
    peer_t = sglang_t if sglang_t else lenient_t
    med_r, med_p = statistics.median(refine_t), statistics.median(peer_t)
    lines = [
        "# One refine against a peer, on canitoolcall's raw outputs",
        "",
        f"{len(rows)} texts, best of {args.repeat} runs each, interleaved; peer: {peer_name}"
        + (f" (sglang not used: {sgl})" if isinstance(sgl, str) else "")
        + (f"; {sum(skipped.values())} texts without an SGLang time ({dict(skipped)})" if skipped else "") + ".",
        "",
        "| reader | texts | median us | p90 us | median x peer |",
        "|---|---:|---:|---:|---:|",
        (f"| refine (detection, gate, tier 1; tools given) | {len(refine_t)} | {med_r:.1f} | {p90(refine_t):.1f} | "
         f"{med_r / med_p:.2f} |"),
        (f"| refine, tools given as JSON text (their specs kept from the request before) | {len(text_t)} | "
         f"{statistics.median(text_t):.1f} | {p90(text_t):.1f} | {statistics.median(text_t) / med_p:.2f} |"),
        (f"| refine told the format it detects (as the peer is told the family) | {len(told_t)} | "
         f"{statistics.median(told_t):.1f} | {p90(told_t):.1f} | {statistics.median(told_t) / med_p:.2f} |"),
    ]
    if sglang_t:
        lines.append(f"| SGLang detect_and_parse, told the family | {len(sglang_t)} | {statistics.median(sglang_t):.1f} "
                     f"| {p90(sglang_t):.1f} | {statistics.median(sglang_t) / med_p:.2f} |")
    lines.append(f"| the family's lenient read (format detected beforehand) | {len(lenient_t)} | "
                 f"{statistics.median(lenient_t):.1f} | {p90(lenient_t):.1f} | {statistics.median(lenient_t) / med_p:.2f} |")
    lines += ["", "| texts | texts | refine median us | peer median us | refine x peer |", "|---|---:|---:|---:|---:|"]
    parts = (("read as written (unchanged, no finding)", as_written),
             ("no call, broken or cut calls", [not w for w in as_written]),
             ("the peer reads the refine's calls (at least one)", peer_same))
    for label, chosen in parts:
        part = [row for row, w in zip(rows, chosen) if w]
        if not part:
            continue
        peer_part = [row[1] for row in part if not math.isnan(row[1])] if sglang_t else [row[2] for row in part]
        r_med, p_med = statistics.median(row[0] for row in part), statistics.median(peer_part)
        lines.append(f"| {label} | {len(part)} | {r_med:.1f} | {p_med:.1f} | {r_med / p_med:.2f} |")
    lines += ["", f"refine / peer (medians): {med_r / med_p:.2f}x (target at most {TARGET_X:g}x)"]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
