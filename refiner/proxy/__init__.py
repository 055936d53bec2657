"""An OpenAI-compatible proxy that refines the tool calls of any upstream chat-completions server (docs/serving.md).

    app = create_app("http://127.0.0.1:8000/v1", refiner=Refiner(engine=make_engine("vllm", model="refiner/")))
    uvicorn.run(app, port=8080)      # clients point their OpenAI SDK at http://127.0.0.1:8080/v1
"""

from refiner.proxy.app import create_app
from refiner.proxy.convert import apply_result, rebuild_tool_calls

__all__ = ["apply_result", "create_app", "rebuild_tool_calls"]
