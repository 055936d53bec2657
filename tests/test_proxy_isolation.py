"""Request isolation in the proxy: the body limit, tier-1 work in worker processes with a deadline (a hostile request
never holds up the others), and the refiner model still fed in batches."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time

import httpx
import pytest
from fake_upstream import BROKEN_CALLS, WEATHER_QUERY, WEATHER_TOOLS, create_fake_upstream, serve_in_thread

from refiner.pipeline import Refiner
from refiner.proxy import create_app
from refiner.proxy.isolation import SLOW_NICE, WorkerLost, WorkerPool, WorkTimeout, size_class

STORM = '{"a": 1, "b"' + "(" * 5000  # a paren storm: hostile input for tier 1


class Spinner(Refiner):
    """Tier 1 that first burns ``N`` seconds of CPU on a request whose upstream text holds ``SPIN=N``: a slow request
    whose cost does not depend on how fast the library is on hostile text (it is being made faster)."""

    def prepare_batch(self, requests, **kw):
        requests = list(requests)
        for r in requests:
            m = re.search(r"SPIN=([0-9.]+)", str(r.get("upstream", ""))) if isinstance(r, dict) else None
            if m:
                end = time.process_time() + float(m.group(1))
                while time.process_time() < end:
                    pass
        return super().prepare_batch(requests, **kw)


def spin_calls(seconds: float, n: int = 1) -> list[dict]:
    return [{"name": "get_weather", "arguments": f'{{"city": "SPIN={seconds}"', "id": f"call_s{i}"} for i in range(n)]


def payload(fake: dict, **kw) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": WEATHER_QUERY}], "tools": WEATHER_TOOLS,
            "x_fake": fake, **kw}


def item(arguments: str, n: int = 1) -> dict:
    tool_calls = [{"id": f"c{i}", "type": "function", "function": {"name": "get_wether", "arguments": arguments}}
                  for i in range(n)]
    return {"request": {"tools": WEATHER_TOOLS, "upstream": json.dumps(tool_calls), "format": "openai"}}


@pytest.fixture(scope="module")
def upstream():
    with serve_in_thread(create_fake_upstream()) as url:
        yield url


# ------------------------------------------------------------------------------------------------ the body limit


def test_bodies_over_the_limit_are_refused_with_413(upstream) -> None:
    limit = 4096
    with serve_in_thread(create_app(upstream + "/v1", max_body_bytes=limit)) as url:
        small = json.dumps(payload({"tool_calls": BROKEN_CALLS}))
        exact = small[:-1] + " " * (limit - len(small)) + "}"
        assert len(exact.encode()) == limit
        r = httpx.post(url + "/v1/chat/completions", content=exact, headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.headers["x-tool-refiner"] == "repaired"
        r = httpx.post(url + "/v1/chat/completions", content=exact + " ", headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert r.json() == {"error": {"message": f"request body is larger than {limit} bytes, this proxy's limit",
                                      "type": "invalid_request_error", "param": None, "code": "request_too_large"}}

        def chunks():  # no content-length: counted while read
            for _ in range(10):
                yield b" " * 1000

        r = httpx.post(url + "/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
        assert httpx.get(url + "/health").json()["max_body_bytes"] == limit
    with pytest.raises(ValueError, match="max_body_bytes"):
        create_app(upstream + "/v1", max_body_bytes=0)


# ------------------------------------------------------------------------------------------------ the worker pool


def test_the_deadline_stops_a_running_task_and_the_pool_recovers() -> None:
    async def run() -> dict:
        pool = WorkerPool(Spinner(engine=None), workers=2)
        await pool.start()
        try:
            with pytest.raises(WorkTimeout, match="stopped"):  # (2 s: long enough to leave the queue under load)
                await pool.run("tier1", [item('{"city": "SPIN=30"')], 2.0)
            (outcome,), _ = await pool.run("tier1", [item('{"city": "Paris"')], 30)
            assert outcome["result"]["stage"] == "repaired" and outcome["format"] == "openai"
            assert set(outcome["result"]) <= {"calls", "changed", "stage", "reason", "format", "diagnostics",
                                              "repairs"}  # (the repairs counted by class: metrics.repair_classes)
            repairs = outcome["result"]["repairs"]
            assert repairs and all(isinstance(n, int) for n in repairs.values())
            for _ in range(1000):  # the killed worker is replaced
                if pool.info()["workers"] == 2 and pool.stats["started"] >= 3:
                    break
                await asyncio.sleep(0.01)
            return dict(pool.stats)
        finally:
            await pool.stop()

    stats = asyncio.run(run())
    assert stats["killed"] == 1 and stats["timeouts"] == 1 and stats["started"] >= 3


def test_a_slow_task_is_demoted_and_others_pass_it() -> None:
    async def run() -> None:
        pool = WorkerPool(Spinner(engine=None), workers=2)
        await pool.start()
        try:
            slow = [asyncio.ensure_future(pool.run("tier1", [item('{"city": "SPIN=0.5"')], 60)) for _ in range(2)]
            while pool.stats["demoted"] < 2:  # both workers taken by heavy tasks, then demoted and replaced
                await asyncio.sleep(0.01)
            assert {os.getpriority(os.PRIO_PROCESS, w.pid) for w in pool._slow} == {SLOW_NICE}
            assert {os.sched_getscheduler(w.pid) for w in pool._slow} == {os.SCHED_IDLE}
            normal = asyncio.ensure_future(pool.run("tier1", [item('{"city": "Paris"')], 60))
            done, _ = await asyncio.wait([normal, *slow], return_when=asyncio.FIRST_COMPLETED)
            assert done == {normal}
            (outcome,), cpu = normal.result()
            assert outcome["result"]["stage"] == "repaired"
            for s in slow:
                outcomes, cpu = await s
                # (0.45: the worker spins on its own process clock, the pool reads its main thread's /proc schedstat)
                assert cpu >= 0.45 and outcomes[0]["result"]["stage"] == "repaired"
            assert pool.info()["slow"] == 0  # demoted workers retire once their task is done
        finally:
            await pool.stop()

    asyncio.run(run())


async def spinning(pool: WorkerPool, timeout: float):
    """A task that spins for 30 s of CPU, once a worker has taken it, and that worker."""
    task = asyncio.ensure_future(pool.run("tier1", [item('{"city": "SPIN=30"')], timeout))
    while not pool._busy and not pool._slow:
        await asyncio.sleep(0.01)
    return task, next(iter(pool._busy or pool._slow))


def test_stop_leaves_nothing_of_the_pool_to_the_loop_end() -> None:
    """Once stop() returns, no task of the pool is pending and every worker connection is closed, those of workers
    still being forked too: an event loop that finds live handles at its end may crash (uvloop does, at random)."""
    async def run() -> None:
        pool = WorkerPool(Spinner(engine=None), workers=2)
        await pool.start()
        task, _ = await spinning(pool, 60)  # one busy worker, and one more fork asked for in its place
        pool._fill(4)  # two more asked for: they are answered while the pool stops
        await pool.stop()
        assert asyncio.all_tasks() - {task} == {asyncio.current_task()}  # (its readers ended, not only cancelled)
        with pytest.raises(WorkerLost):
            await task

    asyncio.run(run())


def test_the_fork_server_is_stopped_when_the_process_exits() -> None:
    """A process that ran a pool leaves no helper running and no socket open at its exit."""
    code = ("import asyncio\nfrom refiner.pipeline import Refiner\nfrom refiner.proxy.isolation import WorkerPool\n"
            "async def main():\n    pool = WorkerPool(Refiner(engine=None), workers=1)\n    await pool.start()\n"
            "    await pool.stop()\nasyncio.run(main())\n")
    run = subprocess.run([sys.executable, "-X", "dev", "-W", "always::ResourceWarning", "-c", code],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ResourceWarning" not in run.stderr, run.stderr[-2000:]


def test_a_worker_that_dies_fails_its_task_and_is_replaced() -> None:
    async def run() -> None:
        pool = WorkerPool(Spinner(engine=None), workers=2)
        await pool.start()
        try:
            task, victim = await spinning(pool, 60)
            os.kill(victim.pid, 9)
            with pytest.raises(WorkerLost):
                await task
            (outcome,), _ = await pool.run("tier1", [item('{"city": "Paris"}')], 30)
            assert outcome["result"]["stage"] in ("unchanged", "repaired")
        finally:
            await pool.stop()

    asyncio.run(run())


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this OS: workers are killed by pid")
def test_a_deadline_kills_the_worker_even_once_its_pid_number_names_another_process() -> None:
    """The pid number of a worker can be reused once its process ends (the fork server's children are reaped at
    once): the kill goes to the worker's process handle, never to whatever holds that number now."""
    bystander = subprocess.Popen(["sleep", "60"])

    async def run() -> None:
        pool = WorkerPool(Spinner(engine=None), workers=2)
        await pool.start()
        try:
            task, victim = await spinning(pool, 1.0)
            real_pid, victim.pid = victim.pid, bystander.pid  # as if the number now named the bystander
            with pytest.raises(WorkTimeout):
                await task
            for _ in range(500):
                if not os.path.exists(f"/proc/{real_pid}"):
                    break
                await asyncio.sleep(0.01)
            assert not os.path.exists(f"/proc/{real_pid}")
            assert bystander.poll() is None
        finally:
            await pool.stop()

    try:
        asyncio.run(run())
    finally:
        bystander.kill()
        bystander.wait()


def test_large_tasks_queue_behind_small_ones() -> None:
    assert size_class(10) == size_class(60_000) == 0
    assert 0 < size_class(100_000) < size_class(1_000_000) < size_class(10_000_000)


# ------------------------------------------------------------------------------------------------ through the app


def test_a_slow_request_does_not_hold_up_the_others(upstream) -> None:
    """A request whose tier 1 takes seconds of CPU, then normal ones: every normal one is answered (refined) first."""
    with serve_in_thread(create_app(upstream + "/v1", refiner=Spinner(), refine_timeout=60)) as url:

        async def run() -> tuple[list, httpx.Response, list[float], float]:
            async with httpx.AsyncClient(timeout=120) as client:
                done_at: list[float] = []

                async def normal() -> httpx.Response:
                    r = await client.post(url + "/v1/chat/completions", json=payload({"tool_calls": BROKEN_CALLS}))
                    done_at.append(time.monotonic())
                    return r

                slow = asyncio.ensure_future(client.post(url + "/v1/chat/completions",
                                                         json=payload({"tool_calls": spin_calls(2.0)})))
                await asyncio.sleep(0.3)  # the slow request is in tier 1 by now
                normals = await asyncio.gather(*(normal() for _ in range(10)))
                s = await slow
                return normals, s, done_at, time.monotonic()

        normals, slow, done_at, slow_done = asyncio.run(run())
    assert [r.headers["x-tool-refiner"] for r in normals] == ["repaired"] * 10
    assert slow.status_code == 200 and slow.headers["x-tool-refiner"] == "repaired"
    assert max(done_at) < slow_done


def test_hostile_text_is_refined_or_returned_at_the_deadline(upstream) -> None:
    storms = [{"name": "get_weather", "arguments": STORM, "id": f"call_h{i}"} for i in range(8)]
    with serve_in_thread(create_app(upstream + "/v1", refine_timeout=2)) as url:
        r = httpx.post(url + "/v1/chat/completions", json=payload({"tool_calls": storms}), timeout=60)
        assert r.status_code == 200 and r.headers["x-tool-refiner"] in ("repaired", "timeout")
        assert [t["id"] for t in r.json()["choices"][0]["message"]["tool_calls"]] == [s["id"] for s in storms]


def test_past_the_deadline_the_upstream_answer_is_returned_as_it_came(upstream) -> None:
    calls = spin_calls(30, 3)
    with serve_in_thread(create_app(upstream + "/v1", refiner=Spinner(), refine_timeout=0.3)) as url:
        r = httpx.post(url + "/v1/chat/completions", json=payload({"tool_calls": calls}), timeout=60)
        assert r.status_code == 200 and r.headers["x-tool-refiner"] == "timeout"
        assert [t["function"]["arguments"] for t in r.json()["choices"][0]["message"]["tool_calls"]] == [
            c["arguments"] for c in calls]
        health = httpx.get(url + "/health").json()
        assert health["refine_timeout"] == 0.3 and health["tier1"]["timeouts"] == 1
        assert health["tier1"]["killed"] == 1
        r = httpx.post(url + "/v1/chat/completions", json=payload({"tool_calls": BROKEN_CALLS}), timeout=60)
        assert r.headers["x-tool-refiner"] == "repaired"  # the pool recovered


def test_threads_instead_of_processes(upstream) -> None:
    with serve_in_thread(create_app(upstream + "/v1", workers=0)) as url:
        r = httpx.post(url + "/v1/chat/completions", json=payload({"tool_calls": BROKEN_CALLS}), timeout=60)
        assert r.headers["x-tool-refiner"] == "repaired"
        assert httpx.get(url + "/health").json()["tier1"]["workers"] == 0


class LockedRefiner(Refiner):
    """A refiner that cannot be sent to another process (it holds a lock)."""

    def __init__(self) -> None:
        super().__init__(engine=None)
        self.lock = threading.Lock()


def test_a_refiner_that_cannot_go_to_a_process_runs_in_threads(upstream, caplog) -> None:
    with serve_in_thread(create_app(upstream + "/v1", refiner=LockedRefiner())) as url:
        r = httpx.post(url + "/v1/chat/completions", json=payload({"tool_calls": BROKEN_CALLS}), timeout=60)
        assert r.headers["x-tool-refiner"] == "repaired"
        assert httpx.get(url + "/health").json()["tier1"]["workers"] == 0
    assert "using threads" in caplog.text


# ------------------------------------------------------------------------------------------------ the model, batched

# The model is shown OpenAI tool calls in a format it was trained on (xlam) and answers in it.
MODEL_ANSWER = '<func_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</func_call>'


class RecordingEngine:
    """A stand-in engine: answers every conversation with one corrected call, records its batches, fails when called
    from two threads at once, and can be slowed down."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay
        self.batches: list[list] = []
        self.lock = threading.Lock()

    def chat(self, conversations: list, **kw) -> list[list[str]]:
        assert self.lock.acquire(blocking=False), "engine called concurrently"
        try:
            time.sleep(self.delay)
            self.batches.append(conversations)
            return [[MODEL_ANSWER] for _ in conversations]
        finally:
            self.lock.release()


UNKNOWN = [{"name": "book_flight", "arguments": '{"to": "Paris"}', "id": "call_u"}]  # tier 1 cannot fix it


def test_requests_that_need_the_model_are_batched_and_slow_ones_skip_it(upstream) -> None:
    engine = RecordingEngine()
    with serve_in_thread(create_app(upstream + "/v1", refiner=Spinner(engine))) as url:

        async def run() -> tuple[list, httpx.Response]:
            async with httpx.AsyncClient(timeout=120) as client:
                hostile = asyncio.ensure_future(client.post(url + "/v1/chat/completions", json=payload(
                    {"tool_calls": [{"name": "book_flight", "arguments": '{"to": "SPIN=0.5"', "id": "call_h"}]})))
                rs = await asyncio.gather(*(client.post(url + "/v1/chat/completions", json=payload(
                    {"tool_calls": UNKNOWN})) for _ in range(12)))
                return rs, await hostile

        rs, hostile = asyncio.run(run())
        assert httpx.get(url + "/health").json()["model"] is True
    assert [r.headers["x-tool-refiner"] for r in rs] == ["model"] * 12
    assert rs[0].json()["choices"][0]["message"]["tool_calls"][0]["id"] == "call_u"  # the upstream's id is kept
    sizes = [len(b) for b in engine.batches]
    assert sum(sizes) == 12 and len(sizes) < 12  # batched, never concurrent; the slow request never reached it
    assert hostile.headers["x-tool-refiner"] in ("unchanged", "repaired")
    assert not any("SPIN" in json.dumps(b) for b in engine.batches)


def test_a_model_slower_than_the_deadline_leaves_the_upstream_answer(upstream) -> None:
    engine = RecordingEngine(delay=1.0)
    with serve_in_thread(create_app(upstream + "/v1", refiner=Refiner(engine), refine_timeout=0.3)) as url:
        r = httpx.post(url + "/v1/chat/completions", json=payload({"tool_calls": UNKNOWN}), timeout=60)
        assert r.headers["x-tool-refiner"] == "timeout"
        assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "book_flight"
        assert httpx.get(url + "/health").json()["refine_timeout"] == 0.3


# ------------------------------------------------------------------------------------------------ tool lists sent once


def test_a_tool_list_goes_to_each_worker_once_and_again_to_one_that_lost_it() -> None:
    from refiner.specs import ToolList, loads_keeping_tools

    many = [{"type": "function", "function": {"name": f"tool_{i}", "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}}}}} for i in range(300)] + WEATHER_TOOLS
    tools = loads_keeping_tools(json.dumps({"tools": many}))["tools"]
    assert isinstance(tools, ToolList)

    def request(tool_list) -> list[dict]:
        return [{"request": {**item('{"city": "Paris"')["request"], "tools": tool_list}}]

    async def run() -> tuple[list, dict]:
        pool = WorkerPool(Refiner(engine=None), workers=1)
        await pool.start()
        try:
            outs = []
            for tool_list in (tools, ToolList(list(tools), tools.text.encode().decode()), tools):  # an equal text too
                (outcome,), _ = await pool.run("tier1", request(tool_list), 60)
                outs.append(outcome)
            sent = pool.stats["tool_lists_sent"]
            await pool.run("forget", None, 60)  # the worker drops what it holds; the proxy does not know
            (outcome,), _ = await pool.run("tier1", request(tools), 60)
            outs.append(outcome)
            other = ToolList(list(WEATHER_TOOLS), json.dumps(WEATHER_TOOLS))  # another list: its own text, once
            (outcome,), _ = await pool.run("tier1", request(other), 60)
            outs.append(outcome)
            return outs, {**pool.stats, "sent_before_forget": sent}
        finally:
            await pool.stop()

    outs, stats = asyncio.run(run())
    assert all(o["result"]["stage"] == "repaired" and o["result"]["calls"][0]["name"] == "get_weather" for o in outs)
    assert stats["sent_before_forget"] == 1 and stats["tool_lists_named"] == 3  # 3 requests named it, 1 carried it
    assert stats["tool_lists_missing"] == 1 and stats["tool_lists_sent"] == 3  # sent again once lost, then the other


def test_text_numbers_are_stable_bounded_and_never_reused() -> None:
    from refiner.proxy.isolation import TextNumbers

    numbers = TextNumbers(max_lists=2, max_chars=100)
    a, b = numbers.number("a" * 30), numbers.number("b" * 30)
    assert numbers.number("a" * 30) == a and a != b  # an equal text (another object) keeps its number
    c = numbers.number("c" * 30)  # over 2 lists: b (least recently used) is forgotten
    assert numbers.kept.texts() == ["a" * 30, "c" * 30]
    assert numbers.number("b" * 30) not in (a, b, c)
    kept = numbers.kept.texts()
    assert numbers.number("x" * 500) != numbers.number("x" * 500)  # longer than the bound: numbered, never kept
    assert numbers.kept.texts() == kept


def test_a_worker_demoted_while_reading_a_list_keeps_it_and_its_replacement_goes() -> None:
    from refiner.specs import ToolList

    tools = ToolList(list(WEATHER_TOOLS), json.dumps(WEATHER_TOOLS))

    def request(arguments: str) -> list[dict]:
        return [{"request": {**item(arguments)["request"], "tools": tools}}]

    async def run() -> dict:
        pool = WorkerPool(Spinner(engine=None), workers=1)
        await pool.start()
        try:
            slow = asyncio.ensure_future(pool.run("tier1", request('{"city": "SPIN=1"'), 60))
            while not pool.stats["demoted"] or pool._starting or not pool._idle:  # demoted; a fresh worker ready
                await asyncio.sleep(0.01)
            await slow
            (outcome,), _ = await pool.run("tier1", request('{"city": "Paris"'), 60)
            assert outcome["result"]["stage"] == "repaired"
            return {**pool.stats, "workers": pool.info()["workers"]}
        finally:
            await pool.stop()

    stats = asyncio.run(run())
    assert stats["demoted"] == 1
    if not stats["promoted"]:
        pytest.skip("this process may not restore a worker's priority (needs root or RLIMIT_NICE)")
    assert stats["swapped"] == 1 and stats["workers"] == 1
    assert stats["tool_lists_sent"] == 1 and stats["tool_lists_named"] == 1  # the kept worker was not sent it again
