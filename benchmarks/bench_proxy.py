"""The refining proxy on loopback: its overhead, and how well it isolates requests from hostile ones.

Both servers run as separate processes: the scripted fake upstream (``tests/fake_upstream.py``, in
``--upstream-workers`` processes) and the proxy started with the real CLI (tier-1 repair + guard, no refiner model).

1. **Overhead** (closed loop, fixed concurrency): latency p50/p99 and throughput through the proxy vs the upstream
   called directly, for valid and for broken calls.
2. **Isolation** (open loop, Poisson arrivals at ``--rate``): normal requests alone, then the *same* normal requests
   with hostile ones mixed in (``--hostile-share`` of all requests, default 10 %): bracket, paren, quote and tag
   storms, deep nesting, huge strings, thousands of calls, a hostile conversation history, each sized at the body
   limit (``--max-body-mb``; answers that big come from the upstream), and bodies just over it (413), sent by a
   second client process at the same time. The two phases alternate over ``--rounds`` rounds so that a change in
   machine load hits both alike. Target: the normal requests'
   p99 with hostile ones within 2x of their p99 without, and every normal request answered 200 and refined.
   ``--compare-threads`` runs the same mix once more with the proxy's tier-1 work in threads (``--workers 0``),
   the peer without process isolation; ``--compare-direct`` sends it to the upstream itself, the peer without any
   proxy (what the mix costs the upstream, the clients and the machine alone).

3. **Call to delta**: the time from a call's last byte leaving the upstream to its tool-call delta reaching the
   client, for a call early in a long streamed generation (calls are sent as they close). Target: 5 ms median.

**Added time** (what the proxy adds to a request): p50 and p99 through the proxy less the same percentile of the
upstream called directly with the same traffic, quiet (table 1's closed loop; table 2's phase without hostile
requests) and under the hostile load (table 2's mixed phase; needs ``--compare-direct``). Every figure is also
written to ``--out`` (JSON, default ``benchmarks/results/bench_proxy.json``; ``--out ''``: none), with the machine's
load average: the machine's other work moves these figures, so compare a run's rows with each other.

    .venv/bin/python benchmarks/bench_proxy.py                                  # all three tables, default sizes
    .venv/bin/python benchmarks/bench_proxy.py --mode latency --latency-runs 50
    .venv/bin/python benchmarks/bench_proxy.py --mode isolation --rate 30 --normal 600 --compare-threads --compare-direct
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_upstream import BROKEN_CALLS as BROKEN
from fake_upstream import VALID_CALLS as VALID
from fake_upstream import WEATHER_QUERY, WEATHER_TOOLS, free_port, serve_in_subprocess

TARGET_RATIO = 2.0
OUT = ROOT / "benchmarks" / "results" / "bench_proxy.json"
JSON = {"content-type": "application/json"}


def payload(calls: list[dict], i: int) -> dict:
    return {"model": "fake-model", "tools": WEATHER_TOOLS, "x_fake": {"tool_calls": calls, "content": f"r{i}"},
            "messages": [{"role": "user", "content": WEATHER_QUERY}]}


def pct(xs: list[float], q: int) -> float:
    if not xs:
        return float("nan")
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else xs[0]


def start_proxy(upstream: str, port: int, extra: list[str]):
    cli = [sys.executable, "-m", "refiner.cli", "serve", "--upstream-base-url", upstream + "/v1", "--port", str(port),
           "--log-level", "warning", *extra]
    return serve_in_subprocess(cli, port, health_path="/health")


# ----------------------------------------------------------------------------------------------------------------
# 1. Overhead


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


def overhead(upstream: str, proxy: str, args: argparse.Namespace) -> list[tuple]:
    runs = [("direct upstream", upstream, BROKEN), ("proxy, valid calls", proxy, VALID),
            ("proxy, broken calls", proxy, BROKEN)]
    for _, url, calls in runs:
        asyncio.run(load(url, calls, args.warmup, min(args.concurrency, args.warmup)))
    stats = {name: ([], 0.0, 0) for name, _, _ in runs}
    per_round = max(1, args.requests // args.rounds)
    for _ in range(args.rounds):  # interleaved, so a change in machine load hits every target alike
        for name, url, calls in runs:
            lat, wall, errors = asyncio.run(load(url, calls, per_round, args.concurrency))
            acc = stats[name]
            stats[name] = (acc[0] + lat, acc[1] + wall, acc[2] + errors)
    rows = [(name, pct(lat, 50) * 1e3, pct(lat, 99) * 1e3, len(lat) / wall, errors)
            for name, (lat, wall, errors) in stats.items()]
    base = rows[0]
    print(f"\n1. Overhead: {per_round * args.rounds} requests per target in {args.rounds} interleaved rounds, "
          f"concurrency {args.concurrency}; x = ratio to the direct upstream\n")
    head = f"{'target':<22}{'p50 ms':>9}{'p99 ms':>9}{'req/s':>9}{'errors':>8}{'p50 x':>8}{'req/s x':>9}"
    print(head + "\n" + "-" * len(head))
    for name, p50, p99, rps, errors in rows:
        print(f"{name:<22}{p50:>9.2f}{p99:>9.2f}{rps:>9.1f}{errors:>8}{p50 / base[1]:>8.2f}{rps / base[3]:>9.2f}")
    return rows


# ----------------------------------------------------------------------------------------------------------------
# 2. Isolation


def normal_request(i: int) -> tuple[bytes, list[str]]:
    """A normal request (broken or valid calls, alternately) and the tool names its refined answer must carry."""
    calls = BROKEN if i % 2 else VALID
    return json.dumps(payload(calls, i)).encode(), ["get_weather", "get_time"]


def hostile_requests(limit: int) -> list[tuple[str, bytes, int]]:
    """``(name, body, expected status)`` of every hostile shape, each sized at the body limit ``limit`` (bytes)."""
    n = int(limit * 0.9)  # characters of hostile text: the request (or the upstream's answer) is near the limit

    def answer(content: object = None, calls: list[dict] | None = None) -> bytes:
        fake: dict = {"content": content} if content is not None else {"content": None}
        if calls is not None:
            fake["tool_calls"] = calls
        return json.dumps({"model": "fake-model", "tools": WEATHER_TOOLS, "x_fake": fake,
                           "messages": [{"role": "user", "content": WEATHER_QUERY}]}).encode()

    def args(prefix: str, unit: str, times: int) -> list[dict]:
        return [{"name": "get_weather", "arguments": {"$prefix": prefix, "$repeat": [unit, times]}, "id": "call_h"}]

    many = [{"name": "get_wether", "arguments": '{"city": "Paris", "days": "3"', "id": f"call_{k}"}
            for k in range(min(3000, max(2, n // 60)))]
    history = [{"role": "user", "content": WEATHER_QUERY},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_old", "type": "function",
                    "function": {"name": "get_wether", "arguments": '{"a": 1, "b"' + "(" * (n - 200)}}]},
               {"role": "tool", "tool_call_id": "call_old", "content": "sunny"},
               {"role": "user", "content": "And tomorrow?"}]
    history_body = json.dumps({"model": "fake-model", "tools": WEATHER_TOOLS, "messages": history,
                               "x_fake": {"tool_calls": VALID}}).encode()
    over = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "x" * (limit + 1024)}]})
    return [
        ("paren storm", answer(calls=args('{"a": 1, "b"', "(", n)), 200),
        ("bracket storm", answer(calls=args('{"a": 1, "b": ', "[", n)), 200),
        ("quote storm", answer(calls=args('{"a": ', '"', n)), 200),
        ("deep nesting", answer(calls=args("", '{"a":', n // 5)), 200),
        ("tag storm in content", answer(content={"$prefix": "Let me see.\n", "$repeat": ["<tool_call>{", n // 12]}),
         200),
        ("huge string", answer(calls=args('{"city": "', "x", n)), 200),
        ("thousands of calls", answer(calls=many), 200),
        ("broken history", history_body, 200),
        ("over the limit", over.encode(), 413),
    ]


def check_normal(r: httpx.Response, names: list[str] | None) -> bool:
    """Answered 200, refined (not timed out, not failed) and carrying the right tools; ``names`` None (the upstream
    called directly): answered 200."""
    if names is None:
        return r.status_code == 200
    if r.status_code != 200 or r.headers.get("x-tool-refiner") not in ("repaired", "unchanged"):
        return False
    message = r.json()["choices"][0]["message"]
    return [t["function"]["name"] for t in message.get("tool_calls") or []] == names


async def open_loop(url: str, schedule: list[tuple[float, str, bytes, object]],
                    start_at: float | None = None) -> list[tuple[str, float, object]]:
    """Sends each ``(time offset, kind, body, expected)`` at ``start_at`` (epoch seconds; default: now) plus its
    offset; ``(kind, latency s, outcome)`` per request, where a normal request's outcome is whether it passed
    :func:`check_normal` and a hostile one's is ``(status, stage)``."""
    limits = httpx.Limits(max_connections=512, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        loop = asyncio.get_running_loop()
        start = loop.time() + (0.05 if start_at is None else max(0.0, start_at - time.time()))

        async def one(at: float, kind: str, body: bytes, expected: object) -> tuple[str, float, object]:
            await asyncio.sleep(max(0.0, start + at - loop.time()))
            t = time.perf_counter()
            try:
                r = await client.post(url + "/v1/chat/completions", content=body, headers=JSON)
            except httpx.HTTPError as e:
                return kind, time.perf_counter() - t, False if kind == "normal" else (type(e).__name__, "-")
            latency = time.perf_counter() - t
            if kind == "normal":
                return kind, latency, check_normal(r, expected)
            return kind, latency, (r.status_code, r.headers.get("x-tool-refiner", "-"))

        return await asyncio.gather(*(one(*s) for s in schedule))


def schedules(args: argparse.Namespace, limit: int, seed: int) -> tuple[list, list]:
    """The normal requests and the hostile ones of a round: Poisson arrivals, reproducible from ``seed``."""
    rng = random.Random(seed)
    normal_rate = args.rate * (1 - args.hostile_share)
    hostile_rate = args.rate * args.hostile_share
    per_round = max(1, args.normal // args.rounds)
    t, normal = 0.0, []
    for i in range(per_round):
        t += rng.expovariate(normal_rate)
        body, names = normal_request(seed * 100_000 + i)
        normal.append((t, "normal", body, names))
    shapes = [h for h in hostile_requests(limit) if not args.shapes or h[0] in args.shapes.split(",")]
    hostile, t = [], 0.0
    k = rng.randrange(len(shapes))
    while hostile_rate > 0:
        t += rng.expovariate(hostile_rate)
        if t > normal[-1][0]:
            break
        name, body, status = shapes[k % len(shapes)]
        hostile.append((t, name, body, status))
        k += 1
    return normal, hostile


def send_hostile(spec: dict) -> None:
    """The hostile client (its own process, as hostile traffic comes from other clients): sends a round's hostile
    requests from ``start_at`` and prints their outcomes as JSON."""
    args = argparse.Namespace(**spec["args"])
    _, hostile = schedules(args, spec["limit"], spec["seed"])
    rows = asyncio.run(open_loop(spec["url"], hostile, spec["start_at"]))
    print(json.dumps([[kind, latency, list(outcome)] for kind, latency, outcome in rows]))


def mixed_round(proxy: str, args: argparse.Namespace, limit: int, seed: int, normal: list) -> list:
    """The normal requests of a round with the hostile ones sent at the same time by another process."""
    start_at = time.time() + 3.0  # time for the other process to start
    spec = {"url": proxy, "limit": limit, "seed": seed, "start_at": start_at, "args": vars(args)}
    sender = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--hostile-sender", json.dumps(spec)],
                              stdout=subprocess.PIPE, text=True)
    rows = asyncio.run(open_loop(proxy, normal, start_at))
    out, _ = sender.communicate(timeout=600)
    if sender.returncode != 0:
        raise RuntimeError(f"the hostile client failed with exit code {sender.returncode}")
    return rows + [(kind, latency, tuple(outcome)) for kind, latency, outcome in json.loads(out)]


def proxy_flags(args: argparse.Namespace) -> list[str]:
    return ["--max-body-mb", str(args.max_body_mb), "--refine-timeout", str(args.refine_timeout)]


def isolation_run(proxy: str, args: argparse.Namespace, label: str, direct: bool = False) -> dict:
    """Both phases against ``proxy`` (``direct``: the upstream itself, the peer without any proxy)."""
    limit = int(args.max_body_mb * 1024 * 1024)
    results: dict[str, list] = {"without": [], "with": []}
    round_ratios: list[float] = []
    warm = [(0.01 * i, "normal", *normal_request(i)) for i in range(min(20, args.normal))]
    asyncio.run(open_loop(proxy, warm))
    if not direct:  # steady state: the workers have read each hostile shape before (lazy imports, compiled patterns)
        shapes = hostile_requests(limit)
        asyncio.run(open_loop(proxy, [(0.05 * i, name, body, status) for i, (name, body, status)
                                      in enumerate(shapes * 4)]))
    for r in range(args.rounds):  # the two phases alternate, so a change in machine load hits both alike
        normal, _ = schedules(args, limit, seed=r + 1)
        if direct:
            normal = [(t, kind, body, None) for t, kind, body, _ in normal]
        p99s = {}
        for name in ("without", "with") if r % 2 == 0 else ("with", "without"):
            if name == "without":
                rows = asyncio.run(open_loop(proxy, normal))
            else:
                rows = mixed_round(proxy, args, limit, r + 1, normal)
            results[name] += rows
            p99s[name] = pct([lat for kind, lat, _ in rows if kind == "normal"], 99)
        round_ratios.append(p99s["with"] / p99s["without"])
    health = httpx.get(proxy + "/health").json() if not direct else {}
    out = {"label": label, "health": health}
    for name, rows in results.items():
        lat = [lat for kind, lat, _ in rows if kind == "normal"]
        out[name] = {"n": len(lat), "ok": sum(1 for kind, _, ok in rows if kind == "normal" and ok),
                     "p50": pct(lat, 50) * 1e3, "p99": pct(lat, 99) * 1e3}
    out["ratio"] = out["with"]["p99"] / out["without"]["p99"]
    out["round_ratios"] = round_ratios
    out["met"] = out["ratio"] <= TARGET_RATIO and all(out[p]["ok"] == out[p]["n"] for p in ("without", "with"))
    hostile: dict[str, dict] = {}
    for kind, lat, outcome in results["with"]:
        if kind != "normal":
            h = hostile.setdefault(kind, {"lat": [], "outcomes": Counter()})
            h["lat"].append(lat)
            h["outcomes"][f"{outcome[0]} {outcome[1]}"] += 1
    out["hostile"] = hostile
    return out


def isolation(upstream: str, proxy: str, args: argparse.Namespace) -> list[dict]:
    runs = [isolation_run(proxy, args, "proxy (processes)")]
    if args.compare_threads:
        with start_proxy(upstream, free_port(), [*proxy_flags(args), "--workers", "0"]) as threaded:
            runs.append(isolation_run(threaded, args, "proxy (--workers 0)"))
    if args.compare_direct:
        runs.append(isolation_run(upstream, args, "no proxy (upstream)", direct=True))
    n_hostile = sum(len(h["lat"]) for h in runs[0]["hostile"].values())
    print(f"\n2. Isolation: open loop at {args.rate:g} req/s, {args.rounds} alternating rounds per phase, hostile share "
          f"{args.hostile_share:.0%} ({n_hostile} hostile requests in the mixed phase), body limit "
          f"{args.max_body_mb:g} MiB, refine timeout {args.refine_timeout:g} s; latencies of the normal requests\n")
    head = (f"{'target':<22}{'normal':>8}{'p50 ms':>9}{'p99 ms':>9}{'p50 ms':>9}{'p99 ms':>9}"
            f"{'p99 x':>8}{'ok':>13}  target (p99 x <= {TARGET_RATIO:g}, all ok)")
    print(f"{'':<30}{'without hostile':>18}{'with hostile':>18}")
    print(head + "\n" + "-" * len(head))
    for run in runs:
        a, b = run["without"], run["with"]
        ok = f"{a['ok'] + b['ok']}/{a['n'] + b['n']}"
        print(f"{run['label']:<22}{a['n']:>8}{a['p50']:>9.1f}{a['p99']:>9.1f}{b['p50']:>9.1f}{b['p99']:>9.1f}"
              f"{run['ratio']:>8.2f}{ok:>13}  {'met' if run['met'] else 'MISSED'}")
    print("\np99 x per round (each round's two phases back to back): "
          + "; ".join(f"{run['label']}: " + ", ".join(f"{x:.2f}" for x in run["round_ratios"]) for run in runs))
    print("\nHostile requests through the proxy: latency and outcome (status, stage)\n")
    head = f"{'shape':<24}{'n':>4}{'p50 ms':>9}{'max ms':>9}  outcomes"
    print(head + "\n" + "-" * len(head))
    for kind, h in sorted(runs[0]["hostile"].items()):
        outcomes = ", ".join(f"{k} x{v}" for k, v in sorted(h["outcomes"].items()))
        print(f"{kind:<24}{len(h['lat']):>4}{pct(h['lat'], 50) * 1e3:>9.0f}{max(h['lat']) * 1e3:>9.0f}  {outcomes}")
    tier1 = runs[0]["health"]["tier1"]
    print("\ntier-1 pool after the run: " + ", ".join(f"{k} {v}" for k, v in sorted(tier1.items())))
    return runs


# ----------------------------------------------------------------------------------------------------------------
# 3. A call's delta


LATENCY_TARGET_MS = 5.0
CALL_PIECES = ['<tool_call>\n{"name": "get_weather", ', '"arguments": {"city": ', '"Paris", "days": 3}}', "\n</tool_call>"]


def call_latency(args: argparse.Namespace) -> dict:
    """Time from a call's last byte leaving the upstream to its first tool-call delta reaching the client, for a call
    early in a long generation (a sentence, the call in four pieces, then ``--latency-tail`` pieces of text at
    ``--latency-pace`` seconds each): the scripted upstream runs in this process (it records when it sends the call's
    last piece: ``fake_upstream.MARKS``), the proxy is the real CLI in its own process, both on loopback."""
    import fake_upstream
    from fake_upstream import create_fake_upstream, serve_in_thread

    pieces = ["Let me look that up.\n", *CALL_PIECES, *(["\nmore text"] * args.latency_tail)]
    last = len(CALL_PIECES)  # the index of the call's last piece
    lat, ahead = [], []
    with serve_in_thread(create_fake_upstream()) as upstream, \
            start_proxy(upstream, free_port(), ["--opens-reasoning", "latency=no"]) as proxy, \
            httpx.Client(timeout=60) as client:
        for run in range(args.latency_runs + 1):
            key = f"run{run}"
            body = {"model": "latency", "stream": True, "tools": WEATHER_TOOLS,
                    "messages": [{"role": "user", "content": WEATHER_QUERY}],
                    "x_fake": {"content_pieces": pieces, "piece_delay": args.latency_pace, "mark": [key, last]}}
            got = ended = None
            with client.stream("POST", proxy + "/v1/chat/completions", json=body) as r:
                for line in r.iter_lines():
                    if got is None and '"tool_calls"' in line:
                        got = time.perf_counter()
                if r.status_code != 200:
                    raise RuntimeError(f"the proxy answered {r.status_code}")
                ended = time.perf_counter()
            if run and got is not None:  # the first run warms up
                lat.append(got - fake_upstream.MARKS[key])
                ahead.append(ended - got)
    med = pct(lat, 50) * 1e3
    print(f"\n3. Call to delta: a call early in a generation of {len(pieces)} pieces ({args.latency_pace * 1e3:g} ms "
          f"apart), {len(lat)} runs; from the call's last piece leaving the upstream to its delta reaching the client\n")
    print(f"median {med:.2f} ms, p90 {pct(lat, 90) * 1e3:.2f} ms, max {max(lat) * 1e3:.2f} ms; the delta came "
          f"{pct(ahead, 50) * 1e3:.0f} ms (median) before the stream ended; target (median <= {LATENCY_TARGET_MS:g} ms): "
          f"{'met' if med <= LATENCY_TARGET_MS else 'MISSED'}")
    return {"n": len(lat), "median_ms": med, "p90_ms": pct(lat, 90) * 1e3, "before_end_ms": pct(ahead, 50) * 1e3}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["overhead", "isolation", "latency", "both"], default="both",
                    help="both: all three tables")
    ap.add_argument("--requests", type=int, default=1000, help="overhead: requests per target")
    ap.add_argument("--concurrency", type=int, default=8, help="overhead: concurrent clients")
    ap.add_argument("--warmup", type=int, default=50, help="overhead: warm-up requests per target")
    ap.add_argument("--rounds", type=int, default=4, help="interleaved rounds (both tables)")
    ap.add_argument("--rate", type=float, default=20.0, help="isolation: requests per second, all kinds")
    ap.add_argument("--normal", type=int, default=800, help="isolation: normal requests per phase")
    ap.add_argument("--hostile-share", type=float, default=0.1, help="isolation: share of hostile requests")
    ap.add_argument("--max-body-mb", type=float, default=1.0, help="isolation: the proxy's body limit, MiB")
    ap.add_argument("--refine-timeout", type=float, default=5.0, help="isolation: the proxy's refine timeout, s")
    ap.add_argument("--shapes", default="", help="isolation: only these hostile shapes (comma-separated names)")
    ap.add_argument("--compare-threads", action="store_true", help="isolation: also run with --workers 0")
    ap.add_argument("--compare-direct", action="store_true", help="isolation: also send the same traffic to the "
                    "upstream directly (how much the mix slows the upstream, the client and the machine themselves)")
    ap.add_argument("--upstream-workers", type=int, default=2, help="processes of the fake upstream (a single one "
                    "is itself held up by every large answer it writes)")
    ap.add_argument("--latency-runs", type=int, default=30, help="call to delta: streamed answers timed")
    ap.add_argument("--latency-tail", type=int, default=200, help="call to delta: text pieces after the call")
    ap.add_argument("--latency-pace", type=float, default=0.002, help="call to delta: seconds between pieces")
    ap.add_argument("--out", default=str(OUT), help="write the figures here as JSON ('' for none)")
    ap.add_argument("--hostile-sender", help=argparse.SUPPRESS)  # internal: the hostile client's process
    args = ap.parse_args(argv)
    given = list(argv) if argv is not None else sys.argv[1:]
    if args.hostile_sender:
        send_hostile(json.loads(args.hostile_sender))
        return {}

    up_port = free_port()
    out: dict = {"load": os.getloadavg() if hasattr(os, "getloadavg") else None}
    argv = [sys.executable, str(ROOT / "tests" / "fake_upstream.py"), str(up_port), str(args.upstream_workers)]
    with serve_in_subprocess(argv, up_port) as upstream, start_proxy(upstream, free_port(), proxy_flags(args)) as proxy:
        if args.mode in ("overhead", "both"):
            out["overhead"] = overhead(upstream, proxy, args)
        if args.mode in ("isolation", "both"):
            out["isolation"] = isolation(upstream, proxy, args)
    if args.mode in ("latency", "both"):
        out["latency"] = call_latency(args)
    out["added"] = added_time(out)
    if out["load"] is not None:
        out["load_end"] = os.getloadavg()
        print(f"\nmachine load average (1, 5, 15 min) at the start: {', '.join(f'{x:.2f}' for x in out['load'])}; "
              f"now: {', '.join(f'{x:.2f}' for x in out['load_end'])}")
    if args.out:
        write_results(Path(args.out), out, given)
    return out


def added_time(out: dict) -> list[dict]:
    """What the proxy adds: its p50 and p99 less the direct upstream's, for the same traffic (printed and returned)."""
    rows = []
    overhead_rows = {row[0]: row for row in out.get("overhead") or []}
    base = overhead_rows.get("direct upstream")
    for name in ("proxy, valid calls", "proxy, broken calls"):
        if base is not None and name in overhead_rows:
            row = overhead_rows[name]
            rows.append({"load": "quiet (closed loop)", "requests": name.split(", ")[1], "p50_ms": row[1] - base[1],
                         "p99_ms": row[2] - base[2]})
    runs = {run["label"]: run for run in out.get("isolation") or []}
    proxy, direct = runs.get("proxy (processes)"), runs.get("no proxy (upstream)")
    if proxy is not None and direct is not None:
        for phase, label in (("without", "quiet (open loop)"), ("with", "hostile load (open loop)")):
            rows.append({"load": label, "requests": "normal", "p50_ms": proxy[phase]["p50"] - direct[phase]["p50"],
                         "p99_ms": proxy[phase]["p99"] - direct[phase]["p99"]})
    if rows:
        print("\nAdded time: the proxy's p50 / p99 less the direct upstream's for the same traffic\n")
        head = f"{'load':<28}{'requests':<12}{'p50 ms':>9}{'p99 ms':>9}"
        print(head + "\n" + "-" * len(head))
        for r in rows:
            print(f"{r['load']:<28}{r['requests']:<12}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}")
    return rows


def write_results(path: Path, out: dict, given: list[str]) -> None:
    """The figures as JSON (the hostile requests' latencies summarised); ``given``: the command line."""
    data = {k: v for k, v in out.items() if k != "isolation"}
    data["argv"] = given
    data["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if "overhead" in out:
        data["overhead"] = [dict(zip(("target", "p50_ms", "p99_ms", "req_per_s", "errors"), row))
                            for row in out["overhead"]]
    if "isolation" in out:
        data["isolation"] = [{**{k: v for k, v in run.items() if k not in ("hostile", "health")},
                              "tier1": (run.get("health") or {}).get("tier1"),
                              "hostile": {kind: {"n": len(h["lat"]), "p50_ms": pct(h["lat"], 50) * 1e3,
                                                 "max_ms": max(h["lat"]) * 1e3, "outcomes": dict(h["outcomes"])}
                                          for kind, h in run["hostile"].items()}}
                             for run in out["isolation"]]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"\nresults written to {path}")


if __name__ == "__main__":
    main()
