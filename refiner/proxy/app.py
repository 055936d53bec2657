"""The proxy's routes and settings: ``POST /v1/chat/completions`` and ``POST /v1/responses`` (refined), every other
path under ``/v1`` passed through to the upstream as it is, ``GET /health``, ``GET /metrics``; client
authentication (:class:`ClientAuth`); one record per request, a log line and its metrics (:class:`RequestLog`)."""

from __future__ import annotations

import contextlib
import copy
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from refiner.pipeline import Refiner
from refiner.proxy import responses
from refiner.proxy.batching import RefineBatcher, batch_function
from refiner.proxy.content import ContentCalls
from refiner.proxy.convert import WIRE_FORMAT
from refiner.proxy.history import HistoryReport
from refiner.proxy.isolation import ThreadRunner, WorkerPool
from refiner.proxy.metrics import CONTENT_TYPE, Metrics
from refiner.proxy.refining import Refinement, report
from refiner.proxy.stream import relay
from refiner.proxy.thinking import PromptReasoning
from refiner.proxy.upstream import (
    Upstream,
    UpstreamError,
    elapsed,
    error_body,
    error_response,
    parse_completion,
    parse_object,
    returned_headers,
)
from refiner.specs import loads_keeping_tools

log = logging.getLogger("refiner.proxy")

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
TIER1_TIMEOUT = 5.0  # default refine_timeout without a refiner model
MODEL_TIMEOUT = 60.0  # default refine_timeout with one


class BodyTooLarge(Exception):
    pass


OPEN_PATHS = frozenset({"/health", "/metrics"})


class ClientAuth:
    """ASGI middleware: every HTTP request but ``/health`` and ``/metrics`` must carry ``Authorization: Bearer
    <key>``; others get 401 with an OpenAI-style error body. The token is compared in constant time
    (:func:`hmac.compare_digest`) and never logged."""

    def __init__(self, app: ASGIApp, key: str, record: RequestLog) -> None:
        if not key:
            raise ValueError("the client API key must not be empty")
        self.app = app
        self.key = key.encode()
        self.record = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS and not self.allowed(scope):
            self.record(scope.get("method", ""), scope["path"], 401, "unauthorized", 0.0, refused="auth")
            body = json.dumps(error_body(401, "missing or invalid API key: send Authorization: Bearer <key>",
                                         "invalid_request_error", code="invalid_api_key")).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def allowed(self, scope: Scope) -> bool:
        values = [v for k, v in scope.get("headers") or () if k.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, token = values[0].partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.key)


class RequestLog:
    """The one record of each request on the API's routes: its info log line (route, status, stages, formats, times;
    never a key, a header or a body) and its metrics (:class:`~refiner.proxy.metrics.Metrics`)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def __call__(self, method: str, route: str, status: int, stages: str, total: float, *, mode: str = "",
                 formats: str = "", upstream: float | None = None, refine: float | None = None,
                 upstream_elapsed: float | None = None, refused: str | None = None,
                 upstream_error: str | None = None) -> None:
        """``upstream``: the time until the upstream answered (on a stream: until its first event), for the log
        line; ``upstream_elapsed``: the upstream exchange's own time, to the end of its answer, for the metrics;
        ``refused``: ``auth`` or ``size``; ``upstream_error``: the :class:`UpstreamError`'s kind."""
        self.metrics.request(route, status, mode="stream" if mode == "stream" else "whole", refused=refused,
                             upstream_error=upstream_error, total=total, upstream=upstream_elapsed)
        if not log.isEnabledFor(logging.INFO):
            return
        times = f"{1e3 * total:.1f} ms"
        if upstream is not None:
            times += f" (upstream {1e3 * upstream:.1f} ms" + (f", refinement {1e3 * refine:.1f} ms)" if refine is not
                                                                None else ")")
        log.info("%s %s %d%s stage=%s%s %s", method, route, status, f" {mode}" if mode else "", stages or "-",
                 f" format={formats}" if formats else "", times)

    async def stream(self, events: AsyncIterator[str], route: str, started: float,
                     resp: httpx.Response) -> AsyncIterator[str]:
        """``events`` (SSE text) as they come; once they end, the request's record, with the stages and formats the
        stream's ``tool_refiner`` report gave (read from the last events only), the time to the first event and the
        upstream ``resp``'s own time."""
        first: float | None = None
        report: dict = {}
        status, failure = 200, None
        try:
            async for piece in events:
                if first is None:
                    first = time.perf_counter() - started
                if len(piece) < 65536 and ('"tool_refiner"' in piece or '"error"' in piece[:64]):
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        event = json.loads(piece[piece.index("data:") + 5:])
                        inner = event.get("response") if isinstance(event.get("response"), dict) else {}
                        report = event.get("tool_refiner") or inner.get("tool_refiner") or report
                        if "error" in event or event.get("type") == "error":
                            error = event.get("error")
                            status = 502
                            failure = str(error.get("type")) if isinstance(error, dict) else "upstream_error"
                yield piece
        finally:
            stages = report.get("stages") or ([report["stage"]] if "stage" in report else ["none"])
            formats = ",".join(sorted({m.get("format", "") for m in report.get("content_calls") or []}))
            self(method="POST", route=route, status=status, stages=",".join(map(str, stages)),
                 total=time.perf_counter() - started, mode="stream", formats=formats, upstream=first,
                 upstream_elapsed=elapsed(resp), upstream_error=failure)


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
    client_api_key: str | None = None,
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
    chat_template: str | Path | None = None,
    opens_reasoning: Mapping[str, bool] | None = None,
) -> FastAPI:
    """The proxy app. ``upstream_base_url`` ends in ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``); ``refiner`` is a
    :class:`refiner.pipeline.Refiner` (default: tier-1 repair and the guard, no model) or anything with
    ``refine_batch(requests) -> list[dict]``. ``api_key`` is sent upstream; without it the client's
    ``Authorization`` header is forwarded (unless ``client_api_key`` is set). ``client_api_key``: clients must send
    it as their bearer token (401 otherwise; ``/health`` and ``/metrics`` stay open). The client's other headers are
    forwarded (:func:`refiner.proxy.upstream.forwarded_headers`). ``timeout`` bounds each upstream call (504 after).

    Isolation: request bodies over ``max_body_bytes`` are refused (413). Tier-1 work runs in ``workers`` processes
    (default: twice the CPU count, at least 4; ``0``: threads of this process, no isolation); a task that has used
    ``slow_after`` CPU seconds is demoted to the lowest CPU priority and replaced in the pool. ``refine_timeout`` (default 5 s, 60 s with a
    refiner model) bounds what refinement adds to one response: past it the upstream's answer is returned as it came
    (stage ``timeout``). Requests that need the model are batched (up to ``max_batch``) into one engine call.

    ``content_calls``: calls an upstream left in its answer's ``content`` are moved to ``tool_calls`` —
    ``"auto"`` (default) in any registered wire format, a list of format names, or ``None`` / ``"off"``.
    ``heal_history``: broken tool calls in the incoming conversation are repaired before forwarding (default on).

    Whether the upstream's prompt opens the reasoning block (so that a streamed answer's reasoning is sent as
    ``reasoning_content`` from its first token; :mod:`refiner.proxy.thinking`): ``opens_reasoning`` (model name, or
    ``*``, -> True / False), else the upstream model's ``chat_template`` (a path: ``.jinja``, tokenizer_config.json or
    model folder), else what that model's earlier answers showed."""
    upstream = Upstream(upstream_base_url, api_key=api_key, timeout=timeout, connect_timeout=connect_timeout,
                        max_connections=max_connections, transport=transport, consume_auth=bool(client_api_key))
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
    metrics = Metrics()
    record = RequestLog(metrics)
    prompts = PromptReasoning(chat_template, opens_reasoning)
    refinement = Refinement(ref, runner=runner, batcher=batcher, fmt=fmt, content=content, timeout=budget,
                            metrics=metrics, prompts=prompts)

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
    app.state.metrics = metrics

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "upstream": upstream.base, "refiner": type(ref).__name__, "model": has_model,
                "content_calls": content.describe(), "heal_history": heal_history, "max_body_bytes": max_body_bytes,
                "refine_timeout": budget, "client_auth": bool(client_api_key), "tier1": runner.info(),
                "opens_reasoning": prompts.describe()}

    @app.get("/metrics")
    async def metrics_text() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    app.post("/v1/chat/completions")(ChatCompletions(upstream, refinement, max_body_bytes, record, heal_history).handle)
    app.post("/v1/responses")(Responses(upstream, refinement, max_body_bytes, record).handle)
    app.api_route("/v1/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])(
        PassThrough(upstream, None, max_body_bytes, record).handle)
    if client_api_key:
        app.add_middleware(ClientAuth, key=client_api_key, record=record)
    return app


def too_large(limit: int) -> JSONResponse:
    return error_response(413, f"request body is larger than {limit} bytes, this proxy's limit",
                          "invalid_request_error", code="request_too_large")


async def read_json(request: Request, limit: int, route: str, started: float,
                    record: RequestLog) -> tuple[bytes, dict] | Response:
    """``(raw body, JSON object)``, or the error response: 413 over ``limit`` bytes, 400 when it is not a JSON
    object."""
    try:
        raw = await read_body(request, limit)
    except BodyTooLarge:
        record("POST", route, 413, "none", time.perf_counter() - started, refused="size")
        return too_large(limit)
    try:
        body = loads_keeping_tools(raw.decode("utf-8"))  # (its tool list keeps its text: see refiner.specs.catalog)
    except (ValueError, RecursionError):
        record("POST", route, 400, "none", time.perf_counter() - started)
        return error_response(400, "request body is not valid JSON", "invalid_request_error")
    if not isinstance(body, dict):
        record("POST", route, 400, "none", time.perf_counter() - started)
        return error_response(400, "request body must be a JSON object", "invalid_request_error")
    return raw, body


@dataclass
class Route:
    """What a route's handler uses: the upstream, the refinement (None for a route that refines nothing), the body
    limit and the request record."""

    upstream: Upstream
    refinement: Refinement | None
    max_body_bytes: int
    record: RequestLog
    heal_history: bool = False


class PassThrough(Route):
    """Every other path under ``/v1`` (``GET /v1/models``, ``/v1/models/{id}``, ``/v1/completions``,
    ``/v1/embeddings``, ...): forwarded with its method, query, headers and body, and answered with the upstream's
    status, headers and body as they come (streamed). An upstream 5xx answers 502, a timeout 504, an unreachable
    upstream 502, as on the refined routes; bodies over the limit 413."""

    async def handle(self, request: Request, path: str) -> Response:
        started = time.perf_counter()
        route = f"/v1/{path}"
        try:
            raw = await read_body(request, self.max_body_bytes)
        except BodyTooLarge:
            self.record(request.method, route, 413, "none", time.perf_counter() - started, refused="size")
            return too_large(self.max_body_bytes)
        target = f"/{path}" + (f"?{request.url.query}" if request.url.query else "")
        try:
            resp = await self.upstream.open_stream(target, request.headers.raw, raw, method=request.method,
                                                   passthrough=True)
        except UpstreamError as e:
            self.record(request.method, route, e.status, "none", time.perf_counter() - started, upstream_error=e.kind)
            return e.response()
        self.record(request.method, route, resp.status_code, "none", time.perf_counter() - started, mode="relayed")
        return StreamingResponse(self.upstream.body(resp), resp.status_code, headers=returned_headers(resp.headers))


ROUTE = "/v1/chat/completions"


class ChatCompletions(Route):
    """``POST /v1/chat/completions``: read the body (within the limit), heal its history, forward it, refine the
    answer (or relay the stream), report."""

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        read = await read_json(request, self.max_body_bytes, ROUTE, started, self.record)
        if isinstance(read, Response):
            return read
        raw, body = read
        history = None
        if self.heal_history:
            body, history = await self.refinement.heal_history(body)
        payload = raw if history is None or not history.fixed else json.dumps(body, ensure_ascii=False).encode()
        client = request.headers.raw
        try:
            if body.get("stream"):
                return await self.stream(body, payload, client, history, started)
            resp = await self.upstream.request("POST", "/chat/completions", client, payload)
            data = parse_completion(resp.content)
        except UpstreamError as e:
            log.warning("chat completion failed: %s %s", e.status, e.message)
            self.record("POST", ROUTE, e.status, "none", time.perf_counter() - started, upstream_error=e.kind)
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
        self.record("POST", ROUTE, 200, headers["x-tool-refiner"], time.perf_counter() - started,
                    formats=",".join(sorted({r.content_format for r in results if r.content_format})),
                    upstream=answered - started, refine=refined - answered, upstream_elapsed=elapsed(resp))
        return JSONResponse(data, headers={**returned_headers(resp.headers, refined=True), **headers})

    async def stream(self, body: dict, payload: bytes, client: Any, history: HistoryReport | None,
                     started: float) -> Response:
        resp = await self.upstream.open_stream("/chat/completions", client, payload)
        headers = {**returned_headers(resp.headers, refined=True), "cache-control": "no-cache"}
        if history is not None and history.header():
            headers["x-tool-refiner-history"] = history.header()
        events = relay(self.upstream.events(resp), self.refinement, body, history)
        return StreamingResponse(self.record.stream(events, ROUTE, started, resp), media_type="text/event-stream",
                                 headers=headers)


class Responses(Route):
    """``POST /v1/responses``: forward the request, refine the answer's function calls (or relay the stream), report
    (see :mod:`refiner.proxy.responses`)."""

    route = "/v1/responses"

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        read = await read_json(request, self.max_body_bytes, self.route, started, self.record)
        if isinstance(read, Response):
            return read
        raw, body = read
        client = request.headers.raw
        try:
            if body.get("stream"):
                resp = await self.upstream.open_stream("/responses", client, raw)
                events = responses.relay(self.upstream.events(resp), self.refinement, body)
                return StreamingResponse(self.record.stream(events, self.route, started, resp),
                                         media_type="text/event-stream",
                                         headers={**returned_headers(resp.headers, refined=True),
                                                  "cache-control": "no-cache"})
            resp = await self.upstream.request("POST", "/responses", client, raw)
            data = parse_object(resp.content)
        except UpstreamError as e:
            self.record("POST", self.route, e.status, "none", time.perf_counter() - started, upstream_error=e.kind)
            return e.response()
        answered = time.perf_counter()
        headers = responses.reported(data, await responses.refine_output(self.refinement, body, data))
        self.record("POST", self.route, 200, headers["x-tool-refiner"], time.perf_counter() - started,
                    upstream=answered - started, refine=time.perf_counter() - answered, upstream_elapsed=elapsed(resp))
        return JSONResponse(data, headers={**returned_headers(resp.headers, refined=True), **headers})
