"""OpenAI ``tool_calls`` ⇄ refiner requests and results.

A choice's ``tool_calls`` go to the pipeline as text in the ``openai`` wire format (the array exactly as received,
broken arguments included); the refined calls come back as OpenAI ``tool_calls`` that keep the upstream's call ids.
"""

from __future__ import annotations

import collections
import json
import uuid
from collections.abc import Sequence
from typing import Any

WIRE_FORMAT = "openai"


def upstream_text(tool_calls: Sequence[dict]) -> str:
    """The upstream's calls as text in the ``openai`` wire format: the ``tool_calls`` array exactly as received
    (arguments kept as the strings the upstream wrote, broken or not)."""
    return json.dumps(list(tool_calls), ensure_ascii=False)


def refine_request(body: dict, tool_calls: Sequence[dict], fmt: str) -> dict:
    """The pipeline request for one choice: the chat's tools and messages, and the upstream's calls."""
    return {"tools": body.get("tools") or None, "query": body.get("messages") or "", "upstream":
            upstream_text(tool_calls), "format": fmt}


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def rebuild_tool_calls(original: Sequence[dict], calls: Sequence[dict]) -> list[dict]:
    """OpenAI ``tool_calls`` for the refined ``calls``: a call keeps the id of the original call at its position
    when the name matches, else of the first unused original with its name, else (a renamed call) of the first
    unused original; calls beyond the originals get fresh ids. Linear time (thousands of calls are a hostile
    answer's shape, not a reason to stall)."""
    names = [(o.get("function") or {}).get("name") if isinstance(o, dict) else None for o in original]
    used = [False] * len(original)
    assigned = [False] * len(calls)
    ids: list[str | None] = [None] * len(calls)

    def take(i: int, j: int) -> None:
        used[j], assigned[i] = True, True
        ids[i] = original[j].get("id") if isinstance(original[j], dict) else None

    for i, c in enumerate(calls):
        if i < len(original) and names[i] == c["name"]:
            take(i, i)
    unused_by_name: dict[Any, collections.deque[int]] = collections.defaultdict(collections.deque)
    for j, name in enumerate(names):
        if not used[j]:
            unused_by_name[name].append(j)
    for i, c in enumerate(calls):
        if not assigned[i] and unused_by_name.get(c["name"]):
            take(i, unused_by_name[c["name"]].popleft())
    spare = (j for j in range(len(original)) if not used[j])  # renamed calls keep the ids of the rest
    for i in range(len(calls)):
        if not assigned[i]:
            j = next(spare, None)
            if j is not None:
                take(i, j)
    return [
        {
            "id": ids[i] or new_call_id(),
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {}, ensure_ascii=False)},
        }
        for i, c in enumerate(calls)
    ]


def apply_result(message: dict, finish_reason: str | None, result: dict) -> tuple[dict, str | None]:
    """The choice's message and finish reason after refinement (unchanged results keep the upstream's bytes)."""
    original = message.get("tool_calls") or []
    if not result.get("changed") or result.get("stage") == "error":
        return message, finish_reason
    tool_calls = rebuild_tool_calls(original, result.get("calls") or [])
    out = dict(message)
    if tool_calls:
        out["tool_calls"] = tool_calls
        reason = "tool_calls" if finish_reason in (None, "stop", "tool_calls") else finish_reason
    else:
        out.pop("tool_calls", None)
        reason = "stop" if finish_reason in (None, "tool_calls") else finish_reason
    return out, reason

