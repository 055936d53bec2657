"""Tier-1 repair: deterministic, model-free fixes of tool calls, each recorded as a finding of severity ``repair``.

On the text: calls read from text that is not valid in its format are rendered again (``parse_repair``,
``salvage``), in the output format (``normalise_format``); a call the text stops inside is left out, never completed
(``drop_cut``); calls to tools not offered may be dropped (``drop_unknown_tool``); a call comes after the calls whose
outputs it references (``reorder``). On each call: its tool name snaps to an offered tool (``snap_tool``), a
parameter name to a free declared one (``snap_param``), undeclared parameters are dropped (``drop_param``), values are
converted to their declared type (``coerce``).

Names and values are repaired in full only when the spec is believed: the call cannot run as written (unknown tool,
missing required parameter), its spec says it is closed (:func:`spec_is_closed`), or the caller trusts every spec
(``trust_spec``). Any other call gets only one-slip misspellings of parameter names (:func:`is_misspelling`) and
values encoded as text (:func:`decode_value`), because loose specs disagree with real calls. Tier 1 never invents a
value, never replaces an enum value by a merely similar member, and never turns a boolean into text.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any, Literal, get_args

from rapidfuzz import fuzz
from rapidfuzz.distance import DamerauLevenshtein

from refiner import formats
from refiner.calls import Count, ToolCall, dependency_order, is_reference, preview
from refiner.formats.reading import Reading, tool_index
from refiner.formats.salvage import normalise
from refiner.gate import (
    MAX_DEPTH,
    REPAIR,
    Finding,
    GateReport,
    check_reading,
    check_text,
    excused,
    in_enum,
    json_type,
    lost_call,
    type_matches,
)

UnknownTools = Literal["keep", "drop"]  # what tier 1 does with a call to a tool the request does not offer
UNKNOWN_TOOLS: tuple[str, ...] = get_args(UnknownTools)

# Similarity cutoffs (rapidfuzz ``ratio`` on normalised names, 0..100) and the lead the best candidate needs over the
# runner-up, set so that no correct call of tests/test_repair_real.py moves.
TOOL_CUTOFF = 80.0
PARAM_CUTOFF = 75.0
MARGIN = 5.0

# Work bounds per call list: longer names are matched exactly only; at most MAX_SNAP_PARAMS unknown parameter names
# per call are paired, MAX_COERCED_VALUES values coerced and MAX_NAME_COMPARISONS names compared.
MAX_SNAP_NAME_CHARS = 256
MAX_SNAP_PARAMS = 64
MAX_COERCED_VALUES = 4096
MAX_NAME_COMPARISONS = 8192
_INT_TEXT = re.compile(r"[+-]?\d{1,30}")
_NUM_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_NUMBERS = re.compile(r"[+-]?\d+(?:[.,]\d+)*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_IDENTIFIER = re.compile(r"[^\W\d][\w.\-]*")


def action(code: str, message: str, call: int | None = None, tool: str | None = None,
           param: str | None = None) -> Finding:
    """The finding that records one repair (``call``: its index in the output list; None for the text)."""
    return Finding(code, message, call, tool, param, REPAIR)


@dataclass
class Tier1:
    """Outcome of tier-1 repair on one upstream text; with no action, the upstream's text, calls and gate report."""

    text: str  # the repaired text in the output format (the upstream text itself when nothing changed)
    calls: list[ToolCall]
    actions: list[Finding] = field(default_factory=list)  # the repairs made
    before: GateReport = field(default_factory=GateReport)  # the gate on the upstream text, in its own format
    after: GateReport = field(default_factory=GateReport)  # the gate on ``text``, in the output format

    @property
    def changed(self) -> bool:
        return bool(self.actions)


def spec_is_closed(spec: Any) -> bool:
    """Whether a tool spec says it lists every parameter exactly: ``additionalProperties: false`` or OpenAI's
    ``strict: true`` (both kept in ``ToolSpec.extra``)."""
    extra = getattr(spec, "extra", None) or {}
    return extra.get("additionalProperties") is False or extra.get("strict") is True


normalise_name = functools.lru_cache(maxsize=4096)(normalise)  # getWeather, get_weather, Get-Weather: one name


def snap(name: str, candidates: Sequence[str], cutoff: float, *, count: Count | None = None) -> str | None:
    """The candidate ``name`` was meant to be: its one normalised equal, else the most similar one when it scores at
    least ``cutoff`` and :data:`MARGIN` more than the runner-up; ``None`` otherwise. One comparison per candidate is
    taken from ``count``."""
    if not candidates or len(name) > MAX_SNAP_NAME_CHARS or (count is not None and not count.spend(len(candidates))):
        return None
    key = normalise_name(name)
    exact = [c for c in candidates if normalise_name(c) == key]
    if exact or not key:
        return exact[0] if len(exact) == 1 else None
    scored = sorted(
        ((fuzz.ratio(key, normalise_name(c)), c) for c in candidates if len(c) <= MAX_SNAP_NAME_CHARS),
        key=lambda t: -t[0],
    )
    if not scored or scored[0][0] < cutoff or (len(scored) > 1 and scored[0][0] - scored[1][0] < MARGIN):
        return None
    return scored[0][1]


def _words(name: str) -> list[str]:
    """The lower-case words of a name, split at separators and camelCase humps."""
    return [w for w in _NON_ALNUM.split(_CAMEL.sub("_", name).lower()) if w]


@functools.lru_cache(maxsize=4096)
def name_words(name: str) -> frozenset[str]:
    """The words of a name with a plural ``s`` dropped (``scienceFacts.getWeights`` → ``{"science", "fact", "get",
    "weight"}``)."""
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in _words(name))


def snap_by_arguments(
    name: str, arguments: Mapping[str, Any], tools: Mapping[str, Any], *, count: Count | None = None,
    identifiers_only: bool = False,
) -> str | None:
    """The one offered tool that the call ``name(arguments)`` fits: its name adds or drops words of ``name``
    (``math.gcd_info`` → ``math.gcd``; a changed word is never enough), it declares every argument passed and all its
    required parameters are passed; else ``None`` (also for a call with no argument). ``identifiers_only``: ``name``
    must look like a tool name (a call read in another format than its own may carry that format's markers).
    One comparison per offered tool is taken from ``count``."""
    if not arguments or len(name) > MAX_SNAP_NAME_CHARS or (identifiers_only and not _IDENTIFIER.fullmatch(name)):
        return None
    if count is not None and not count.spend(len(tools)):
        return None
    words = name_words(name)
    fits = []
    for tool in tools:
        if len(tool) > MAX_SNAP_NAME_CHARS:
            continue
        tool_words = name_words(tool)
        if not (words <= tool_words or tool_words <= words):
            continue
        spec = tools[tool]
        params = getattr(spec, "params", None) or {}
        required = getattr(spec, "required", None) or ()
        if all(k in params for k in arguments) and all(r in arguments for r in required):
            fits.append(tool)
            if len(fits) > 1:
                return None
    return fits[0] if fits else None


def _word_breaks(name: str) -> set[int]:
    """Where a name's words end, as offsets into its normalised form (``sort_by`` and ``sortBy``: ``{4}``)."""
    return set(accumulate(len(w) for w in _words(name)[:-1]))


def is_misspelling(written: str, declared: str) -> bool:
    """Whether ``written`` is one slip away from ``declared``: normalised forms of at least four characters with the
    same digits, one edit apart (``sotr_by``), or equal with a separator moved inside a word (``fullt_erm_only``), or
    a markdown-escaped ``_``. Another spelling convention (``sortBy``, ``zipcode`` for ``zip_code``) is not a slip."""
    if max(len(written), len(declared)) > MAX_SNAP_NAME_CHARS:
        return False
    if "\\_" in written and written.replace("\\_", "_") == declared:
        return True
    a, b = normalise_name(written), normalise_name(declared)
    if a == b:
        wa, wb = _word_breaks(written), _word_breaks(declared)
        return len(a) >= 4 and not (wa <= wb or wb <= wa)
    if min(len(a), len(b)) < 4 or re.findall(r"\d+", a) != re.findall(r"\d+", b):
        return False
    return DamerauLevenshtein.distance(a, b) == 1


def _pair_names(
    unknown: Sequence[str], free: Sequence[str], required: set[str], cutoff: float, count: Count | None = None
) -> dict[str, str]:
    """Unknown parameter names paired with free declared ones, best pairs first, each name used once, an ambiguous
    pair left out (at most MAX_SNAP_PARAMS unknown names, and as many comparisons as ``count`` has left)."""
    pairs: list[tuple[float, int, str, str]] = []
    unknown = [u for u in unknown if len(u) <= MAX_SNAP_NAME_CHARS][:MAX_SNAP_PARAMS]
    free = [p for p in free if len(p) <= MAX_SNAP_NAME_CHARS]
    if count is not None:
        unknown = unknown[: max(count.left, 0) // max(len(free), 1)]
        count.left -= len(unknown) * len(free)
    for u in unknown:
        ku = normalise_name(u)
        for p in free:
            kp = normalise_name(p)
            score = 100.0 if ku and ku == kp else fuzz.ratio(ku, kp)
            if score >= cutoff:
                pairs.append((score, 1 if p in required else 0, u, p))
    pairs.sort(key=lambda t: (-t[0], -t[1]))
    taken_u: set[str] = set()
    taken_p: set[str] = set()
    out: dict[str, str] = {}
    for i, (score, _, u, p) in enumerate(pairs):
        if u in taken_u or p in taken_p:
            continue
        rivals = [s for s, _, u2, p2 in pairs[i + 1 :] if (u2 == u and p2 not in taken_p) or (p2 == p and u2 not in taken_u)]
        if score < 100.0 and rivals and score - max(rivals) < MARGIN:
            continue  # ambiguous: left for the model
        out[u] = p
        taken_u.add(u)
        taken_p.add(p)
    return out


def coerce_value(
    param: Any, value: Any, depth: int = 0, *, strings: bool = False, count: Count | None = None
) -> Any:
    """``value`` converted to the parameter's declared type where that is lossless and unambiguous, else ``value``
    itself (the same object). ``strings``: value style "text", so a number becomes its text. At most as many values
    as ``count`` has left are looked at."""
    if count is None:
        count = Count(MAX_COERCED_VALUES)
    if param is None or depth > MAX_DEPTH or not count.take() or excused(param, value):
        return value
    ptype = getattr(param, "type", None)
    if strings:
        if ptype is None:
            return value
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, int, float)):
            value = value[0]  # ["Paris"]: the one item
        finite = not isinstance(value, float) or math.isfinite(value)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return str(value) if number and finite else value
    if not type_matches(ptype, value):
        value = _convert(ptype, value)
    enum = getattr(param, "enum", None)
    if enum:
        value = _snap_enum(list(enum), value)
    if isinstance(value, list):
        items = getattr(param, "items", None)
        if items is not None and count.left > 0:
            new = [coerce_value(items, v, depth + 1, count=count) for v in value]
            if any(a is not b for a, b in zip(new, value)):
                value = new
    elif isinstance(value, Mapping):
        props = getattr(param, "properties", None) or {}
        if props and count.left > 0:
            new_d = {k: coerce_value(props[k], v, depth + 1, count=count) if k in props else v
                     for k, v in value.items()}
            if any(new_d[k] is not value[k] for k in value):
                value = new_d
    return value


def decode_value(param: Any, value: Any) -> Any:
    """``value`` decoded when it is text standing for the boolean, array or object the schema declares (``"true"``,
    ``'["a", "b"]'``); otherwise ``value`` itself (the same object)."""
    ptype = getattr(param, "type", None)
    if ptype not in ("boolean", "array", "object") or not isinstance(value, str) or is_reference(value):
        return value
    return _convert(ptype, value)


def _number(text: str) -> int | float | None:
    """The finite number ``text`` writes (an integer as ``int``), or None."""
    s = text.strip()
    if _INT_TEXT.fullmatch(s):
        return int(s)
    f = float(s) if _NUM_TEXT.fullmatch(s) else math.inf
    return f if math.isfinite(f) else None


def _convert(ptype: str | None, value: Any) -> Any:
    """``value`` as the JSON type ``ptype`` where the conversion loses nothing, else ``value``."""
    if isinstance(value, list) and len(value) == 1 and ptype in ("string", "integer", "number", "boolean"):
        if isinstance(value[0], list):
            return value  # one level of list is unwrapped, no more
        inner = value[0] if type_matches(ptype, value[0]) else _convert(ptype, value[0])
        return inner if type_matches(ptype, inner) else value  # ["Paris"] for a string: the one item
    if ptype in ("integer", "number") and isinstance(value, str):
        n = _number(value)
        if ptype == "number" and n is not None:
            return n
        if n is not None and (isinstance(n, int) or (n.is_integer() and abs(n) < 2**53)):
            return int(n)
    elif ptype == "integer" and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    elif ptype == "boolean" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    elif ptype == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, int) or math.isfinite(value):
            return str(value) if isinstance(value, int) else repr(value)
    elif ptype in ("array", "object") and isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if json_type(parsed) == ptype:
            return parsed
    return value


def _snap_enum(enum: list[Any], value: Any) -> Any:
    """The enum member ``value`` writes otherwise: a number as a text member or text as a number member, exactly,
    or a text member with another spelling (:func:`enum_spelling`); else ``value``."""
    if in_enum(value, enum) or not isinstance(value, (int, float, str)) or isinstance(value, bool):
        return value
    texts = [e for e in enum if isinstance(e, str)]
    if isinstance(value, str) and texts:
        return enum_spelling(value, texts)
    if isinstance(value, str):
        matches = [e for e in enum if isinstance(e, (int, float)) and not isinstance(e, bool)
                   and _number_text(e) == value.strip()]
    else:
        matches = [e for e in texts if e.strip() == _number_text(value)]
    return matches[0] if len(matches) == 1 else value


def enum_spelling(value: str, members: Sequence[str]) -> str:
    """The one member that ``value`` spells with another case, spacing or punctuation (``"in progress"`` →
    ``"IN_PROGRESS"``), with the same numbers (``"-1"`` is not ``"1"``); else ``value``."""
    key = normalise_name(value)
    if not key:
        return value
    numbers = _NUMBERS.findall(value)
    hits = [m for m in members if normalise_name(m) == key and _NUMBERS.findall(m) == numbers]
    return hits[0] if len(hits) == 1 else value


def _number_text(x: float) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


def repair_call(
    call: ToolCall, index: int, tools: Mapping[str, Any], actions: list[Finding], *, strings: bool = False,
    trust_spec: bool = False, count: Count | None = None, compare: Count | None = None, misread: bool = False,
    paired: dict[tuple, dict[str, str]] | None = None, snapped: dict[str | tuple[str, ...], str | None] | None = None,
) -> ToolCall:
    """One call with its tool name, parameter names and values repaired against ``tools`` (as far as the spec is
    believed: see the module docstring), each repair appended to ``actions``. ``count``: values still to coerce;
    ``compare``: name comparisons left; ``strings``: value style "text"; ``misread``: the call was read in another
    format than its own; ``paired``: the parameter renames already settled for this call list; ``snapped``: its tool
    names already snapped, alone and with their argument names (:func:`_snap_tool`)."""
    n_before = len(actions)
    name = _snap_tool(call, index, tools, actions, compare, misread, snapped=snapped)
    spec = tools.get(name)
    if spec is None:
        return call if name == call.name else replace(call, name=name)
    params: Mapping[str, Any] = getattr(spec, "params", None) or {}
    required = tuple(getattr(spec, "required", ()) or ())
    args = dict(call.arguments)
    failing = name != call.name or any(r not in args for r in required)
    believe = failing or trust_spec or spec_is_closed(spec)
    unknown = [k for k in args if k not in params]
    if unknown and params:
        free = [p for p in params if p not in args]
        key = (tuple(unknown), tuple(free), required, believe)
        renames = paired.get(key) if paired is not None else None
        if renames is None:
            whole = compare is None or compare.left >= len(unknown) * len(free)  # (every pair compared)
            renames = _pair_names(unknown, free, set(required), PARAM_CUTOFF, compare)
            if not believe:
                renames = {u: p for u, p in renames.items() if is_misspelling(u, p)}
            if paired is not None and whole:
                paired[key] = renames
        args = {renames.get(k, k): v for k, v in args.items()}
        for old, new in renames.items():
            actions.append(action("snap_param", f"parameter {old!r} -> {new!r}", index, name, new))
    if believe and all(r in args for r in required):  # (an unknown one may hold a missing value: kept till then)
        for k in [k for k in args if k not in params]:
            del args[k]
            actions.append(action("drop_param", f"{name} has no parameter {k!r}; dropped", index, name, k))
    if count is None:
        count = Count(MAX_COERCED_VALUES)
    for k, v in list(args.items()):
        if count.left <= 0:
            break
        if believe or strings:
            new_v = coerce_value(params.get(k), v, strings=strings, count=count)
        else:
            count.take()
            new_v = decode_value(params.get(k), v)
        if new_v is not v:
            args[k] = new_v
            actions.append(action("coerce", f"{k}: {_short(v)} -> {_short(new_v)}", index, name, k))
    if len(actions) == n_before:
        return call
    return ToolCall(name, args, call.outputs, call.step)


def _short(value: Any, limit: int = 60) -> str:
    """A value as JSON for a message, cut to ``limit`` characters (a large or deep value as its bounded preview)."""
    if isinstance(value, str):
        value = value[: limit + 1]
    elif isinstance(value, (list, dict)) and preview(value, limit).endswith("..."):
        return preview(value, limit)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):  # a huge integer
        return preview(value, limit)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def repair_calls(
    calls: Sequence[ToolCall], tools: Iterable[Any] | Mapping[str, Any] | None, *, fmt: str | None = None,
    trust_spec: bool = False, text_values: bool = False, misread: bool = False,
) -> tuple[list[ToolCall], list[Finding]]:
    """Tier-1 repair of a call list: names, parameters and values (when tools are known; only tool names in a
    format that writes names only), then dependency order."""
    actions: list[Finding] = []
    index = tool_index(tools)
    out = list(calls)
    if index:
        names_only = fmt is not None and formats.get(fmt).names_only
        count, compare = Count(MAX_COERCED_VALUES), Count(MAX_NAME_COMPARISONS)
        paired: dict[tuple, dict[str, str]] = {}
        snapped: dict[str | tuple[str, ...], str | None] = {}
        for i, c in enumerate(calls):
            if snapped.get(c.name, "") is None and (
                names_only or not c.arguments or snapped.get((c.name, *c.arguments), "") is None
            ):  # (a name no tool has, snapped to none before, alone and with these argument names: as it is)
                continue
            if names_only:
                name = _snap_tool(c, i, index, actions, compare, by_arguments=False, snapped=snapped)
                out[i] = c if name == c.name else replace(c, name=name)
            else:
                out[i] = repair_call(c, i, index, actions, strings=text_values, trust_spec=trust_spec, count=count,
                                     compare=compare, misread=misread, paired=paired, snapped=snapped)
    order = dependency_order(out)
    if order is not None and order != list(range(len(out))):
        actions.append(action("reorder", f"calls reordered by their references: {order}"))
        out = [out[i] for i in order]
    return out, actions


def _snap_tool(
    call: ToolCall, index: int, tools: Mapping[str, Any], actions: list[Finding], compare: Count | None,
    misread: bool = False, *, by_arguments: bool = True, snapped: dict[str | tuple[str, ...], str | None] | None = None,
) -> str:
    """The tool ``call`` meant: its name, else the offered tool it snaps to (:func:`snap`, then, ``by_arguments``,
    :func:`snap_by_arguments`), recorded in ``actions``; none once the call list's comparisons run short.
    ``snapped``: the names of this call list :func:`snap` answered, and the names with argument names
    :func:`snap_by_arguments` answered, with their answers (each is asked once)."""
    name, snapped = call.name, {} if snapped is None else snapped
    if name in tools or (compare is not None and compare.left < len(tools)):
        return name
    if name not in snapped:
        snapped[name] = snap(name, list(tools), TOOL_CUTOFF, count=compare)
    hit, why = snapped[name], ""
    if hit is None and by_arguments and call.arguments:
        key = (name, *call.arguments)
        if key not in snapped:
            snapped[key] = snap_by_arguments(name, call.arguments, tools, count=compare,
                                             identifiers_only=misread) or None
        hit, why = snapped[key], " (the one tool whose parameters fit the call's arguments)"
    if hit is None:
        return name
    actions.append(action("snap_tool", f"tool {name!r} -> {hit!r}{why}", index, hit))
    return hit


def cut_call_index(before: GateReport, cut_off: bool = False) -> int | None:
    """The index (in ``before.calls``) of the call the text stops inside when it is to be left out: the text stops
    there mid-value, or anywhere in it when ``cut_off`` (the upstream hit its token limit)."""
    cut = before.cut
    if cut is None or cut.index is None or not 0 <= cut.index < len(before.calls) or (cut.clean and not cut_off):
        return None
    return cut.index


def repair_parsed(
    before: GateReport, text: str, fmt: str, tools: Iterable[Any] | Mapping[str, Any] | None, *,
    out_fmt: str | None = None, trust_spec: bool = False, text_values: bool = False, cut_off: bool = False,
    offered: Mapping[str, Any] | None = None, unknown_tools: str = "keep",
) -> Tier1:
    """Tier 1 given the gate's report on ``text`` (in ``fmt``): the calls repaired, rendered in ``out_fmt`` (default
    ``fmt``) and gated again (as they are, or read back from the text: :func:`reads_back`); a text that needs no repair
    comes back verbatim. ``trust_spec``: every spec is exact; ``text_values``: value style "text"; ``cut_off``: the
    upstream hit its token limit (:func:`cut_call_index`); ``offered``: the tools' parameters, to read the output with
    when it is read; ``unknown_tools``: one of :data:`UNKNOWN_TOOLS`."""
    out_fmt = out_fmt or fmt
    if not before.calls or (not before.diagnostics and out_fmt == fmt and not before.loose):
        # no call, or the gate found each call, every argument checked, as its spec declares it: nothing to repair
        return Tier1(text, before.calls, [], before, before)
    index = tool_index(tools)
    actions: list[Finding] = []
    source = list(before.calls)
    dropped = cut_call_index(before, cut_off)
    if dropped is not None:
        gone = source.pop(dropped)
        actions.append(
            action("drop_cut", f"call #{dropped} ({gone.name}) is where the text was cut off: left out, not completed",
                   dropped, gone.name)
        )
    if not before.strict_ok and source and before.salvaged is not None:
        actions.append(action("salvage", f"read {len(source)} call(s) from text that is not valid {fmt}, where "
                                         f"the model put them: {before.salvaged.describe()}"))
    elif not before.strict_ok and source:
        actions.append(action("parse_repair", f"recovered {len(source)} call(s) from text that is not valid {fmt}"))
    if out_fmt != fmt and source:
        actions.append(action("normalise_format", f"rendered in {out_fmt} (upstream was {fmt})"))
    calls, call_actions = repair_calls(source, tools, fmt=out_fmt, trust_spec=trust_spec, text_values=text_values,
                                       misread=out_fmt != fmt)
    actions.extend(call_actions)
    unknown = [i for i, c in enumerate(calls) if c.name not in index] if unknown_tools == "drop" and index else []
    for i in unknown:
        actions.append(action("drop_unknown_tool", f"call #{i} ({calls[i].name}) names no offered tool: dropped", i,
                              calls[i].name))
    if unknown and len(unknown) == len(calls):
        none = check_reading(Reading("", out_fmt, [], strict_ok=True), index)  # (no call is a valid answer)
        return Tier1(text="", calls=[], actions=actions, before=before, after=none)
    calls = [c for c in calls if c.name in index] if unknown else calls
    if not actions or (not calls and dropped is None):
        return Tier1(text, before.calls, [], before, before)
    try:
        new_text = formats.get(out_fmt).render(calls)
    except formats.RenderError:  # calls the output format cannot write: the upstream stands (without its cut call)
        if dropped is not None:
            return Tier1(text=text, calls=source, actions=actions[:1], before=before, after=before)
        return Tier1(text, before.calls, [], before, before)
    if reads_back(calls, formats.get(out_fmt)):  # (the calls gated as they are: the text reads back as them)
        after = check_reading(Reading(new_text, out_fmt, list(calls), strict_ok=True), index, text_values=text_values)
    else:  # (the text itself read: the format writes fewer or other things than the calls carry)
        after = check_text(new_text, out_fmt, tools, text_values=text_values, offered=offered)
    if (lost := lost_call(before.reading)) is not None:  # (tier 1 cannot put it back)
        after.diagnostics.append(lost)
    return Tier1(text=new_text, calls=calls, actions=actions, before=before, after=after)


def reads_back(calls: Sequence[ToolCall], wire: formats.WireFormat) -> bool:
    """Whether ``calls`` rendered in ``wire`` read back strictly as themselves, arguments in order (the round trip of
    tests/test_formats_roundtrip.py): calls without labels or steps, in a format that writes typed values only."""
    return bool(calls) and type(wire).retype is formats.WireFormat.retype and not (
        wire.names_only or wire.pythonic or wire.outputs or wire.steps or any(
            c.outputs or c.step is not None for c in calls))


def repair_text(
    text: str, fmt: str, tools: Iterable[Any] | Mapping[str, Any] | None, *, out_fmt: str | None = None,
    trust_spec: bool = False, text_values: bool = False, cut_off: bool = False,
) -> Tier1:
    """Tier 1 on one upstream text in ``fmt``: read and gate it, then :func:`repair_parsed`."""
    index = tool_index(tools)
    report = check_text(text, fmt, index, text_values=text_values)
    return repair_parsed(
        report, text, fmt, index, out_fmt=out_fmt, trust_spec=trust_spec, text_values=text_values, cut_off=cut_off
    )
