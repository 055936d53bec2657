"""Request isolation: tier-1 work runs in a small pool of worker processes, one task at a time per process, each
task with a deadline, so that one slow (or hostile) request cannot hold up the others.

- Tasks wait in one queue (first come, first served) for ``workers`` processes (default: the CPU count).
- Work is measured in CPU seconds of the worker process (read from ``/proc``; wall time where that is missing), so
  a busy machine does not make a normal task look slow. A worker whose task has used ``stuck_after`` CPU seconds
  while others wait is *stuck*: an extra worker is forked for the queue (up to ``max_workers``), and stopped again
  after ``idle_timeout`` seconds without work.
- A task that has used ``slow_after`` CPU seconds (or run five times that long) is *demoted*: its process drops to the lowest CPU priority (nice
  19), so the other requests' work gets the CPU first, and a fresh worker takes its place in the pool. A demoted
  worker is retired once its task ends (its priority cannot be raised again). At most ``max_slow`` demoted workers
  live at once: past that, the oldest is stopped early.
- At the deadline (wall time from submission) a running task's process is killed, so work is bounded whatever the
  input, and the task fails with :class:`WorkTimeout`; a queued task is dropped the same way.
- A worker that dies fails its task with :class:`WorkerLost` and is replaced.

Workers are forked from a helper process that has the refiner already imported (:mod:`refiner.proxy.forks`), so a
replacement costs a fork (about a millisecond), not an interpreter start. :class:`ThreadRunner` runs the tasks in
threads of this process instead (same interface; deadlines without the kill, and no CPU isolation).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import pickle
import signal
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import anyio

from refiner.proxy import work
from refiner.proxy.forks import ForkServer

log = logging.getLogger("refiner.proxy")

SLOW_NICE = 19
SLOW_WALL_FACTOR = 5  # a task running this many times ``slow_after`` in wall time is slow, whatever its CPU time


class IsolationError(RuntimeError):
    """A task that gave no result."""


class WorkTimeout(IsolationError):
    """The task's deadline passed (queued or running); a running task's process was killed."""


class WorkerLost(IsolationError):
    """The worker process running the task died."""


class WorkFailed(IsolationError):
    """The task raised inside the worker; the message is ``"<ExceptionType>: <message>"``."""


@dataclass(eq=False)
class _Task:
    name: str
    payload: Any
    future: asyncio.Future
    deadline: float  # loop time
    worker: _Worker | None = None
    slow: bool = False
    started: float = 0.0  # CPU seconds of its worker when it started there
    dispatched: float = 0.0  # loop time when it started there
    timers: list[asyncio.TimerHandle] = field(default_factory=list)

    def fail(self, error: Exception) -> None:
        for t in self.timers:
            t.cancel()
        if not self.future.done():
            self.future.set_exception(error)

    def succeed(self, value: Any) -> None:
        for t in self.timers:
            t.cancel()
        if not self.future.done():
            self.future.set_result((value, self.slow))


@dataclass(eq=False)
class _Worker:
    pid: int
    conn: Connection
    task: _Task | None = None
    slow: bool = False


def cpu_seconds(pid: int, wall: float) -> float:
    """CPU seconds used so far by process ``pid`` (``/proc/PID/schedstat``, else ``/proc/PID/stat``); ``wall`` when
    neither can be read."""
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


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class WorkerPool:
    """``await pool.run(name, payload, timeout)`` runs ``work.TASKS[name](state, payload)`` in a worker process and
    returns ``(value, slow)`` (``slow``: the task was demoted). ``state`` (picklable) is given to every worker at
    start. See the module docstring for ``workers``, ``max_workers`` (default 2x ``workers``), ``stuck_after``,
    ``slow_after``, ``max_slow`` (default 2x ``workers``) and ``idle_timeout``."""

    def __init__(self, state: Any, *, workers: int | None = None, max_workers: int | None = None,
                 stuck_after: float = 0.02, slow_after: float = 0.1, max_slow: int | None = None,
                 idle_timeout: float = 10.0) -> None:
        self._forks = ForkServer(state)  # pickles the state: an unpicklable one fails here, at start-up
        self.size = workers if workers else max(2, os.cpu_count() or 1)
        self.max_workers = max(self.size, max_workers or 2 * self.size)
        self.stuck_after = min(stuck_after, slow_after)
        self.slow_after = slow_after
        self.max_slow = max_slow if max_slow is not None else 2 * self.size
        self.idle_timeout = idle_timeout
        self._idle: collections.deque[_Worker] = collections.deque()
        self._busy: set[_Worker] = set()
        self._slow: collections.deque[_Worker] = collections.deque()  # oldest demotion first
        self._queue: collections.deque[_Task] = collections.deque()
        self._starting = 0
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stuck_check: asyncio.TimerHandle | None = None
        self.stats: collections.Counter[str] = collections.Counter()

    # -- life cycle

    async def start(self) -> None:
        """Starts the workers; raises when none can be started."""
        self._loop = asyncio.get_running_loop()
        await self._loop.run_in_executor(None, self._forks.start)
        started = await asyncio.gather(*(self._loop.run_in_executor(None, self._start_process)
                                         for _ in range(self.size)), return_exceptions=True)
        errors = [s for s in started if isinstance(s, BaseException)]
        for s in started:
            if not isinstance(s, BaseException):
                self._add(*s)
        if errors and not self._idle:
            raise RuntimeError(f"no tier-1 worker process could be started: {errors[0]!r}") from errors[0]
        self._fill()

    async def stop(self) -> None:
        self._closed = True
        for task in self._queue:
            task.fail(WorkerLost("the proxy is shutting down"))
        self._queue.clear()
        for w in [*self._idle, *self._busy, *self._slow]:
            self._remove(w, WorkerLost("the proxy is shutting down"))
        await asyncio.get_running_loop().run_in_executor(None, self._forks.close)

    def info(self) -> dict[str, Any]:
        return {"workers": len(self._idle) + len(self._busy), "idle": len(self._idle), "slow": len(self._slow),
                "queued": len(self._queue), **self.stats}

    # -- tasks

    async def run(self, name: str, payload: Any, timeout: float) -> tuple[Any, bool]:
        """``(value, slow)`` of the task; raises :class:`IsolationError` (:class:`WorkTimeout`, :class:`WorkerLost`,
        :class:`WorkFailed`)."""
        if self._closed or self._loop is None:
            raise WorkerLost("the worker pool is not running")
        loop = self._loop
        task = _Task(name, payload, loop.create_future(), loop.time() + timeout)
        task.timers.append(loop.call_at(task.deadline, self._expire, task))
        self._queue.append(task)
        self.stats["tasks"] += 1
        self._dispatch()
        return await task.future

    def _dispatch(self) -> None:
        while self._queue and self._idle:
            task = self._queue.popleft()
            if task.future.done():  # expired or abandoned while queued
                continue
            worker = self._idle.popleft()
            try:
                worker.conn.send((task.name, task.payload))
            except (pickle.PicklingError, TypeError, AttributeError) as e:  # nothing was written: the worker is fine
                self._idle.appendleft(worker)
                task.fail(WorkFailed(f"{type(e).__name__}: {e}"))
                continue
            except OSError as e:
                self._queue.appendleft(task)
                self._remove(worker, WorkerLost(f"worker unreachable ({type(e).__name__})"))
                continue
            worker.task, task.worker = task, worker
            task.started, task.dispatched = self._cpu(worker), self._loop.time()
            self._busy.add(worker)
            task.timers.append(self._loop.call_later(self.slow_after, self._check_slow, worker, task))
        if self._queue and self._stuck_check is None:
            self._stuck_check = self._loop.call_later(self.stuck_after, self._check_stuck)

    def _cpu(self, worker: _Worker) -> float:
        return cpu_seconds(worker.pid, self._loop.time())

    def _used(self, worker: _Worker, task: _Task) -> float:
        return self._cpu(worker) - task.started

    def _check_stuck(self) -> None:
        """While tasks wait, forks an extra worker for each busy one whose task has used ``stuck_after`` CPU
        seconds."""
        self._stuck_check = None
        if not any(not t.future.done() for t in self._queue):
            return
        stuck = sum(1 for w in self._busy if w.task is not None and self._used(w, w.task) >= self.stuck_after)
        self._grow(min(self.max_workers, self.size + stuck), extra=True)
        self._stuck_check = self._loop.call_later(self.stuck_after, self._check_stuck)

    def _on_readable(self, worker: _Worker) -> None:
        try:
            ok, value = worker.conn.recv()
        except Exception as e:  # noqa: BLE001 - EOF (the process died) or a reply that cannot be read
            self._remove(worker, WorkerLost(f"the worker process ended ({type(e).__name__})"))
            return
        task, worker.task = worker.task, None
        if task is not None:
            if ok:
                task.succeed(value)
            else:
                task.fail(WorkFailed(value))
        if worker.slow or self._closed:
            self._remove(worker, None)
        else:
            self._busy.discard(worker)
            self._idle.append(worker)
            if len(self._idle) + len(self._busy) > self.size:
                self._loop.call_later(self.idle_timeout, self._trim)
        self._dispatch()

    def _trim(self) -> None:
        """Stops the workers beyond ``workers`` that have been idle the longest, when nothing waits."""
        while not self._queue and self._idle and len(self._idle) + len(self._busy) > self.size:
            self.stats["trimmed"] += 1
            self._remove(self._idle[0], None)

    def _check_slow(self, worker: _Worker, task: _Task) -> None:
        if worker.task is not task or worker.slow:
            return
        used = self._used(worker, task)
        ran = self._loop.time() - task.dispatched
        if used < self.slow_after and ran < SLOW_WALL_FACTOR * self.slow_after:  # waited for the CPU: look again
            task.timers.append(self._loop.call_later(max(0.01, self.slow_after - used), self._check_slow, worker,
                                                     task))
            return
        task.slow = worker.slow = True
        self.stats["demoted"] += 1
        self._busy.discard(worker)
        self._slow.append(worker)
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, worker.pid, SLOW_NICE)
        while len(self._slow) > self.max_slow:
            self.stats["evicted"] += 1
            self._remove(self._slow[0], WorkTimeout("gave up: too many slow requests at once"))
        self._fill()

    def _expire(self, task: _Task) -> None:
        if task.future.done():
            return
        self.stats["timeouts"] += 1
        if task.worker is None:
            with contextlib.suppress(ValueError):
                self._queue.remove(task)
            task.fail(WorkTimeout("deadline passed while queued"))
        else:
            self._remove(task.worker, WorkTimeout("deadline passed; the worker was stopped"))

    # -- workers

    def _start_process(self) -> tuple[int, Connection]:
        return self._forks.fork()

    def _add(self, pid: int, conn: Connection) -> None:
        if self._closed:
            _kill(pid)
            conn.close()
            return
        worker = _Worker(pid, conn)
        self._loop.add_reader(conn.fileno(), self._on_readable, worker)
        self._idle.append(worker)
        self.stats["started"] += 1
        self._dispatch()

    def _fill(self) -> None:
        """Starts workers until the pool has ``workers`` of them (demoted ones do not count)."""
        self._grow(self.size)

    def _grow(self, target: int, extra: bool = False) -> None:
        while not self._closed and len(self._idle) + len(self._busy) + self._starting < target:
            self._starting += 1
            self.stats["extra" if extra else "replaced"] += 1
            self._loop.run_in_executor(None, self._start_process).add_done_callback(self._started)

    def _started(self, future: asyncio.Future) -> None:
        self._starting -= 1
        error = future.exception()
        if error is not None:
            log.error("could not start a tier-1 worker process: %r; retrying in 1 s", error)
            self.stats["start_failures"] += 1
            self._loop.call_later(1.0, self._fill)
            return
        self._add(*future.result())

    def _remove(self, worker: _Worker, error: Exception | None) -> None:
        """Stops ``worker`` (killed when it is busy) and fails its task with ``error``; refills the pool."""
        with contextlib.suppress(Exception):
            self._loop.remove_reader(worker.conn.fileno())
        self._busy.discard(worker)
        with contextlib.suppress(ValueError):
            self._idle.remove(worker)
        with contextlib.suppress(ValueError):
            self._slow.remove(worker)
        task, worker.task = worker.task, None
        if task is not None:
            task.fail(error or WorkerLost("the worker was stopped"))
            self.stats["killed"] += 1
        _kill(worker.pid)  # reaped by the fork server's kernel settings, not waited for here
        with contextlib.suppress(Exception):
            worker.conn.close()
        self._fill()


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


class ThreadRunner:
    """The :class:`WorkerPool` interface with tasks run in threads of this process: the deadline answers the request
    but cannot stop the work, and threads share the interpreter lock (no isolation of CPU-bound work)."""

    def __init__(self, state: Any, **_: Any) -> None:
        self.state = state
        self.stats: collections.Counter[str] = collections.Counter()

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def info(self) -> dict[str, Any]:
        return {"workers": 0, **self.stats}

    async def run(self, name: str, payload: Any, timeout: float) -> tuple[Any, bool]:
        self.stats["tasks"] += 1
        fn = work.TASKS[name]
        try:
            with anyio.fail_after(timeout):
                value = await anyio.to_thread.run_sync(fn, self.state, payload, abandon_on_cancel=True)
        except TimeoutError:
            self.stats["timeouts"] += 1
            raise WorkTimeout("deadline passed (the thread keeps running)") from None
        except Exception as e:  # noqa: BLE001 - same contract as a worker process
            raise WorkFailed(f"{type(e).__name__}: {str(e)[:300]}") from None
        return value, False
