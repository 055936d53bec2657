"""The refiner's prompt, shared by the data builder (training) and the pipeline (inference): a system message with
the corrector's role (paper Appendix A, our wording), then one user message with the task's system prompt and tools,
the user's query, the upstream's output and one sentence naming the wire format to answer in (:func:`format_hint`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from refiner import formats
from refiner.formats.reasoning import split_reasoning as reasoning_block

SYSTEM_PROMPT = (
    "You correct tool calls written by another language model. You are given the tools that were available, "
    "the user's request, and the tool calls the other model produced. Those calls may already be right; if so, "
    "return them unchanged. Otherwise fix every mistake you find: broken syntax or missing special tags, a tool "
    "that does not exist or is misspelled, parameter names that are wrong or missing, parameter values that do "
    "not match the request or the tool's schema, and calls placed in the wrong order when later calls use the "
    "results of earlier ones. Fix errors with confidence, keep what is correct, and never invent information the "
    "request does not give. Your final answer must contain only the corrected tool calls, with their special "
    "tags, in the same format the task asks for."
)

USER_TEMPLATE = (
    "Task system prompt, with the tools that can be called:\n<<<SYSTEM\n{system}\nSYSTEM>>>\n\n"
    "User query:\n<<<QUERY\n{query}\nQUERY>>>\n\n"
    "{reasoning_block}"
    "Tool calls produced by the other model:\n<<<UPSTREAM\n{upstream}\nUPSTREAM>>>\n\n"
    "Correct these tool calls and answer with only the corrected tool calls.{format_hint}"
)

REASONING_TEMPLATE = "Reasoning the other model gave before its calls:\n<<<REASONING\n{reasoning}\nREASONING>>>\n\n"


def format_hint(fmt: str) -> str:
    """The default sentence telling the refiner which wire format to answer in (``fmt``: a registered format name;
    an unknown one raises ``KeyError`` from :func:`refiner.formats.get`)."""
    return f"Write the corrected tool calls in the {fmt} format ({formats.get(fmt).description})."


def render_query(query: str | Sequence[Mapping[str, Any]]) -> str:
    """A query is a string, or chat messages (rendered as ``ROLE: content`` lines, tool results included)."""
    if isinstance(query, str):
        return query
    lines = []
    for m in query:
        role = str(m.get("role", "user")).upper()
        content = m.get("content")
        if content is None and m.get("tool_calls"):
            content = json.dumps(m["tool_calls"], ensure_ascii=False)
        if isinstance(content, list):  # content parts
            content = " ".join(str(p.get("text", p)) if isinstance(p, Mapping) else str(p) for p in content)
        lines.append(f"{role}: {content if content is not None else ''}")
    return "\n".join(lines)


def build_messages(system: str, query: str | Sequence[Mapping[str, Any]], upstream: str, *,
                   format_hint: str | None = None, upstream_reasoning: str | None = None) -> list[dict[str, str]]:
    """Chat messages for the refiner: ``[{"role": "system", ...}, {"role": "user", ...}]``."""
    reasoning_block = REASONING_TEMPLATE.format(reasoning=upstream_reasoning.strip()) if upstream_reasoning else ""
    hint = f"\n{format_hint.strip()}" if format_hint else ""
    user = USER_TEMPLATE.format(system=system.strip(), query=render_query(query).strip(), upstream=upstream.strip(),
                                reasoning_block=reasoning_block, format_hint=hint)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def extract_answer(text: str) -> str:
    """The answer part of a generation: what follows the reasoning block (all of it when there is none)."""
    return text[reasoning_block(text).answer :].strip()


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, rest)``: the text of a leading reasoning block, if any (:mod:`refiner.formats.reasoning`: any
    registered family's markers), and what follows it."""
    s = reasoning_block(text)
    if not s.found:
        return None, text
    return s.reasoning(text).strip(), text[s.answer :].strip()
