"""The proxy's routes: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``; and its settings."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from refiner.pipeline import Refiner
from refiner.proxy.batching import RefineBatcher, batch_function
from refiner.proxy.content import ContentCalls
from refiner.proxy.convert import WIRE_FORMAT
from refiner.proxy.history import HistoryReport
from refiner.proxy.isolation import ThreadRunner, WorkerPool
from refiner.proxy.refining import Refinement, report
from refiner.proxy.stream import relay
from refiner.proxy.upstream import Upstream, UpstreamError, error_response, parse_completion

log = logging.getLogger("refiner.proxy")

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
TIER1_TIMEOUT = 5.0  # default refine_timeout without a refiner model
MODEL_TIMEOUT = 60.0  # default refine_timeout with one


class BodyTooLarge(Exception):
    pass


async def read_body(request: Request, limit: int) -> bytes:
    """The request body; :class:`BodyTooLarge` as soon as it passes ``limit`` bytes (before reading it all when the
    client declares its length)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def tier1_runner(ref: Any, workers: int | None, slow_after: float) -> WorkerPool | ThreadRunner:
    """The isolated tier-1 workers: a copy of ``ref`` without its model (a :class:`Refiner`), else the default
    tier-1 refiner (for content detection and history repair); in threads when ``workers == 0`` or the refiner
    cannot be sent to a process."""
    if isinstance(ref, Refiner):
        tier1 = copy.copy(ref)
        tier1.engine = None
    else:
        tier1 = Refiner(engine=None)
    if workers == 0:
        return ThreadRunner(tier1)
    try:
        return WorkerPool(tier1, workers=workers, slow_after=slow_after)
    except Exception as e:  # noqa: BLE001 - e.g. a Refiner subclass holding a lock: still served, without isolation
        log.warning("tier-1 refiner cannot run in worker processes (%s: %s); using threads (no isolation)",
                    type(e).__name__, e)
        return ThreadRunner(tier1)


def create_app(
    upstream_base_url: str,
    refiner: Any = None,
    *,
    api_key: str | None = None,
    timeout: float = 120.0,
    connect_timeout: float = 10.0,
    max_connections: int = 1024,
    max_batch: int = 64,
    content_calls: str | bool | Sequence[str] | None = "auto",
    heal_history: bool = True,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    refine_timeout: float | None = None,
    workers: int | None = None,
    slow_after: float = 0.02,
    fmt: str = WIRE_FORMAT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """The proxy app. ``upstream_base_url`` ends in ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``); ``refiner`` is a
    :class:`refiner.pipeline.Refiner` (default: tier-1 repair and the guard, no model) or anything with
    ``refine_batch(requests) -> list[dict]``. ``api_key`` is sent upstream; without it the client's
    ``Authorization`` header is forwarded. ``timeout`` bounds each upstream call (504 after).

    Isolation: request bodies over ``max_body_bytes`` are refused (413). Tier-1 work runs in ``workers`` processes
    (default: twice the CPU count, at least 4; ``0``: threads of this process, no isolation); a task that has used
    ``slow_after`` CPU seconds is demoted to the lowest CPU priority and replaced in the pool. ``refine_timeout`` (default 5 s, 60 s with a
    refiner model) bounds what refinement adds to one response: past it the upstream's answer is returned as it came
    (stage ``timeout``). Requests that need the model are batched (up to ``max_batch``) into one engine call.

    ``content_calls``: calls an upstream left in its answer's ``content`` are moved to ``tool_calls`` —
    ``"auto"`` (default) in any registered wire format, a list of format names, or ``None`` / ``"off"``.
    ``heal_history``: broken tool calls in the incoming conversation are repaired before forwarding (default on)."""
    upstream = Upstream(upstream_base_url, api_key=api_key, timeout=timeout, connect_timeout=connect_timeout,
                        max_connections=max_connections, transport=transport)
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes}")
    ref = refiner if refiner is not None else Refiner(engine=None)
    content = ContentCalls(content_calls)
    has_model = isinstance(ref, Refiner) and ref.engine is not None
    budget = refine_timeout if refine_timeout is not None else (MODEL_TIMEOUT if has_model else TIER1_TIMEOUT)
    if budget <= 0:
        raise ValueError(f"refine_timeout must be positive, got {refine_timeout}")
    runner = tier1_runner(ref, workers, slow_after)
    batcher = RefineBatcher(batch_function(ref), max_batch=max_batch)
    refinement = Refinement(ref, runner=runner, batcher=batcher, fmt=fmt, content=content, timeout=budget)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await runner.start()
        upstream.open()
        batcher.start()
        try:
            yield
        finally:
            await batcher.stop()
            await upstream.close()
            await runner.stop()

    app = FastAPI(title="tool-refiner proxy", lifespan=lifespan)
    app.state.upstream = upstream.base
    app.state.batcher = batcher
    app.state.refinement = refinement

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "upstream": upstream.base, "refiner": type(ref).__name__, "model": has_model,
                "content_calls": content.describe(), "heal_history": heal_history, "max_body_bytes": max_body_bytes,
                "refine_timeout": budget, "tier1": runner.info()}

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        try:
            resp = await upstream.request("GET", "/models", request.headers.get("authorization"), None)
        except UpstreamError as e:
            return e.response()
        return Response(resp.content, resp.status_code, media_type="application/json")

    app.post("/v1/chat/completions")(ChatCompletions(upstream, refinement, max_body_bytes, heal_history).handle)
    return app



class ChatCompletions:
    """``POST /v1/chat/completions``: read the body (within the limit), heal its history, forward it, refine the
    answer (or relay the stream), report."""

    def __init__(self, upstream: Upstream, refinement: Refinement, max_body_bytes: int, heal_history: bool) -> None:
        self.upstream = upstream
        self.refinement = refinement
        self.max_body_bytes = max_body_bytes
        self.heal_history = heal_history

    async def handle(self, request: Request) -> Response:
        try:
            raw = await read_body(request, self.max_body_bytes)
        except BodyTooLarge:
            return error_response(413, f"request body is larger than {self.max_body_bytes} bytes, this proxy's limit",
                                  "invalid_request_error", code="request_too_large")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            return error_response(400, "request body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict):
            return error_response(400, "request body must be a JSON object", "invalid_request_error")
        started = time.perf_counter()
        history = None
        if self.heal_history:
            body, history = await self.refinement.heal_history(body)
        payload = raw if history is None or not history.fixed else json.dumps(body, ensure_ascii=False).encode()
        auth = request.headers.get("authorization")
        try:
            if body.get("stream"):
                return await self.stream(body, payload, auth, history)
            resp = await self.upstream.request("POST", "/chat/completions", auth, payload)
            data = parse_completion(resp.content)
        except UpstreamError as e:
            log.warning("chat completion failed: %s %s", e.status, e.message)
            return e.response()
        answered = time.perf_counter()
        items = [(c.get("message") or {}, c.get("finish_reason")) for c in data["choices"]]
        results = await self.refinement.choices(body, items)
        refined = time.perf_counter()
        for choice, r in zip(data["choices"], results):
            choice["message"], choice["finish_reason"] = r.message, r.finish_reason
        headers, extra = report(results, history)
        if extra:
            data["tool_refiner"] = extra
        log.info("chat completion: %d choice(s), stages %s, %.1f ms (upstream %.1f ms, refinement %.1f ms)",
                 len(results), headers["x-tool-refiner"], 1e3 * (time.perf_counter() - started),
                 1e3 * (answered - started), 1e3 * (refined - answered))
        return JSONResponse(data, headers=headers)

    async def stream(self, body: dict, payload: bytes, auth: str | None, history: HistoryReport | None) -> Response:
        resp = await self.upstream.open_stream("/chat/completions", auth, payload)
        headers = {"cache-control": "no-cache"}
        if history is not None and history.header():
            headers["x-tool-refiner-history"] = history.header()
        events = relay(self.upstream.events(resp), self.refinement, body, history)
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)
