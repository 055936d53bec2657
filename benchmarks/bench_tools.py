"""What a large tool list costs a request: ``Refiner.refine`` (tier 1 + guard) on one valid call, with ``--sizes``
tools of ``--params`` parameters each offered, against the same request offering only the called tool.

Columns (milliseconds added over that one-tool request, median of ``--repeat`` runs):

- ``every spec``: the peer, reading every offered tool's whole schema (``load_tools``, no catalog);
- ``objects``: the tools as parsed JSON objects (a library caller's list);
- ``text, new``: the tools as JSON text never seen before (the process's catalog cache emptied first), and that cost
  per 200 KB of tool list;
- ``text, seen``: the same list again, as a tier-1 worker of the proxy gets it (an equal, fresh string), found in
  the process's cache;
- ``misspelled, seen``: the call's tool name one letter off (name repair against every name), list seen before;
- ``pickled``: not refinement: what sending the list's text to a worker process with every request would cost
  (pickled and unpickled); the proxy sends a list's text once instead:
- ``body, new`` / ``body, seen``: the proxy reading a request body that holds the list
  (:func:`~refiner.specs.loads_keeping_tools`), first time / a list read before (found in place, not parsed again);
- ``worker, seen``: through the proxy's worker pool (one worker process, :class:`~refiner.proxy.isolation.WorkerPool`),
  a request naming a list that worker was sent before: the list travels as a number (its text went once), the
  worker finds the text and its catalog; ms added over the one-tool request through the same pool;
- ``proxy, seen``: ``body, seen`` + ``worker, seen``: what a repeated list adds to a request through the proxy.

Targets: a list seen before adds at most 2 ms at 2,000 tools (``proxy, seen``); a new one stays
within the 50 ms worst-case bound per 200 KB.

    .venv/bin/python benchmarks/bench_tools.py
    .venv/bin/python benchmarks/bench_tools.py --sizes 10,200 --params 5 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from refiner.formats.reading import tool_index
from refiner.pipeline import Refiner
from refiner.proxy.isolation import WorkerPool
from refiner.specs import ToolList, load_tools, loads_keeping_tools
from refiner.specs.catalog import CACHE, PARSED

SEEN_TARGET_MS = 2.0
SEEN_TARGET_TOOLS = 2000
NEW_TARGET_MS_PER_200KB = 50.0


def make_tools(n: int, params: int) -> list[dict]:
    return [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Tool number {i}: looks things up.",
        "parameters": {"type": "object", "required": ["param_0"], "properties": {
            f"param_{j}": {"type": ("string", "integer", "number", "boolean")[j % 4],
                           "description": f"Parameter {j} of tool {i}."} for j in range(params)}}}}
        for i in range(n)]


def call_text(name: str) -> str:
    return json.dumps([{"id": "call_1", "type": "function", "function": {
        "name": name, "arguments": json.dumps({"param_0": "x", "param_1": 7})}}])


def median_ms(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(repeat):
        arg = setup() if setup else None
        start = time.perf_counter()
        fn() if arg is None else fn(arg)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


class Pool:
    """One worker process of the proxy's pool, driven from this (synchronous) benchmark."""

    def __init__(self, ref: Refiner) -> None:
        self.loop = asyncio.new_event_loop()
        self.pool = WorkerPool(ref, workers=1)
        self.loop.run_until_complete(self.pool.start())

    def run(self, tools: ToolList, upstream: str) -> None:
        item = {"request": {"tools": tools, "upstream": upstream, "format": "openai"}}
        self.loop.run_until_complete(self.pool.run("tier1", [item], 60))

    def close(self) -> None:
        self.loop.run_until_complete(self.pool.stop())
        self.loop.close()


def row(ref: Refiner, pool: Pool, n: int, params: int, repeat: int, peer_max: int) -> list:
    """The table's row for ``n`` tools."""
    tools = make_tools(n, params)
    name = f"tool_{n // 2}"
    text = json.dumps(tools)
    kb = len(text) / 1024
    good, bad = call_text(name), call_text(name.replace("tool_", "tol_"))
    one = [tools[n // 2]]
    base = median_ms(lambda: ref.refine({"tools": one, "upstream": good, "format": "openai"}), repeat)
    peer = median_ms(lambda: tool_index(load_tools(tools)), max(1, repeat // 3)) if n <= peer_max else float("nan")
    objects = median_ms(lambda: ref.refine({"tools": tools, "upstream": good, "format": "openai"}), repeat)

    def fresh() -> str:
        CACHE.clear()
        return text.encode().decode()  # an equal string, not the same object

    new = median_ms(lambda t: ref.refine({"tools": t, "upstream": good, "format": "openai"}), repeat, fresh)
    CACHE.clear()
    ref.refine({"tools": text, "upstream": good, "format": "openai"})  # seen once
    seen = median_ms(lambda t: ref.refine({"tools": t, "upstream": good, "format": "openai"}), repeat,
                     lambda: text.encode().decode())
    missp = median_ms(lambda t: ref.refine({"tools": t, "upstream": bad, "format": "openai"}), repeat,
                      lambda: text.encode().decode())
    sent = ToolList(tools, text)
    shipped = median_ms(lambda: pickle.loads(pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL)), repeat)
    one_list = ToolList(one, json.dumps(one))
    pool.run(one_list, good)
    pool.run(sent, good)  # sent once
    pool_base = median_ms(lambda: pool.run(one_list, good), repeat)
    pool_seen = median_ms(lambda t: pool.run(t, good), repeat, lambda: ToolList(tools, text.encode().decode()))
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools})
    body_one = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": one})
    parse_one = median_ms(lambda b: loads_keeping_tools(b), repeat, lambda: body_one.encode().decode())

    def unseen() -> str:
        PARSED.clear()
        return body.encode().decode()

    parse_new = median_ms(lambda b: loads_keeping_tools(b), repeat, unseen) - parse_one
    loads_keeping_tools(body)
    parse = median_ms(lambda b: loads_keeping_tools(b), repeat, lambda: body.encode().decode()) - parse_one
    per = (new - base) * 200 / max(kb, 1e-9)
    return [n, f"{kb:,.0f}", peer - base, objects - base, new - base, per, seen - base, missp - base, shipped,
            parse_new, parse, pool_seen - pool_base, parse + pool_seen - pool_base]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,200,2000,10000", help="numbers of tools offered")
    ap.add_argument("--params", type=int, default=20, help="parameters per tool")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--peer-max", type=int, default=2000, help="largest list the peer (every spec) is timed on")
    args = ap.parse_args()
    ref = Refiner(engine=None)
    pool = Pool(ref)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(f"Tier 1 + guard on one valid call, {args.params} parameters per tool; ms added over the request offering "
          f"only the called tool (median of {args.repeat})\n")
    header = ("tools", "KB", "every spec", "objects", "text, new", "new per 200 KB", "text, seen", "misspelled, seen",
              "pickled", "body, new", "body, seen",
              "worker, seen", "proxy, seen")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" for _ in header) + "|")
    verdicts = []
    for n in sizes:
        cells = row(ref, pool, n, args.params, args.repeat, args.peer_max)
        print("| " + " | ".join(f"{c:.2f}" if isinstance(c, float) else f"{c:,}" if isinstance(c, int) else c
                                for c in cells) + " |")
        verdicts.append((n, cells[12], cells[5] if float(cells[1].replace(",", "")) >= 50 else None))
    pool.close()
    print()
    for n, seen, per in verdicts:
        if n == SEEN_TARGET_TOOLS:
            print(f"list seen before, through the proxy, {n} tools: {seen:.2f} ms added (target <= {SEEN_TARGET_MS:g} ms): "
                  f"{'met' if seen <= SEEN_TARGET_MS else 'NOT met'}")
        if per is not None:
            print(f"new list, {n} tools: {per:.1f} ms per 200 KB (bound {NEW_TARGET_MS_PER_200KB:g} ms): "
                  f"{'within' if per <= NEW_TARGET_MS_PER_200KB else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
