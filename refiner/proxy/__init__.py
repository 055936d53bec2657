"""An OpenAI-compatible proxy that refines the tool calls of any upstream chat-completions server.

    app = create_app("http://127.0.0.1:8000/v1", refiner=Refiner(engine=make_engine("vllm", model="refiner/")))
    uvicorn.run(app, port=8080)      # clients point their OpenAI SDK at http://127.0.0.1:8080/v1

Every choice of a chat completion with ``tool_calls``, and every ``function_call`` of a Responses answer, is refined
against the request's ``tools``, streamed or not; calls left in ``content`` are moved to ``tool_calls``; broken calls
in the incoming conversation are repaired; every other path under ``/v1`` is passed through. A refiner failure never
fails a request (the upstream's answer is returned, ``x-tool-refiner: error``). docs/architecture.md maps the modules.
"""

from refiner.proxy.app import create_app
from refiner.proxy.convert import apply_result, rebuild_tool_calls

__all__ = ["apply_result", "create_app", "rebuild_tool_calls"]
