"""Streaming (``stream: true``): the upstream's SSE chunks are relayed as they come, except the parts that must be
refined first (tool-call deltas, finish reasons, usage), which are held in a :class:`StreamBuffer` and re-emitted
whole once the upstream's stream has ended."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from refiner.proxy.convert import new_call_id
from refiner.proxy.upstream import UpstreamError

DONE = "data: [DONE]\n\n"


def sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


class StreamBuffer:
    """Holds back the tool-call deltas, finish reasons and usage of a stream, and forwards everything else."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.calls: dict[int, dict[int, dict]] = {}  # choice index -> tool index -> {"id","type","name","args"}
        self.content: dict[int, str] = {}
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
                slot = self.calls.setdefault(i, {}).setdefault(int(tc.get("index", 0)), {"args": ""})
                fn = tc.get("function") or {}
                for key, value in (("id", tc.get("id")), ("type", tc.get("type")), ("name", fn.get("name"))):
                    if value:
                        slot[key] = value
                slot["args"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish[i] = choice["finish_reason"]
            if "role" in delta:
                self.roles[i] = delta["role"]
            if delta.get("content"):
                self.content[i] = self.content.get(i, "") + delta["content"]
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
        msg: dict[str, Any] = {"role": self.roles.get(i, "assistant"), "content": self.content.get(i)}
        slots = self.calls.get(i)
        if slots:
            msg["tool_calls"] = [
                {"id": s.get("id") or new_call_id(), "type": s.get("type", "function"),
                 "function": {"name": s.get("name", ""), "arguments": s["args"]}}
                for _, s in sorted(slots.items())
            ]
        return msg

    def template(self) -> dict:
        return {"object": "chat.completion.chunk", **self.head}

    def chunk(self, i: int, delta: dict, finish: str | None = None) -> dict:
        return {**self.template(), "choices": [{"index": i, "delta": delta, "finish_reason": finish}]}


RefineChoices = Callable[[list[tuple[dict, str | None]]], Awaitable[list[tuple[dict, str | None, str]]]]


async def relay(events: AsyncIterator[dict], refine_choices: RefineChoices) -> AsyncIterator[str]:
    """The SSE text sent to the client for the upstream's stream ``events``: chunks forwarded as they come, then the
    refined tool calls, the finish reasons, the usage and ``[DONE]``. An upstream failure mid-stream ends the stream
    with an error event."""
    buf = StreamBuffer()
    try:
        async for chunk in events:
            forward = buf.take(chunk)
            if forward is not None:
                yield sse(forward)
    except UpstreamError as e:
        yield sse(e.body())
        yield DONE
        return
    items = [(buf.message(i), buf.finish.get(i)) for i in buf.indices()]
    refined = await refine_choices(items)
    for i, (message, reason, _) in zip(buf.indices(), refined):
        for k, call in enumerate(message.get("tool_calls") or []):
            yield sse(buf.chunk(i, {"tool_calls": [{"index": k, **call}]}))
        yield sse(buf.chunk(i, {}, reason))
    if buf.usage is not None:
        yield sse({**buf.template(), "choices": [], "usage": buf.usage})
    yield DONE
