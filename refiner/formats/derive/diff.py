"""A family's record of literals (:class:`~refiner.formats.derive.record.Record`), read by diffing renders of
conversations that differ in one thing at a time. Every literal is the text the template wrote around the
placeholders (the call literals: :mod:`~refiner.formats.derive.literals`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from typing import Any

from refiner.formats.derive.literals import marker_prefix, marker_suffix, read_json_args, read_json_object, read_pairs
from refiner.formats.derive.record import ARGS, CONTENT, IDS, NAMES, REASONING, USER, Record
from refiner.formats.derive.render import ChatTemplate, TemplateFailure, render
from refiner.formats.text import common_prefix, common_suffix


def placeholder_tools() -> list[dict]:
    def prop(v: Any) -> dict:
        t = {str: "string", int: "integer", bool: "boolean", list: "array", dict: "object"}[type(v)]
        # (what some templates read to spell an object's type: Command R+'s Dict[str, ...])
        values = {"additionalProperties": {"type": "string"}} if isinstance(v, dict) else {}
        return {"type": t, "description": f"a {t}", **values}

    return [{"type": "function", "function": {
        "name": n, "description": f"tool {n}",
        "parameters": {"type": "object", "properties": {k: prop(v) for k, v in a.items()}, "required": list(a)}}}
        for n, a in zip(NAMES, ARGS)]


def _call(i: int, as_text: bool, named_ids: bool = False) -> dict:
    args: Any = json.dumps(ARGS[i], ensure_ascii=False) if as_text else dict(ARGS[i])
    call_id = f"functions.{NAMES[i]}:{i}" if named_ids else IDS[i]
    return {"id": call_id, "type": "function", "function": {"name": NAMES[i], "arguments": args}}


def _turn(calls: list[dict] | None, reasoning: str | None = None, content: str | None = "") -> list[dict]:
    turn: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        turn["tool_calls"] = calls
    if reasoning is not None:
        turn["reasoning_content"] = reasoning
    return [{"role": "user", "content": USER}, turn]


def _candidates(base: str, other: str) -> list[tuple[int, str]]:
    """Where ``other`` may be ``base`` with one text inserted: ``(place, inserted text)`` for every place the two
    renders allow; else the middle left when their shared prefix and suffix are cut away (:func:`marker_prefix`)."""
    p_max, s_all = len(common_prefix(base, other)), len(common_suffix(base, other))
    extra = len(other) - len(base)
    if extra > 0 and p_max + s_all >= len(base):
        p_min, p_max = max(0, len(base) - s_all), min(p_max, len(base))
        return [(i, other[i: i + extra]) for i in range(p_min, p_max + 1)]
    p = len(marker_prefix(base, other))  # (a marker both renders open starts the text that differs)
    return [(p, other[p: len(other) - len(marker_suffix(base[p:], other[p:]))])]


def inserted(base: str, other: str, base_c: str | None = None, other_c: str | None = None) -> str:
    """What ``other`` adds to ``base``. Where the place is ambiguous, the same two renders with assistant text
    (``base_c``, ``other_c``) narrow it; among the places left, the latest that follows a space, else the earliest
    where a marker opens right after one closes, else the earliest."""
    cands = _candidates(base, other)
    if base_c is not None and other_c is not None:
        alt = {t for _, t in _candidates(base_c, other_c)}
        cands = [c for c in cands if c[1] in alt] or cands
    for i, text in reversed(cands):
        if i == 0 or other[i - 1].isspace():
            return text
    for i, text in cands:  # a marker that opens right after one closes (``｜><｜tool▁call▁begin｜>``)
        if text[:1] in "<[" and other[i - 1] in ">]":
            return text
    return cands[0][1]


Renders = Callable[..., str]  # one render of messages (with extra context) through the template


def derive_record(template: ChatTemplate, compiled: Any, content: str | None = "") -> Record:
    """The record of ``template``'s dialect, the assistant turn's text being ``content`` (``None``: no text at all);
    raises :class:`TemplateFailure` when the template fails to render a conversation with no call."""
    r = partial(render, compiled, template, tools=placeholder_tools())
    rec = Record()
    alt = CONTENT if not content else ""
    none = r(_turn(None, content=content))
    user = _or_none(r, [{"role": "user", "content": USER}])  # the user's turn alone
    _reasoning(rec, r, none, user, content)
    sections, fulls = rec.sections, {}  # (each render's tool section, and the render)
    named_ids = False
    for as_text in (False, True):
        one = _or_none(r, _turn([_call(0, as_text)], content=content))
        if one is None:
            continue
        written = inserted(none, one)
        if NAMES[0] not in written and IDS[0] in written:  # the id in place of the name: ids that carry the name
            named_ids = True
            one = r(_turn([_call(0, as_text, True)], content=content))
            written = inserted(none, one)
        if NAMES[0] in written:
            rec.arguments_given_as_text = as_text
            if as_text:
                rec.derived_from["arguments_given_as_text"] = ("one: written only when the arguments are given as a "
                                                               "JSON string")
            try:
                none_c = _or_none(r, _turn(None, content=alt))  # (a template may refuse a turn with no text)
                for key, which in (("one", (0,)), ("two", (0, 1)), ("check", (1, 2))):
                    calls = [_call(i, as_text, named_ids) for i in which]
                    full = one if key == "one" else r(_turn(calls, content=content))
                    full_c = None if none_c is None else _or_none(r, _turn(calls, content=alt))
                    sections[key] = inserted(none, full, none_c, full_c)
                    fulls[key] = full
            except TemplateFailure as e:
                rec.missing.append(f"calls: the template renders one call per turn and refuses two ({e}): what "
                                   "separates calls cannot be derived")
                rec.sections = {"one": sections["one"]}
                return rec
            break
    two = sections.get("two", "")
    why = ("the template writes no tool calls (the placeholder tool name does not appear in what an assistant turn "
           "with a call adds to one without)" if "two" not in sections else
           "the template writes each call's id in place of its name (here functions.NAME:INDEX, as Kimi-K2's does): "
           "the name is known only through the id's convention" if named_ids else
           "the template writes only the first call of a turn (the second call's name is not written): what "
           "separates calls cannot be derived" if NAMES[1] not in two else
           "the second call's name is not written after the first's" if two.find(NAMES[0]) > two.find(NAMES[1])
           else "")
    if why:
        rec.missing.append(f"calls: {why}")
        return rec
    if user is not None:
        _turn_markers(rec, r, user)
        two = _empty_section(rec, inserted(user, none), fulls)
    if not rec.reasoning_start:
        _reasoning_with_calls(rec, r, none, _turn([_call(0, rec.arguments_given_as_text)], REASONING, content))
    if (at := two.find(IDS[0])) >= 0:
        rec.id_position = "before_name" if at < two.find(NAMES[0]) else "after_name"
        rec.derived_from["id_position"] = "two: where the given call id (callq0000) is written"
    read_json_object(rec, two) or read_json_args(rec, two) or read_pairs(rec, two)  # (else why: rec.missing)
    _turn_end_for_calls(rec, two, fulls["two"])
    return rec


def _turn_end_for_calls(rec: Record, two: str, full: str) -> None:
    """A section end with no section start written in place of the turn's end in a turn with calls (``<|eom_id|>``
    for ``<|eot_id|>``) is the turn's end, not the section's (``full``: the render of ``two``)."""
    end, turn_end = rec.section_end.strip(), rec.turn_end.strip()
    if (not end or rec.section_start.strip() or not turn_end or end == turn_end or not two.endswith(rec.section_end)
            or two + rec.turn_end in full or turn_end in two):
        return
    rec.section_end = ""
    rec.derived_from["section_end"] = (f"two: nothing; {end!r} ends a turn with calls where {turn_end!r} ends one "
                                       "without (the turn's end, not the section's)")


def _or_none(r: Renders, messages: list[dict], **extra: Any) -> str | None:
    try:
        return r(messages, **extra)
    except TemplateFailure:
        return None


def _reasoning(rec: Record, r: Renders, none: str, user: str | None, content: str | None) -> None:
    """A past turn's reasoning against that turn without it; the generation prompt against the user turn (``user``)."""
    bare = none if not content else _or_none(r, _turn(None))
    bare, content = (none, content) if bare is None else (bare, "")
    try:
        before, found, after = inserted(bare, r(_turn(None, REASONING, content))).partition(REASONING)
    except TemplateFailure:
        return
    if not found:
        rec.derived_from["reasoning_start"] = "the template writes no reasoning of a past turn"
    else:
        rec.reasoning_start, rec.reasoning_end = before, after
        rec.derived_from.update(reasoning_start="no call vs reasoning: before the reasoning text",
                                reasoning_end="no call vs reasoning: after the reasoning text")
    asked = [{"role": "user", "content": USER}]
    prompt = None if user is None else _or_none(r, asked, add_generation_prompt=True, enable_thinking=True)
    if prompt is None:
        return
    rec.generation_prompt = prompt[len(user):] if prompt.startswith(user) else ""
    rec.derived_from["generation_prompt"] = "the bare prompt with the generation prompt (thinking on) vs without"
    opener = rec.reasoning_start.strip()
    if opener and rec.generation_prompt.rstrip().endswith(opener):
        rec.prompt_opens_reasoning = True
        rec.derived_from["prompt_opens_reasoning"] = "the generation prompt (thinking on) ends with the reasoning opener"


_TOKEN = re.compile(r"<[^<>]+>|\[[^\[\]]+\]|[^<\[]+")


def _reasoning_with_calls(rec: Record, r: Renders, none: str, messages: list[dict]) -> None:
    """Reasoning the template writes only in a turn with calls (Command R7B's ``<|START_THINKING|>``): the markers
    right around the reasoning text, when the one-call render with reasoning is the one without plus that text."""
    full = _or_none(r, messages)
    before, found, after = ("", "", "") if full is None else inserted(none, full).partition(REASONING)
    if not found or before + after != rec.sections.get("one"):
        return
    runs, rest = before.split(), after.split()
    start = _TOKEN.findall(runs[-1])[-1] if runs else ""
    end = _TOKEN.findall(rest[0])[0] if rest else ""
    if start.strip() and end.strip():
        rec.reasoning_start, rec.reasoning_end = start, end
        rec.derived_from.update(reasoning_start="one call vs one call with reasoning: the marker before the text",
                                reasoning_end="one call vs one call with reasoning: the marker after the text")


def _empty_section(rec: Record, empty: str, fulls: dict[str, str]) -> str:
    """The sections with the markers of an empty one put back, when a turn with no call writes them (``empty``: what
    that turn adds to the user's turn) and the calls go between them. Returns the section of two calls."""
    sections = rec.sections
    inner = empty.removeprefix(rec.turn_start).removesuffix(rec.turn_end)
    if not inner.strip() or NAMES[0] in inner:
        return sections["two"]
    for k in range(1, len(inner)):
        before, after = inner[:k], inner[k:]
        if before.strip() and after.strip() and all(before + s + after in fulls.get(key, "")
                                                     for key, s in sections.items()):
            sections.update({key: before + s + after for key, s in sections.items()})
            rec.derived_from["sections"] = ("a turn with no call writes an empty section; the calls go between its "
                                            f"markers ({before!r}, {after!r})")
            break
    return sections["two"]


def _turn_markers(rec: Record, r: Renders, user: str) -> None:
    """What a plain answer is written between: the user's turn alone (``user``) against it followed by an answer."""
    answered = _or_none(r, _turn(None, content=CONTENT))
    before, found, after = ("", "", "") if answered is None else inserted(user, answered).partition(CONTENT)
    if found:
        rec.turn_start, rec.turn_end = before, after
        rec.derived_from.update(turn_start="the user's turn vs it and an answer: before the answer's text",
                                turn_end="the user's turn vs it and an answer: after the answer's text")
