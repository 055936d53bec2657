"""Streaming (``stream: true``): the upstream's SSE chunks are relayed as they come, except what must be refined
first (tool-call deltas, finish reasons, usage, content that may hold calls), held back and sent at the end."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from refiner.proxy.content import MAX_EARLY_READS, CallDriver, EarlyRead, begins_with, content_split, run_sync
from refiner.proxy.convert import argument_problem, new_call_id, rebuild_tool_calls
from refiner.proxy.history import HistoryReport
from refiner.proxy.reasoning import EdgeTrim, Reasoning
from refiner.proxy.refining import Refinement, report
from refiner.proxy.upstream import UpstreamError

DONE = "data: [DONE]\n\n"
log = logging.getLogger("refiner.proxy")


def sse(obj: dict, event: str | None = None) -> str:
    """One server-sent event: ``obj`` as its data, after an ``event:`` line when ``event`` names one."""
    return (f"event: {event}\n" if event else "") + f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


class StreamBuffer:
    """Holds back the tool-call deltas, finish reasons and usage of a stream, and forwards everything else."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.calls: dict[int, dict[int, dict]] = {}  # choice index -> tool index -> {"id","type","name","args"}
        self.content: dict[int, list[str]] = {}  # pieces, joined once at the end
        self.roles: dict[int, str] = {}
        self.finish: dict[int, str | None] = {}
        self.usage: dict | None = None
        self.reads: dict[int, int] = {}  # choice -> early refinements of its upstream calls
        self.reasoned: set[int] = set()  # choices whose upstream separated its reasoning itself

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
            if delta.get("reasoning_content") or delta.get("reasoning"):
                self.reasoned.add(i)
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

    def complete_calls(self, i: int) -> list[dict]:
        """The first tool calls of choice ``i`` the upstream has finished sending: each one before the last, and the
        last once its arguments are a whole JSON object."""
        slots = self.calls.get(i) or {}
        last = max(slots, default=-1)
        out = []
        for k in range(last + 1):
            s = slots.get(k)
            if s is None or not s.get("name"):
                break
            args = "".join(s["args"])
            if k == last and argument_problem(args) is not None:
                break
            s["args"] = [args]
            out.append(_tool_call(s))
        return out

    def message(self, i: int) -> dict:
        """The assembled assistant message of choice ``i`` (content and tool calls)."""
        pieces = self.content.get(i)
        msg: dict[str, Any] = {"role": self.roles.get(i, "assistant"), "content": "".join(pieces) if pieces else None}
        slots = self.calls.get(i)
        if slots:
            msg["tool_calls"] = [_tool_call(s) for _, s in sorted(slots.items())]
        return msg

    def template(self) -> dict:
        return {"object": "chat.completion.chunk", **self.head}

    def chunk(self, i: int, delta: dict, finish: str | None = None) -> dict:
        return {**self.template(), "choices": [{"index": i, "delta": delta, "finish_reason": finish}]}


def _tool_call(slot: dict) -> dict:
    """A streamed call's slot as an OpenAI tool call (its id made once)."""
    return {"id": slot.setdefault("id", new_call_id()), "type": slot.get("type", "function"),
            "function": {"name": slot.get("name", ""), "arguments": "".join(slot["args"])}}


class AnswerStream:
    """One choice's streamed content: its reasoning block (:class:`~refiner.proxy.reasoning.Reasoning`, sent as
    ``reasoning_content``), then the content split (:class:`~refiner.proxy.content.CallDriver`, each call sent as it
    closes), the content's edge blanks trimmed (:class:`~refiner.proxy.reasoning.EdgeTrim`) as a whole answer's are."""

    def __init__(self, opened: bool | None, names: frozenset[str], lean: bool = False) -> None:
        self.reasoning = Reasoning(opened, lean)
        self.split = content_split(names) if names else None  # (none when answers are not read for calls)
        self.driver = CallDriver(self.split) if self.split is not None else None
        self.trim: EdgeTrim | None = None  # made when the content starts (after the reasoning block, if any)
        self.sent_reasoning: list[str] = []
        self.calls: list[dict] = []  # the calls sent before the end (OpenAI tool calls, in order)

    def _content(self, text: str) -> str:
        if self.trim is None:
            if not text:
                return ""
            self.trim = EdgeTrim(lead=self.reasoning.found)
        return self.trim.feed(text)

    async def feed(self, piece: str, refinement: Refinement, body: dict) -> tuple[str, str, list[dict]]:
        """``(reasoning, content, calls)`` to send for one content delta."""
        reasoning, answer = self.reasoning.feed(piece)
        self.sent_reasoning.append(reasoning)
        text, calls = await self._answer(answer, refinement, body)
        return reasoning, text, calls

    async def _answer(self, answer: str, refinement: Refinement, body: dict) -> tuple[str, list[dict]]:
        if self.driver is None or not answer:
            return self._content(answer), []
        release, read = await refinement.run(self.driver.feed(answer), body, self.split)
        calls = rebuild_tool_calls([], read) if read else []
        self.calls += calls
        return self._content(release), calls

    async def end(self, refinement: Refinement, body: dict, cut: bool = False) -> tuple[str, str]:
        """``(reasoning, content)`` to send once the upstream's stream has ended; ``cut``: on the token limit."""
        self.stop_early_calls()  # the rest is read whole
        reasoning, answer = self.reasoning.end(cut)
        self.sent_reasoning.append(reasoning)
        text, _ = await self._answer(answer, refinement, body)
        if self.driver is not None:
            text += self._content(await refinement.run(self.driver.end(), body, self.split))
        return reasoning, text

    def stop_early_calls(self) -> None:
        """No call is read before the end (the upstream sends tool calls of its own)."""
        if self.driver is not None:
            self.driver.early = False

    def give_up(self) -> tuple[str, str]:
        """Everything held, as it is (the upstream failed mid-stream)."""
        reasoning, answer = self.reasoning.end()
        pending = self.trim.pending if self.trim is not None else ""  # released by the split, held here
        if self.driver is None:
            return reasoning, pending + answer
        self.stop_early_calls()
        self.split.give_up_checks()  # (a region already open is released: its question gets no answer)
        released = pending + run_sync(self.driver.feed(answer), lambda _: None)[0]
        released += run_sync(self.driver.end(), lambda _: None)
        return reasoning, released if self.calls else released + self.split.held  # (sent calls are not sent twice)

    def finish(self, tail: str, separated: bool) -> str:
        """The last content to send: ``tail``, held text or the text around the calls read from it."""
        text = self._content(tail)
        if self.trim is None:
            return text
        return text + self.trim.end(separated or self.reasoning.found)


ARGUMENT_FRAGMENT = 64  # characters of a refined call's arguments per delta


def call_deltas(k: int, call: dict) -> list[dict]:
    """A refined call as OpenAI's ``tool_calls`` deltas: index, id, type and name, then the arguments in fragments."""
    fn = call.get("function") or {}
    args = fn.get("arguments") or ""
    head = {"index": k, "id": call.get("id"), "type": call.get("type", "function"),
            "function": {"name": fn.get("name", ""), "arguments": ""}}
    rest = [{"index": k, "function": {"arguments": args[i : i + ARGUMENT_FRAGMENT]}}
            for i in range(0, len(args), ARGUMENT_FRAGMENT)]
    return [head, *rest]


async def relay(events: AsyncIterator[dict], refinement: Refinement, body: dict,
                history: HistoryReport | None = None) -> AsyncIterator[str]:
    """The SSE text for the upstream's stream ``events``: chunks forwarded as they come, then the held content, the
    refined calls, the finish reasons with the ``tool_refiner`` report, the usage and ``[DONE]``."""
    buf = StreamBuffer()
    answers: dict[int, AnswerStream] = {}
    early: dict[int, list[dict]] = {}  # choice -> the upstream's calls sent (refined) before the end
    reads: dict[int, EarlyRead] = {}  # choice -> tier 1's last read of its upstream calls before the end
    names = refinement.content.applies(body)
    try:
        async for chunk in events:
            forward = buf.take(chunk)
            for i in buf.calls:  # the upstream sends calls of its own: content is not read for calls early
                if i in answers:
                    answers[i].stop_early_calls()
            forward, calls = await _hold_content(forward, answers, refinement, body, names, buf)
            if forward is not None:
                yield sse(forward)
            for i, k, call in calls + await _early_upstream_calls(buf, answers, early, reads, refinement, body):
                for d in call_deltas(k, call):
                    yield sse(buf.chunk(i, {"tool_calls": [d]}))
    except UpstreamError as e:
        for i, ans in sorted(answers.items()):
            delta = _delta(*ans.give_up())
            if delta:
                yield sse(buf.chunk(i, delta))
        yield sse(e.body())
        yield DONE
        return
    for i, ans in sorted(answers.items()):
        delta = _delta(*(await ans.end(refinement, body, buf.finish.get(i) == "length")))
        if delta:
            yield sse(buf.chunk(i, delta))
    indices = sorted(buf.finish)
    splits = {i: a.split for i, a in answers.items() if a.split is not None}
    reasonings = {i: "".join(a.sent_reasoning) for i, a in answers.items() if a.reasoning.found}
    messages = [(buf.message(i), buf.finish.get(i)) for i in indices]
    for i, (message, reason) in zip(indices, messages):
        if i not in buf.reasoned:
            refinement.prompts.learn(body, message.get("content"), reason)
    for i, a in answers.items():
        if a.driver is not None and a.driver.last is not None:
            reads.setdefault(i, a.driver.last)
    results = await refinement.choices(body, messages, splits, reasonings, reads)
    _, extra = report(results, history)
    if extra or any(r.stage != "none" for r in results):
        extra = {"stages": [r.stage for r in results], **extra}
    for n, (i, r) in enumerate(zip(indices, results)):
        ans = answers.get(i)
        tail = r.content_tail
        if ans is not None and ans.calls and not r.message.get("tool_calls"):
            tail = ""  # the whole read gave nothing (past the deadline): the held text is the calls already sent
        tail = ans.finish(tail, r.separated) if ans is not None else tail
        delta = _delta(r.reasoning_tail, tail)
        if delta:
            yield sse(buf.chunk(i, delta))
        sent = (ans.calls if ans is not None else []) or early.get(i, [])
        final = r.message.get("tool_calls") or []
        if sent and not begins_with(final, sent):
            log.warning("calls sent before the end differ from the answer's calls read whole (%d sent, %d read)",
                        len(sent), len(final))
        for k, call in enumerate(final[len(sent) :], start=len(sent)):
            for d in call_deltas(k, call):
                yield sse(buf.chunk(i, {"tool_calls": [d]}))
        last = buf.chunk(i, {}, r.finish_reason)
        if extra and n == len(indices) - 1:
            last["tool_refiner"] = extra
        yield sse(last)
    if buf.usage is not None:
        yield sse({**buf.template(), "choices": [], "usage": buf.usage})
    yield DONE


async def _early_upstream_calls(buf: StreamBuffer, answers: dict[int, AnswerStream], early: dict[int, list[dict]],
                                reads: dict[int, EarlyRead], refinement: Refinement,
                                body: dict) -> list[tuple[int, int, dict]]:
    """The upstream's tool calls completed since the last chunk, refined: ``(choice, index, call)`` to send now (up to
    :data:`MAX_EARLY_READS` reads); each choice's last read kept in ``reads``."""
    out = []
    for i in list(buf.calls):
        ans = answers.get(i)
        sent = early.setdefault(i, [])
        if (ans is not None and ans.calls) or buf.reads.get(i, 0) >= MAX_EARLY_READS:
            continue
        complete = buf.complete_calls(i)
        if len(complete) <= len(sent):
            continue
        buf.reads[i] = buf.reads.get(i, 0) + 1
        read = await refinement.early_tool_calls(body, complete, refinement.deadline())
        if read is not None:
            reads[i] = read
        refined = read.calls if read is not None else None
        if refined is None or not begins_with(refined, sent):
            buf.reads[i] = MAX_EARLY_READS  # the rest waits for the end
            continue
        for k, call in enumerate(refined[len(sent) :], start=len(sent)):
            out.append((i, k, call))
            sent.append(call)
    return out


def _delta(reasoning: str, content: str) -> dict:
    return {k: v for k, v in (("reasoning_content", reasoning), ("content", content)) if v}


async def _hold_content(chunk: dict | None, answers: dict[int, AnswerStream], refinement: Refinement, body: dict,
                        names: frozenset[str], buf: StreamBuffer) -> tuple[dict | None, list[tuple[int, int, dict]]]:
    """The chunk with each choice's content replaced by what its :class:`AnswerStream` sends now (None when nothing
    is left), and the calls read: ``(choice, index, call)``."""
    kept, calls = [], []
    for choice in chunk["choices"] if chunk is not None else ():
        piece = choice["delta"].get("content")
        if piece:
            i = choice["index"]
            ans = answers.get(i)
            if ans is None:
                opened = False if i in buf.reasoned else refinement.prompts.opened(body)
                lean = opened is None and refinement.prompts.leans(body)
                ans = answers[i] = AnswerStream(opened, names, lean)
                if i in buf.calls:
                    ans.stop_early_calls()
            before = len(ans.calls)
            reasoning, text, new = await ans.feed(piece, refinement, body)
            calls += [(i, before + k, call) for k, call in enumerate(new)]
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
    return ({**chunk, "choices": kept} if kept else None), calls
