"""Streaming (``stream: true``): the upstream's SSE chunks are relayed as they come, except the parts that must be
refined first (tool-call deltas, finish reasons, usage, and content that may hold calls), which are held back and
re-emitted once the upstream's stream has ended."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from refiner.proxy.content import ContentSplit, EdgeTrim, ReasoningStream, thinking_hint
from refiner.proxy.convert import new_call_id
from refiner.proxy.history import HistoryReport
from refiner.proxy.refining import Refinement, report
from refiner.proxy.upstream import UpstreamError

DONE = "data: [DONE]\n\n"


def sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


class StreamBuffer:
    """Holds back the tool-call deltas, finish reasons and usage of a stream, and forwards everything else."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.calls: dict[int, dict[int, dict]] = {}  # choice index -> tool index -> {"id","type","name","args"}
        self.content: dict[int, list[str]] = {}  # pieces, joined once at the end
        self.roles: dict[int, str] = {}
        self.finish: dict[int, str | None] = {}
        self.usage: dict | None = None

    def take(self, chunk: dict) -> dict | None:
        """Records a chunk; returns what to forward now (None when nothing is left of it)."""
        if not self.head:
            self.head = {k: chunk[k] for k in ("id", "object", "created", "model", "system_fingerprint") if k in chunk}
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        kept = []
        for choice in chunk.get("choices") or []:
            i = int(choice.get("index", 0))
            self.finish.setdefault(i, None)
            delta = dict(choice.get("delta") or {})
            for tc in delta.pop("tool_calls", None) or []:
                slot = self.calls.setdefault(i, {}).setdefault(int(tc.get("index", 0)), {"args": []})
                fn = tc.get("function") or {}
                for key, value in (("id", tc.get("id")), ("type", tc.get("type")), ("name", fn.get("name"))):
                    if value:
                        slot[key] = value
                slot["args"].append(fn.get("arguments") or "")
            if choice.get("finish_reason"):
                self.finish[i] = choice["finish_reason"]
            if "role" in delta:
                self.roles[i] = delta["role"]
            if delta.get("content"):
                self.content.setdefault(i, []).append(delta["content"])
            if delta:
                kept.append({**{k: v for k, v in choice.items() if k not in ("delta", "finish_reason")},
                             "index": i, "delta": delta, "finish_reason": None})
        if not kept:
            return None
        out = {k: v for k, v in chunk.items() if k not in ("choices", "usage")}
        out["choices"] = kept
        return out

    def indices(self) -> list[int]:
        return sorted(self.finish)

    def message(self, i: int) -> dict:
        """The assembled assistant message of choice ``i`` (content and tool calls)."""
        pieces = self.content.get(i)
        msg: dict[str, Any] = {"role": self.roles.get(i, "assistant"), "content": "".join(pieces) if pieces else None}
        slots = self.calls.get(i)
        if slots:
            msg["tool_calls"] = [
                {"id": s.get("id") or new_call_id(), "type": s.get("type", "function"),
                 "function": {"name": s.get("name", ""), "arguments": "".join(s["args"])}}
                for _, s in sorted(slots.items())
            ]
        return msg

    def template(self) -> dict:
        return {"object": "chat.completion.chunk", **self.head}

    def chunk(self, i: int, delta: dict, finish: str | None = None) -> dict:
        return {**self.template(), "choices": [{"index": i, "delta": delta, "finish_reason": finish}]}


class AnswerStream:
    """One choice's streamed content, read as it arrives: its reasoning block first
    (:class:`~refiner.proxy.content.ReasoningStream`: sent as ``reasoning_content``), then the content split (text
    that may hold calls held back, when the request's answers are read for calls); the content's blanks at its start
    and end are held (:class:`~refiner.proxy.content.EdgeTrim`) so that it is shaped as a whole answer's is: the
    line breaks after a reasoning block and before the calls are the template's, and content left blank once
    reasoning or calls were taken out is no content."""

    def __init__(self, opened: bool, split: ContentSplit | None) -> None:
        self.reasoning = ReasoningStream(opened)
        self.split = split
        self.trim: EdgeTrim | None = None  # made when the content starts (after the reasoning block, if any)
        self.sent_reasoning: list[str] = []

    @property
    def found_reasoning(self) -> bool:
        return self.reasoning.found

    def _content(self, text: str) -> str:
        if self.trim is None:
            if not text:
                return ""
            self.trim = EdgeTrim(lead=self.found_reasoning)
        return self.trim.feed(text)

    async def feed(self, piece: str, refinement: Refinement, body: dict) -> tuple[str, str]:
        """``(reasoning, content)`` to send for one content delta."""
        reasoning, answer = self.reasoning.feed(piece)
        self.sent_reasoning.append(reasoning)
        return reasoning, await self._answer(answer, refinement, body)

    async def _answer(self, answer: str, refinement: Refinement, body: dict) -> str:
        if self.split is None or not answer:
            return self._content(answer)
        return self._content(await refinement.drive(self.split, self.split.feed(answer), body))

    async def end(self, refinement: Refinement, body: dict) -> tuple[str, str]:
        """``(reasoning, content)`` to send once the upstream's stream has ended (before the refined calls)."""
        reasoning, answer = self.reasoning.end()
        self.sent_reasoning.append(reasoning)
        text = await self._answer(answer, refinement, body)
        if self.split is not None:
            text += self._content(await refinement.drive(self.split, self.split.end(), body))
        return reasoning, text

    def give_up(self) -> tuple[str, str]:
        """Everything held, as it is (the upstream failed mid-stream)."""
        reasoning, answer = self.reasoning.end()
        pending = self.trim.pending if self.trim is not None else ""  # released by the split, held here
        if self.split is None:
            return reasoning, pending + answer
        self.split.give_up_checks()
        if answer:
            self.split.feed(answer)
        return reasoning, pending + self.split.end().release + self.split.held

    def finish(self, tail: str, separated: bool) -> str:
        """The last content to send: ``tail`` (held text, or the text around the calls read from it)."""
        text = self._content(tail)
        if self.trim is None:
            return text
        cut = separated or self.found_reasoning
        return text + self.trim.end(cut, cut)


ARGUMENT_FRAGMENT = 64  # characters of a refined call's arguments per delta


def call_deltas(k: int, call: dict) -> list[dict]:
    """A refined call as OpenAI's incremental ``tool_calls`` deltas: the index, id, type and name once (arguments
    ``""``), then the arguments in fragments."""
    fn = call.get("function") or {}
    args = fn.get("arguments") or ""
    head = {"index": k, "id": call.get("id"), "type": call.get("type", "function"),
            "function": {"name": fn.get("name", ""), "arguments": ""}}
    rest = [{"index": k, "function": {"arguments": args[i : i + ARGUMENT_FRAGMENT]}}
            for i in range(0, len(args), ARGUMENT_FRAGMENT)]
    return [head, *rest]


async def relay(events: AsyncIterator[dict], refinement: Refinement, body: dict,
                history: HistoryReport | None = None) -> AsyncIterator[str]:
    """The SSE text sent to the client for the upstream's stream ``events``: chunks forwarded as they come, except
    each choice's content, read by an :class:`AnswerStream` (its reasoning block sent as ``reasoning_content``,
    content that may hold calls held back and released as soon as it proves to be text); then, once the upstream's
    stream has ended, the rest of the held content or the text around the calls read from it, the refined tool calls
    (as incremental deltas), the finish reasons (the last one carrying the ``tool_refiner`` report when there is
    one), the usage and ``[DONE]``. An upstream failure mid-stream releases the held content and ends the stream
    with an error event."""
    buf = StreamBuffer()
    answers: dict[int, AnswerStream] = {}
    reasoned: set[int] = set()  # choices whose upstream separated its reasoning itself
    try:
        async for chunk in events:
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("reasoning_content") or delta.get("reasoning"):
                    reasoned.add(int(choice.get("index", 0)))
            forward = buf.take(chunk)
            if forward is not None:
                forward = await _hold_content(forward, answers, reasoned, refinement, body)
            if forward is not None:
                yield sse(forward)
    except UpstreamError as e:
        for i, ans in sorted(answers.items()):
            delta = _delta(*ans.give_up())
            if delta:
                yield sse(buf.chunk(i, delta))
        yield sse(e.body())
        yield DONE
        return
    for i, ans in sorted(answers.items()):
        delta = _delta(*(await ans.end(refinement, body)))
        if delta:
            yield sse(buf.chunk(i, delta))
    indices = buf.indices()
    splits = {i: a.split for i, a in answers.items() if a.split is not None}
    reasonings = {i: "".join(a.sent_reasoning) for i, a in answers.items() if a.found_reasoning}
    results = await refinement.choices(body, [(buf.message(i), buf.finish.get(i)) for i in indices], splits,
                                       reasonings)
    _, extra = report(results, history)
    if extra or any(r.stage != "none" for r in results):
        extra = {"stages": [r.stage for r in results], **extra}
    for n, (i, r) in enumerate(zip(indices, results)):
        ans = answers.get(i)
        tail = ans.finish(r.content_tail, r.separated) if ans is not None else r.content_tail
        delta = _delta(r.reasoning_tail, tail)
        if delta:
            yield sse(buf.chunk(i, delta))
        for k, call in enumerate(r.message.get("tool_calls") or []):
            for d in call_deltas(k, call):
                yield sse(buf.chunk(i, {"tool_calls": [d]}))
        last = buf.chunk(i, {}, r.finish_reason)
        if extra and n == len(indices) - 1:
            last["tool_refiner"] = extra
        yield sse(last)
    if buf.usage is not None:
        yield sse({**buf.template(), "choices": [], "usage": buf.usage})
    yield DONE


def _delta(reasoning: str, content: str) -> dict:
    out = {}
    if reasoning:
        out["reasoning_content"] = reasoning
    if content:
        out["content"] = content
    return out


async def _hold_content(chunk: dict, answers: dict[int, AnswerStream], reasoned: set[int], refinement: Refinement,
                        body: dict) -> dict | None:
    """The chunk with each choice's content replaced by what its :class:`AnswerStream` sends now (None when nothing
    is left of it)."""
    kept = []
    for choice in chunk["choices"]:
        piece = choice["delta"].get("content")
        if piece:
            i = choice["index"]
            ans = answers.get(i)
            if ans is None:
                ans = answers[i] = AnswerStream(thinking_hint(body) is True and i not in reasoned, refinement.splitter(body))
            reasoning, text = await ans.feed(piece, refinement, body)
            delta = {k: v for k, v in choice["delta"].items() if k != "content"}
            if reasoning:
                delta["reasoning_content"] = (delta.get("reasoning_content") or "") + reasoning
            if text:
                delta["content"] = text
            others = any(v is not None for k, v in choice.items() if k not in ("index", "delta", "finish_reason"))
            if not delta and not others:
                continue
            choice = {**choice, "delta": delta}
        kept.append(choice)
    return {**chunk, "choices": kept} if kept else None
