"""An OpenAI-compatible proxy that refines the tool calls of any upstream chat-completions server.

    app = create_app("http://127.0.0.1:8000/v1", refiner=Refiner(engine=make_engine("vllm", model="refiner/")))
    uvicorn.run(app, port=8080)      # clients point their OpenAI SDK at http://127.0.0.1:8080/v1

Every choice of a chat completion that carries ``tool_calls``, and every ``function_call`` item of a Responses
answer, is refined against the request's ``tools`` (:mod:`~refiner.proxy.refining`), streamed or not; calls an
upstream left in its ``content`` are moved to ``tool_calls``; broken calls in the incoming conversation are repaired
before it is forwarded; every other path under ``/v1`` is passed through. A refiner failure never fails a request:
the upstream's answer is returned as it came (header ``x-tool-refiner: error``). Upstream failures map to OpenAI-style
errors (:mod:`~refiner.proxy.upstream`); API keys are never logged.

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
