"""Micro-batching for the refiner: requests that arrive while a batch runs are grouped into the next one."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from typing import Any

import anyio


class RefineBatcher:
    """Runs the refiner in one worker thread, one batch at a time: requests that arrive while a batch runs are
    grouped into the next one (up to ``max_batch``). Engines see batches (vLLM's strength) and are never called from
    two threads at once (``vllm.LLM`` is not thread-safe)."""

    def __init__(self, refine_batch: Callable[[list[dict]], list[dict]], max_batch: int = 64) -> None:
        self.refine_batch = refine_batch
        self.max_batch = max_batch
        self.queue: asyncio.Queue[tuple[list[dict], asyncio.Future]] = asyncio.Queue()
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def refine(self, requests: list[dict]) -> list[dict]:
        """Results for ``requests`` (in order); raises what the refiner raised for their batch."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        await self.queue.put((requests, future))
        return await future

    async def _run(self) -> None:
        while True:
            items = [await self.queue.get()]
            size = len(items[0][0])
            while not self.queue.empty() and size < self.max_batch:
                items.append(self.queue.get_nowait())
                size += len(items[-1][0])
            flat = [r for reqs, _ in items for r in reqs]
            try:
                results = await anyio.to_thread.run_sync(self.refine_batch, flat)
                if len(results) != len(flat):
                    raise RuntimeError(f"refiner returned {len(results)} results for {len(flat)} requests")
            except Exception as e:  # noqa: BLE001 - handed to every waiting request; the worker keeps running
                for _, future in items:
                    if not future.done():
                        future.set_exception(e)
                continue
            start = 0
            for reqs, future in items:
                if not future.done():
                    future.set_result(results[start : start + len(reqs)])
                start += len(reqs)


def batch_function(ref: Any) -> Callable[[list[dict]], list[dict]]:
    """``ref``'s batch method; the pipeline's turns unreadable requests into error results instead of raising."""
    fn = ref.refine_batch
    try:
        takes_errors = "errors" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes_errors = False
    return (lambda reqs: fn(reqs, errors="result")) if takes_errors else fn
