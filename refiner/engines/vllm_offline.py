"""Offline batched generation with ``vllm.LLM``: all conversations of a call go to vLLM in one batch."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from refiner.engines.base import Conversation, Engine, EngineError, template_kwargs

log = logging.getLogger(__name__)


class VLLMEngine(Engine):
    """A local model run by ``vllm.LLM``, which applies the chat template. ``in_process=True`` keeps vLLM's engine core
    in this process; ``cpu_kvcache_gib`` sets ``VLLM_CPU_KVCACHE_SPACE`` on CPU; other keyword arguments go to
    ``vllm.LLM``."""

    def __init__(self, model: str, *, dtype: str = "auto", max_model_len: int | None = None, seed: int = 0,
                 enforce_eager: bool | None = None, in_process: bool | None = None, cpu_kvcache_gib: int | None = None,
                 use_tqdm: bool = True, **llm_kwargs: Any) -> None:
        try:
            import vllm
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise EngineError("the 'vllm' engine needs the vllm package (pip install 'tool-refiner[serve]')") from e
        if in_process is not None:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if in_process else "1"
        try:
            from vllm.platforms import current_platform
        except Exception:  # noqa: BLE001 - an import problem surfaces later, when vllm.LLM is built
            current_platform = None
        on_cpu = current_platform is not None and bool(current_platform.is_cpu())
        if on_cpu:
            if cpu_kvcache_gib is not None or "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
                os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(cpu_kvcache_gib if cpu_kvcache_gib is not None else 4)
            if enforce_eager is None:
                enforce_eager = True  # no graph capture on CPU; compiling only costs start-up time
            # vLLM's CPU sampler fails on a seeded request whose prompt is split over steps ("CPU Generator does
            # not use offset"); without chunked prefill a prompt is never split.
            llm_kwargs.setdefault("enable_chunked_prefill", False)
        chosen = {"max_model_len": max_model_len, "enforce_eager": enforce_eager}
        kwargs = dict(model=str(model), dtype=dtype, seed=seed, **llm_kwargs,
                      **{k: v for k, v in chosen.items() if v is not None})
        log.info("loading vLLM model %s (cpu=%s)", model, on_cpu)
        self.model = str(model)
        self.use_tqdm = use_tqdm
        self._vllm = vllm
        self.llm = vllm.LLM(**kwargs)

    def _run(self, conversations: Sequence[Conversation], *, n: int, temperature: float, max_tokens: int,
             enable_thinking: bool | None, seed: int | None) -> list[list[str]]:
        params = self._vllm.SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
        outputs = self.llm.chat([list(map(dict, c)) for c in conversations], params, use_tqdm=self.use_tqdm,
                                chat_template_kwargs=template_kwargs(enable_thinking) or None)
        if len(outputs) != len(conversations):
            raise EngineError(f"vLLM returned {len(outputs)} results for {len(conversations)} conversations")
        return [[c.text for c in out.outputs] for out in outputs]
