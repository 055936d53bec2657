"""Proxy overhead: latency (p50/p99) and throughput through ``tool-refiner serve`` vs the upstream called directly.

Both servers run as separate processes on loopback: the scripted fake upstream (``tests/fake_upstream.py``) and the
proxy started with the real CLI (tier-1 repair + guard, no refiner model). The same client (httpx, async, fixed
concurrency) sends the same chat requests to each; the proxy rows are compared with the direct row.

    .venv/bin/python benchmarks/bench_proxy.py --requests 2000 --concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_upstream import BROKEN_CALLS as BROKEN
from fake_upstream import VALID_CALLS as VALID
from fake_upstream import WEATHER_QUERY, WEATHER_TOOLS, free_port, serve_in_subprocess


def payload(calls: list[dict], i: int) -> dict:
    return {"model": "fake-model", "tools": WEATHER_TOOLS, "x_fake": {"tool_calls": calls, "content": f"r{i}"},
            "messages": [{"role": "user", "content": WEATHER_QUERY}]}


async def load(url: str, calls: list[dict], requests: int, concurrency: int) -> tuple[list[float], float, int]:
    """Latencies (s) of ``requests`` POSTs at ``concurrency``, the wall time, and the number of failures."""
    latencies: list[float] = []
    errors = 0
    queue = iter(range(requests))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def worker() -> None:
            nonlocal errors
            for i in queue:
                t = time.perf_counter()
                r = await client.post(url + "/v1/chat/completions", json=payload(calls, i))
                latencies.append(time.perf_counter() - t)
                if r.status_code != 200 or r.json()["choices"][0]["message"]["content"] != f"r{i}":
                    errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, time.perf_counter() - start, errors


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else xs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per target")
    args = ap.parse_args()

    py = sys.executable
    up_port, px_port = free_port(), free_port()
    with serve_in_subprocess([py, str(ROOT / "tests" / "fake_upstream.py"), str(up_port)], up_port) as upstream:
        cli = [py, "-m", "refiner.cli", "serve", "--upstream-base-url", upstream + "/v1", "--port", str(px_port),
               "--log-level", "warning"]
        with serve_in_subprocess(cli, px_port, health_path="/health") as proxy:
            runs = [("direct upstream", upstream, BROKEN), ("proxy, valid calls", proxy, VALID),
                    ("proxy, broken calls", proxy, BROKEN)]
            for _, url, calls in runs:
                asyncio.run(load(url, calls, args.warmup, min(args.concurrency, args.warmup)))
            # Interleaved rounds, so a change in machine load hits every target alike.
            stats = {name: ([], 0.0, 0) for name, _, _ in runs}
            per_round = max(1, args.requests // args.rounds)
            for _ in range(args.rounds):
                for name, url, calls in runs:
                    lat, wall, errors = asyncio.run(load(url, calls, per_round, args.concurrency))
                    acc = stats[name]
                    stats[name] = (acc[0] + lat, acc[1] + wall, acc[2] + errors)
            rows = [(name, pct(lat, 50) * 1e3, pct(lat, 99) * 1e3, len(lat) / wall, errors)
                    for name, (lat, wall, errors) in stats.items()]

    base = rows[0]
    n = per_round * args.rounds
    print(f"\n{n} requests per target in {args.rounds} interleaved rounds, concurrency {args.concurrency}, loopback, "
          "proxy = tier-1 repair + guard (no model); x = ratio to the direct upstream\n")
    head = f"{'target':<22}{'p50 ms':>9}{'p99 ms':>9}{'req/s':>9}{'errors':>8}{'p50 x':>8}{'req/s x':>9}"
    print(head + "\n" + "-" * len(head))
    for name, p50, p99, rps, errors in rows:
        print(f"{name:<22}{p50:>9.2f}{p99:>9.2f}{rps:>9.1f}{errors:>8}{p50 / base[1]:>8.2f}{rps / base[3]:>9.2f}")


if __name__ == "__main__":
    main()
