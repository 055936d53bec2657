"""Request isolation: tier-1 tasks run one at a time in a pool of worker processes, each with a deadline, so that one
slow or hostile request cannot hold up the others; :class:`ThreadRunner` runs them in threads instead.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import io
import itertools
import logging
import os
import pickle
import signal
import socket
from dataclasses import dataclass, field
from typing import Any

import anyio

from refiner.pipeline import describe_error
from refiner.proxy import forks, work
from refiner.specs.catalog import MAX_CACHED_CHARS, MAX_CACHED_LISTS, KeptTexts, ToolList

log = logging.getLogger("refiner.proxy")

SLOW_NICE = 19
SLOW_AFTER = 0.02  # CPU seconds after which a task is demoted (tier 1 takes a few milliseconds on a normal answer)
SMALL_TASK_BYTES = 64 * 1024
STOP_WAIT = 5.0  # seconds stop() waits for the forks asked for to be answered
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class IsolationError(RuntimeError):
    """A task that gave no result."""


class WorkTimeout(IsolationError):
    """The task's deadline passed."""


class WorkerLost(IsolationError):
    """The worker process running the task died."""


class WorkFailed(IsolationError):
    """The task raised (or could not be sent): ``"<ExceptionType>: <message>"``."""


def cpu_seconds(pid: int, wall: float) -> float:
    """CPU seconds used so far by process ``pid`` (from ``/proc``); ``wall`` when that cannot be read."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, ValueError, IndexError):
        return wall


def demote(pid: int) -> None:
    """Lowest CPU priority for process ``pid``: ``SCHED_IDLE`` where the OS has it, and nice 19."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, pid, SLOW_NICE)
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))


def promote(pid: int) -> bool:
    """Gives process ``pid`` its normal CPU priority back; False where that needs a privilege this process lacks."""
    try:
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
        os.setpriority(os.PRIO_PROCESS, pid, 0)
        return os.getpriority(os.PRIO_PROCESS, pid) == 0 and os.sched_getscheduler(pid) == os.SCHED_OTHER
    except (OSError, AttributeError):
        return False


def size_class(size: int) -> int:
    """Queue priority of a task of ``size`` bytes: 0 under :data:`SMALL_TASK_BYTES`, then one class per doubling."""
    return max(0, size.bit_length() - SMALL_TASK_BYTES.bit_length() + 1)


class TextNumbers:
    """Numbers for the tool-list texts sent to workers: an equal text keeps its number while it is kept (within the
    tool-list cache's bounds), a new one gets the next number (never reused)."""

    def __init__(self, max_lists: int = MAX_CACHED_LISTS, max_chars: int = MAX_CACHED_CHARS) -> None:
        self.kept = KeptTexts(max_lists, max_chars)
        self.next = itertools.count(1)

    def number(self, text: str) -> int:
        found = self.kept.get(text)
        if found is None:
            found = next(self.next)
            self.kept.put(text, found)
        return found


def pickle_payload(payload: Any, numbers: TextNumbers) -> tuple[bytes, dict[int, str]]:
    """``payload`` pickled with each :class:`ToolList` in it as its number, and ``{number: text}`` of those lists."""
    refs: dict[int, str] = {}

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            if type(obj) is ToolList:
                n = numbers.number(obj.text)
                refs[n] = obj.text
                return (work.TOOLS_REF, n)
            return None

    buf = io.BytesIO()
    Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(payload)
    return buf.getvalue(), refs


async def read_frame(reader: asyncio.StreamReader) -> Any:
    size = int.from_bytes(await reader.readexactly(work.HEADER), "little")
    return pickle.loads(await reader.readexactly(size))


@dataclass(eq=False)
class _Task:
    name: str
    blob: bytes  # the pickled payload, its tool lists as numbers
    refs: dict[int, str]  # the texts of those tool lists, by number
    future: asyncio.Future
    deadline: float  # loop time
    worker: _Worker | None = None
    started: float = 0.0  # CPU seconds of its worker when the task started there
    timers: list[asyncio.TimerHandle] = field(default_factory=list)

    def settle(self, error: Exception | None, result: tuple[Any, float] | None = None) -> None:
        """Ends the task (once) with ``error``, else ``result``: its value and CPU seconds."""
        for t in self.timers:
            t.cancel()
        if not self.future.done():
            self.future.set_exception(error) if error is not None else self.future.set_result(result)


@dataclass(eq=False)
class _Worker:
    pid: int
    sock: socket.socket
    pidfd: int | None  # kills this process only, even once its pid is reused
    writer: asyncio.StreamWriter | None = None
    reader_task: asyncio.Task | None = None
    task: _Task | None = None
    slow: bool = False
    gone: bool = False  # removed from the pool (its process is stopping or has ended)
    sent: collections.OrderedDict[int, None] = field(default_factory=collections.OrderedDict)  # tool lists it holds


class WorkerPool:
    """``await pool.run(name, payload, timeout)`` runs ``work.TASKS[name](state, payload)`` in a worker process and
    returns ``(value, cpu seconds)``; ``state`` (picklable) is given to every worker. ``workers``: default twice the
    CPU count, at least 4."""

    def __init__(self, state: Any, *, workers: int | None = None) -> None:
        self._forks = forks.shared(state)  # pickles the state: an unpicklable one fails here, at start-up
        self.size = workers if workers else max(4, 2 * (os.cpu_count() or 1))
        self.max_slow = 2 * self.size
        self.reserve = max(1, self.size - 1)  # workers kept at once when one is demoted; the rest when needed
        self._idle: collections.deque[_Worker] = collections.deque()
        self._busy: set[_Worker] = set()
        self._slow: collections.deque[_Worker] = collections.deque()  # oldest demotion first
        self._queue: list[tuple[int, int, _Task]] = []  # heap of (size class, arrival number, task)
        self._arrivals = itertools.count()
        self._starting = 0  # forks asked for, not yet connected
        self._closed = False
        self._workers: set[_Worker] = set()  # every worker from its fork until it is removed
        self._forking: set[asyncio.Future] = set()  # forks asked for, not yet answered
        self._loop: asyncio.AbstractEventLoop | None = None
        self._numbers = TextNumbers()
        self.stats: collections.Counter[str] = collections.Counter()

    async def start(self) -> None:
        """Starts the fork server and the workers; raises when no worker can be started."""
        self._loop = asyncio.get_running_loop()
        await self._loop.run_in_executor(None, self._forks.start)
        started = await asyncio.gather(*(self._loop.run_in_executor(None, self._forks.fork)
                                         for _ in range(self.size)), return_exceptions=True)
        forked = [s for s in started if not isinstance(s, BaseException)]
        if not forked:
            raise RuntimeError(f"no tier-1 worker process could be started: {started[0]!r}") from started[0]
        self._starting += len(forked)
        for s in forked:
            self._add(*s)
        self._fill()

    async def stop(self) -> None:
        """Stops every worker, starting ones too, and returns once their connections are closed: nothing of the
        pool is left for the event loop's end (an event loop may crash on handles it finds then)."""
        self._closed = True
        for _, _, task in self._queue:
            task.settle(WorkerLost("the proxy is shutting down"))
        self._queue.clear()
        if self._forking:  # (a fork answered now is closed at once)
            await asyncio.wait(set(self._forking), timeout=STOP_WAIT)
        workers = list(self._workers)
        for w in workers:
            self._remove(w, WorkerLost("the proxy is shutting down"))
        await asyncio.gather(*(w.reader_task for w in workers if w.reader_task is not None), return_exceptions=True)
        for w in workers:
            if w.writer is not None:
                with contextlib.suppress(Exception):  # (a reset connection is closed too)
                    await w.writer.wait_closed()

    def info(self) -> dict[str, Any]:
        return {"workers": len(self._idle) + len(self._busy), "idle": len(self._idle), "slow": len(self._slow),
                "queued": len(self._queue), **self.stats}

    async def run(self, name: str, payload: Any, timeout: float) -> tuple[Any, float]:
        """``(value, cpu seconds)`` of the task; raises :class:`IsolationError` when it gives none."""
        if self._closed or self._loop is None:
            raise WorkerLost("the worker pool is not running")
        try:
            blob, refs = pickle_payload(payload, self._numbers)
        except Exception as e:  # noqa: BLE001 - a payload that cannot be pickled fails its task only
            raise WorkFailed(describe_error(e)) from None
        loop = self._loop
        task = _Task(name, blob, refs, loop.create_future(), loop.time() + timeout)
        task.timers.append(loop.call_at(task.deadline, self._expire, task))
        heapq.heappush(self._queue, (size_class(len(blob)), next(self._arrivals), task))
        self.stats["tasks"] += 1
        self._dispatch()
        return await task.future

    def _dispatch(self) -> None:
        while self._queue and self._idle:
            _, _, task = heapq.heappop(self._queue)
            if task.future.done():  # expired or abandoned while queued
                continue
            worker = self._idle.popleft()
            worker.writer.write(self._frame(worker, task))  # (buffered; a dead worker shows as EOF on its reader)
            worker.task, task.worker = task, worker
            task.started = self._cpu(worker)
            self._busy.add(worker)
            task.timers.append(self._loop.call_later(SLOW_AFTER, self._check_slow, worker, task))
        if self._queue or not self._idle:
            self._fill()  # tasks wait, or the next one would: back to full strength

    def _frame(self, worker: _Worker, task: _Task) -> bytes:
        """The task's frame for ``worker``: the texts of the tool lists it has not been sent go along."""
        texts = {}
        for n, text in task.refs.items():
            if n in worker.sent:
                worker.sent.move_to_end(n)
                continue
            texts[n] = text
            worker.sent[n] = None
            self.stats["tool_lists_sent"] += 1
            if len(worker.sent) > MAX_CACHED_LISTS:
                worker.sent.popitem(last=False)
        self.stats["tool_lists_named"] += len(task.refs) - len(texts)
        return work.frame(pickle.dumps((task.name, task.blob, texts), protocol=pickle.HIGHEST_PROTOCOL))

    def _cpu(self, worker: _Worker) -> float:
        return cpu_seconds(worker.pid, self._loop.time())

    async def _read_replies(self, worker: _Worker) -> None:
        """Connects to a new worker, then reads its replies until it ends (and is removed)."""
        try:
            try:
                reader, worker.writer = await asyncio.open_unix_connection(sock=worker.sock)
                if await read_frame(reader) != (True, work.READY):
                    raise ValueError("the worker did not say it was ready")
            finally:
                self._starting -= 1
            self._idle.append(worker)
            self._dispatch()
            while True:
                ok, value = await read_frame(reader)
                self._reply(worker, ok, value)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - EOF (the process ended), a reset, or a reply that cannot be read
            if not worker.gone:
                self._remove(worker, WorkerLost(f"the worker process ended ({type(e).__name__})"), alive=False)

    def _reply(self, worker: _Worker, ok: bool | None, value: Any) -> None:
        if ok is None:  # the worker no longer holds these tool lists: the same task again, with their texts
            for n in value if isinstance(value, list) else []:
                worker.sent.pop(n, None)
            self.stats["tool_lists_missing"] += 1
            if worker.task is not None and not worker.task.future.done():
                worker.writer.write(self._frame(worker, worker.task))
                return
            ok, value = False, "the worker lost the request's tool list"
        task, worker.task = worker.task, None
        if task is not None:
            task.settle(None if ok else WorkFailed(value), (value, self._cpu(worker) - task.started))
        spare = None
        if worker.slow and not self._closed:
            full = len(self._idle) + len(self._busy) >= self.size
            if full:  # the idle worker holding the fewest tool lists, when it holds fewer than this one
                spare = min(self._idle, key=lambda w: len(w.sent), default=None)
                spare = spare if spare is not None and len(spare.sent) < len(worker.sent) else None
            if (not full or spare is not None) and promote(worker.pid):
                worker.slow = False  # the process could be given its normal priority back: no fork needed
                self._slow.remove(worker)
                self.stats["promoted"] += 1
            else:
                spare = None
        if worker.slow or self._closed:
            self._remove(worker, None)
        else:
            self._busy.discard(worker)
            self._idle.append(worker)
            if spare is not None:  # the fresh worker that took its place goes; the one holding tool lists stays
                self.stats["swapped"] += 1
                self._remove(spare, None)
        self._dispatch()

    def _check_slow(self, worker: _Worker, task: _Task) -> None:
        if worker.task is not task or worker.slow:
            return
        used = self._cpu(worker) - task.started
        if used < SLOW_AFTER:  # it waited for the CPU rather than used it: look again later
            task.timers.append(self._loop.call_later(max(0.005, SLOW_AFTER - used), self._check_slow, worker,
                                                     task))
            return
        worker.slow = True
        self.stats["demoted"] += 1
        self._busy.discard(worker)
        self._slow.append(worker)
        demote(worker.pid)
        while len(self._slow) > self.max_slow:
            self.stats["evicted"] += 1
            self._remove(self._slow[0], WorkTimeout("gave up: too many slow requests at once"))
        self._fill(self.reserve)  # the rest of the way when a task waits (see _dispatch)

    def _expire(self, task: _Task) -> None:
        if task.future.done():
            return
        self.stats["timeouts"] += 1
        if task.worker is None:  # still queued: dropped when its turn comes (its future is done)
            task.settle(WorkTimeout("deadline passed while queued"))
        else:
            self._remove(task.worker, WorkTimeout("deadline passed; the worker was stopped"))

    def _add(self, pid: int, sock: socket.socket, pidfd: int | None) -> None:
        if self._closed:
            self._starting -= 1
            sock.close()  # the worker sees EOF and exits
            if pidfd is not None:
                os.close(pidfd)
            return
        self.stats["started"] += 1
        worker = _Worker(pid, sock, pidfd)
        self._workers.add(worker)
        worker.reader_task = self._loop.create_task(self._read_replies(worker))

    def _fill(self, target: int | None = None) -> None:
        """Forks workers until the pool has ``target`` (default ``workers``) of them (demoted ones do not count)."""
        target = self.size if target is None else target
        while not self._closed and len(self._idle) + len(self._busy) + self._starting < target:
            self._starting += 1
            forking = self._loop.run_in_executor(None, self._forks.fork)
            forking.add_done_callback(self._forked)
            self._forking.add(forking)
            forking.add_done_callback(self._forking.discard)

    def _forked(self, future: asyncio.Future) -> None:
        error = future.exception()
        if error is not None:
            self._starting -= 1
            log.error("could not start a tier-1 worker process: %r; retrying in 1 s", error)
            self.stats["start_failures"] += 1
            self._loop.call_later(1.0, self._fill)
            return
        self._add(*future.result())

    def _remove(self, worker: _Worker, error: Exception | None, *, alive: bool = True) -> None:
        """Takes ``worker`` out of the pool (killed when busy) and fails its task with ``error``; refills the pool."""
        if worker.gone:
            return
        worker.gone = True
        self._workers.discard(worker)
        self._busy.discard(worker)
        for queue in (self._idle, self._slow):
            with contextlib.suppress(ValueError):
                queue.remove(worker)
        task, worker.task = worker.task, None
        if task is not None:
            task.settle(error or WorkerLost("the worker was stopped"))
            self.stats["killed"] += 1
            if alive:
                with contextlib.suppress(OSError):  # already ended (the fork server's children are reaped at once)
                    if worker.pidfd is not None:
                        signal.pidfd_send_signal(worker.pidfd, signal.SIGKILL)
                    else:
                        os.kill(worker.pid, signal.SIGKILL)
        if worker.pidfd is not None:
            os.close(worker.pidfd)
            worker.pidfd = None
        if worker.reader_task is not None and worker.reader_task is not asyncio.current_task():
            worker.reader_task.cancel()
        if worker.writer is not None:
            worker.writer.close()
        else:
            worker.sock.close()
        self._fill()


class ThreadRunner:
    """The :class:`WorkerPool` interface with tasks run in threads of this process: the deadline answers the request
    but cannot stop the work; the CPU time reported is wall time."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.stats: collections.Counter[str] = collections.Counter()

    async def start(self) -> None:
        """Nothing to start (nor to stop)."""

    stop = start

    def info(self) -> dict[str, Any]:
        return {"workers": 0, **self.stats}

    async def run(self, name: str, payload: Any, timeout: float) -> tuple[Any, float]:
        self.stats["tasks"] += 1
        fn = work.TASKS[name]
        start = asyncio.get_running_loop().time()
        try:
            with anyio.fail_after(timeout):
                value = await anyio.to_thread.run_sync(fn, self.state, payload, abandon_on_cancel=True)
        except TimeoutError:
            self.stats["timeouts"] += 1
            raise WorkTimeout("deadline passed (the thread keeps running)") from None
        except Exception as e:  # noqa: BLE001 - same contract as a worker process
            raise WorkFailed(describe_error(e)) from None
        return value, asyncio.get_running_loop().time() - start
