"""Generation engines: one ``chat`` interface (:class:`refiner.engines.base.Engine`) over vLLM (offline),
OpenAI-compatible HTTP and transformers; ``make_engine(kind, model=..., base_url=..., **kw)`` builds one, importing
its backend only then."""

from __future__ import annotations

from typing import Any

from refiner.engines.base import Conversation, Engine, EngineError, check_request

KINDS = ("vllm", "openai", "hf")
# Where the command line reads the keys of the two OpenAI-compatible endpoints it may call (eval and serve alike).
REFINER_KEY_ENV = "REFINER_API_KEY"
UPSTREAM_KEY_ENV = "UPSTREAM_API_KEY"


def make_engine(kind: str, *, model: str | None = None, base_url: str | None = None, **kw: Any) -> Engine:
    """An engine of ``kind`` (``vllm`` | ``openai`` | ``hf``). ``vllm`` and ``hf`` need ``model`` (a path or name;
    for ``hf`` also a .gguf file); ``openai`` needs ``base_url`` and takes ``model`` as the served model's name
    (default: the first it lists)."""
    if kind not in KINDS:
        raise ValueError(f"unknown engine kind {kind!r}; known: {', '.join(KINDS)}")
    if kind == "openai":
        if not base_url:
            raise ValueError("engine 'openai' needs base_url=<http://host:port/v1>")
        from refiner.engines.openai_http import OpenAIEngine

        return OpenAIEngine(base_url, model, **kw)
    if not model:
        raise ValueError(f"engine {kind!r} needs model=<path or name>")
    if kind == "hf":
        from refiner.engines.hf import HFEngine

        return HFEngine(model, **kw)
    from refiner.engines.vllm_offline import VLLMEngine

    return VLLMEngine(model, **kw)


__all__ = ["KINDS", "REFINER_KEY_ENV", "UPSTREAM_KEY_ENV", "Conversation", "Engine", "EngineError", "check_request",
           "make_engine"]
