"""Healing the incoming conversation: earlier assistant tool calls with broken ``arguments`` or a name not offered are
repaired by tier 1 before the request is forwarded; only what was wrong is replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from refiner.proxy.content import tool_names
from refiner.proxy.convert import argument_problem, arguments_text, refine_request

MAX_HEALED_CALLS = 64  # per request; further broken calls are left as sent (and reported)


@dataclass
class Broken:
    message: int
    call: int
    tool_call: dict
    problems: list[str]
    bad_arguments: bool = False
    offered: set[str] = field(default_factory=set)  # the request's tool names, when the call's name is not one

    def entry(self, *more: str) -> dict:
        """The report's entry for this call (nothing fixed yet)."""
        return {"message": self.message, "call": self.call, "id": self.tool_call.get("id"),
                "problems": [*self.problems, *more], "fixed": []}


@dataclass
class HistoryReport:
    """What healing did: one entry per broken call (``fixed`` empty when left as sent); ``status``: ``ok``,
    ``timeout`` or ``error`` (the repair did not run)."""

    entries: list[dict] = field(default_factory=list)
    status: str = "ok"

    @property
    def fixed(self) -> int:
        return sum(1 for e in self.entries if e["fixed"])

    def header(self) -> str | None:
        """The ``x-tool-refiner-history`` value (None when the history had nothing to heal)."""
        if self.status != "ok":
            return self.status
        if not self.entries:
            return None
        left = len(self.entries) - self.fixed
        return f"fixed={self.fixed}" + (f" left={left}" if left else "")


def find_broken(body: dict) -> list[Broken]:
    """The assistant tool calls of ``body["messages"]`` that need healing, in order."""
    names = tool_names(body.get("tools"))
    found = []
    messages = body.get("messages")
    for mi, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        for ci, tc in enumerate(calls if isinstance(calls, list) else []):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict):
                continue
            problem = argument_problem(fn.get("arguments"))
            bad_name = bool(names) and fn.get("name") not in names
            problems = [p for p in (problem, bad_name and f"unknown tool name {fn.get('name')!r}") if p]
            if problems:
                found.append(Broken(mi, ci, tc, problems, problem is not None, names if bad_name else set()))
    return found


def repair_items(body: dict, broken: list[Broken]) -> list[dict]:
    """The tier-1 work items (see :mod:`refiner.proxy.work`), one per broken call (without the conversation)."""
    return [{"request": refine_request({"tools": body.get("tools")}, [b.tool_call])} for b in broken]


def apply_repairs(body: dict, broken: list[Broken], outcomes: list[dict]) -> tuple[dict, HistoryReport]:
    """The request with the repaired calls in place (a copy; ``body`` is not changed) and the report."""
    out = {**body, "messages": list(body["messages"])}
    report = HistoryReport()
    renamed: dict[str, tuple[str, str]] = {}  # call id -> (old name, new name)
    for b, outcome in zip(broken, outcomes):
        fn = b.tool_call["function"]
        entry = b.entry()
        result = (outcome or {}).get("result") or {}
        calls = result.get("calls") or []
        new_fn = dict(fn)
        if result.get("stage") != "error" and len(calls) == 1:
            call = calls[0]
            if b.bad_arguments and isinstance(call.get("arguments"), dict):
                new_fn["arguments"] = arguments_text(call)
                entry["fixed"].append("arguments")
            if call.get("name") in b.offered:
                new_fn["name"] = call["name"]
                entry["fixed"].append("name")
                entry["name"] = {"from": fn.get("name"), "to": call["name"]}
                if isinstance(b.tool_call.get("id"), str):
                    renamed[b.tool_call["id"]] = (fn.get("name"), call["name"])
        if entry["fixed"]:
            message = out["messages"][b.message]
            if message is body["messages"][b.message]:
                message = out["messages"][b.message] = {**message, "tool_calls": list(message["tool_calls"])}
            message["tool_calls"][b.call] = {**b.tool_call, "function": new_fn}
        report.entries.append(entry)
    for mi, message in enumerate(out["messages"]):
        if isinstance(message, dict) and message.get("role") == "tool" and message.get("tool_call_id") in renamed:
            old, new = renamed[message["tool_call_id"]]
            if message.get("name") == old:
                out["messages"][mi] = {**message, "name": new}
    return out, report
