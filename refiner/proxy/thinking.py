"""Whether the upstream's prompt opened the reasoning block, so that a streamed answer's reasoning is sent as
``reasoning_content`` from its first token (:meth:`PromptReasoning.opened`).
"""

from __future__ import annotations

import collections
import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from refiner.formats.derive.render import ChatTemplate, compile_template, load_template, render
from refiner.formats.reasoning import call_start, pairs, split_reasoning
from refiner.specs.catalog import MAX_CACHED_CHARS, KeptTexts

log = logging.getLogger("refiner.proxy")

MAX_MODELS = 1024  # models whose answers are remembered
MAX_RENDERS = 64  # chat_template_kwargs whose generation prompt is remembered
_DUMMY_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                                  "parameters": {"type": "object", "properties": {
                                                      "city": {"type": "string"}}, "required": ["city"]}}}]
_DUMMY_MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


# Models whose generation prompt ends inside the reasoning block by default (searched in the model name, any case),
# each with what its template writes after the assistant header.
OPENS_BY_DEFAULT: tuple[tuple[str, str], ...] = (
    (r"qwen3[\w.-]*-thinking", "Qwen3 Thinking-2507 / Qwen3-Next Thinking: '<think>\\n', always"),
    (r"qwen3\.[5-9](?!.*coder)", "Qwen3.5 and later (hybrid): '<think>\\n' unless enable_thinking is false"),
    (r"qwq", "QwQ-32B: '<think>\\n', always"),
    (r"deepseek-r1", "DeepSeek-R1, R1-0528 and the R1 distills: '<think>\\n', always"),
    (r"glm-?(?:4\.7|5)", "GLM-4.7, GLM-5: '<think>' unless enable_thinking is false"),
    (r"kimi-k2\.[5-9]", "Kimi K2.5 and later: '<think>' unless thinking is false"),
)
_OPENS_RE = re.compile("|".join(f"(?:{p})" for p, _ in OPENS_BY_DEFAULT), re.IGNORECASE)


def thinking_hint(body: dict) -> bool | None:
    """Whether the request's ``chat_template_kwargs`` (``enable_thinking`` or ``thinking``) opened the prompt's
    reasoning block; None when they say nothing."""
    kwargs = body.get("chat_template_kwargs")
    if not isinstance(kwargs, dict):
        return None
    said = [kwargs.get(k) for k in ("enable_thinking", "thinking") if isinstance(kwargs.get(k), bool)]
    return any(said) if said else None


def leans(model: Any) -> bool:
    """Whether the model name is of a family whose template opens the block by default (:data:`OPENS_BY_DEFAULT`)."""
    return isinstance(model, str) and _OPENS_RE.search(model) is not None


def model_of(body: dict) -> str:
    return body.get("model") if isinstance(body.get("model"), str) else ""


def prompt_opens(template: ChatTemplate, kwargs: Mapping[str, Any] | None = None, compiled: Any = None) -> bool | None:
    """Whether the template's generation prompt for a one-question conversation, rendered with ``kwargs``, ends inside
    a reasoning block (a registered pair's opener comes after every closer); None when it does not render."""
    compiled = compiled if compiled is not None else compile_template(template)
    extra = {k: v for k, v in (kwargs or {}).items() if k not in ("messages", "tools", "add_generation_prompt")}
    for tools in (_DUMMY_TOOLS, None):
        try:
            full = render(compiled, template, _DUMMY_MESSAGES, tools, add_generation_prompt=True, **extra)
        except Exception:  # noqa: BLE001, S112 - a template that cannot render this conversation tells nothing
            continue
        try:
            bare = render(compiled, template, _DUMMY_MESSAGES, tools, **extra)
        except Exception:  # noqa: BLE001
            bare = ""
        prompt = full.removeprefix(bare)
        return max(prompt.rfind(o) for o, _ in pairs()) > max(prompt.rfind(c) for _, c in pairs())
    return None


def answer_says(content: Any, finish_reason: str | None) -> bool | None:
    """What one raw answer says of its prompt: True (a closer with no opener before it, outside any call), False (it
    opens its own block, or ended with no closer), None (it cannot tell)."""
    if not isinstance(content, str) or not content.strip():
        return None
    s = split_reasoning(content, opened=None)
    if s.found:
        return s.body_start == 0
    if finish_reason in ("stop", "tool_calls") and not any(c in content for _, c in pairs()) \
            and call_start(content, 0) < 0:
        return False  # (a call with no closer before it may end a block the prompt opened: it cannot tell)
    return None


class PromptReasoning:
    """What the proxy knows of whether a request's prompt opened the reasoning block. ``template``: the upstream
    model's chat template (path or :class:`ChatTemplate`); ``models``: name (or ``*``) -> bool; ``learn``: remember
    what answers say."""

    def __init__(self, template: str | Path | ChatTemplate | None = None, models: Mapping[str, bool] | None = None,
                 learn: bool = True) -> None:
        self.template = load_template(template) if isinstance(template, (str, Path)) else template
        self.compiled = compile_template(self.template) if self.template is not None else None
        self.models = dict(models or {})
        self.learning = learn
        self.learned = KeptTexts(MAX_MODELS, MAX_CACHED_CHARS)  # model name -> what its answers said
        self.renders: collections.OrderedDict[str, bool | None] = collections.OrderedDict()

    def from_template(self, kwargs: Any) -> bool | None:
        if self.template is None:
            return None
        kwargs = kwargs if isinstance(kwargs, dict) else {}
        try:
            key = json.dumps(kwargs, sort_keys=True, default=str)
        except (TypeError, ValueError):
            return None
        if key not in self.renders:
            self.renders[key] = prompt_opens(self.template, kwargs, self.compiled)
            if self.renders[key] is None:
                log.warning("the chat template (%s) did not render a generation prompt", self.template.where)
            while len(self.renders) > MAX_RENDERS:
                self.renders.popitem(last=False)
        return self.renders[key]

    def opened(self, body: dict, whole: bool = False) -> bool | None:
        """Whether the prompt opened the block (None: not known). ``whole``: for a whole answer, which reads its own
        text rather than its model's earlier answers."""
        hint = thinking_hint(body)
        if hint is not None:
            return hint
        model = model_of(body)
        for key in (model, "*"):
            if key in self.models:
                return self.models[key]
        said = self.from_template(body.get("chat_template_kwargs"))
        return said if said is not None or whole else self.learned.get(model)

    def leans(self, body: dict) -> bool:
        """Whether the model's family opens the block by default (:func:`leans`) and its answers did not say no."""
        return leans(body.get("model")) and self.learned.get(model_of(body)) is not False

    def learn(self, body: dict, content: Any, finish_reason: str | None) -> None:
        """Remembers what a raw answer to a request with no hint says of its model's prompt (:func:`answer_says`)."""
        if not self.learning or thinking_hint(body) is not None:
            return
        said = answer_says(content, finish_reason)
        if said is not None:
            self.learned.put(model_of(body), said)

    def describe(self) -> dict:
        return {"template": self.template.where if self.template is not None else None,
                "models": dict(self.models), "learned": {m: self.learned.get(m) for m in self.learned.texts()},
                "opens_by_default": [pattern for pattern, _ in OPENS_BY_DEFAULT]}
