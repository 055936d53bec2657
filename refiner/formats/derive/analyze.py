"""The differential analysis of a chat template: render known calls, diff the renders, keep the markers.

At most six renders of one conversation (a user turn, then an assistant turn), changing one thing at a time:

- ``none``: the assistant turn with no call;
- ``one``: the same turn with one call, ``fn_alpha`` with five arguments of five types (a string with a space, an
  integer, a boolean, a list, an object);
- ``two``: the same first call, then ``fn_beta`` with one string argument;
- ``one`` again with the arguments given as a JSON string (only when the template does not write the calls of
  ``one``: some templates take ``arguments`` as a string), and again with call ids that carry the name
  (``functions.fn_alpha:0``, only when the template writes the id where the name would be, as Kimi-K2's does);
- ``reasoning``: ``none`` with ``reasoning_content``, for the reasoning block's markers.

``none`` against ``one`` and ``two`` (shared prefix and suffix cut away, the cut moved back to a marker boundary)
gives each render's *tool section*; inside it the placeholder names, keys and values are found, and what surrounds
them is split by comparing the calls with each other: what precedes the first call and also precedes the second is
the call opener (the rest: the section opener), what follows the last value of the first call and also of the second
is the call closer (the rest: the separator, and the section closer). The arguments are either one JSON value (the
tool name inside it, as ``{"name": ..., "arguments": ...}``, or outside it), or one element per argument, whose key
and value delimiters come from comparing consecutive arguments; how each value is written (a string as it is or
quoted, other values as JSON or as Python literals) comes from the five typed values.

The renders are made with no assistant text, and again with some when the first set gives no row (a template may
end a turn with text differently from one without: Seed-OSS writes its end token only after text). The result is a
:class:`Markers` record, with the render each marker was read from; :mod:`refiner.formats.derive`
maps it onto a grammar's row. Everything here is string work on the renders: a bounded number of finds and one JSON
decode per bracket of a render of a few hundred characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from refiner.formats.derive.render import ChatTemplate, TemplateFailure, compile_template, render

NAMES = ("fn_alpha", "fn_beta")
ARGS_ONE: dict[str, Any] = {
    "arg_text": "val text one",
    "arg_count": 4711,
    "arg_flag": True,
    "arg_items": ["val_item", 2],
    "arg_info": {"val_key": "val_inner"},
}
ARGS_TWO: dict[str, Any] = {"arg_city": "val_city"}
REASONING = "rsn_thought_text"
CONTENTS = ("", "cnt_answer_text")  # the assistant's text: none, then some (templates that end a turn differently)
USER = "usr_question_text"
# The longest marker fragment a boundary is moved over (a cut that falls inside a marker is moved to its start).
MARKER_REACH = 48
OPENERS, CLOSERS = "<[", ">]"


def _tools() -> list[dict]:
    props_one = {
        "arg_text": {"type": "string", "description": "a text"},
        "arg_count": {"type": "integer", "description": "a count"},
        "arg_flag": {"type": "boolean", "description": "a flag"},
        "arg_items": {"type": "array", "items": {}, "description": "a list"},
        "arg_info": {"type": "object", "description": "an object"},
    }
    props_two = {"arg_city": {"type": "string", "description": "a city"}}
    return [
        {"type": "function", "function": {"name": n, "description": f"tool {n}",
                                          "parameters": {"type": "object", "properties": p, "required": list(p)}}}
        for n, p in ((NAMES[0], props_one), (NAMES[1], props_two))
    ]


def _call(i: int, name: str, args: dict, as_text: bool, named_ids: bool = False) -> dict:
    arguments: Any = json.dumps(args, ensure_ascii=False) if as_text else dict(args)
    call_id = f"functions.{name}:{i}" if named_ids else f"call_{i:04d}"
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _messages(calls: list[dict] | None, reasoning: str | None = None, content: str = "") -> list[dict]:
    turn: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        turn["tool_calls"] = calls
    if reasoning is not None:
        turn["reasoning_content"] = reasoning
    return [{"role": "user", "content": USER}, turn]


@dataclass
class Markers:
    """What the renders say about the family's calls. ``shape``: ``json_calls`` (each call one JSON object holding
    its name and arguments, or all calls in one JSON list), ``named_json`` (the name outside, the arguments one JSON
    object), ``per_argument`` (one element per argument) or ``""`` (none found: ``why`` says). Markers are as the
    template writes them (whitespace included); ``derived_from`` names the renders each was read from."""

    shape: str = ""
    why: str = ""
    section_start: str = ""
    section_end: str = ""
    call_start: str = ""
    call_end: str = ""
    call_sep: str = ""
    name_prefix: str = ""
    name_suffix: str = ""
    # json_calls
    in_list: bool = False
    name_key: str = ""
    args_key: str = ""
    id_key: str = ""  # a key holding the call's id
    # brace_kv
    quote: str = ""  # the token around string values
    args_as_text: bool = False
    # per_argument
    key_prefix: str = ""
    key_suffix: str = ""
    value_suffix: str = ""
    arg_sep: str = ""
    strings: str = ""  # "raw" (as written) or "json" (quoted)
    literals: str = ""  # "json" (true, [..]) or "python" (True, [..] with single quotes)
    value_styles: dict[str, str] = field(default_factory=dict)  # by Python type name: raw / json / python
    key_suffix_by_type: dict[str, str] = field(default_factory=dict)  # a typing attribute: key_suffix per value type
    reasoning: tuple[tuple[str, str], ...] = ()
    arguments_as_text: bool = False  # the template was given arguments as a JSON string
    content: str = ""  # the assistant turn's text in every render
    derived_from: dict[str, str] = field(default_factory=dict)
    renders: dict[str, str] = field(default_factory=dict)  # each render's tool section

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reasoning"] = [list(p) for p in self.reasoning]
        return d


# ---- string helpers ------------------------------------------------------------------------------------------------


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def common_suffix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


def _unclosed_opener(s: str) -> int:
    """Where a marker left open at the end of ``s`` starts (``<tool_`` in ``...\\n<tool_``), else -1."""
    for j in range(len(s) - 1, max(-1, len(s) - 1 - MARKER_REACH), -1):
        if s[j] in CLOSERS:
            return -1
        if s[j] in OPENERS:
            return j
    return -1


def _closer_of_open_marker(s: str) -> int:
    """Where a marker opened before ``s`` ends inside it (``>`` in ``_call>\\n``): the index after it, else 0."""
    for j in range(min(len(s), MARKER_REACH)):
        if s[j] in OPENERS:
            return 0
        if s[j] in CLOSERS:
            return j + 1
    return 0


def marker_prefix(*texts: str) -> str:
    """The longest common prefix of ``texts``, cut back before a marker it ends inside."""
    n = len(texts[0])
    for t in texts[1:]:
        n = min(n, common_prefix(texts[0], t))
    p = texts[0][:n]
    j = _unclosed_opener(p)
    return p if j < 0 else p[:j]


def marker_suffix(*texts: str) -> str:
    """The longest common suffix of ``texts``, cut forward after a marker it starts inside."""
    n = len(texts[0])
    for t in texts[1:]:
        n = min(n, common_suffix(texts[0], t))
    s = texts[0][len(texts[0]) - n :]
    return s[_closer_of_open_marker(s) :]


def section(base: str, other: str) -> str:
    """What ``other`` adds to ``base``: the middle left when their shared prefix and suffix are cut away, with each
    cut moved to a marker boundary."""
    p = common_prefix(base, other)
    j = _unclosed_opener(other[:p])
    if j >= 0:
        p = j
    s = common_suffix(base[p:], other[p:])
    tail = other[len(other) - s :]
    s -= _closer_of_open_marker(tail)
    return other[p : len(other) - s]


# ---- JSON values in a render ---------------------------------------------------------------------------------------

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


def _call_keys(value: Any, name: str, args: dict) -> tuple[str, str, bool] | None:
    """``(name key, arguments key, arguments as a JSON string)`` when ``value`` is a call object for ``name`` and
    ``args``."""
    if not isinstance(value, dict):
        return None
    name_key = next((k for k, v in value.items() if v == name), None)
    if name_key is None:
        return None
    for k, v in value.items():
        if v == args:
            return name_key, k, False
        if isinstance(v, str):
            try:
                if json.loads(v) == args:
                    return name_key, k, True
            except ValueError:
                pass
    return None


def _id_key(value: Any) -> str:
    """The key of a call object that holds the first call's id (``call_0000``), else ``""``."""
    if not isinstance(value, dict):
        return ""
    return next((k for k, v in value.items() if v == "call_0000"), "")


# ---- value writing -------------------------------------------------------------------------------------------------


def _python_literal(value: Any) -> str:
    return repr(value)


def value_spellings(value: Any) -> list[tuple[str, str]]:
    """How a template may write ``value``: ``(text, style)``, style ``raw``/``json``/``python``."""
    if isinstance(value, str):
        return [(json.dumps(value, ensure_ascii=False), "json"), (value, "raw")]
    out = [(json.dumps(value, ensure_ascii=False), "json")]
    out.append((json.dumps(value, ensure_ascii=False, separators=(",", ":")), "json"))
    if isinstance(value, (bool, list, dict)):
        out.append((_python_literal(value), "python"))
    return out


def find_value(text: str, start: int, value: Any) -> tuple[int, int, str] | None:
    """The earliest spelling of ``value`` at or after ``start``: ``(start, end, style)``; among spellings at the same
    place, the longest."""
    best = None
    for spelled, style in value_spellings(value):
        i = text.find(spelled, start)
        if i < 0:
            continue
        cand = (i, i + len(spelled), style)
        if best is None or i < best[0] or (i == best[0] and cand[1] > best[1]):
            best = cand
    return best


# ---- the analysis --------------------------------------------------------------------------------------------------


def _renders(template: ChatTemplate, content: str, compiled: Any) -> tuple[dict[str, str], bool]:
    tools = _tools()
    out: dict[str, str] = {}

    def go(key: str, messages: list[dict]) -> str:
        out[key] = render(compiled, template, messages, tools)
        return out[key]

    go("none", _messages(None, content=content))
    as_text = False
    try:
        one = go("one", _messages([_call(0, NAMES[0], ARGS_ONE, False)], content=content))
    except TemplateFailure:
        one = ""
    if NAMES[0] not in section(out["none"], one):  # (the whole render may name it in the tool list)
        as_text = True
        one = go("one", _messages([_call(0, NAMES[0], ARGS_ONE, True)], content=content))
    written = section(out["none"], one)
    named_ids = NAMES[0] not in written and "call_0000" in written
    if named_ids:  # the template writes the call's id, not its name: ids that carry the name, as Kimi-K2's do
        go("one", _messages([_call(0, NAMES[0], ARGS_ONE, as_text, True)], content=content))
    out["named_ids"] = "yes" if named_ids else ""
    calls = [_call(0, NAMES[0], ARGS_ONE, as_text, named_ids), _call(1, NAMES[1], ARGS_TWO, as_text, named_ids)]
    go("two", _messages(calls, content=content))
    try:
        go("reasoning", _messages(None, REASONING, content=content))
    except TemplateFailure:
        pass
    return out, as_text


def analyze(template: ChatTemplate, content: str = "", compiled: Any = None) -> Markers:
    """Renders ``template`` (at most six times, the assistant turn's text being ``content``) and reads its markers;
    raises :class:`TemplateFailure` when the template fails to compile or render."""
    renders, as_text = _renders(template, content, compiled or compile_template(template))
    m = Markers(arguments_as_text=as_text, content=content)
    if as_text:
        m.derived_from["arguments_as_text"] = "one: rendered only when given the arguments as a JSON string"
    one, two = section(renders["none"], renders["one"]), section(renders["none"], renders["two"])
    m.renders = {"one": one, "two": two}
    _reasoning(m, renders)
    if NAMES[0] not in one or NAMES[1] not in two:
        m.why = "the template writes no tool calls (the placeholder names do not appear in its renders)"
        return m
    if renders.get("named_ids"):
        m.derived_from["call_id"] = "one: the template writes each call's id (here functions.NAME:INDEX), not its name"
        m.why = ("the template writes each call's id in place of its name (Kimi-K2: functions.NAME:INDEX): the name "
                 "is only known through the id's convention, which no row grammar reads")
        return m
    if two.find(NAMES[0]) > two.find(NAMES[1]):
        m.why = "the template writes the calls out of order"
        return m
    if _json_calls(m, two) or _named_json(m, two) or _brace_kv(m, two) or _per_argument(m, two):
        return m
    if not m.why:
        m.why = "the arguments are neither one JSON value nor one element per argument"
    return m


def _reasoning(m: Markers, renders: dict[str, str]) -> None:
    if "reasoning" not in renders:
        return
    text = renders["reasoning"]
    if REASONING not in section(renders["none"], text):
        return
    i = text.find(REASONING)
    before, after = text[:i].rstrip(), text[i + len(REASONING) :].lstrip()
    j = max(before.rfind("<"), before.rfind("["))
    k = min((x for x in (after.find(">"), after.find("]")) if x >= 0), default=-1)
    open_ = before[j:] if j >= 0 and before.endswith((">", "]")) else ""
    close = after[: k + 1] if k >= 0 and after.startswith(("<", "[")) else ""
    if open_ and close and _words(open_) & _words(close):  # a pair (<think> / </think>), not two unrelated tags
        m.reasoning = ((open_, close),)
        m.derived_from["reasoning"] = "none vs reasoning"


def _words(tag: str) -> set[str]:
    return set(re.findall(r"[a-z]+", tag.lower()))


def _frame(m: Markers, two: str, spans: list[tuple[int, int]], first_core: int) -> None:
    """Section and call markers from the two calls' spans in ``two``: ``spans[k]`` runs from call k's first
    character we know (its name, or its JSON object) to its last; ``first_core`` is where call 0's span starts."""
    (s0, e0), (s1, e1) = spans
    lead, between, tail = two[:s0], two[e0:s1], two[e1:]
    opener = marker_suffix(lead, between)  # precedes each call
    closer = marker_prefix(between, tail)  # follows each call
    if len(opener) + len(closer) > len(between):
        closer = closer[: max(0, len(between) - len(opener))]
    m.section_start = lead[: len(lead) - len(opener)]
    m.section_end = tail[len(closer) :]
    m.call_sep = between[len(closer) : len(between) - len(opener)]
    m.derived_from["call_sep"] = "two: between the calls, less what follows and precedes each"
    m.call_start, m.name_prefix = _split_opener(opener) if m.shape != "json_calls" else (opener, "")
    m.call_end = closer
    if m.name_prefix:
        m.derived_from["name_prefix"] = "two: the end of what precedes both calls, a marker left open before the name"
    m.derived_from.update(
        section_start="two: before the first call, less what also precedes the second",
        call_start="two: what precedes both calls",
        call_end="two: what follows both calls",
        section_end="two: after the last call, less what also follows the first",
    )


def _split_opener(opener: str) -> tuple[str, str]:
    """A call opener split into the call marker and the name prefix: the name prefix is a marker left open just
    before the name (``<function=``, ``<invoke name="``), else nothing."""
    j = _unclosed_opener(opener)
    if j < 0:
        return opener, ""
    return opener[:j], opener[j:]


def _json_calls(m: Markers, two: str) -> bool:
    values = json_values(two)
    for start, end, value in values:
        if isinstance(value, list) and len(value) == 2:
            k0, k1 = _call_keys(value[0], NAMES[0], ARGS_ONE), _call_keys(value[1], NAMES[1], ARGS_TWO)
            if k0 and k1:
                m.shape, m.in_list = "json_calls", True
                m.name_key, m.args_key, m.args_as_text = k0
                m.id_key = _id_key(value[0])
                if m.id_key:
                    m.derived_from["id_key"] = "two: the key holding the call id given (call_0000)"
                m.derived_from.update(name_key="two: the key holding 'fn_alpha'", args_key="two: the key holding "
                                      "the arguments")
                m.section_start, m.section_end = two[:start], two[end:]
                m.derived_from.update(shape="two: both calls in one JSON list",
                                      section_start="two: before the list", section_end="two: after the list")
                return True
    objs = [(s, e, _call_keys(v, n, a)) for s, e, v in values for n, a in zip(NAMES, (ARGS_ONE, ARGS_TWO))]
    objs = [(s, e, k) for s, e, k in objs if k]
    if len(objs) != 2:
        if any(isinstance(v, dict) and any(isinstance(x, dict) and NAMES[0] in x.values() for x in v.values())
               for _, _, v in values):
            m.why = 'each call is a JSON object that wraps the call in another object ({"function": {...}})'
        return False
    m.shape = "json_calls"
    m.name_key, m.args_key, m.args_as_text = objs[0][2]
    m.id_key = next((_id_key(v) for s, e, v in values if s == objs[0][0]), "")
    if m.id_key:
        m.derived_from["id_key"] = "two: the key holding the call id given (call_0000)"
    m.derived_from.update(name_key="two: the key holding 'fn_alpha'", args_key="two: the key holding the arguments")
    m.derived_from["shape"] = "two: one JSON object per call, holding the name and the arguments"
    _frame(m, two, [(objs[0][0], objs[0][1]), (objs[1][0], objs[1][1])], objs[0][0])
    return True


def _named_json(m: Markers, two: str) -> bool:
    args = [(s, e) for s, e, v in json_values(two) if v in (ARGS_ONE, ARGS_TWO)]
    if len(args) != 2:
        return False
    n0, n1 = two.find(NAMES[0]), two.find(NAMES[1], args[0][1])
    if not (n0 < args[0][0] and 0 <= n1 < args[1][0]):
        return False
    m.shape = "named_json"
    m.derived_from["shape"] = "two: each call's name, then its arguments as one JSON object"
    mid0, mid1 = two[n0 + len(NAMES[0]) : args[0][0]], two[n1 + len(NAMES[1]) : args[1][0]]
    if mid0 != mid1:
        m.shape, m.why = "", f"the text between the name and the arguments differs per call ({mid0!r}, {mid1!r})"
        return False
    _frame(m, two, [(n0, args[0][1]), (n1, args[1][1])], n0)
    m.name_suffix = mid0
    m.derived_from["name_suffix"] = "two: between each name and its arguments"
    return True


def _brace_kv(m: Markers, two: str) -> bool:
    """``OPEN KEYWORD NAME{key:value,...} CLOSE`` with strings between a quote token (Gemma 4's
    ``<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>``): the keyword is what follows the opening marker up to the
    name, the quote what surrounds the string value, the closer what follows the first call's closing brace."""
    n0 = two.find(NAMES[0])
    if not two.startswith("{", n0 + len(NAMES[0])):
        return False
    lead = two[:n0]
    j = max(lead.rfind(">"), lead.rfind("]"))
    keyword, opener = lead[j + 1 :], _last_run(lead[: j + 1])
    v = two.find(ARGS_ONE["arg_text"], n0)
    colon = two.rfind(":", n0, v) if v >= 0 else -1
    quote = two[colon + 1 : v] if colon >= 0 else ""
    if not opener or not quote.strip() or not two.startswith(quote, v + len(ARGS_ONE["arg_text"])):
        return False
    second = two.find(opener + keyword + NAMES[1], v)
    head = two[:second].rstrip() if second >= 0 else ""
    closer = head[head.rfind("}") + 1 :].strip() if "}" in head else ""
    if not closer:
        return False
    m.shape, m.why = "brace_kv", ""
    m.call_start, m.name_prefix, m.call_end, m.quote = opener, keyword, closer, quote
    m.derived_from.update(
        shape="two: each call's name followed by a brace holding key:value pairs that are not JSON",
        call_start="two: the marker before the first name", name_prefix="two: between that marker and the name",
        quote="one: what surrounds 'val text one'", call_end="two: after the first call's closing brace")
    return True


def _last_run(text: str) -> str:
    runs = text.split()
    return runs[-1] if runs else ""


def _argument_spans(text: str, start: int, args: dict) -> list[tuple[int, int, int, int, str]] | None:
    """Each argument's ``(key start, key end, value start, value end, style)`` in ``text`` from ``start``, in
    order."""
    out = []
    pos = start
    for key, value in args.items():
        k = text.find(key, pos)
        if k < 0:
            return None
        found = find_value(text, k + len(key), value)
        if found is None:
            return None
        out.append((k, k + len(key), *found))
        pos = found[1]
    return out


def _per_argument(m: Markers, two: str) -> bool:
    n0 = two.find(NAMES[0])
    a0 = _argument_spans(two, n0 + len(NAMES[0]), ARGS_ONE)
    if a0 is None:
        m.why = "the argument keys and values were not found in the render, in order, in any spelling tried"
        return False
    n1 = two.find(NAMES[1], a0[-1][3])
    a1 = _argument_spans(two, n1 + len(NAMES[1]), ARGS_TWO) if n1 >= 0 else None
    if a1 is None:
        m.why = "the second call's argument was not found after its name"
        return False
    m.shape = "per_argument"
    m.derived_from["shape"] = "two: each call's name, then each argument's key and value"
    delims = [two[ke:vs] for _, ke, vs, _, _ in a0] + [two[a1[0][1] : a1[0][2]]]
    styles = {type(v).__name__: st for (*_, st), v in zip(a0, ARGS_ONE.values())}
    if len(set(delims)) > 1:
        by_type = {type(v).__name__: d for d, v in zip(delims, [*ARGS_ONE.values(), *ARGS_TWO.values()])}
        if by_type.get("str") == delims[-1] and len({d for t, d in by_type.items() if t != "str"}) == 1:
            m.key_suffix_by_type = by_type
            m.derived_from["key_suffix_by_type"] = "one, two: the text between key and value differs by value type"
        else:
            m.shape, m.why = "", f"the text between a key and its value varies ({sorted(set(delims))!r})"
            if len(set(by_type.values())) == len(by_type):
                m.why = ("each argument names its value's type in its tag, one value per type "
                         f"({sorted(set(delims))!r}): the XML grammar's typing attribute is a string=\"true|false\" "
                         "flag, and no other row grammar reads a per-type attribute")
            return False
    m.key_suffix = delims[-1]
    m.value_styles = styles
    m.strings = styles["str"]
    non_str = {st for t, st in styles.items() if t not in ("str", "int")}
    m.literals = "python" if "python" in non_str else "json"
    m.derived_from.update(key_suffix="two: between each key and its value",
                          strings="one: how 'val text one' is written", literals="one: how true, a list, an object are written")
    # around the arguments: before the first key, between values and keys, after the last value
    lead0 = two[n0 + len(NAMES[0]) : a0[0][0]]
    lead1 = two[n1 + len(NAMES[1]) : a1[0][0]]
    trails = [two[a0[i][3] : a0[i + 1][0]] for i in range(len(a0) - 1)]
    value_suffix = marker_prefix(*trails, two[a0[-1][3] : n1], two[a1[-1][3] :])
    m.value_suffix = value_suffix
    m.key_prefix = marker_suffix(lead0, lead1, *(t[len(value_suffix) :] for t in trails))
    sep = trails[0][len(value_suffix) : len(trails[0]) - len(m.key_prefix)]
    if any(t != value_suffix + sep + m.key_prefix for t in trails):
        m.shape, m.why = "", "the text between arguments varies"
        return False
    m.arg_sep = sep
    m.name_suffix = lead0[: len(lead0) - len(m.key_prefix)]
    if lead1[: len(lead1) - len(m.key_prefix)] != m.name_suffix:
        m.shape, m.why = "", "the text after the name differs per call"
        return False
    m.derived_from.update(key_prefix="two: what precedes every key", value_suffix="two: what follows every value",
                          name_suffix="two: after each name, before its first key")
    _frame(m, two, [(n0, a0[-1][3] + len(value_suffix)), (n1, a1[-1][3] + len(value_suffix))], n0)
    return True
