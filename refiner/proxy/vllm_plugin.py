"""tool-refiner inside vLLM: a tool-parser plugin, so that vLLM's own answers carry the calls tier 1 reads, and a
reasoning-parser plugin (:class:`refiner.proxy.reasoning.Reasoning`); vLLM is imported only when they are first used
(docs/serving.md, section 4). Calls are read from ``content`` as the proxy reads them (:mod:`refiner.proxy.content`);
streamed, each call is sent whole in the delta that closes it.
"""

from __future__ import annotations

import bisect
import functools
import logging
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from refiner.formats.derive import dialect_for
from refiner.formats.derive.render import ChatTemplate
from refiner.formats.reasoning import pairs
from refiner.pipeline import Refiner
from refiner.proxy import work
from refiner.proxy.content import (
    Ask,
    CallDriver,
    begins_with,
    content_split,
    holds_calls,
    run_sync,
    tool_names,
)
from refiner.proxy.convert import arguments_text
from refiner.proxy.reasoning import Reasoning
from refiner.proxy.thinking import PromptReasoning

NAME = "tool_refiner"
CLASS_NAME = "ToolRefinerToolParser"
REASONING_CLASS_NAME = "ToolRefinerReasoningParser"
PROMPT_TAIL_TOKENS = 32  # tokens of a prompt's end decoded to see whether it opened or closed the reasoning block

log = logging.getLogger("refiner.proxy")


def request_tools(request: Any) -> list[dict]:
    """The request's function tools as dicts (chat or Responses shape)."""
    tools = getattr(request, "tools", None) or []
    dumped = (t.model_dump(exclude_none=True) if hasattr(t, "model_dump") else t for t in tools)
    return [t for t in dumped if isinstance(t, dict) and t.get("type", "function") == "function"]


def template_of(tokenizer: Any) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """The chat template the tokenizer vLLM loaded holds (None: it holds none), and its special tokens."""
    source = getattr(tokenizer, "chat_template", None)
    if not isinstance(source, str) or not source:
        return None, ()
    return source, tuple((k, t) for k in ("bos_token", "eos_token") if isinstance(t := getattr(tokenizer, k, None), str))


def _template(source: str | None, tokens: tuple[tuple[str, str], ...]) -> ChatTemplate | None:
    return ChatTemplate(source, "the served model's tokenizer", dict(tokens)) if source else None


@functools.lru_cache(maxsize=8)
def _refiner_for(source: str | None, tokens: tuple[tuple[str, str], ...]) -> Refiner:
    """The tier-1 refiner in the dialect derived from a served chat template (else detection)."""
    template = _template(source, tokens)
    return Refiner(engine=None) if template is None else Refiner(engine=None, fmt=dialect_for(template))


@functools.lru_cache(maxsize=8)
def _prompts_for(source: str | None, tokens: tuple[tuple[str, str], ...]) -> PromptReasoning:
    """What a served chat template says of whether the generation prompt opens the reasoning block (one reader per
    template, shared: it learns nothing from answers)."""
    try:
        return PromptReasoning(_template(source, tokens), learn=False)
    except Exception:  # noqa: BLE001 - a template that does not compile tells nothing
        return PromptReasoning(learn=False)


class Reader:
    """Reads one generation against ``tools``, whole (:meth:`read`) or delta by delta (:meth:`feed`, :meth:`end`),
    with the proxy's :class:`~refiner.proxy.content.CallDriver`; ``refiner``'s dialect markers open calls too. The
    tools are read into their catalog once, when the first read needs them (:func:`refiner.proxy.work.loaded`)."""

    def __init__(self, tools: list[dict], refiner: Refiner | None = None) -> None:
        self.refiner = refiner if refiner is not None else _refiner_for(None, ())
        self.tools = tools or None
        self.names = tool_names(tools)
        self.split = content_split(self.names, self.refiner.fmt)
        self.driver = CallDriver(self.split)  # (its ``calls``: those read before the end)

    @functools.cached_property
    def catalog(self) -> Any:
        return work.loaded(self.tools)

    def _answer(self, ask: Ask) -> Any:
        return work.answer(self.refiner, {"kind": ask.kind, "text": ask.text, "tools": self.catalog,
                                          "names": self.split.openers.names, "allowed": None})

    def feed(self, piece: str) -> tuple[str, list[dict]]:
        """``(content, calls)`` that ``piece`` releases: the calls complete and read since the last piece."""
        return run_sync(self.driver.feed(piece), self._answer)

    def end(self) -> tuple[str, list[dict]]:
        """``(content still to send, calls)`` at the end: all the calls of the held text (those sent first)."""
        self.driver.early = False
        released = run_sync(self.driver.end(), self._answer)
        held = self.split.held
        if held.strip() and self.names:
            read = self.driver.last  # (the held text read early, unchanged since, is not read again)
            outcome = read.outcome if read is not None and read.covers(held) else work.tier1(self.refiner, [
                work.content_item(held, self.catalog, None, self.split.detection())])[0]
            result = outcome["result"]
            if holds_calls(result, self.names):
                return released, list(result["calls"])
        if self.driver.calls:  # calls went out: the held text is theirs, not content
            return released, list(self.driver.calls)
        return released + held, []

    def read(self, text: str) -> tuple[str | None, list[dict]]:
        """``(content, calls)`` of a whole generation; no calls: the text as it came."""
        if not self.names:
            return text, []
        self.driver.early = False
        released, _ = self.feed(text)
        rest, calls = self.end()
        if not calls:
            return text, []
        content = (released + rest).strip()
        return content or None, calls


def off(request: Any) -> bool:
    """``tool_choice: "none"``: the generation is content, whatever it holds."""
    return getattr(request, "tool_choice", None) == "none"


def template_opens(prompts: PromptReasoning, kwargs: Any) -> bool | None:
    return prompts.opened({"chat_template_kwargs": kwargs} if isinstance(kwargs, dict) else {}, whole=True)


def tail_marker(text: str) -> bool | None:
    """Whether ``text`` ends (before blanks) with a reasoning closer (True), an opener (False), or neither (None)."""
    end = text.rstrip(" \t\r\n")
    if any(end.endswith(o) for o, _ in pairs()):
        return False
    if any(end.endswith(c) for _, c in pairs()):
        return True
    return None


def _build() -> type:
    """The vLLM ``ToolParser`` subclass (imports vLLM)."""
    from vllm.entrypoints.generate.base.protocol import (
        DeltaFunctionCall,
        DeltaMessage,
        DeltaToolCall,
        ExtractedToolCallInformation,
        FunctionCall,
        ToolCall,
    )
    from vllm.renderers.chat_utils import make_tool_call_id
    from vllm.tool_parsers.abstract_tool_parser import ToolParser

    class ToolRefinerToolParser(ToolParser):
        """vLLM tool parser reading every registered wire format with tier-1 repair."""

        engine_based_streaming = True  # vLLM then calls finish_streaming() when the generation ends

        def __init__(self, tokenizer: Any, tools: list | None = None) -> None:
            super().__init__(tokenizer, tools)
            self._tier1 = _refiner_for(*template_of(tokenizer))
            self._reader: Reader | None = None
            self._request: Any = None

        def adjust_request(self, request: Any) -> Any:
            request = super().adjust_request(request)
            if getattr(request, "tools", None) and getattr(request, "tool_choice", None) != "none":
                request.skip_special_tokens = False  # call tokens are special tokens in several families
            return request

        def _reader_for(self, request: Any) -> Reader:
            if self._reader is None:
                self._reader = Reader(request_tools(request), self._tier1)
            return self._reader

        def extract_tool_calls(self, model_output: str, request: Any) -> Any:
            content, calls = (model_output, []) if off(request) else Reader(request_tools(request),
                                                                                  self._tier1).read(model_output)
            if not calls:
                return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output)
            tool_calls = [ToolCall(type="function", function=FunctionCall(name=c["name"], arguments=arguments_text(c)))
                          for c in calls]
            return ExtractedToolCallInformation(tools_called=True, tool_calls=tool_calls, content=content)

        def extract_tool_calls_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                         previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                         delta_token_ids: Sequence[int], request: Any) -> Any:
            self._request = request
            if off(request):
                return DeltaMessage(content=delta_text) if delta_text else None
            released, calls = self._reader_for(request).feed(delta_text)
            deltas = self._call_deltas(calls)
            return DeltaMessage(content=released or None, tool_calls=deltas) if released or deltas else None

        def _call_deltas(self, calls: list[dict]) -> list:
            """Each call as one tool-call delta (index, id, name, whole arguments), numbered after those sent."""
            deltas = []
            for c in calls:
                args = arguments_text(c)
                deltas.append(DeltaToolCall(index=len(self.prev_tool_call_arr), id=make_tool_call_id(), type="function",
                                            function=DeltaFunctionCall(name=c["name"], arguments=args)))
                self.prev_tool_call_arr.append({"name": c["name"], "arguments": c.get("arguments") or {}})
                self.streamed_args_for_tool.append(args)
                self.current_tool_id = len(self.prev_tool_call_arr) - 1
            return deltas

        def finish_streaming(self) -> Any:
            if self._request is None or off(self._request):
                return None
            reader = self._reader_for(self._request)
            rest, calls = reader.end()
            if not calls:
                return DeltaMessage(content=rest) if rest else None
            sent = reader.driver.calls
            if not begins_with(calls, sent):
                log.warning("calls sent before the end differ from those read whole")
            deltas = self._call_deltas(calls[len(sent) :])
            content = rest.strip() or None
            return DeltaMessage(content=content, tool_calls=deltas) if deltas or content else None

    ToolRefinerToolParser.__module__ = __name__
    return ToolRefinerToolParser


def _build_reasoning() -> type:
    """The vLLM ``ReasoningParser`` subclass (imports vLLM)."""
    from vllm.entrypoints.generate.base.protocol import DeltaMessage
    from vllm.reasoning.abs_reasoning_parsers import ReasoningParser

    def delta(reasoning: str, content: str) -> Any:
        return DeltaMessage(reasoning=reasoning or None, content=content or None) if reasoning or content else None

    class ToolRefinerReasoningParser(ReasoningParser):
        """vLLM reasoning parser splitting every registered family's reasoning block; token ids are decoded."""

        engine_based_streaming = True  # vLLM asks has_engine_confirmed_reasoning_end() and calls finish_streaming()

        def __init__(self, tokenizer: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(tokenizer, *args, **kwargs)
            self.kwargs = kwargs.get("chat_template_kwargs")
            self.template = _prompts_for(*template_of(tokenizer))
            self.reader = Reasoning(template_opens(self.template, self.kwargs) is True, lead=True)

        def _decode(self, ids: Sequence[int]) -> str:
            return self.model_tokenizer.decode(list(ids)) if ids else ""

        def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
            """Whether the text of ``input_ids`` (a prompt's end) closed the reasoning block: it ends with a closer.
            One that ends with an opener, or with neither, leaves the generation to say."""
            return tail_marker(self._decode(list(input_ids)[-PROMPT_TAIL_TOKENS:])) is True

        def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Iterable[int]) -> bool:
            delta = list(delta_ids)
            window = self._decode(list(input_ids)[-(len(delta) + 8):])
            return any(c in window for _, c in pairs())

        def adjust_initial_state_from_prompt(self, prompt_token_ids: Sequence[int]) -> None:
            """The prompt itself says: it ends with an opener (the block is open)."""
            if tail_marker(self._decode(list(prompt_token_ids)[-PROMPT_TAIL_TOKENS:])) is False:
                self.reader.opened = True

        def extract_content_ids(self, input_ids: list[int]) -> list[int]:
            """The ids after the first closer (none when no closer is in them)."""
            text = self._decode(input_ids)
            found = [j + len(c) for _, c in pairs() if (j := text.find(c)) >= 0]
            if not found:
                return []
            # the fewest ids whose text reaches past the closer
            lo = bisect.bisect_left(range(len(input_ids)), min(found), key=lambda n: len(self._decode(input_ids[:n])))
            return list(input_ids[lo:])

        def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
            kwargs = getattr(request, "chat_template_kwargs", None)
            opened = template_opens(self.template, kwargs if isinstance(kwargs, dict) else self.kwargs)
            reasoning, answer = Reasoning(opened, lead=True).read(model_output)
            return (None, model_output or None) if reasoning is None else (reasoning or None, answer or None)

        def extract_reasoning_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                        previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                        delta_token_ids: Sequence[int]) -> Any:
            return delta(*self.reader.feed(delta_text))

        def has_engine_confirmed_reasoning_end(self) -> bool:
            return self.reader.confirmed

        def finish_streaming(self) -> Any:
            return delta(*self.reader.end())

    ToolRefinerReasoningParser.__module__ = __name__
    return ToolRefinerReasoningParser


_BUILDERS = {CLASS_NAME: _build, REASONING_CLASS_NAME: _build_reasoning}


def __getattr__(name: str) -> Any:
    if name in _BUILDERS:
        cls = _BUILDERS[name]()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register() -> None:
    """Registers both parsers with vLLM as ``tool_refiner`` (on import when vLLM is loaded)."""
    from vllm.reasoning.abs_reasoning_parsers import ReasoningParserManager
    from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

    ToolParserManager.register_lazy_module(NAME, __name__, CLASS_NAME)
    ReasoningParserManager.register_lazy_module(NAME, __name__, REASONING_CLASS_NAME)


if "vllm" in sys.modules:
    register()
