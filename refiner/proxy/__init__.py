"""An OpenAI-compatible proxy that refines the tool calls of any upstream chat-completions server.

    app = create_app("http://127.0.0.1:8000/v1", refiner=Refiner(engine=make_engine("vllm", model="refiner/")))
    uvicorn.run(app, port=8080)      # clients point their OpenAI SDK at http://127.0.0.1:8080/v1

``POST /v1/chat/completions`` is forwarded to the upstream; every returned choice that carries ``tool_calls`` is
refined against the request's ``tools`` (``Refiner.refine_batch``; without a refiner model, tier-1 repair and the guard
only). Call ids, order, content and usage are kept; ``arguments`` is always a JSON string; ``finish_reason`` becomes
``"stop"`` when no call remains, and stays ``"length"`` when the upstream hit its token limit (a call cut there is
never returned as a tool call, nor completed: ``tool_refiner.truncated`` reports it). Calls an upstream left in its
text ``content`` (its own tool parser failed), in any registered wire format, are moved to ``tool_calls``; broken tool
calls in the incoming conversation are repaired before it is forwarded. With ``stream: true`` content is forwarded as
it comes, except what may be a call, which is held back until it proves to be text; tool calls are refined and
re-emitted whole before the final chunk and ``[DONE]``. ``POST /v1/responses`` (the Responses API) is forwarded and
its ``function_call`` output items refined the same way, streamed or not (:mod:`~refiner.proxy.responses`). Every
other path under ``/v1`` is passed through as it is; the client's headers are forwarded (hop-by-hop ones aside).

Isolation: request bodies over a limit are refused (413); tier-1 work runs in worker processes, one request at a
time each, a slow one demoted to the lowest CPU priority and stopped at the response's deadline (its upstream answer
is then returned as it came); requests that need the refiner model are batched into one engine call.

Errors: upstream timeouts answer 504, unreachable or malformed upstreams and upstream 5xx answer 502, upstream 4xx
pass through; all with OpenAI-style ``{"error": {...}}`` bodies. A refiner failure never fails the request: the
upstream answer is returned as it came (header ``x-tool-refiner: error``). ``GET /health`` reports liveness and the
worker pool, ``GET /metrics`` the counters in Prometheus' text format (:mod:`~refiner.proxy.metrics`). ``client_api_key``: clients must send it as their bearer token (401 otherwise). API keys (the proxy's
own ``api_key`` or the client's ``Authorization`` header, forwarded when no key is configured) are never logged.

Modules, one job each: :mod:`~refiner.proxy.app` (routes and settings), :mod:`~refiner.proxy.upstream` (the upstream
client and the one mapping of its failures), :mod:`~refiner.proxy.convert` (``tool_calls`` ⇄ refiner requests),
:mod:`~refiner.proxy.refining` (which choices are refined, where each step runs, the deadline),
:mod:`~refiner.proxy.content` (calls left in content, and the streaming hold-back),
:mod:`~refiner.proxy.reasoning` (the reasoning block, whole and streamed), :mod:`~refiner.proxy.history`
(healing the incoming conversation), :mod:`~refiner.proxy.isolation` (the worker pool), :mod:`~refiner.proxy.forks`
(the fork server that starts its workers), :mod:`~refiner.proxy.work` (what runs in a worker),
:mod:`~refiner.proxy.batching` (micro-batches for the model), :mod:`~refiner.proxy.stream` (the SSE relay),
:mod:`~refiner.proxy.responses` (the Responses API) and :mod:`~refiner.proxy.metrics` (``/metrics``).
"""

from refiner.proxy.app import create_app
from refiner.proxy.batching import RefineBatcher, batch_function
from refiner.proxy.convert import WIRE_FORMAT, apply_result, rebuild_tool_calls, refine_request
from refiner.proxy.stream import StreamBuffer
from refiner.proxy.upstream import UpstreamError, error_response

__all__ = [
    "WIRE_FORMAT",
    "RefineBatcher",
    "StreamBuffer",
    "UpstreamError",
    "apply_result",
    "batch_function",
    "create_app",
    "error_response",
    "rebuild_tool_calls",
    "refine_request",
]
