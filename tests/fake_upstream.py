"""A scripted OpenAI-compatible server for tests and benchmarks, and helpers to run ASGI apps on loopback.

The fake upstream answers ``POST /v1/chat/completions`` according to an ``x_fake`` object in the request body
(unknown fields travel through the proxy untouched):

- ``content``: assistant text (default: ``"echo: <last user message>"``); ``reasoning``: a ``reasoning_content``;
  streamed, ``content_pieces`` / ``reasoning_pieces`` (lists of strings) are the deltas exactly (reasoning first);
- ``tool_calls``: ``[{"name", "arguments": str | obj, "id"?}]`` returned as OpenAI ``tool_calls`` (string arguments
  are sent verbatim, so broken JSON can be scripted); ``raw_tool_calls``: a ``tool_calls`` list sent exactly as given;
- ``finish_reason``: the finish reason of every choice (default ``tool_calls`` when there are calls, else ``stop``);
- a long text without a long request: any ``content`` or call ``arguments`` may be ``{"$prefix": str, "$repeat":
  [unit, times]}``, sent as ``prefix + unit * times`` (hostile answers for load tests);
- ``status``: reply with this HTTP status and an OpenAI-style error body; ``fail_times`` + ``key``: the first
  ``fail_times`` requests carrying ``key`` get ``fail_status`` (default 503), later ones succeed;
- ``delay``: seconds to wait before answering; ``malformed``: reply 200 with a body that is not JSON;
- streamed, ``piece_delay``: seconds between content pieces (a generation's pace); ``mark``: ``[key, k]``, the time
  content piece ``k`` is sent is recorded in ``MARKS[key]`` (``time.perf_counter()``, for latency benchmarks run in
  the same process);
- ``headers``: response headers to send with the answer (streamed or not; chat completions and responses);
- ``stream: true`` in the body streams SSE chunks: content in small pieces, each tool call split into a name chunk
  and several argument fragments, then ``finish_reason``, a usage chunk when ``stream_options.include_usage``, and
  ``[DONE]``; ``stream_stall``: seconds to stall after the content (a read timeout mid-stream).

Every request's ``Authorization`` header is recorded in ``app.state.auth_seen`` (to check keys are forwarded), its
headers in ``app.state.headers_seen`` and the latest bodies in ``app.state.bodies``.

The other routes a drop-in must pass through: ``GET /v1/models/{id}`` (404 for an unknown id), ``POST
/v1/completions`` (streams with ``stream: true``), ``POST /v1/embeddings``; and ``POST /v1/responses`` (the Responses
API), scripted by the same ``x_fake`` (``content``, ``tool_calls``, ``finish_reason: "length"`` → status
``incomplete`` for ``max_output_tokens``), streamed as the Responses API's events with ``stream: true``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

MODEL_ID = "fake-model"

# A small tool set and scripted upstream calls shared by the proxy tests and benchmarks.
WEATHER_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast for a city.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string"}, "days": {"type": "integer"}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a time zone.",
                                      "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
                                                     "required": ["tz"]}}},
]
WEATHER_QUERY = "Weather in Paris for 3 days, and the time in CET?"
VALID_CALLS = [{"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}', "id": "call_a"},
               {"name": "get_time", "arguments": '{"tz": "CET"}', "id": "call_b"}]
# Misspelled tool, Python-style quotes, trailing comma, a string for an integer; then a missing closing brace.
BROKEN_CALLS = [{"name": "get_wether", "arguments": "{'city': 'Paris', 'days': '3',}", "id": "call_a"},
                {"name": "get_time", "arguments": '{"tz": "CET"', "id": "call_b"}]


def _expand(value: Any) -> Any:
    """``{"$prefix": p, "$repeat": [unit, n]}`` → ``p + unit * n``; anything else as it is."""
    if isinstance(value, dict) and "$repeat" in value:
        unit, times = value["$repeat"]
        return str(value.get("$prefix", "")) + str(unit) * int(times)
    return value


def _tool_calls(spec: list[dict]) -> list[dict]:
    out = []
    for i, c in enumerate(spec):
        args = _expand(c.get("arguments", {}))
        out.append(
            {
                "id": c.get("id", f"call_fake_{i}"),
                "type": "function",
                "function": {"name": c["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
        )
    return out


def _content(body: dict, fake: dict) -> str | None:
    if "content" in fake:
        return _expand(fake["content"])
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return f"echo: {users[-1].get('content') if users else ''}"


def _chunk(cid: str, delta: dict, finish: str | None = None, index: int = 0) -> str:
    obj = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(obj)}\n\n"


MARKS: dict[str, float] = {}  # x_fake.mark [key, k]: time.perf_counter() when content piece k was sent, by key


async def _stream(body: dict, fake: dict) -> AsyncIterator[str]:
    cid = "chatcmpl-fake-stream"
    yield _chunk(cid, {"role": "assistant", "content": ""})
    for piece in fake.get("reasoning_pieces") or ([fake["reasoning"]] if fake.get("reasoning") else []):
        yield _chunk(cid, {"reasoning_content": piece})
    content = _content(body, fake) or ""
    pieces = fake.get("content_pieces")
    delay, mark = float(fake.get("piece_delay") or 0), fake.get("mark")
    for k, piece in enumerate(pieces if pieces is not None else (content[i : i + 4] for i in range(0, len(content), 4))):
        if delay and k:
            await asyncio.sleep(delay)
        if mark and k == mark[1]:
            MARKS[mark[0]] = time.perf_counter()  # when content piece mark[1] is sent (see MARKS)
        yield _chunk(cid, {"content": piece})
    if fake.get("stream_stall"):
        await asyncio.sleep(float(fake["stream_stall"]))
    calls = _tool_calls(fake.get("tool_calls") or [])
    for k, call in enumerate(calls):
        head = {"index": k, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"],
                                                                             "arguments": ""}}
        yield _chunk(cid, {"tool_calls": [head]})
        args = call["function"]["arguments"]
        for i in range(0, len(args), 5):
            yield _chunk(cid, {"tool_calls": [{"index": k, "function": {"arguments": args[i : i + 5]}}]})
    yield _chunk(cid, {}, fake.get("finish_reason") or ("tool_calls" if calls else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        yield f"data: {json.dumps({'id': cid, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


def _response(body: dict, fake: dict) -> dict:
    """A Responses API answer: a message item with the scripted content, then a function call item per call."""
    output: list[dict] = []
    text = fake.get("content")
    if text:
        output.append({"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    for k, c in enumerate(fake.get("tool_calls") or []):
        args = _expand(c.get("arguments", {}))
        output.append({"type": "function_call", "id": f"fc_fake_{k}", "call_id": c.get("id", f"call_fake_{k}"),
                       "name": c["name"], "arguments": args if isinstance(args, str) else json.dumps(args),
                       "status": "completed"})
    cut = fake.get("finish_reason") == "length"
    if cut and output and output[-1]["type"] == "function_call":
        output[-1]["status"] = "incomplete"
    return {"id": "resp_fake", "object": "response", "created_at": int(time.time()), "model": body.get("model"),
            "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "error": None,
            "instructions": body.get("instructions"), "output": output, "parallel_tool_calls": True,
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "usage": {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


async def _response_events(answer: dict) -> AsyncIterator[str]:
    """The Responses API's stream of ``answer``: created, in_progress, each item added / its deltas / done, and the
    final event (``response.completed``, or ``response.incomplete``), as ``event:`` + ``data:`` SSE records."""
    seq = 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal seq
        seq += 1
        return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq - 1, **fields})}\n\n"

    start = {**answer, "status": "in_progress", "output": [], "incomplete_details": None}
    yield event("response.created", response=start)
    yield event("response.in_progress", response=start)
    for at, item in enumerate(answer["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", output_index=at, item={**item, "content": [],
                                                                                "status": "in_progress"})
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", item_id=item["id"], output_index=at, content_index=0, part=part)
            for i in range(0, len(text), 4):
                yield event("response.output_text.delta", item_id=item["id"], output_index=at, content_index=0,
                            delta=text[i : i + 4], logprobs=[])
            yield event("response.output_text.done", item_id=item["id"], output_index=at, content_index=0, text=text,
                        logprobs=[])
            yield event("response.content_part.done", item_id=item["id"], output_index=at, content_index=0,
                        part={**part, "text": text})
        else:
            args = item["arguments"]
            yield event("response.output_item.added", output_index=at, item={**item, "arguments": "",
                                                                                "status": "in_progress"})
            for i in range(0, len(args), 5):
                yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=at,
                            delta=args[i : i + 5])
            yield event("response.function_call_arguments.done", item_id=item["id"], output_index=at, arguments=args)
        yield event("response.output_item.done", output_index=at, item=item)
    final = "response.incomplete" if answer["status"] == "incomplete" else "response.completed"
    yield event(final, response=answer)


def create_fake_upstream() -> FastAPI:
    """A new fake OpenAI-compatible app (its own failure counters and recorded headers)."""
    app = FastAPI()
    app.state.auth_seen = []
    app.state.fail_counts = {}
    app.state.requests = 0
    app.state.bodies = collections.deque(maxlen=100)  # the latest request bodies, newest last
    app.state.headers_seen = collections.deque(maxlen=100)  # the latest requests' headers (lower-case names)

    @app.middleware("http")
    async def record_headers(request: Request, call_next: Any) -> Any:
        app.state.headers_seen.append([(k.decode(), v.decode()) for k, v in request.headers.raw])
        return await call_next(request)

    @app.get("/v1/models/{model_id}")
    async def model(model_id: str) -> Any:
        if model_id != MODEL_ID:
            return JSONResponse({"error": {"message": f"The model {model_id!r} does not exist", "type":
                                           "invalid_request_error", "code": "model_not_found"}}, 404)
        return {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "tests"}

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        body = await request.json()
        text = f"completion of: {body.get('prompt')}"
        if body.get("stream"):
            async def pieces() -> AsyncIterator[str]:
                for i in range(0, len(text), 6):
                    chunk = {"id": "cmpl-fake", "object": "text_completion", "model": MODEL_ID,
                             "choices": [{"index": 0, "text": text[i : i + 6], "finish_reason": None}]}
                    yield f"data: {json.dumps(chunk)}\n\n"
                yield "data: [DONE]\n\n"
            return StreamingResponse(pieces(), media_type="text/event-stream")
        return {"id": "cmpl-fake", "object": "text_completion", "model": MODEL_ID,
                "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Any:
        body = await request.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return JSONResponse({"object": "list", "model": MODEL_ID, "usage": {"prompt_tokens": 2, "total_tokens": 2},
                             "data": [{"object": "embedding", "index": i, "embedding": [float(len(str(x))), 0.5]}
                                      for i, x in enumerate(inputs)]}, headers={"x-fake-upstream": "embeddings"})

    @app.post("/v1/responses")
    async def responses(request: Request) -> Any:
        body = await request.json()
        app.state.bodies.append(body)
        fake = body.get("x_fake") or {}
        if fake.get("status"):
            return JSONResponse({"error": {"message": "scripted", "type": "scripted"}}, int(fake["status"]))
        answer = _response(body, fake)
        if body.get("stream"):
            return StreamingResponse(_response_events(answer), media_type="text/event-stream",
                                     headers=fake.get("headers"))
        return JSONResponse(answer, headers=fake.get("headers"))

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "tests"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        app.state.requests += 1
        app.state.auth_seen.append(request.headers.get("authorization"))
        body = await request.json()
        app.state.bodies.append(body)
        fake = body.get("x_fake") or {}
        if fake.get("delay"):
            await asyncio.sleep(float(fake["delay"]))
        if fake.get("fail_times"):
            key = fake.get("key", "")
            seen = app.state.fail_counts.get(key, 0)
            app.state.fail_counts[key] = seen + 1
            if seen < int(fake["fail_times"]):
                status = int(fake.get("fail_status", 503))
                headers = {"retry-after": "0"} if status == 429 else {}
                return JSONResponse({"error": {"message": "scripted failure", "type": "server_error"}}, status,
                                    headers=headers)
        if fake.get("status"):
            status = int(fake["status"])
            return JSONResponse({"error": {"message": f"scripted status {status}", "type": "scripted",
                                           "code": status}}, status, headers={"retry-after": "7"} if status == 429
                                else None)
        if fake.get("malformed"):
            return PlainTextResponse('{"id": "x", "choices": [ not json', 200, media_type="application/json")
        if body.get("stream"):
            return StreamingResponse(_stream(body, fake), media_type="text/event-stream", headers=fake.get("headers"))
        calls = fake.get("raw_tool_calls") or _tool_calls(fake.get("tool_calls") or [])
        choices = []
        for i in range(int(body.get("n") or 1)):
            message: dict[str, Any] = {"role": "assistant", "content": _content(body, fake)}
            if "n" in body and int(body["n"]) > 1 and "content" not in fake:
                message["content"] = f"{message['content']} #{i}"
            if fake.get("reasoning"):
                message["reasoning_content"] = fake["reasoning"]
            if calls:
                message["tool_calls"] = calls
            reason = fake.get("finish_reason") or ("tool_calls" if calls else "stop")
            choices.append({"index": i, "message": message, "finish_reason": reason})
        return JSONResponse({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", MODEL_ID),
            "choices": choices,
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }, headers=fake.get("headers"))

    return app


@contextlib.contextmanager
def serve_in_thread(app: Any, *, startup_timeout: float = 20.0, log_level: str = "warning") -> Iterator[str]:
    """Runs an ASGI app with uvicorn on 127.0.0.1 (a free port) in a daemon thread; yields ``http://127.0.0.1:PORT``
    and stops the server on exit."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level=log_level, lifespan="on", backlog=4096,
                            timeout_keep_alive=30)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-loopback", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("loopback server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_in_subprocess(argv: list[str], port: int, *, startup_timeout: float = 60.0,
                        health_path: str = "/v1/models", env: dict[str, str] | None = None) -> Iterator[str]:
    """Starts ``argv`` (a server that will listen on ``127.0.0.1:port``), waits until ``health_path`` answers, yields
    its base URL and terminates it on exit (killed if it does not stop within 10 s)."""
    import subprocess
    import tempfile

    import httpx

    log = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a chatty server can never block on it
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"server exited with {proc.returncode}: {log.read()[-2000:]}")
            try:
                if httpx.get(url + health_path, timeout=1.0).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server on port {port} did not start within {startup_timeout:g}s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def main() -> None:
    """``python tests/fake_upstream.py PORT [WORKERS]``: serve the fake upstream on 127.0.0.1:PORT, in WORKERS
    processes (default 1; several keep one slow request from delaying the others, as a real server would)."""
    import sys
    from pathlib import Path

    port = int(sys.argv[1])
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    if workers == 1:
        uvicorn.run(create_fake_upstream(), host="127.0.0.1", port=port, log_level="warning", backlog=4096)
    else:
        uvicorn.run("fake_upstream:create_fake_upstream", factory=True, workers=workers, host="127.0.0.1", port=port,
                    log_level="warning", backlog=4096, app_dir=str(Path(__file__).resolve().parent))


if __name__ == "__main__":
    main()
