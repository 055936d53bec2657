"""Generation with ``transformers`` on CPU (slow: debugging, machines without vLLM), from a Hugging Face folder or a
GGUF file (``gguf_file=``, or a ``model`` path ending in ``.gguf``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refiner.engines.base import Conversation, Engine, EngineError, batches, template_kwargs

log = logging.getLogger(__name__)


class HFEngine(Engine):
    """A causal LM run by ``transformers`` (``generate``), batched with left padding, ``batch_size`` at a time."""

    def __init__(self, model: str | Path, *, gguf_file: str | None = None, tokenizer: str | Path | None = None,
                 dtype: str = "float32", device: str = "cpu", batch_size: int = 8, show_progress: bool = False,
                 **model_kwargs: Any) -> None:
        path = Path(model)
        if gguf_file is None and path.suffix == ".gguf":
            path, gguf_file = path.parent, path.name
        if not path.exists():
            raise FileNotFoundError(f"model not found: {path}")
        if gguf_file is not None and not (path / gguf_file).exists():
            raise FileNotFoundError(f"GGUF file not found: {path / gguf_file}")
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise EngineError("the 'hf' engine needs torch and transformers") from e
        extra = {"gguf_file": gguf_file} if gguf_file else {}
        self._torch = torch
        self.device = device
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer or path, **({} if tokenizer else extra))
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        log.info("loading transformers model %s%s on %s", path, f" ({gguf_file})" if gguf_file else "", device)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype), **extra, **model_kwargs)
        self.model.to(device)
        self.model.eval()

    def _run(self, conversations: Sequence[Conversation], *, n: int, temperature: float, max_tokens: int,
             enable_thinking: bool | None, seed: int | None) -> list[list[str]]:
        prompts = [self.tokenizer.apply_chat_template([dict(m) for m in conv], tokenize=False,
                                                      add_generation_prompt=True, **template_kwargs(enable_thinking))
                   for conv in conversations]
        if seed is not None:
            self._torch.manual_seed(seed)
        sampling = temperature > 0
        per = n if sampling else 1  # greedy: one text per conversation, repeated n times
        # greedy: the sampling settings unset, so generation_config's defaults neither warn nor interfere
        top = {"temperature": temperature, "top_p": 1.0, "top_k": 0} if sampling else {
            "temperature": None, "top_p": None, "top_k": None}
        gen_kwargs = dict(max_new_tokens=max_tokens, do_sample=sampling, num_return_sequences=per,
                          pad_token_id=self.tokenizer.pad_token_id, **top)
        results: list[list[str]] = []
        for batch in batches(prompts, self.batch_size, "hf generate", progress=self.show_progress):
            enc = self.tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
            with self._torch.no_grad():
                out = self.model.generate(**enc, **gen_kwargs)
            new = out[:, enc["input_ids"].shape[1] :]
            texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
            results += [texts[i * per : (i + 1) * per] * (n // per) for i in range(len(batch))]
        return results
