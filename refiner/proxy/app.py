"""The proxy's routes and settings: ``POST /v1/chat/completions`` and ``POST /v1/responses`` (refined), every other
path under ``/v1`` passed through, ``GET /health``, ``GET /metrics``; client authentication; one record per request."""

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
OPEN_PATHS = frozenset({"/health", "/metrics"})


class ClientAuth:
    """ASGI middleware: every HTTP request but ``/health`` and ``/metrics`` must carry ``Authorization: Bearer
    <key>`` (compared in constant time, never logged), else 401."""

    def __init__(self, app: ASGIApp, key: str, record: RequestLog) -> None:
        if not key:
            raise ValueError("the client API key must not be empty")
        self.app = app
        self.key = key.encode()
        self.record = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS and not self.allowed(scope):
            self.record(scope.get("method", ""), scope["path"], 401, "unauthorized", 0.0, refused="auth")
            refused = error_response(401, "missing or invalid API key: send Authorization: Bearer <key>",
                                     "invalid_request_error", code="invalid_api_key")
            refused.headers["www-authenticate"] = "Bearer"
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def allowed(self, scope: Scope) -> bool:
        values = [v for k, v in scope.get("headers") or () if k.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, token = values[0].partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.key)


class RequestLog:
    """The one record of each request: its info log line (never a key, a header or a body) and its metrics."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def __call__(self, method: str, route: str, status: int, stages: str, total: float, *, mode: str = "",
                 formats: str = "", upstream: float | None = None, refine: float | None = None,
                 upstream_elapsed: float | None = None, refused: str | None = None,
                 upstream_error: str | None = None) -> None:
        """``upstream``: the time until the upstream answered (a stream: its first event), for the log line;
        ``upstream_elapsed``: the upstream's time to the end of its answer, for the metrics."""
        self.metrics.request(route, status, mode="stream" if mode == "stream" else "whole", refused=refused,
                             upstream_error=upstream_error, total=total, upstream=upstream_elapsed)
        if not log.isEnabledFor(logging.INFO):
            return
        times = f"{1e3 * total:.1f} ms"
        if upstream is not None:
            refined = f", refinement {1e3 * refine:.1f} ms" if refine is not None else ""
            times += f" (upstream {1e3 * upstream:.1f} ms{refined})"
        log.info("%s %s %d%s stage=%s%s %s", method, route, status, f" {mode}" if mode else "", stages or "-",
                 f" format={formats}" if formats else "", times)

    async def stream(self, events: AsyncIterator[str], route: str, started: float,
                     resp: httpx.Response) -> AsyncIterator[str]:
        """``events`` (SSE text) as they come; at their end, the request's record (from the ``tool_refiner`` report)."""
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


def tier1_runner(ref: Any, workers: int | None) -> WorkerPool | ThreadRunner:
    """The tier-1 workers, holding ``ref`` without its model; threads when ``workers == 0`` or it cannot be sent."""
    tier1 = copy.copy(ref) if isinstance(ref, Refiner) else Refiner(engine=None)
    tier1.engine = None
    if workers == 0:
        return ThreadRunner(tier1)
    try:
        return WorkerPool(tier1, workers=workers)
    except Exception as e:  # noqa: BLE001 - e.g. a Refiner subclass holding a lock: still served, without isolation
        log.warning("tier-1 refiner cannot run in worker processes (%s: %s); using threads (no isolation)",
                    type(e).__name__, e)
        return ThreadRunner(tier1)


def create_app(upstream_base_url: str, refiner: Any = None, *, api_key: str | None = None,
               client_api_key: str | None = None, timeout: float = 120.0, max_batch: int = 64,
               content_calls: str | bool | Sequence[str] | None = "auto", heal_history: bool = True,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, refine_timeout: float | None = None,
               workers: int | None = None, chat_template: str | Path | None = None,
               opens_reasoning: Mapping[str, bool] | None = None) -> FastAPI:
    """The proxy app. ``upstream_base_url`` ends in ``/v1``; ``refiner``: a :class:`refiner.pipeline.Refiner`
    (default: tier 1 and the guard, no model) or anything with ``refine_batch(requests)``. ``api_key`` is sent
    upstream (else the client's ``Authorization``, unless ``client_api_key``, which clients must send as their bearer
    token). ``timeout`` bounds each upstream call. Bodies over ``max_body_bytes`` get 413. Tier 1 runs in ``workers``
    processes (``0``: threads; :mod:`refiner.proxy.isolation`). ``refine_timeout`` (5 s, 60 s with a model) bounds
    what refinement adds to a response. Model requests are batched up to ``max_batch``. ``content_calls``: read calls
    left in ``content`` (``"auto"``, format names, or ``"off"``); ``heal_history``: repair the incoming conversation's
    broken calls. ``opens_reasoning`` (model or ``*`` -> bool) and ``chat_template`` (a path) say whether the
    upstream's prompt opens the reasoning block (:mod:`refiner.proxy.thinking`)."""
    upstream = Upstream(upstream_base_url, api_key=api_key, timeout=timeout, consume_auth=bool(client_api_key))
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes}")
    ref = refiner if refiner is not None else Refiner(engine=None)
    content = ContentCalls(content_calls)
    has_model = isinstance(ref, Refiner) and ref.engine is not None
    budget = refine_timeout if refine_timeout is not None else (MODEL_TIMEOUT if has_model else TIER1_TIMEOUT)
    if budget <= 0:
        raise ValueError(f"refine_timeout must be positive, got {refine_timeout}")
    runner = tier1_runner(ref, workers)
    batcher = RefineBatcher(batch_function(ref), max_batch=max_batch)
    metrics = Metrics()
    record = RequestLog(metrics)
    prompts = PromptReasoning(chat_template, opens_reasoning)
    refinement = Refinement(ref, runner=runner, batcher=batcher, content=content, timeout=budget,
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


@dataclass
class Route:
    """What a route's handler uses: the upstream, the refinement (None: refines nothing), the body limit, the record."""

    upstream: Upstream
    refinement: Refinement | None
    max_body_bytes: int
    record: RequestLog
    heal_history: bool = False

    async def read(self, request: Request, route: str, started: float) -> bytes | Response:
        """The request body, or the 413 response as soon as it passes the limit (or declares it will)."""
        declared = request.headers.get("content-length", "")
        if not (declared.isdigit() and int(declared) > self.max_body_bytes):
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body_bytes:
                    break
                chunks.append(chunk)
            else:
                return b"".join(chunks)
        self.record(request.method, route, 413, "none", time.perf_counter() - started, refused="size")
        return error_response(413, f"request body is larger than {self.max_body_bytes} bytes, this proxy's limit",
                              "invalid_request_error", code="request_too_large")

    async def read_json(self, request: Request, route: str, started: float) -> tuple[bytes, dict] | Response:
        """``(raw body, JSON object)``, or the error response (413, or 400 when it is not a JSON object)."""
        raw = await self.read(request, route, started)
        if isinstance(raw, Response):
            return raw
        try:
            body = loads_keeping_tools(raw.decode("utf-8"))  # (its tool list keeps its text: see refiner.specs.catalog)
            problem = None if isinstance(body, dict) else "request body must be a JSON object"
        except (ValueError, RecursionError):
            problem = "request body is not valid JSON"
        if problem:
            self.record("POST", route, 400, "none", time.perf_counter() - started)
            return error_response(400, problem, "invalid_request_error")
        return raw, body

    def streamed(self, events: AsyncIterator[str], route: str, started: float, resp: httpx.Response,
                 extra: dict[str, str] | None = None) -> StreamingResponse:
        """The SSE response relaying ``events`` (``extra``: more headers), recorded once they end."""
        return StreamingResponse(self.record.stream(events, route, started, resp), media_type="text/event-stream",
                                 headers={**returned_headers(resp.headers, refined=True), "cache-control": "no-cache",
                                          **(extra or {})})


class PassThrough(Route):
    """Every other path under ``/v1`` (``/v1/models``, ``/v1/embeddings``...): forwarded as it came, answered with
    the upstream's status, headers and body as they come; upstream failures as on the refined routes."""

    async def handle(self, request: Request, path: str) -> Response:
        started = time.perf_counter()
        route = f"/v1/{path}"
        raw = await self.read(request, route, started)
        if isinstance(raw, Response):
            return raw
        target = f"/{path}" + (f"?{request.url.query}" if request.url.query else "")
        try:
            resp = await self.upstream.open_stream(target, request.headers.raw, raw, method=request.method,
                                                   passthrough=True)
        except UpstreamError as e:
            self.record(request.method, route, e.status, "none", time.perf_counter() - started, upstream_error=e.kind)
            return e.response()
        self.record(request.method, route, resp.status_code, "none", time.perf_counter() - started, mode="relayed")
        return StreamingResponse(self.upstream.body(resp), resp.status_code, headers=returned_headers(resp.headers))


class ChatCompletions(Route):
    """``POST /v1/chat/completions``: heal the history, forward, refine the answer (or relay the stream), report."""

    route, path, parse = "/v1/chat/completions", "/chat/completions", staticmethod(parse_completion)
    failing = "chat completion"  # what an upstream failure is logged as (nothing when empty)

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        read = await self.read_json(request, self.route, started)
        if isinstance(read, Response):
            return read
        raw, body = read
        history = HistoryReport()
        if self.heal_history:
            body, history = await self.refinement.heal_history(body)
        payload = json.dumps(body, ensure_ascii=False).encode() if history.fixed else raw
        client = request.headers.raw
        try:
            if body.get("stream"):
                resp = await self.upstream.open_stream(self.path, client, payload)
                healed = {"x-tool-refiner-history": history.header()} if history.header() else {}
                return self.streamed(self.relay(resp, body, history), self.route, started, resp, healed)
            resp = await self.upstream.request("POST", self.path, client, payload)
            data = self.parse(resp.content)
        except UpstreamError as e:
            if self.failing:
                log.warning("%s failed: %s %s", self.failing, e.status, e.message)
            self.record("POST", self.route, e.status, "none", time.perf_counter() - started, upstream_error=e.kind)
            return e.response()
        answered = time.perf_counter()
        headers, content_formats = await self.refine(body, data, history)
        self.record("POST", self.route, 200, headers["x-tool-refiner"], time.perf_counter() - started,
                    formats=content_formats, upstream=answered - started, refine=time.perf_counter() - answered,
                    upstream_elapsed=elapsed(resp))
        return JSONResponse(data, headers={**returned_headers(resp.headers, refined=True), **headers})

    def relay(self, resp: httpx.Response, body: dict, history: HistoryReport) -> AsyncIterator[str]:
        return relay(self.upstream.events(resp), self.refinement, body, history)

    async def refine(self, body: dict, data: dict, history: HistoryReport) -> tuple[dict[str, str], str]:
        """Refines ``data``'s choices in place: the response headers, the formats of calls taken from content."""
        items = [(c.get("message") or {}, c.get("finish_reason")) for c in data["choices"]]
        results = await self.refinement.choices(body, items)
        for choice, r in zip(data["choices"], results):
            choice["message"], choice["finish_reason"] = r.message, r.finish_reason
        headers, extra = report(results, history)
        if extra:
            data["tool_refiner"] = extra
        return headers, ",".join(sorted({r.content_format for r in results if r.content_format}))


class Responses(ChatCompletions):
    """``POST /v1/responses``: forward, refine the function calls (or relay the stream), report."""

    route, path, parse = "/v1/responses", "/responses", staticmethod(parse_object)
    failing = ""

    def relay(self, resp: httpx.Response, body: dict, history: HistoryReport) -> AsyncIterator[str]:
        return responses.relay(self.upstream.events(resp), self.refinement, body)

    async def refine(self, body: dict, data: dict, history: HistoryReport) -> tuple[dict[str, str], str]:
        return responses.reported(data, await responses.refine_output(self.refinement, body, data)), ""
