"""The proxy's routes: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from refiner import formats
from refiner.proxy.batching import RefineBatcher, batch_function
from refiner.proxy.convert import WIRE_FORMAT
from refiner.proxy.refining import Refinement, default_refiner
from refiner.proxy.stream import relay
from refiner.proxy.upstream import Upstream, UpstreamError, error_response, parse_completion

log = logging.getLogger("refiner.proxy")


def create_app(
    upstream_base_url: str,
    refiner: Any = None,
    *,
    api_key: str | None = None,
    timeout: float = 120.0,
    connect_timeout: float = 10.0,
    max_connections: int = 1024,
    max_batch: int = 64,
    content_calls: Sequence[str] = (),
    fmt: str = WIRE_FORMAT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """The proxy app. ``upstream_base_url`` ends in ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``); ``refiner`` is a
    :class:`refiner.pipeline.Refiner` (default: tier-1 repair and the guard, no model) or anything with
    ``refine_batch(requests) -> list[dict]``. ``api_key`` is sent upstream; without it the client's
    ``Authorization`` header is forwarded. Refinement runs in micro-batches of up to ``max_batch`` requests.

    ``content_calls`` (e.g. ``("hermes",)``) names wire formats whose calls are also taken from an answer's
    ``content`` when it has no ``tool_calls`` (non-streaming only): an upstream whose own tool parser failed on broken
    output, such as ``vllm serve --tool-call-parser hermes``, returns the raw calls there."""
    upstream = Upstream(upstream_base_url, api_key=api_key, timeout=timeout, connect_timeout=connect_timeout,
                        max_connections=max_connections, transport=transport)
    ref = refiner if refiner is not None else default_refiner()
    refine_batch = batch_function(ref)
    content_formats = tuple(content_calls)
    for name in content_formats:
        formats.get(name)  # unknown names fail at start-up

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        upstream.open()
        batcher = RefineBatcher(refine_batch, max_batch=max_batch)
        app.state.batcher = batcher
        app.state.refinement = Refinement(batcher, fmt=fmt, content_formats=content_formats)
        batcher.start()
        try:
            yield
        finally:
            await batcher.stop()
            await upstream.close()

    app = FastAPI(title="tool-refiner proxy", lifespan=lifespan)
    app.state.upstream = upstream.base

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "upstream": upstream.base, "refiner": type(ref).__name__,
                "model": getattr(ref, "engine", None) is not None}

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        try:
            resp = await upstream.request("GET", "/models", request.headers.get("authorization"), None)
        except UpstreamError as e:
            return e.response()
        return Response(resp.content, resp.status_code, media_type="application/json")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error_response(400, "request body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict):
            return error_response(400, "request body must be a JSON object", "invalid_request_error")
        refinement: Refinement = app.state.refinement
        auth = request.headers.get("authorization")
        started = time.perf_counter()
        try:
            if body.get("stream"):
                resp = await upstream.open_stream("/chat/completions", auth, body)
                events = relay(upstream.events(resp), lambda items: refinement.choices(body, items))
                return StreamingResponse(events, media_type="text/event-stream", headers={"cache-control": "no-cache"})
            resp = await upstream.request("POST", "/chat/completions", auth, body)
            data = parse_completion(resp.content)
            items = [(c.get("message") or {}, c.get("finish_reason")) for c in data["choices"]]
            refined = await refinement.choices(body, items)
        except UpstreamError as e:
            log.warning("chat completion failed: %s %s", e.status, e.message)
            return e.response()
        for choice, (message, reason, _) in zip(data["choices"], refined):
            choice["message"], choice["finish_reason"] = message, reason
        stages = ",".join(s for _, _, s in refined)
        log.info("chat completion: %d choice(s), stages %s, %.1f ms", len(refined), stages,
                 1e3 * (time.perf_counter() - started))
        return JSONResponse(data, headers={"x-tool-refiner": stages})

    return app

