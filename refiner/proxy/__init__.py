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

Modules, one job each: :mod:`~refiner.proxy.app` (routes), :mod:`~refiner.proxy.upstream` (the upstream client and
the one mapping of its failures), :mod:`~refiner.proxy.convert` (``tool_calls`` ⇄ refiner requests),
:mod:`~refiner.proxy.refining` (which choices are refined), :mod:`~refiner.proxy.batching` (micro-batches) and
:mod:`~refiner.proxy.stream` (the SSE relay).
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
