"""A family's dialect as one record of literals, read from its chat template by diffing renders.

The template is rendered as a chat template is (:mod:`~refiner.formats.derive.render`) with conversations that
differ in one thing at a time: no call; one call (``tlq_alpha``, five arguments of five types: a string with a space,
an integer, a boolean, a list, an object); two calls (``tlq_alpha``, then ``tlq_beta`` with one string argument);
two other calls (``tlq_beta``, then ``tlq_gamma`` with two arguments) to check what was read; the same turn with
reasoning; the bare prompt with and without the generation prompt. Nothing here knows a tag, an attribute, a token
or a line layout: every literal of the :class:`Record` is the text the template itself wrote around the placeholders.

- The *section* of a render is what it adds to the render with no call (:func:`inserted`: the shared prefix and
  suffix cut away; where the cut is ambiguous, text both renders hold at that place, it goes back to the start of the
  run of non-space characters it falls in, never further than the ambiguity reaches; a cut inside a marker goes to
  where the marker opens or closes). When a turn with no call writes an empty section, its markers are put back
  around the calls; reasoning written only beside calls is read from the one-call render with reasoning.
- Inside the section of two calls the placeholders are found: each call's *core* runs from its name (or from the
  JSON object holding it) to the end of its arguments. What precedes both cores is the call opener (split for
  display at its last space: ``call_start`` and ``name_prefix``); what follows both is the call closer; the rest
  before the first is the section start, after the last the section end, between them the call separator.
- The arguments are one JSON object after the name (``json_args``), a JSON object per call holding the name and the
  arguments under keys of the template's own (``json_object``, or all calls in one JSON list; the call object may sit
  under a key of an outer object, ``wrapper``), or one element per argument (``pairs``): what precedes every key,
  what follows every key up to its value, what follows every value, and between arguments, from comparing
  consecutive arguments. How each value is written (a string as it is, JSON-quoted, between Python's quotes or
  between a quote token of the template's own; other values as JSON, as Python literals, or with bare keys and that
  quote token) comes from the five typed values. A call id written between the name and the arguments splits what
  follows the name in two; in a call object, the id is the given one or the call's place in the turn.

:func:`derive_record` fills the record and lists what it could not derive, each with why
(:attr:`Record.missing`). The rows (:mod:`~refiner.formats.derive.rows`) and the generic reader
(:mod:`refiner.formats.recorded`) both read it. Everything is string work on a few renders of a few hundred
characters each.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from refiner.formats.anchored import quote_closers
from refiner.formats.derive.render import ChatTemplate, TemplateFailure, compile_template, render
from refiner.formats.recorded import write_quoted

NAMES = ("tlq_alpha", "tlq_beta", "tlq_gamma")
ARGS = (
    {"kq_text": "vq text one", "kq_count": 4711, "kq_flag": True, "kq_items": ["vq_item", 2],
     "kq_info": {"vq_key": "vq_inner"}},
    {"kq_city": "vq_city"},
    {"kq_word": "vq_word", "kq_num": 17},
)
IDS = ("callq0000", "callq0001", "callq0002")  # nine letters and digits: Mistral's templates accept no other id
REASONING = "rq_thought_text"
USER = "uq_question_text"
CONTENT = "cq_answer_text"
MARKER_REACH = 32  # the longest part of a marker a cut between renders may fall inside


@dataclass
class Record:
    """What a family writes, as literals the template wrote (whitespace included). ``shape``: ``json_object`` (a
    JSON object per call, its name under ``name_key`` and its arguments under ``args_key``; under ``wrapper`` of an
    outer object when there is one), ``json_list`` (every call such an object in one JSON list), ``json_args`` (the
    name, then the arguments as one JSON object) or ``pairs`` (the name, then one element per argument); ``""`` when
    none was found. ``missing`` lists what could not be derived, each with why; ``derived_from`` says which renders
    each literal was read from; ``sections`` holds each render's tool section."""

    shape: str = ""
    section_start: str = ""
    section_end: str = ""
    call_start: str = ""
    call_end: str = ""
    call_sep: str = ""
    name_prefix: str = ""
    name_suffix: str = ""
    # pairs
    key_prefix: str = ""
    key_suffix: str = ""
    key_suffix_typed: str = ""  # a typing attribute: the key suffix before a value other than a string ("": the same)
    value_suffix: str = ""
    arg_sep: str = ""
    strings: str = ""  # raw (as written), json (quoted), python ('quoted') or quoted (between quote_open and quote_close)
    literals: str = ""  # json (true, [..]), python (True, [..]) or quoted (bare keys, strings between the quote tokens)
    quote_open: str = ""
    quote_close: str = ""
    compact_json: bool = False  # JSON written with no space after , and :
    # json_object / json_list
    name_key: str = ""
    args_key: str = ""
    args_as_text: bool = False  # the arguments are a JSON string holding the object
    wrapper: str = ""  # the key of an outer object that holds each call object
    wrapper_fields: dict[str, Any] = field(default_factory=dict)  # the outer object's other members, the same per call
    keyed: bool = False  # each call object is {NAME: arguments} (no name or arguments key)
    # ids and reasoning
    id_key: str = ""
    id_position: str = ""  # where the call id sits: "" (not written), json_key, wrapper_key, before_name, after_name
    id_suffix: str = ""  # after_name: what follows the id, up to the arguments
    turn_start: str = ""  # what the template writes before and after the text of a plain answer (role header,
    turn_end: str = ""  # end of turn): kept out of the section's literals
    reasoning_start: str = ""
    reasoning_end: str = ""
    generation_prompt: str = ""
    prompt_opens_reasoning: bool = False
    arguments_given_as_text: bool = False  # the template was given the arguments as a JSON string
    missing: list[str] = field(default_factory=list)
    derived_from: dict[str, str] = field(default_factory=dict)
    sections: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return bool(self.shape) and not self.missing

    @property
    def opener(self) -> str:
        return self.call_start + self.name_prefix

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- string helpers ------------------------------------------------------------------------------------------------


def common_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def common_suffix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a[::-1], b[::-1]]))


_DECODER = json.JSONDecoder()


def json_values(text: str) -> list[tuple[int, int, Any]]:
    """The outermost JSON objects and lists in ``text``: ``(start, end, value)``."""
    out = []
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = _DECODER.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            out.append((i, end, value))
            i = end
        else:
            i += 1
    return out


def value_spellings(value: Any, quote: tuple[str, str] = ("", "")) -> list[tuple[str, str]]:
    """How a template may write ``value``: ``(text, style)``, style ``raw``/``json``/``python`` (a string between
    Python's quotes: ``'vq text one'``)/``quoted``."""
    out = [(json.dumps(value, ensure_ascii=False), "json")]
    if quote[0] and (isinstance(value, (str, list, dict))):
        out.append((write_quoted(value, *quote), "quoted"))
    if isinstance(value, str):
        return [*out, (repr(value), "python"), (value, "raw")]
    out.append((json.dumps(value, ensure_ascii=False, separators=(",", ":")), "json"))
    if isinstance(value, (bool, list, dict)):
        out.append((repr(value), "python"))
    return out


def find_value(text: str, start: int, value: Any, quote: tuple[str, str] = ("", "")) -> tuple[int, int, str] | None:
    """The earliest spelling of ``value`` at or after ``start``: ``(start, end, style)``; among spellings at the same
    place, the longest."""
    best = None
    for spelled, style in value_spellings(value, quote):
        i = text.find(spelled, start)
        if i < 0:
            continue
        cand = (i, i + len(spelled), style)
        if best is None or i < best[0] or (i == best[0] and cand[1] > best[1]):
            best = cand
    return best


# ---- the renders ---------------------------------------------------------------------------------------------------


def _tools() -> list[dict]:
    def prop(v: Any) -> dict:
        t = {str: "string", int: "integer", bool: "boolean", list: "array", dict: "object"}[type(v)]
        out: dict[str, Any] = {"type": t, "description": f"a {t}"}
        if isinstance(v, dict):  # what some templates read to spell the type (Command R+'s Dict[str, ...])
            out["additionalProperties"] = {"type": "string"}
        return out

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
    renders allow (the place is ambiguous over the characters both hold there); else the middle left when their shared
    prefix (less a ``<`` or ``[`` it ends with, when a marker goes on there) and suffix are cut away."""
    p_max = common_prefix(base, other)
    s_all = common_suffix(base, other)
    extra = len(other) - len(base)
    if extra > 0 and p_max + s_all >= len(base):
        p_min, p_max = max(0, len(base) - s_all), min(p_max, len(base))
        return [(i, other[i: i + extra]) for i in range(p_min, p_max + 1)]
    while p_max > 0 and other[p_max - 1] in "<[" and p_max < len(other) and not other[p_max].isspace():
        p_max -= 1  # a marker both renders open (``<turn|>``, ``<|tool_call>``) starts the text that differs
    p_max = _marker_start(other, p_max)
    s = common_suffix(base[p_max:], other[p_max:])
    return [(p_max, other[p_max: _marker_end(other, len(other) - s, p_max)])]


def _marker_start(text: str, i: int) -> int:
    """``i``, or where the marker opens when ``i`` falls inside one (``<|START_`` shared by ``<|START_ACTION|>`` and
    ``<|START_RESPONSE|>``): the ``<`` or ``[`` before it with no space, ``>`` or ``]`` between."""
    j = max(text.rfind("<", max(0, i - MARKER_REACH), i), text.rfind("[", max(0, i - MARKER_REACH), i))
    if j < 0 or i >= len(text) or text[i].isspace():
        return i
    inside = text[j + 1: i]
    return j if inside and not any(c.isspace() or c in "<[>]" for c in inside) else i


def _marker_end(text: str, i: int, floor: int) -> int:
    """``i``, or where the marker closes when ``i`` falls inside one (``|>`` shared by ``<|END_ACTION|>`` and
    ``<|END_RESPONSE|>``): past the ``>`` or ``]`` after it with no space, ``<`` or ``[`` between."""
    if i <= floor or text[i - 1].isspace():
        return i
    ends = [k for k in (text.find(">", i, i + MARKER_REACH), text.find("]", i, i + MARKER_REACH)) if k >= 0]
    if not ends:
        return i
    k = min(ends)
    inside = text[i:k]
    if any(c.isspace() or c in "<[>]" for c in inside) or any(c in "<[" for c in text[floor:i][-1:]):
        return i
    start = max(text.rfind("<", floor, i), text.rfind("[", floor, i))
    if start < 0 or any(c.isspace() or c in ">]" for c in text[start + 1: i]):
        return i
    return k + 1


def inserted(base: str, other: str, base_c: str | None = None, other_c: str | None = None) -> str:
    """What ``other`` adds to ``base``. Where the place is ambiguous, the same two renders with assistant text
    (``base_c``, ``other_c``) narrow it (the text before the calls then differs); among the places left, the latest
    that follows a space, else the earliest where a ``<`` or ``[`` follows a ``>`` or ``]``, else the earliest (a cut
    never falls inside a run of non-space characters or a marker when it can help it)."""
    cands = _candidates(base, other)
    if base_c is not None and other_c is not None:
        alt = {t for _, t in _candidates(base_c, other_c)}
        both = [c for c in cands if c[1] in alt]
        cands = both or cands
    for i, text in reversed(cands):
        if i == 0 or other[i - 1].isspace():
            return text
    for i, text in cands:  # a marker that opens right after one closes (``｜><｜tool▁call▁begin｜>``)
        if text[:1] in "<[" and other[i - 1] in ">]":
            return text
    return cands[0][1]


class _Renders:
    def __init__(self, template: ChatTemplate, compiled: Any) -> None:
        self.template, self.compiled, self.tools = template, compiled, _tools()

    def __call__(self, messages: list[dict], **extra: Any) -> str:
        return render(self.compiled, self.template, messages, self.tools, **extra)


def derive_record(template: ChatTemplate, compiled: Any = None, content: str | None = "") -> Record:
    """The record of ``template``'s dialect (at most fourteen renders), the assistant turn's text being ``content``
    (``None``: no text at all; the same renders with another text settle where a section starts); raises
    :class:`TemplateFailure` when the template fails to compile, or to render a conversation with no call."""
    r = _Renders(template, compiled or compile_template(template))
    rec = Record()
    alt = CONTENT if not content else ""
    none = r(_turn(None, content=content))
    _reasoning(rec, r, none, content)
    sections: dict[str, str] = {}
    fulls: dict[str, str] = {}
    named_ids = False
    for as_text in (False, True):
        try:
            one = r(_turn([_call(0, as_text)], content=content))
        except TemplateFailure:
            continue
        written = inserted(none, one)
        if NAMES[0] not in written and IDS[0] in written:  # the id in place of the name: ids that carry the name
            named_ids = True
            one = r(_turn([_call(0, as_text, True)], content=content))
            written = inserted(none, one)
        if NAMES[0] in written:
            rec.arguments_given_as_text = as_text
            try:
                two = [_call(0, as_text, named_ids), _call(1, as_text, named_ids)]
                other = [_call(1, as_text, named_ids), _call(2, as_text, named_ids)]
                none_c = _or_none(r, _turn(None, content=alt))  # (a template may refuse a turn with no text)
                for key, calls in (("one", two[:1]), ("two", two), ("check", other)):
                    full = one if key == "one" else r(_turn(calls, content=content))
                    full_c = None if none_c is None else _or_none(r, _turn(calls, content=alt))
                    sections[key] = inserted(none, full, none_c, full_c)
                    fulls[key] = full
            except TemplateFailure as e:
                rec.missing.append(f"calls: the template renders one call per turn and refuses two ({e}): what "
                                   "separates calls cannot be derived")
                rec.sections = {k: v for k, v in sections.items() if k == "one"}
                return rec
            break
    rec.sections = sections
    if "two" not in sections:
        rec.missing.append("calls: the template writes no tool calls (the placeholder tool name does not appear in "
                           "what an assistant turn with a call adds to one without)")
        return rec
    if named_ids:
        rec.missing.append("calls: the template writes each call's id in place of its name (here functions.NAME:"
                           "INDEX, as Kimi-K2's does): the name is known only through the id's convention")
        return rec
    if rec.arguments_given_as_text:
        rec.derived_from["arguments_given_as_text"] = "one: written only when the arguments are given as a JSON string"
    two = sections["two"]
    if NAMES[1] not in two:
        rec.missing.append("calls: the template writes only the first call of a turn (the second call's name is not "
                           "written): what separates calls cannot be derived")
        return rec
    if two.find(NAMES[0]) > two.find(NAMES[1]):
        rec.missing.append("calls: the second call's name is not written after the first's")
        return rec
    bare = _turn_markers(rec, r)
    if bare is not None:
        two = _empty_section(rec, inserted(bare, none), fulls)
    if not rec.reasoning_start:
        _reasoning_with_calls(rec, r, none, _turn([_call(0, rec.arguments_given_as_text)], REASONING, content))
    _ids(rec, two)
    if not (_json_object(rec, two) or _json_args(rec, two) or _pairs(rec, two)):
        if not rec.missing:
            rec.missing.append("arguments: neither one JSON value per call nor one element per argument (the "
                               "placeholder keys and values were not found in order after the name)")
    return rec


def _or_none(r: _Renders, messages: list[dict]) -> str | None:
    try:
        return r(messages)
    except TemplateFailure:
        return None


def _reasoning(rec: Record, r: _Renders, none: str, content: str | None) -> None:
    """Reasoning of a past turn against the same turn without it, both with no text (with ``content`` when the
    template refuses a turn with no text)."""
    bare = none if not content else _or_none(r, _turn(None))
    if bare is None:
        bare = none
    else:
        content = ""
    try:
        text = inserted(bare, r(_turn(None, REASONING, content)))
    except TemplateFailure:
        return
    i = text.find(REASONING)
    if i < 0:
        rec.derived_from["reasoning_start"] = "the template writes no reasoning of a past turn"
    else:
        rec.reasoning_start, rec.reasoning_end = text[:i], text[i + len(REASONING):]
        rec.derived_from.update(reasoning_start="no call vs reasoning: before the reasoning text",
                                reasoning_end="no call vs reasoning: after the reasoning text")
    try:
        bare = r([{"role": "user", "content": USER}])
        prompt = r([{"role": "user", "content": USER}], add_generation_prompt=True, enable_thinking=True)
    except TemplateFailure:
        return
    rec.generation_prompt = prompt[common_prefix(bare, prompt):] if prompt.startswith(bare) else ""
    rec.derived_from["generation_prompt"] = "the bare prompt with the generation prompt (thinking on) vs without"
    opener = rec.reasoning_start.strip()
    if opener and rec.generation_prompt.rstrip().endswith(opener):
        rec.prompt_opens_reasoning = True
        rec.derived_from["prompt_opens_reasoning"] = "the generation prompt (thinking on) ends with the reasoning opener"


_TOKEN = re.compile(r"<[^<>]+>|\[[^\[\]]+\]|[^<\[]+")


def _reasoning_with_calls(rec: Record, r: _Renders, none: str, messages: list[dict]) -> None:
    """Reasoning the template writes only in a turn with calls, inside what the calls add (Command R7B's
    ``<|START_THINKING|>...<|END_THINKING|>`` before its action): the marker right before the reasoning text and
    the one right after it, when the one-call render with reasoning is the one without plus that text."""
    try:
        text = inserted(none, r(messages))
    except TemplateFailure:
        return
    before, found, after = text.partition(REASONING)
    if not found or before + after != rec.sections.get("one"):
        return
    runs, rest = before.split(), after.split()
    start = _TOKEN.findall(runs[-1])[-1] if runs else ""
    end = _TOKEN.findall(rest[0])[0] if rest else ""
    if start.strip() and end.strip():
        rec.reasoning_start, rec.reasoning_end = start, end
        rec.derived_from.update(reasoning_start="one call vs one call with reasoning: the marker before the text",
                                reasoning_end="one call vs one call with reasoning: the marker after the text")


def _less_reasoning(rec: Record, text: str) -> str:
    """``text`` (a section's start) less an empty reasoning block the template writes before the calls."""
    empty = rec.reasoning_start.strip() + rec.reasoning_end.strip()
    core = text.lstrip()
    if empty and empty != rec.reasoning_start.strip() and core.startswith(empty) and core[len(empty):].strip():
        return core[len(empty):]
    return text


def _empty_section(rec: Record, empty: str, fulls: dict[str, str]) -> str:
    """The sections with the markers of an empty one put back, when the template writes the section's markers in a
    turn with no call (``empty``: what that turn adds to the user's turn) and the calls between them: what the calls
    add then lacks those markers. Returns the section of two calls."""
    sections = rec.sections
    inner = empty
    if rec.turn_start and inner.startswith(rec.turn_start):
        inner = inner[len(rec.turn_start):]
    if rec.turn_end and inner.endswith(rec.turn_end):
        inner = inner[: len(inner) - len(rec.turn_end)]
    if not inner.strip() or NAMES[0] in inner:
        return sections["two"]
    for k in range(1, len(inner)):
        if not (inner[:k].strip() and inner[k:].strip()):
            continue
        if all(inner[:k] + sections[key] + inner[k:] in fulls.get(key, "") for key in sections):
            for key in sections:
                sections[key] = inner[:k] + sections[key] + inner[k:]
            rec.derived_from["sections"] = ("a turn with no call writes an empty section; the calls go between its "
                                            f"markers ({inner[:k]!r}, {inner[k:]!r})")
            break
    return sections["two"]


def _turn_markers(rec: Record, r: _Renders) -> str | None:
    """What a plain answer is written between: the user's turn alone against it followed by an answer. Returns the
    user's turn alone."""
    user = [{"role": "user", "content": USER}]
    bare, answered = _or_none(r, user), _or_none(r, _turn(None, content=CONTENT))
    if bare is None or answered is None:
        return bare
    text = inserted(bare, answered)
    before, found, after = text.partition(CONTENT)
    if found:
        rec.turn_start, rec.turn_end = before, after
        rec.derived_from.update(turn_start="the user's turn vs it and an answer: before the answer's text",
                                turn_end="the user's turn vs it and an answer: after the answer's text")
    return bare


def _ids(rec: Record, two: str) -> None:
    at = two.find(IDS[0])
    if at < 0:
        return
    n = two.find(NAMES[0])
    rec.id_position = "before_name" if at < n else "after_name"
    rec.derived_from["id_position"] = "two: where the given call id (callq0000) is written"


def _split_id(rec: Record, gaps: tuple[str, str], ids: tuple[str, str]) -> str | None:
    """The text after the name when the call id is written in it (``gaps``: what follows each of two names up to
    its arguments): the part before the id, the part after it going to ``id_suffix``; ``None`` when it is not."""
    if not all(i in g for g, i in zip(gaps, ids)):
        return None
    before, _, after = gaps[0].partition(ids[0])
    if gaps[1] != before + ids[1] + after or not after.strip():
        return None
    rec.id_position, rec.id_suffix = "after_name", after
    rec.derived_from.update(id_position="two: the given call id is written between the name and the arguments",
                            id_suffix="two: between each call's id and its arguments")
    return before


def _call_keys(value: Any, i: int, wrapped: bool = False) -> dict[str, Any] | None:
    """The keys of call ``i`` written as one JSON object (``name_key``, ``args_key``, ``args_as_text``, ``id_key``,
    and ``wrapper``, ``wrapper_fields`` when the call object sits under a key of an outer object)."""
    if not isinstance(value, dict):
        return None
    if not wrapped and len(value) == 1 and value.get(NAMES[i]) == ARGS[i]:
        return {"keyed": True}
    name_key = next((k for k, v in value.items() if v == NAMES[i]), None)
    if name_key is None:
        if wrapped:
            return None
        for k, v in value.items():
            inner = _call_keys(v, i, True)
            if inner is not None:
                id_key = next((x for x, y in value.items() if _is_id(y, i)), "")
                fields = {x: y for x, y in value.items() if x not in (k, id_key)}
                if id_key and not inner["id_key"]:
                    inner.update(id_key=id_key, id_position="wrapper_key")
                return inner | {"wrapper": k, "wrapper_fields": fields}
        return None
    id_key = next((k for k, v in value.items() if _is_id(v, i)), "")
    out = {"name_key": name_key, "id_key": id_key, "id_position": "json_key" if id_key else "", "wrapper": "",
           "wrapper_fields": {}}
    for k, v in value.items():
        if v == ARGS[i]:
            return out | {"args_key": k, "args_as_text": False}
        if isinstance(v, str) and v.startswith("{"):
            try:
                if json.loads(v) == ARGS[i]:
                    return out | {"args_key": k, "args_as_text": True}
            except ValueError:
                pass
    return None


def _is_id(value: Any, i: int) -> bool:
    """Whether ``value`` is call ``i``'s id: the id given, or one the template numbers itself (the call's place in
    the turn: ``"0"``, ``"1"``)."""
    return value == IDS[i] or (type(value) in (int, str) and str(value) == str(i))


def _set_keys(rec: Record, keys: dict[str, Any]) -> None:
    for k, v in keys.items():
        setattr(rec, k, v)
    if rec.keyed:
        rec.derived_from["keyed"] = "two: each call object's one key is the name, its value the arguments"
        return
    rec.derived_from.update(name_key="two: the key holding tlq_alpha", args_key="two: the key holding the arguments")
    if rec.id_key:
        rec.derived_from["id_key"] = "two: the key holding the given call id (or the call's place in the turn)"
    if rec.wrapper:
        rec.derived_from.update(wrapper="two: the key of the outer object holding each call object",
                                wrapper_fields="two: the outer object's other members (the same in every call)")


def _json_object(rec: Record, two: str) -> bool:
    values = json_values(two)
    for start, end, value in values:
        if isinstance(value, list) and len(value) == 2:
            k0, k1 = _call_keys(value[0], 0), _call_keys(value[1], 1)
            if k0 and k1 and k0 == k1:
                rec.shape = "json_list"
                _set_keys(rec, k0)
                rec.section_start = _less_reasoning(rec, _less_turn(two[:start], rec.turn_start, True))
                rec.section_end = _less_turn(two[end:], rec.turn_end, False)
                rec.compact_json = ", " not in two[start:end] and ": " not in two[start:end]
                rec.derived_from.update(shape="two: both calls in one JSON list", section_start="two: before the list",
                                        section_end="two: after the list")
                return True
    objs = [(s, e, k) for s, e, v in values for i in (0, 1) if (k := _call_keys(v, i))]
    if len(objs) != 2:
        return False
    if objs[0][2] != objs[1][2]:
        rec.missing.append("calls: the two calls' JSON objects use different keys")
        return False
    rec.shape = "json_object"
    _set_keys(rec, objs[0][2])
    rec.compact_json = ", " not in two[objs[0][0]:objs[0][1]] and ": " not in two[objs[0][0]:objs[0][1]]
    rec.derived_from["shape"] = "two: one JSON object per call" + (" (under a key of an outer object)"
                                                                   if rec.wrapper else "")
    return _frame(rec, two, [(objs[0][0], objs[0][1]), (objs[1][0], objs[1][1])])


def _json_args(rec: Record, two: str) -> bool:
    args = [(s, e) for s, e, v in json_values(two) if v in (ARGS[0], ARGS[1])]
    if len(args) != 2:
        return False
    n0, n1 = two.find(NAMES[0]), two.find(NAMES[1], args[0][1])
    if not (n0 < args[0][0] and 0 <= n1 < args[1][0]):
        return False
    mid0, mid1 = two[n0 + len(NAMES[0]): args[0][0]], two[n1 + len(NAMES[1]): args[1][0]]
    if mid0 != mid1:
        mid0 = _split_id(rec, (mid0, mid1), IDS[:2])
        if mid0 is None:
            gap0 = two[n0 + len(NAMES[0]): args[0][0]]
            rec.missing.append(f"name_suffix: the text between the name and the arguments differs per call "
                               f"({gap0!r}, {mid1!r})" + _numbered(gap0, mid1))
            return False
    rec.shape = "json_args"
    rec.name_suffix = mid0
    rec.compact_json = ", " not in two[args[0][0]:args[0][1]]
    rec.derived_from.update(shape="two: each call's name, then its arguments as one JSON object",
                            name_suffix="two: between each name and its arguments" + (
                                " (its id)" if rec.id_suffix else ""))
    return _frame(rec, two, [(n0, args[0][1]), (n1, args[1][1])])


def _numbered(gap0: str, gap1: str) -> str:
    """What the two calls' texts after the name say when they differ only in the call's place in the turn."""
    n = common_prefix(gap0, gap1)
    if gap0[n:n + 1] == "0" and gap1[n:n + 1] == "1" and gap0[n + 1:] == gap1[n + 1:]:
        return ": it numbers the calls (0, 1, ...), a counter no spelling holds"
    return ""


def _spans(text: str, start: int, args: dict, quote: tuple[str, str]) -> list[tuple[int, int, int, int, str]] | None:
    """Each argument's ``(key start, key end, value start, value end, style)`` in ``text`` from ``start``, in the
    order the template writes them (some sort the keys)."""
    at = {key: text.find(key, start) for key in args}
    if any(k < 0 for k in at.values()):
        return None
    out = []
    for key in sorted(args, key=at.get):
        k = at[key]
        found = find_value(text, k + len(key), args[key], quote)
        if found is None:
            return None
        out.append((k, k + len(key), *found))
    if any(a[3] > b[0] for a, b in zip(out, out[1:])):
        return None
    return out


def _quote(rec: Record, two: str, start: int) -> tuple[str, str]:
    """The quote token around string values: what lies between a key and its string value beyond what lies between
    a key and its integer value (``:<|"|>`` against ``:``), closed by the same token, its mirror or its closing
    tag; ``("", "")`` when strings are not written so."""
    ks, kc = two.find("kq_text", start), two.find("kq_count", start)
    if ks < 0 or kc < 0:
        return "", ""
    vs, vc = two.find(ARGS[0]["kq_text"], ks), two.find(str(ARGS[0]["kq_count"]), kc)
    if vs < 0 or vc < 0:
        return "", ""
    s_delim, c_delim = two[ks + len("kq_text"): vs], two[kc + len("kq_count"): vc]
    q_open = s_delim[len(c_delim):]
    if not s_delim.startswith(c_delim) or not q_open.strip() or q_open.strip() in ('"', "'"):
        return "", ""
    after = two[vs + len(ARGS[0]["kq_text"]):]
    for q_close in quote_closers(q_open):
        if after.startswith(q_close):
            rec.quote_open, rec.quote_close = q_open, q_close
            rec.derived_from.update(quote_open="one: between a key and a string value, beyond what lies between a "
                                    "key and an integer", quote_close="one: after a string value")
            return q_open, q_close
    rec.missing.append(f"quote_close: a string value follows {q_open!r} but is not closed by the same token, its "
                       f"mirror or its closing tag ({after[:20]!r} follows it)")
    return "", ""


def _pairs(rec: Record, two: str) -> bool:
    n0 = two.find(NAMES[0])
    quote = _quote(rec, two, n0 + len(NAMES[0]))
    if rec.missing:
        return False
    a0 = _spans(two, n0 + len(NAMES[0]), ARGS[0], quote)
    n1 = two.find(NAMES[1], a0[-1][3]) if a0 else -1
    a1 = _spans(two, n1 + len(NAMES[1]), ARGS[1], quote) if n1 >= 0 else None
    if a0 is None or a1 is None:
        rec.missing.append(f"arguments: {_why_no_pairs(two, n0 + len(NAMES[0]))}")
        return False
    delims = [two[ke:vs] for _, ke, vs, _, _ in a0] + [two[a1[0][1]: a1[0][2]]]
    vals0 = [ARGS[0][two[ks:ke]] for ks, ke, *_ in a0]  # (in the order written)
    kinds = ["str" if isinstance(v, str) else "other" for v in (*vals0, *ARGS[1].values())]
    by_kind = {k: {d for d, kk in zip(delims, kinds) if kk == k} for k in ("str", "other")}
    typed = ""
    if len(set(delims)) > 1:
        s_, o_ = by_kind["str"], by_kind["other"]
        if len(s_) == 1 and len(o_) == 1 and _typing_split(next(iter(s_)), next(iter(o_))):
            typed = next(iter(o_))  # a typing attribute: one spelling for strings, one for every other value
            rec.derived_from["key_suffix_typed"] = ("one, two: between a key and a value other than a string (the "
                                                    "key's typing attribute)")
        else:
            rec.missing.append(f"key_suffix: the text between a key and its value differs by the value's type "
                               f"({sorted(set(delims))!r}), one spelling per type: the record holds one for strings "
                               "and one for every other value")
            return False
    rec.shape = "pairs"
    rec.key_suffix = next(iter(by_kind["str"]))
    rec.key_suffix_typed = typed
    styles = {type(v).__name__: st for (*_, st), v in zip(a0, vals0)}
    rec.strings = styles["str"]
    others = {st for t, st in styles.items() if t != "str"}
    rec.literals = next((s for s in ("quoted", "python") if s in others), "json")
    items = next(two[vs:ve] for (ks, ke, vs, ve, _) in a0 if two[ks:ke] == "kq_items")
    rec.compact_json = rec.literals == "json" and ", " not in items
    trails = [two[a0[i][3]: a0[i + 1][0]] for i in range(len(a0) - 1)]
    lead0, lead1 = two[n0 + len(NAMES[0]): a0[0][0]], two[n1 + len(NAMES[1]): a1[0][0]]
    after = (two[a0[-1][3]: n1], two[a1[-1][3]:])
    vs = _common_prefix(*trails, *after)
    kp = _common_suffix(lead0, lead1, *(t[len(vs):] for t in trails))
    seps = {t[len(vs): len(t) - len(kp)] for t in trails}
    if len(seps) != 1 or any(len(vs) + len(kp) > len(t) for t in trails):
        rec.missing.append(f"arg_sep: the text between arguments varies ({sorted(set(trails))!r})")
        rec.shape = ""
        return False
    rec.value_suffix, rec.key_prefix, rec.arg_sep = vs, kp, seps.pop()
    gaps = (lead0[: len(lead0) - len(kp)], lead1[: len(lead1) - len(kp)])
    rec.name_suffix = gaps[0] if gaps[0] == gaps[1] else _split_id(rec, gaps, IDS[:2])
    if rec.name_suffix is None:
        rec.name_suffix = ""
        twice = NAMES[0] in gaps[0] and NAMES[1] in gaps[1]
        rec.missing.append("name_suffix: " + ("each call's name is written twice, the second time inside the call: "
                                              if twice else "") +
                           f"the text after the name differs per call ({gaps[0]!r}, {gaps[1]!r})")
        rec.shape = ""
        return False
    rec.derived_from.update(
        shape="two: each call's name, then each argument's key and value",
        key_prefix="two: what precedes every key", key_suffix="two: between every key and its value",
        value_suffix="two: what follows every value", arg_sep="two: between consecutive arguments",
        name_suffix="two: after each name, before its first key", strings="one: how 'vq text one' is written",
        literals="one: how true, a list and an object are written")
    end = len(rec.value_suffix)
    return _frame(rec, two, [(n0, a0[-1][3] + end), (n1, a1[-1][3] + end)])


def _common_prefix(*texts: str) -> str:
    """The longest common prefix of ``texts``, cut back before a marker it ends inside when every text goes on with a
    character that is not a space there (``</p><`` of ``</p><p>`` and ``</p></call>``: the ``<`` opens what comes
    next)."""
    n = len(os.path.commonprefix(list(texts)))
    while n > 0 and texts[0][n - 1] in "<[" and all(len(t) > n and not t[n].isspace() for t in texts):
        n -= 1
    if all(len(t) > n and not t[n].isspace() for t in texts):  # inside a marker: back to where it opens
        j = max(texts[0].rfind("<", 0, n), texts[0].rfind("[", 0, n))
        if j >= 0 and not any(c in texts[0][j:n] for c in ">]") and not texts[0][j:n].isspace():
            n = j
    return texts[0][:n]


def _common_suffix(*texts: str) -> str:
    """The longest common suffix of ``texts``, cut forward after a marker it starts inside when every text has a
    character that is not a space before it (``">\n<arg key="`` of ``">\n<arg key="`` and ``</arg>\n<arg key="``: the
    ``>`` closes what came before)."""
    n = len(os.path.commonprefix([t[::-1] for t in texts]))
    while n > 0 and texts[0][-n] in ">]" and all(len(t) > n and not t[-n - 1].isspace() for t in texts):
        n -= 1
    if n and all(len(t) > n and not t[-n - 1].isspace() for t in texts):  # inside a marker: on to where it closes
        tail = texts[0][len(texts[0]) - n:]
        j = min((i for i in (tail.find(">"), tail.find("]")) if i >= 0), default=-1)
        if j >= 0 and not any(c in tail[:j] for c in "<["):
            n -= j + 1
    return texts[0][len(texts[0]) - n:]


def _why_no_pairs(text: str, start: int) -> str:
    """Why the first call's arguments were not found as key/value pairs: the first key or value missing, and what
    the template wrote there."""
    at = {key: text.find(key, start) for key in ARGS[0]}
    for key in sorted(ARGS[0], key=at.get):
        k, value = at[key], ARGS[0][key]
        if k < 0:
            return (f"neither one JSON value per call nor one element per argument: the key {key!r} is not written "
                    "after the tool name")
        if find_value(text, k + len(key), value) is None:
            shown = text[k: k + len(key) + 40]
            return (f"neither one JSON value per call nor one element per argument: the value {value!r} of {key!r} "
                    f"is written in none of the spellings read (as is, JSON, Python, between quote tokens): the "
                    f"template wrote {shown!r}")
    return "neither one JSON value per call nor one element per argument (the values overlap the keys)"


def _typing_split(a: str, b: str) -> bool:
    """Whether two key suffixes differ only after a shared start that is not only spaces (``" string="`` of
    ``" string="true">`` and ``" string="false">``): the key ends where they part."""
    n = common_prefix(a, b)
    return bool(a[:n].strip()) and n < len(a) and n < len(b)


def _less_turn(text: str, marker: str, start: bool) -> str:
    """``text`` (a section's start or end) less the turn's header (``start``) or end-of-turn token (``marker``) at its
    outer edge, when more than that marker is left: the model writes the section, the chat writes the turn."""
    m = marker.strip()
    core = text.strip()
    if not m or core == m:
        return text
    if start and core.startswith(m):
        return text[text.find(m) + len(m):]
    if not start and core.endswith(m):
        return text[: text.rfind(m)]
    return text


def _frame(rec: Record, two: str, spans: list[tuple[int, int]]) -> bool:
    """Section and call literals from the two calls' cores ``spans`` in ``two``."""
    (s0, e0), (s1, e1) = spans
    lead, between, tail = two[:s0], two[e0:s1], two[e1:]
    closer = _common_prefix(between, tail)
    opener = _common_suffix(lead, between[len(closer):])
    rec.section_start = _less_reasoning(rec, _less_turn(lead[: len(lead) - len(opener)], rec.turn_start, True))
    rec.section_end = _less_turn(tail[len(closer):], rec.turn_end, False)
    rec.call_sep = between[len(closer): len(between) - len(opener)]
    cut = max(opener.rfind(" "), opener.rfind("\n"), opener.rfind("\t")) + 1
    if rec.shape == "json_object":
        cut = len(opener)
    rec.call_start, rec.name_prefix = opener[:cut], opener[cut:]
    rec.call_end = closer
    rec.derived_from.update(
        section_start="two: before the first call, less what also precedes the second",
        section_end="two: after the last call, less what also follows the first",
        call_start="two: what precedes both calls (split from name_prefix at its last space)",
        name_prefix="two: the end of what precedes both calls, after its last space",
        call_end="two: what follows both calls", call_sep="two: between the calls, less what follows and precedes each")
    if not (opener.strip() or rec.section_start.strip()):
        rec.missing.append("call_start: nothing but spaces precedes the calls (an untagged format): no literal tells a "
                           "call from prose")
        return False
    return True
