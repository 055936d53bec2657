"""OpenAI ``tool_calls`` ⇄ refiner requests and results: a choice's ``tool_calls`` go to the pipeline as the
``openai`` wire format's text, and come back refined, keeping the upstream's call ids."""

from __future__ import annotations

import collections
import json
import uuid
from collections.abc import Sequence
from typing import Any

WIRE_FORMAT = "openai"


def upstream_text(tool_calls: Sequence[dict]) -> str:
    """The upstream's ``tool_calls`` array as received (broken arguments included), as ``openai`` format text."""
    return json.dumps(list(tool_calls), ensure_ascii=False)


def argument_problem(arguments: Any) -> str | None:
    """Why ``function.arguments`` needs healing, or None."""
    if isinstance(arguments, dict):
        return None
    if arguments is None:
        return "arguments are missing"
    if not isinstance(arguments, str):
        return f"arguments are a {type(arguments).__name__}, not a JSON string"
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError) as e:
        return f"arguments are not valid JSON ({str(e)[:120]})"
    if not isinstance(value, dict):
        return f"arguments are JSON but not an object ({type(value).__name__})"
    return None


def refine_request(body: dict, tool_calls: Sequence[dict]) -> dict:
    """The pipeline request for one choice: the chat's tools and messages, and the upstream's calls."""
    return {"tools": body.get("tools") or None, "query": body.get("messages") or "", "upstream":
            upstream_text(tool_calls), "format": WIRE_FORMAT}


def arguments_text(call: dict) -> str:
    """A call's arguments as OpenAI's ``function.arguments`` JSON text."""
    return json.dumps(call.get("arguments") or {}, ensure_ascii=False)


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def rebuild_tool_calls(original: Sequence[dict], calls: Sequence[dict]) -> list[dict]:
    """OpenAI ``tool_calls`` for the refined ``calls``: a call keeps the id of the original at its position when the
    name matches, else of the first unused original with its name, else of the first unused original; calls beyond
    the originals get fresh ids. Linear time."""
    names = [(o.get("function") or {}).get("name") if isinstance(o, dict) else None for o in original]
    owner = [i if i < len(original) and names[i] == c["name"] else None for i, c in enumerate(calls)]
    taken = {j for j in owner if j is not None}
    unused_by_name: dict[Any, collections.deque[int]] = collections.defaultdict(collections.deque)
    for j, name in enumerate(names):
        if j not in taken:
            unused_by_name[name].append(j)
    for i, c in enumerate(calls):
        if owner[i] is None and unused_by_name.get(c["name"]):
            owner[i] = unused_by_name[c["name"]].popleft()
            taken.add(owner[i])
    spare = (j for j in range(len(original)) if j not in taken)  # renamed calls keep the ids of the rest
    owner = [j if j is not None else next(spare, None) for j in owner]
    out = []
    for c, j in zip(calls, owner):
        given = original[j].get("id") if j is not None and isinstance(original[j], dict) else None
        out.append({"id": given or new_call_id(), "type": "function",
                    "function": {"name": c["name"], "arguments": arguments_text(c)}})
    return out


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

