"""Worst-case cost of every public entry point on hostile inputs, against the 50 ms bound for any input up to 200 KB.

Inputs come from ``tests/hostile.py`` and are built from the format registry (so formats added later are measured
too): bracket, paren, quote and tag storms (every format's markers and tags), deep nesting (5,000 levels), repeated
blocks, huge numbers (10**5000, 1e999), very long strings, thousands of calls, texts cut short; each format's own
storms sit where one of its values goes; and every format's own render of many calls (with no arguments, with
literals only, with strings) and of one call writing a file of three quarters of the size, each put through every
format's reader (``hostile.family_texts``: no reader may go on past a call, per call). Entry points: each format's
``parse_strict`` and ``parse_lenient`` (the calls of every format too), ``formats.detect_format``, the gate
(``check_text`` on every text in every format, ``check_calls`` on hostile call lists), tier 1 (``repair_text``,
``repair_calls``), ``Refiner().refine`` (format detected, and each format requested),
``Refiner().refine_batch(errors="result")`` and ``rewards.compute_score`` (with the hostile text as the upstream too);
``refine`` also with a tool list as long as the texts (:func:`long_tool_lists`); the readers built at run time
(:func:`derived_readers`: the record reader of each invented family's template, the anchored reader).

Each input is timed as CPU time of this thread, best of ``--repeat`` runs (one by default: a run can only come out
slower than the input's best, and one over the bound is measured again, see :class:`Table`, so more runs change no
verdict; the reward's upstream cache is cleared before each), each distinct text once per entry point (a names-only
format writes its calls alike whatever their arguments; a format's many calls with strings are among its texts for
every reader too), and the table prints, per entry point (and
per format for the parsers), the slowest input, its time and whether the 50 ms bound is met. The peer, in the same
run: ``json.loads`` of a valid 200 KB JSON text of calls; the bound is judged as a multiple of it (``BOUND_X_PEER``:
50 ms on a reference machine where the peer takes ``REFERENCE_PEER_S``), since the speed of a shared machine drifts.
Any exception other than an entry point's documented one is reported as a failure.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_worst_case.py [--size 200000] [--repeat 1] [--format NAME]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from hostile import family_texts, format_texts, hostile_calls, hostile_texts  # noqa: E402

from refiner import formats  # noqa: E402
from refiner.calls import ToolCall  # noqa: E402
from refiner.gate import check_calls, check_text  # noqa: E402
from refiner.pipeline import Refiner, RequestError  # noqa: E402
from refiner.repair import repair_calls, repair_text  # noqa: E402
from refiner.specs import catalog, load_tools  # noqa: E402
from rewards import compute_score, make_ground_truth  # noqa: E402
from rewards.score import _upstream_breakdown  # noqa: E402

BOUND_S = 0.050
# The bound is judged against the peer measured in the same run (a shared machine's speed drifts, so a time in
# milliseconds alone says as much about the machine as about the code): BOUND_X_PEER is the bound as a multiple of
# the peer's time on the reference machine, REFERENCE_PEER_S.
REFERENCE_PEER_S = 0.00181
BOUND_X_PEER = BOUND_S / REFERENCE_PEER_S
TOOLS = [
    {
        "name": "book_table",
        "parameters": {
            "type": "object",
            "properties": {
                "restaurant": {"type": "string", "minLength": 1, "pattern": "^[A-Za-z ]+$"},
                "people": {"type": "integer", "minimum": 1, "maximum": 20},
                "time": {"type": "string"},
                "price": {"type": "number"},
                "dishes": {"type": "array", "items": {"type": "string", "enum": ["soup", "fish", "cake"]}},
                "contact": {"type": "object", "properties": {"phone": {"type": "string"}}, "required": ["phone"]},
            },
            "required": ["restaurant", "people"],
        },
    },
    {"name": "cancel_booking", "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}}},
    {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}},
]
GOLD = [ToolCall("book_table", {"restaurant": "Chez Nous", "people": 4}), ToolCall("f", {"a": 1, "b": "x"})]


def long_tool_lists(size: int) -> list[tuple[str, list[dict], str]]:
    """``(kind, tools, upstream)``: a request of about ``size`` characters, half of it a tool list in JSON (the tools
    are input too) and half an upstream of Hermes calls: to names no tool has (each a candidate for a name snap), and
    to every offered tool in turn with misspelt parameter names (each tool's spec is read)."""
    tool = {"name": "tool_00000", "description": "d", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}
    size //= 2
    n_tools = max(1, size // len(json.dumps(tool)))
    tools = [{**tool, "name": f"tool_{i:05d}"} for i in range(n_tools)]

    def upstream(make: Callable[[int], dict]) -> str:
        blocks, total, i = [], 0, 0
        while total < size - 200:
            block = f"<tool_call>\n{json.dumps(make(i))}\n</tool_call>\n"
            blocks.append(block)
            total, i = total + len(block), i + 1
        return "".join(blocks)

    return [
        (f"{n_tools} tools, calls to other names", tools,
         upstream(lambda i: {"name": f"other_{i}", "arguments": {"city": "x", "n": i}})),
        (f"{n_tools} tools, misspelt parameters", tools,
         upstream(lambda i: {"name": f"tool_{i % n_tools:05d}", "arguments": {"cty": "x", "dayz": "3"}})),
    ]


def forget_tool_lists() -> None:
    """Empties the kept catalogs of tool lists given as text (and their parsed lists)."""
    catalog.CACHE.clear()
    catalog.PARSED.clear()


def cpu_time(fn: Callable[[], object], repeat: int, before: Callable[[], None] | None = None) -> float:
    best = float("inf")
    for _ in range(repeat):
        if before is not None:
            before()
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return best


class Table:
    """The worst input per entry point, as a multiple of the peer measured close to it: the peer is measured again
    (best of 3) once PEER_EVERY_S seconds of this thread's time have passed since it last was, so a machine whose
    speed drifts during the run (a shared one does) is judged against itself, and a run of many small inputs is not
    mostly peers. An input the sweep finds over the bound is measured again at once, CONFIRM_RUNS times,
    each run between two peers of its own and after a full collection (a full pass of the collector that the garbage
    of earlier inputs and peers made due is paid before the run, not billed to it; the run's own allocations still
    pay theirs), and judged by its best run against the faster of those two peers (the stricter choice; the sweep's
    peer can be minutes and a burst of load away from the input it judges)."""

    PEER_EVERY_S = 0.5
    CONFIRM_RUNS = 9

    def __init__(self, repeat: int, show_over: float | None = None) -> None:
        self.repeat = repeat
        self.show_over = show_over  # ms on the reference machine: print every input slower than this as measured
        self.rows: dict[str, tuple[float, float, str, int]] = {}  # entry -> (worst x peer, its time, input, size)
        self.failures: list[str] = []
        self.peers: list[float] = []
        self.peer = self.peer_again()
        self.confirmed: list[tuple[str, str, float, float]] = []  # (entry, input, x peer in the sweep, measured again)

    def measure(self, entry: str, kind: str, text_len: int, fn: Callable[[], object], allowed: tuple = (),
                before: Callable[[], None] | None = None) -> None:
        def run() -> None:
            try:
                fn()
            except allowed:
                pass

        if time.thread_time() - self.peer_at >= self.PEER_EVERY_S:
            self.peer_again()
        try:
            spent = cpu_time(run, self.repeat, before)
        except Exception as e:  # noqa: BLE001 - an undocumented exception is the finding
            self.failures.append(f"{entry} on {kind} ({text_len} chars): {type(e).__name__}: {str(e)[:120]}")
            return
        swept = ratio = spent / self.peer
        again = ""
        if swept > BOUND_X_PEER:
            ratio, confirmed = self.confirm(run, before)
            self.confirmed.append((entry, kind, swept, ratio))
            again = f"; measured again: {confirmed * 1e3:.1f} ms, {ratio * REFERENCE_PEER_S * 1e3:.1f} ref ms"
        if self.show_over is not None and max(swept, ratio) * REFERENCE_PEER_S * 1e3 > self.show_over:
            print(f"over: {entry} on {kind} ({text_len} chars): {spent * 1e3:.1f} ms, {swept:.1f}x peer, "
                  f"{swept * REFERENCE_PEER_S * 1e3:.1f} ref ms{again}", flush=True)
        if again:
            spent = confirmed
        worst = self.rows.get(entry)
        if worst is None or ratio > worst[0]:
            self.rows[entry] = (ratio, spent, kind, text_len)

    def confirm(self, run: Callable[[], None], before: Callable[[], None] | None) -> tuple[float, float]:
        """``(x peer, time)`` of the best of CONFIRM_RUNS runs, each against the faster of the peers just before
        and just after it."""
        best = (float("inf"), 0.0)
        after = self.peer_again()
        for _ in range(self.CONFIRM_RUNS):
            prior = after
            gc.collect()
            spent = cpu_time(run, 1, before)
            after = self.peer_again()
            best = min(best, (spent / min(prior, after), spent))
        return best

    def peer_again(self) -> float:
        """The peer measured now (best of 3), kept as the sweep's."""
        self.peer = peer_time(3)
        self.peer_at = time.thread_time()
        self.peers.append(self.peer)
        return self.peer

    def print(self) -> int:
        print(f"\n{'entry point':42} {'worst input':44} {'chars':>8} {'ms':>8} {'x peer':>7} {'ref ms':>7}  50 ms")
        missed = 0
        for entry, (ratio, spent, kind, n) in self.rows.items():
            ok = ratio <= BOUND_X_PEER
            missed += not ok
            verdict = "met" if ok else "MISSED"
            print(f"{entry:42} {kind[:44]:44} {n:8d} {spent * 1e3:8.2f} {ratio:7.1f} "
                  f"{ratio * REFERENCE_PEER_S * 1e3:7.1f}  {verdict}")
        lo, hi = min(self.peers), max(self.peers)
        print(f"\npeer: json.loads of a valid {PEER_CHARS // 1000} KB call list, measured {len(self.peers)} times "
              f"during the run: {lo * 1e3:.2f}-{hi * 1e3:.2f} ms (reference machine: {REFERENCE_PEER_S * 1e3:.2f} ms; "
              "'ref ms' is a time scaled to it by the peer measured closest)")
        held = sum(again <= BOUND_X_PEER for *_, again in self.confirmed)
        print(f"{len(self.confirmed)} inputs over the bound in the sweep were measured again ({self.CONFIRM_RUNS} "
              f"runs, each between two peers of its own): {held} within it")
        print(f"{len(self.rows) - missed} of {len(self.rows)} entry points within 50 ms on the reference "
              f"({BOUND_X_PEER:.1f}x peer); {missed} missed")
        for f in self.failures:
            print("FAILURE (undocumented exception):", f)
        return missed + len(self.failures)


PEER_CHARS = 200_000


def peer_time(repeat: int) -> float:
    call = {"name": "book_table", "arguments": {"restaurant": "Chez Nous", "people": 4, "dishes": ["soup", "fish"]}}
    text = json.dumps([call] * (PEER_CHARS // len(json.dumps(call))))
    return cpu_time(lambda: json.loads(text), max(repeat, 3))


def distinct(texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``texts`` without those whose text came before (under another kind)."""
    seen: set[str] = set()
    return [(kind, text) for kind, text in texts if not (text in seen or seen.add(text))]


def derived_readers(table: Table, size: int, shared: list, every: list, specs: list) -> None:
    """The readers built at run time: the generic record reader (:mod:`refiner.formats.recorded`) of each invented
    family's chat template (``tests/data/invented/``, derived here), on the shared storms and its own; the anchored
    reader (:mod:`refiner.formats.anchored`) on every text, with the bench's tools offered, and on each derived
    format's own texts (its renders of many calls to offered tools, whole and cut)."""
    from refiner.formats.anchored import anchored_calls
    from refiner.formats.derive import derive

    offered = {s.name: s.params for s in specs}
    own = []
    for path in sorted((ROOT / "tests" / "data" / "invented").glob("*.jinja")):
        fmt = derive(path).fmt
        if fmt is None:
            continue
        texts = format_texts(fmt, size)
        own += [(f"{path.stem}: {k}", t) for k, t in texts]
        for kind, text in shared + texts:
            table.measure(f"record {path.stem}.parse_strict", kind, len(text), lambda: fmt.parse_strict(text),
                          (formats.FormatError,))
            table.measure(f"record {path.stem}.parse_lenient", kind, len(text), lambda: fmt.parse_lenient(text))
    for kind, text in every + own:
        table.measure("anchored.anchored_calls", kind, len(text), lambda: anchored_calls(text, 0, offered))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=200_000, help="characters per storm (the bound is for 200 KB)")
    ap.add_argument("--repeat", type=int, default=1, help="timing runs per input (best of)")
    ap.add_argument("--format", action="append", help="only these formats (default: every registered one)")
    ap.add_argument("--show-over", type=float, metavar="MS",
                    help="also print every input slower than MS milliseconds on the reference machine, as measured")
    ap.add_argument("--skip-pipeline", action="store_true", help="parsers, detection and the reward only")
    args = ap.parse_args(argv)
    started = time.time()
    size, repeat = args.size, args.repeat
    fmts = [formats.get(n) for n in args.format] if args.format else formats.by_rank()
    specs = load_tools(TOOLS)
    index = {s.name: s for s in specs}
    refiner = Refiner()
    table = Table(repeat, args.show_over)

    common = hostile_texts(size)
    per_format = {f.name: format_texts(f, size) for f in fmts}
    crossing = distinct([t for f in formats.by_rank() for t in family_texts(f, size)])  # (for every reader)
    every = distinct(common + [(f"{n}: {k}", t) for n, texts in per_format.items() for k, t in texts] + crossing)
    print(f"{len(every)} hostile texts (storms of {size} characters, {len(crossing)} of them calls for every "
          f"reader), {len(fmts)} formats, best of {repeat}")

    for fmt in fmts:
        for kind, text in distinct(common + per_format[fmt.name] + crossing):
            n = len(text)
            table.measure(f"{fmt.name}.parse_strict", kind, n, lambda: fmt.parse_strict(text), (formats.FormatError,))
            table.measure(f"{fmt.name}.parse_lenient", kind, n, lambda: fmt.parse_lenient(text))
    for kind, text in every:
        table.measure("formats.detect_format", kind, len(text), lambda: formats.detect_format(text))
    derived_readers(table, size, common + crossing, every, specs)

    gts = {f.name: make_ground_truth(f.name, f.parse_strict(f.render([c for c in GOLD if not f.names_only]
                                                                      or [ToolCall("f", {})])))
           for f in fmts if not f.names_only}
    for fmt in fmts:
        gt = gts.get(fmt.name) or make_ground_truth(fmt.name, fmt.parse_strict(fmt.example))
        for kind, text in common + per_format[fmt.name]:
            table.measure(
                "rewards.compute_score", f"{fmt.name}: {kind}", len(text),
                lambda: compute_score("bench", text, gt, {"upstream": text}),
                before=_upstream_breakdown.cache_clear,
            )

    if not args.skip_pipeline:
        for fmt in fmts:
            for kind, text in common + per_format[fmt.name]:
                n, label = len(text), f"{fmt.name}: {kind}"
                table.measure("gate.check_text", label, n, lambda: check_text(text, fmt.name, index))
                table.measure("repair.repair_text", label, n, lambda: repair_text(text, fmt.name, index))
                table.measure("Refiner.refine (format given)", label, n,
                              lambda: refiner.refine({"tools": TOOLS, "upstream": text, "format": fmt.name}))
        for kind, text in every:
            table.measure("Refiner.refine (format detected)", kind, len(text),
                          lambda: refiner.refine({"tools": TOOLS, "upstream": text}), (RequestError,))
            table.measure("Refiner.refine_batch(errors=result)", kind, len(text),
                          lambda: refiner.refine_batch([{"tools": TOOLS, "upstream": text}, {"upstream": 1}],
                                                       errors="result"))
        for kind, calls in hostile_calls(size):
            for fmt in fmts:
                label = f"{fmt.name}: {kind}"
                table.measure("gate.check_calls", label, 0, lambda: check_calls(calls, index, fmt=fmt.name))
                table.measure("repair.repair_calls", label, 0, lambda: repair_calls(calls, index, fmt=fmt.name))
        for kind, tools, text in long_tool_lists(size):
            tools_text = json.dumps(tools)
            table.measure("Refiner.refine (format given)", kind, len(text),
                          lambda: refiner.refine({"tools": tools, "upstream": text, "format": "hermes"}))
            table.measure("Refiner.refine (format detected)", f"{kind}, as JSON text", len(text),
                          lambda: refiner.refine({"tools": tools_text, "upstream": text}),
                          before=forget_tool_lists)  # (the first request that offers the list: none kept yet)

    missed = table.print()
    print(f"run: {(time.time() - started) / 60:.1f} min")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
