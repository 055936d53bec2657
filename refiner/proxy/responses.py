"""``POST /v1/responses`` (OpenAI's Responses API): the answer's ``function_call`` items are refined as a chat
answer's ``tool_calls`` are, whole and streamed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from refiner.proxy.refining import ChoiceResult, Refinement, report
from refiner.proxy.stream import sse
from refiner.proxy.upstream import UpstreamError
from refiner.specs import ToolList

FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
CALL_EVENTS = ("response.function_call_arguments.delta", "response.function_call_arguments.done")


def chat_body(body: dict) -> dict:
    """The request as a chat request for the refiner: its function tools (a list of function tools only kept as it
    came: :mod:`refiner.specs` reads that shape), its instructions and input as messages."""
    given_tools = body.get("tools") or []
    tools = [
        {"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}}
        for t in given_tools if isinstance(t, dict) and t.get("type") == "function" and "name" in t
    ]
    if isinstance(given_tools, ToolList) and len(tools) == len(given_tools):
        tools = given_tools
    messages: list[dict] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    given = body.get("input")
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list):
        messages.extend({"role": m["role"], "content": m.get("content")} for m in given
                        if isinstance(m, dict) and isinstance(m.get("role"), str))
    return {"tools": tools or None, "messages": messages}


def is_call(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call"


def finish_reason(response: dict) -> str:
    """The chat finish reason a response stands for: ``length`` when it stopped at its output token limit."""
    details = response.get("incomplete_details")
    cut = response.get("status") == "incomplete" and isinstance(details, dict) and details.get(
        "reason") == "max_output_tokens"
    return "length" if cut else "tool_calls"


async def refine_output(refinement: Refinement, body: dict, response: dict) -> ChoiceResult | None:
    """Refines ``response["output"]``'s function calls in place; the refinement's result (None when it has none)."""
    output = response.get("output")
    if not isinstance(output, list) or not any(is_call(i) for i in output):
        return None
    calls = [i for i in output if is_call(i)]
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": c.get("call_id"), "type": "function",
               "function": {"name": c.get("name"), "arguments": c.get("arguments")}} for c in calls]}
    (result,) = await refinement.choices(chat_body(body), [(message, finish_reason(response))])
    response["output"] = rebuilt_output(output, calls, result.message.get("tool_calls") or [])
    return result


def rebuilt_output(output: list, calls: list[dict], refined: list[dict]) -> list:
    """``output`` with its function call items replaced by the ``refined`` tool calls, in their places, each keeping
    the item of the call whose id it kept; further calls after the last one."""
    by_call_id = {c.get("call_id"): c for c in calls}
    items = []
    for tc in refined:
        fn = tc.get("function") or {}
        original = by_call_id.pop(tc.get("id"), None)
        base = original or {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:24]}", "call_id": tc.get("id"),
                            "status": "completed"}
        items.append({**base, "name": fn.get("name"), "arguments": fn.get("arguments")})
    last = max(k for k, item in enumerate(output) if is_call(item))
    out: list = []
    for k, item in enumerate(output):
        if not is_call(item):
            out.append(item)
        elif k == last:
            out.extend(items)
        elif items:
            out.append(items.pop(0))
    return out


def reported(response: dict, result: ChoiceResult | None) -> dict[str, str]:
    """Adds the ``tool_refiner`` report to ``response``; the response headers."""
    if result is None:
        return {"x-tool-refiner": "none"}
    headers, extra = report([result], None)
    if extra or result.stage != "none":
        response["tool_refiner"] = {"stage": result.stage, **extra}
    return headers


async def relay(events: AsyncIterator[dict], refinement: Refinement, body: dict) -> AsyncIterator[str]:
    """The SSE text for the upstream's Responses stream ``events``. An upstream failure mid-stream ends it with an
    ``error`` event; calls held back then are not sent."""
    seq = 0
    held: dict[int, dict] = {}  # output index -> the function call item as far as known

    def numbered(event: dict) -> str:
        nonlocal seq
        if "sequence_number" in event:
            event = {**event, "sequence_number": seq}
        seq += 1
        return sse(event, event.get("type", "message"))

    try:
        async for event in events:
            kind = event.get("type")
            at = event.get("output_index")
            if kind in ("response.output_item.added", "response.output_item.done") and is_call(event.get("item")):
                held[int(at or 0)] = dict(event["item"])
                continue
            if kind in CALL_EVENTS:
                item = held.setdefault(int(at or 0), {"type": "function_call", "arguments": ""})
                item["arguments"] = event["arguments"] if kind.endswith(".done") else (
                    (item.get("arguments") or "") + str(event.get("delta") or ""))
                continue
            if kind in FINAL_EVENTS and isinstance(event.get("response"), dict):
                for piece in await _final(event, held, refinement, body):
                    yield numbered(piece)
                continue
            yield numbered(event)
    except UpstreamError as e:  # the Responses API's error event (the failure's type is its code)
        yield sse({"type": "error", "code": e.kind, "message": e.message, "param": None, "sequence_number": seq},
                  "error")


async def _final(event: dict, held: dict[int, dict], refinement: Refinement, body: dict) -> list[dict]:
    """The events that end the stream: the refined calls, then ``event`` with the refined output and the report."""
    response = dict(event["response"])
    output = list(response.get("output") or [])
    if held and not any(is_call(i) for i in output):  # a final event without the output: the calls as streamed
        for at, item in sorted(held.items()):
            output.insert(min(at, len(output)), item)
    response["output"] = output
    result = await refine_output(refinement, body, response)
    reported(response, result)
    out = []
    for at, item in enumerate(response["output"]):
        if not is_call(item):
            continue
        ids = {"item_id": item.get("id"), "output_index": at, "sequence_number": 0}
        out += [
            {"type": "response.output_item.added", "output_index": at, "item": {**item, "arguments": "",
                                                                                 "status": "in_progress"},
             "sequence_number": 0},
            {"type": "response.function_call_arguments.delta", **ids, "delta": item.get("arguments") or ""},
            {"type": "response.function_call_arguments.done", **ids, "arguments": item.get("arguments") or ""},
            {"type": "response.output_item.done", "output_index": at, "item": item, "sequence_number": 0},
        ]
    out.append({**event, "response": response})
    return out
