"""An OpenAI-compatible proxy that refines the tool calls of any upstream chat-completions server.

    app = create_app("http://127.0.0.1:8000/v1", refiner=Refiner(engine=make_engine("vllm", model="refiner/")))
    uvicorn.run(app, port=8080)      # clients point their OpenAI SDK at http://127.0.0.1:8080/v1

``POST /v1/chat/completions`` is forwarded to the upstream; every returned choice that carries ``tool_calls`` is
refined against the request's ``tools`` (``Refiner.refine_batch``; without a refiner model, tier-1 repair and the guard
only). Call ids, order, content and usage are kept; ``arguments`` is always a JSON string; ``finish_reason`` becomes
``"stop"`` when no call remains. With ``stream: true`` content deltas are forwarded as they come, the tool-call deltas
are buffered, refined and re-emitted whole before the final chunk and ``[DONE]``. Refiner calls are micro-batched
and serialised in one worker thread. Optionally (``content_calls``) calls an upstream left in its text content are
moved to ``tool_calls``.

Errors: upstream timeouts answer 504, unreachable or malformed upstreams and upstream 5xx answer 502, upstream 4xx
pass through; all with OpenAI-style ``{"error": {...}}`` bodies. A refiner failure never fails the request: the
upstream answer is returned as it came (header ``x-tool-refiner: error``). ``GET /v1/models`` is passed through and
``GET /health`` reports liveness. API keys (the proxy's own ``api_key`` or the client's ``Authorization`` header,
forwarded when no key is configured) are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

log = logging.getLogger("refiner.proxy")

WIRE_FORMAT = "openai"


class UpstreamError(Exception):
    """An upstream failure, with the HTTP status the proxy answers and an OpenAI-style error type."""

    def __init__(self, status: int, message: str, kind: str = "upstream_error", retry_after: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.retry_after = retry_after

    def response(self) -> JSONResponse:
        resp = error_response(self.status, self.message, self.kind)
        if self.retry_after:
            resp.headers["retry-after"] = self.retry_after
        return resp


def error_response(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": status}}, status)


# ----------------------------------------------------------------------------------------------------------------
# Tool calls ⇄ refiner requests


def upstream_text(tool_calls: Sequence[dict]) -> str:
    """The upstream's calls as text in the ``openai`` wire format: the ``tool_calls`` array exactly as received
    (arguments kept as the strings the upstream wrote, broken or not)."""
    return json.dumps(list(tool_calls), ensure_ascii=False)


def refine_request(body: dict, tool_calls: Sequence[dict], fmt: str) -> dict:
    """The pipeline request for one choice: the chat's tools and messages, and the upstream's calls."""
    return {"tools": body.get("tools") or None, "query": body.get("messages") or "", "upstream":
            upstream_text(tool_calls), "format": fmt}


def rebuild_tool_calls(original: Sequence[dict], calls: Sequence[dict]) -> list[dict]:
    """OpenAI ``tool_calls`` for the refined ``calls``: a call keeps the id of the original call at its position
    when the name matches, else of the first unused original with its name, else (a renamed call) of the first
    unused original; calls beyond the originals get fresh ids."""
    used: set[int] = set()
    ids: list[str | None] = [None] * len(calls)
    names = [(o.get("function") or {}).get("name") for o in original]
    for i, c in enumerate(calls):
        if i < len(original) and names[i] == c["name"]:
            ids[i] = original[i].get("id")
            used.add(i)
    for i, c in enumerate(calls):
        if ids[i] is None:
            j = next((j for j, n in enumerate(names) if j not in used and n == c["name"]), None)
            if j is not None:
                used.add(j)
                ids[i] = original[j].get("id")
    spare = iter(j for j in range(len(original)) if j not in used)  # renamed calls keep the ids of the rest
    for i in range(len(calls)):
        if ids[i] is None:
            j = next(spare, None)
            ids[i] = original[j].get("id") if j is not None else None
    return [
        {
            "id": ids[i] or f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {}, ensure_ascii=False)},
        }
        for i, c in enumerate(calls)
    ]


def apply_result(message: dict, finish_reason: str | None, result: dict) -> tuple[dict, str | None]:
    """The choice's message and finish reason after refinement (unchanged results keep the upstream's bytes)."""
    original = message.get("tool_calls") or []
    if not result.get("changed") or result.get("stage") == "error":
        return message, finish_reason
    tool_calls = rebuild_tool_calls(original, result.get("calls") or [])
    out = dict(message)
    if tool_calls:
        out["tool_calls"] = tool_calls
        reason = "tool_calls" if finish_reason in (None, "stop", "tool_calls") else finish_reason
    else:
        out.pop("tool_calls", None)
        reason = "stop" if finish_reason in (None, "tool_calls") else finish_reason
    return out, reason


def content_call_format(content: Any, allowed: Sequence[str]) -> str | None:
    """The wire format of tool calls written in an answer's text, when it is one of ``allowed``."""
    if not isinstance(content, str) or not content.strip():
        return None
    from refiner.formats import detect_format

    found = detect_format(content)
    return found if found in allowed else None


def calls_from_content(
    message: dict, finish_reason: str | None, result: dict, fmt_name: str
) -> tuple[dict, str | None]:
    """The message with the calls found in its content moved to ``tool_calls``; the content keeps the text before
    the format's first tag (None when nothing is left). Unchanged when no call was recovered."""
    calls = result.get("calls") or []
    if not calls or result.get("stage") == "error":
        return message, finish_reason
    from refiner import formats

    content = message["content"]
    tags = formats.get(fmt_name).tags
    cut = content.find(tags[0]) if tags else -1
    out = dict(message)
    out["content"] = (content[:cut].strip() or None) if cut >= 0 else None
    out["tool_calls"] = rebuild_tool_calls([], calls)
    return out, "tool_calls" if finish_reason in (None, "stop", "tool_calls") else finish_reason


# ----------------------------------------------------------------------------------------------------------------
# Micro-batching


class RefineBatcher:
    """Runs the refiner in one worker thread, one batch at a time: requests that arrive while a batch runs are
    grouped into the next one (up to ``max_batch``). Engines see batches (vLLM's strength) and are never called from
    two threads at once (``vllm.LLM`` is not thread-safe)."""

    def __init__(self, refine_batch: Callable[[list[dict]], list[dict]], max_batch: int = 64) -> None:
        self.refine_batch = refine_batch
        self.max_batch = max_batch
        self.queue: asyncio.Queue[tuple[list[dict], asyncio.Future]] = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.batches = 0  # number of refiner calls so far

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
            except Exception as e:  # handed to every waiting request; the worker keeps running
                for _, future in items:
                    if not future.done():
                        future.set_exception(e)
                continue
            finally:
                self.batches += 1
            start = 0
            for reqs, future in items:
                if not future.done():
                    future.set_result(results[start : start + len(reqs)])
                start += len(reqs)


def batch_function(ref: Any) -> Callable[[list[dict]], list[dict]]:
    """``ref``'s batch method; the pipeline's turns unreadable requests into error results instead of raising."""
    fn = getattr(ref, "refine_batch", None)
    if fn is None:
        return lambda reqs: [ref.refine(r) for r in reqs]
    try:
        takes_errors = "errors" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes_errors = False
    return (lambda reqs: fn(reqs, errors="result")) if takes_errors else fn


# ----------------------------------------------------------------------------------------------------------------
# The app


def _default_refiner() -> Any:
    from refiner.pipeline import Refiner

    return Refiner(engine=None)


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
    if not upstream_base_url.startswith(("http://", "https://")):
        raise ValueError(f"upstream_base_url must be an http(s) URL, got {upstream_base_url!r}")
    base = upstream_base_url.rstrip("/")
    ref = refiner if refiner is not None else _default_refiner()
    refine_batch = batch_function(ref)
    content_formats = tuple(content_calls)
    for name in content_formats:
        from refiner import formats

        formats.get(name)  # unknown names fail at start-up
    http_timeout = httpx.Timeout(timeout, connect=min(connect_timeout, timeout))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        async with httpx.AsyncClient(timeout=http_timeout, limits=limits, transport=transport) as client:
            app.state.client = client
            app.state.batcher = RefineBatcher(refine_batch, max_batch=max_batch)
            app.state.batcher.start()
            try:
                yield
            finally:
                await app.state.batcher.stop()

    app = FastAPI(title="tool-refiner proxy", lifespan=lifespan)
    app.state.upstream = base

    def headers_for(request: Request) -> dict[str, str]:
        if api_key:
            return {"authorization": f"Bearer {api_key}"}
        auth = request.headers.get("authorization")
        return {"authorization": auth} if auth else {}

    async def call_upstream(method: str, path: str, request: Request, body: dict | None) -> httpx.Response:
        try:
            resp = await app.state.client.request(method, f"{base}{path}", json=body, headers=headers_for(request))
        except httpx.TimeoutException:
            raise UpstreamError(504, f"upstream timed out after {timeout:g}s", "upstream_timeout") from None
        except httpx.TransportError as e:
            raise UpstreamError(502, f"upstream unreachable ({type(e).__name__})", "upstream_unreachable") from None
        check_status(resp.status_code, resp.content, dict(resp.headers))
        return resp

    async def refine_choices(body: dict, items: list[tuple[dict, str | None]]) -> list[tuple[dict, str | None, str]]:
        """``(message, finish_reason)`` pairs → refined pairs with the stage; a refiner failure keeps them."""
        todo = [i for i, (m, _) in enumerate(items) if m.get("tool_calls")]
        requests = [refine_request(body, items[i][0]["tool_calls"], fmt) for i in todo]
        in_content: dict[int, str] = {}  # choice -> format of the calls found in its content
        if content_formats and body.get("tools"):
            for i, (m, _) in enumerate(items):
                found = None if i in todo else content_call_format(m.get("content"), content_formats)
                if found:
                    in_content[i] = found
                    todo.append(i)
                    requests.append({**refine_request(body, [], fmt), "upstream": m["content"]})
        out = [(m, f, "none") for m, f in items]
        if not todo:
            return out
        try:
            results = await app.state.batcher.refine(requests)
        except Exception as e:  # the proxy never fails a request because the refiner did
            log.warning("refiner failed (%s: %s); returning the upstream calls", type(e).__name__, e)
            return [(m, f, "error" if i in todo else s) for i, (m, f, s) in enumerate(out)]
        for i, result in zip(todo, results):
            if i in in_content:
                message, reason = calls_from_content(items[i][0], items[i][1], result, in_content[i])
            else:
                message, reason = apply_result(items[i][0], items[i][1], result)
            out[i] = (message, reason, str(result.get("stage", "unchanged")))
        return out

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "upstream": base, "refiner": type(ref).__name__,
                "model": getattr(ref, "engine", None) is not None}

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        try:
            resp = await call_upstream("GET", "/models", request, None)
            return Response(resp.content, resp.status_code, media_type="application/json")
        except UpstreamError as e:
            return e.response()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error_response(400, "request body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict):
            return error_response(400, "request body must be a JSON object", "invalid_request_error")
        started = time.perf_counter()
        try:
            if body.get("stream"):
                return await stream_completion(request, body)
            resp = await call_upstream("POST", "/chat/completions", request, body)
            data = parse_completion(resp.content)
            items = [(c.get("message") or {}, c.get("finish_reason")) for c in data["choices"]]
            refined = await refine_choices(body, items)
        except UpstreamError as e:
            log.warning("chat completion failed: %s %s", e.status, e.message)
            return e.response()
        for choice, (message, reason, _) in zip(data["choices"], refined):
            choice["message"], choice["finish_reason"] = message, reason
        stages = ",".join(s for _, _, s in refined)
        log.info("chat completion: %d choice(s), stages %s, %.1f ms", len(refined), stages,
                 1e3 * (time.perf_counter() - started))
        return JSONResponse(data, headers={"x-tool-refiner": stages})

    async def stream_completion(request: Request, body: dict) -> Response:
        client: httpx.AsyncClient = app.state.client
        req = client.build_request("POST", f"{base}/chat/completions", json=body, headers=headers_for(request))
        try:
            resp = await client.send(req, stream=True)
        except httpx.TimeoutException:
            raise UpstreamError(504, f"upstream timed out after {timeout:g}s", "upstream_timeout") from None
        except httpx.TransportError as e:
            raise UpstreamError(502, f"upstream unreachable ({type(e).__name__})", "upstream_unreachable") from None
        if resp.status_code >= 400:
            try:
                content = await resp.aread()
            finally:
                await resp.aclose()
            check_status(resp.status_code, content, dict(resp.headers))
        return StreamingResponse(relay_stream(resp, body), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})

    async def relay_stream(resp: httpx.Response, body: dict) -> AsyncIterator[str]:
        buf = StreamBuffer()
        try:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    yield sse({"error": {"message": "upstream sent a malformed stream chunk", "type":
                                         "upstream_malformed", "code": 502}})
                    yield "data: [DONE]\n\n"
                    return
                forward = buf.take(chunk)
                if forward is not None:
                    yield sse(forward)
        except httpx.TimeoutException:
            yield sse({"error": {"message": f"upstream timed out after {timeout:g}s", "type": "upstream_timeout",
                                 "code": 504}})
            yield "data: [DONE]\n\n"
            return
        except httpx.TransportError as e:
            yield sse({"error": {"message": f"upstream stream broke ({type(e).__name__})", "type":
                                 "upstream_unreachable", "code": 502}})
            yield "data: [DONE]\n\n"
            return
        finally:
            await resp.aclose()
        items = [(buf.message(i), buf.finish.get(i)) for i in buf.indices()]
        refined = await refine_choices(body, items)
        for i, (message, reason, _) in zip(buf.indices(), refined):
            for k, call in enumerate(message.get("tool_calls") or []):
                yield sse(buf.chunk(i, {"tool_calls": [{"index": k, **call}]}))
            yield sse(buf.chunk(i, {}, reason))
        if buf.usage is not None:
            yield sse({**buf.template(), "choices": [], "usage": buf.usage})
        yield "data: [DONE]\n\n"

    return app


def check_status(status: int, content: bytes, headers: dict[str, str]) -> None:
    """Raises :class:`UpstreamError` for an upstream error status: 4xx keeps its status, 5xx becomes 502."""
    if status < 400:
        return
    try:
        err = json.loads(content).get("error")
        detail = err.get("message") if isinstance(err, dict) else str(err)
    except (ValueError, AttributeError):
        detail = content[:200].decode("utf-8", "replace")
    if status < 500:
        retry_after = {k.lower(): v for k, v in headers.items()}.get("retry-after")
        raise UpstreamError(status, f"upstream: {detail}", "upstream_client_error", retry_after)
    raise UpstreamError(502, f"upstream answered HTTP {status}: {detail}", "upstream_error")


def parse_completion(content: bytes) -> dict:
    """The upstream's chat completion; :class:`UpstreamError` (502) when it is not one."""
    try:
        data = json.loads(content)
    except ValueError:
        raise UpstreamError(502, "upstream returned malformed JSON", "upstream_malformed") from None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not all(
        isinstance(c, dict) for c in data["choices"]
    ):
        raise UpstreamError(502, "upstream response has no 'choices' list", "upstream_malformed")
    return data


def sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


class StreamBuffer:
    """Holds back the tool-call deltas, finish reasons and usage of a stream, and forwards everything else."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.calls: dict[int, dict[int, dict]] = {}  # choice index -> tool index -> {"id","type","name","args"}
        self.content: dict[int, str] = {}
        self.roles: dict[int, str] = {}
        self.finish: dict[int, str | None] = {}
        self.usage: dict | None = None

    def take(self, chunk: dict) -> dict | None:
        """Records a chunk; returns what to forward now (None when nothing is left of it)."""
        if not self.head:
            self.head = {k: chunk[k] for k in ("id", "object", "created", "model", "system_fingerprint") if k in chunk}
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        kept = []
        for choice in chunk.get("choices") or []:
            i = int(choice.get("index", 0))
            self.finish.setdefault(i, None)
            delta = dict(choice.get("delta") or {})
            for tc in delta.pop("tool_calls", None) or []:
                slot = self.calls.setdefault(i, {}).setdefault(int(tc.get("index", 0)), {"args": ""})
                fn = tc.get("function") or {}
                for key, value in (("id", tc.get("id")), ("type", tc.get("type")), ("name", fn.get("name"))):
                    if value:
                        slot[key] = value
                slot["args"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish[i] = choice["finish_reason"]
            if "role" in delta:
                self.roles[i] = delta["role"]
            if delta.get("content"):
                self.content[i] = self.content.get(i, "") + delta["content"]
            if delta:
                kept.append({**{k: v for k, v in choice.items() if k not in ("delta", "finish_reason")},
                             "index": i, "delta": delta, "finish_reason": None})
        if not kept:
            return None
        out = {k: v for k, v in chunk.items() if k not in ("choices", "usage")}
        out["choices"] = kept
        return out

    def indices(self) -> list[int]:
        return sorted(self.finish)

    def message(self, i: int) -> dict:
        """The assembled assistant message of choice ``i`` (content and tool calls)."""
        msg: dict[str, Any] = {"role": self.roles.get(i, "assistant"), "content": self.content.get(i)}
        slots = self.calls.get(i)
        if slots:
            msg["tool_calls"] = [
                {"id": s.get("id") or f"call_{uuid.uuid4().hex[:24]}", "type": s.get("type", "function"),
                 "function": {"name": s.get("name", ""), "arguments": s["args"]}}
                for _, s in sorted(slots.items())
            ]
        return msg

    def template(self) -> dict:
        return {"object": "chat.completion.chunk", **self.head}

    def chunk(self, i: int, delta: dict, finish: str | None = None) -> dict:
        return {**self.template(), "choices": [{"index": i, "delta": delta, "finish_reason": finish}]}
