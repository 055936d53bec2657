"""Generation engines: one ``chat`` interface over vLLM (offline), OpenAI-compatible HTTP and transformers.

``make_engine(kind, model=..., base_url=..., **kw)`` builds one; see :class:`refiner.engines.base.Engine` for the
method every engine implements. Heavy backends are imported only when their engine is built.
"""

from __future__ import annotations

from typing import Any

from refiner.engines.base import Conversation, Engine, EngineError, check_request

KINDS = ("vllm", "openai", "hf")


def make_engine(kind: str, *, model: str | None = None, base_url: str | None = None, **kw: Any) -> Engine:
    """An engine of ``kind`` (``vllm`` | ``openai`` | ``hf``). ``vllm`` and ``hf`` need ``model`` (a path or name);
    ``openai`` needs ``base_url`` and takes ``model`` as the served model's name (default: the first it lists)."""
    if kind == "vllm":
        if not model:
            raise ValueError("engine 'vllm' needs model=<path or name>")
        from refiner.engines.vllm_offline import VLLMEngine

        return VLLMEngine(model, **kw)
    if kind == "openai":
        if not base_url:
            raise ValueError("engine 'openai' needs base_url=<http://host:port/v1>")
        from refiner.engines.openai_http import OpenAIEngine

        return OpenAIEngine(base_url, model, **kw)
    if kind == "hf":
        if not model:
            raise ValueError("engine 'hf' needs model=<path, or a .gguf file>")
        from refiner.engines.hf import HFEngine

        return HFEngine(model, **kw)
    raise ValueError(f"unknown engine kind {kind!r}; known: {', '.join(KINDS)}")


__all__ = ["KINDS", "Conversation", "Engine", "EngineError", "check_request", "make_engine"]
