"""Streaming (``stream: true``): the upstream's SSE chunks are relayed as they come, except the parts that must be
refined first (tool-call deltas, finish reasons, usage, and content that may hold calls), which are held back and
re-emitted once the upstream's stream has ended."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from refiner.proxy.content import ContentSplit
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


async def relay(events: AsyncIterator[dict], refinement: Refinement, body: dict,
                history: HistoryReport | None = None) -> AsyncIterator[str]:
    """The SSE text sent to the client for the upstream's stream ``events``: chunks forwarded as they come, except
    content that may hold calls (held back by a :class:`~refiner.proxy.content.ContentSplit` per choice, and
    released as soon as it proves to be text); then, once the upstream's stream has ended, the rest of the held
    content or the calls read from it, the refined tool calls, the finish reasons (the last one carrying the
    ``tool_refiner`` report when there is one), the usage and ``[DONE]``. An upstream failure mid-stream releases
    the held content and ends the stream with an error event."""
    buf = StreamBuffer()
    reads_content = refinement.content.applies(body)
    splits: dict[int, ContentSplit] = {}
    try:
        async for chunk in events:
            forward = buf.take(chunk)
            if forward is not None and reads_content:
                forward = await _hold_content(forward, splits, refinement, body)
            if forward is not None:
                yield sse(forward)
    except UpstreamError as e:
        for i, split in sorted(splits.items()):
            split.give_up_checks()
            text = split.end().release + split.held
            if text:
                yield sse(buf.chunk(i, {"content": text}))
        yield sse(e.body())
        yield DONE
        return
    for i, split in sorted(splits.items()):
        text = await refinement.drive(split, split.end(), body)
        if text:
            yield sse(buf.chunk(i, {"content": text}))
    indices = buf.indices()
    results = await refinement.choices(body, [(buf.message(i), buf.finish.get(i)) for i in indices], splits)
    _, extra = report(results, history)
    if extra or any(r.stage != "none" for r in results):
        extra = {"stages": [r.stage for r in results], **extra}
    for n, (i, r) in enumerate(zip(indices, results)):
        if r.content_tail:
            yield sse(buf.chunk(i, {"content": r.content_tail}))
        for k, call in enumerate(r.message.get("tool_calls") or []):
            yield sse(buf.chunk(i, {"tool_calls": [{"index": k, **call}]}))
        last = buf.chunk(i, {}, r.finish_reason)
        if extra and n == len(indices) - 1:
            last["tool_refiner"] = extra
        yield sse(last)
    if buf.usage is not None:
        yield sse({**buf.template(), "choices": [], "usage": buf.usage})
    yield DONE


async def _hold_content(chunk: dict, splits: dict[int, ContentSplit], refinement: Refinement,
                        body: dict) -> dict | None:
    """The chunk with each choice's content replaced by what its split releases now (None when nothing is left)."""
    kept = []
    for choice in chunk["choices"]:
        piece = choice["delta"].get("content")
        if piece:
            i = choice["index"]
            split = splits.get(i)
            if split is None:
                split = splits[i] = refinement.splitter(body)
            released = await refinement.drive(split, split.feed(piece), body)
            delta = {k: v for k, v in choice["delta"].items() if k != "content"}
            if released:
                delta["content"] = released
            others = any(v is not None for k, v in choice.items() if k not in ("index", "delta", "finish_reason"))
            if not delta and not others:
                continue
            choice = {**choice, "delta": delta}
        kept.append(choice)
    return {**chunk, "choices": kept} if kept else None
