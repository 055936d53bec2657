"""Tier-1 repair: deterministic, model-free fixes of tool calls, each one recorded as a finding (:func:`action`).

What it fixes (after RETO's two-tier repair, whose first tier is rules only):

- broken JSON, tags and brackets: the wire formats' lenient parsers (``json_repair`` underneath) recover the calls,
  which are then re-rendered (``parse_repair``); a different requested format is rendered too (``normalise_format``);
- tool names snapped to the tool list by normalised equality, then by string similarity above a cutoff with a margin
  over the runner-up, then by words and arguments: the one tool whose name adds or drops words of the written one
  and whose parameters fit the call's arguments (``math.gcd`` for ``math.gcd_info(num1=..., num2=...)``;
  ``snap_tool``);
- parameter names snapped the same way among the tool's parameters not already used (``snap_param``); parameters the
  schema lacks are dropped (``drop_param``);
- values coerced where the schema is explicit: ``"12"`` → ``12`` for integers, ``12`` → ``"12"`` for strings,
  ``["Paris"]`` → ``"Paris"`` for a scalar, ``"true"`` → ``true``, JSON text → array/object, and an enum member
  written with another case, spacing or punctuation (``coerce``);
- nested calls reordered so that every call comes after the calls whose outputs it references: topological order,
  stable for independent calls (``reorder``).

It never invents a value: a missing required parameter stays missing, for the model to fill in; and a call the
text stops inside (cut short mid-value, or any cut call when the caller says the upstream hit its token limit: see
:class:`refiner.formats.Cut`) is left out of the repaired text rather than completed (``drop_cut``): the complete
calls before it are kept, and the cut one is reported, not presented as a call the model wrote.

When the spec is believed (the policy)
    Real tool specs are often incomplete or loose: NESTFUL's spec files omit parameters its gold calls use and its
    gold writes ``"2010"`` for an integer or ``sortBy`` for ``sort_by``; BFCL's gold passes ``False`` where the spec
    declares the string enum ``["True", "False", "dontcare"]``. Tier 1 must never make a correct call wrong, so the
    gate's *soft* findings (unknown parameter, type, enum, range, pattern, length) are not enough on their own to
    change a call. A call's names and values are repaired in full only when one of these holds:

    - the call is *failing*: its tool does not exist (and was snapped to one that does) or a required parameter is
      missing. Such a call cannot run as written, so repairing it cannot break a working call; a parameter name
      snapped to fill the missing one is the typical case, and unknown parameters left over once every required one
      is present are dropped as the residue of that repair;
    - the tool's spec declares itself closed: OpenAI ``strict: true`` or ``additionalProperties: false``, read from
      ``ToolSpec.extra`` (:func:`spec_is_closed`; the spec loader keeps both there);
    - the caller says every spec is exact (``trust_spec=True``; the pipeline's ``Refiner(trust_spec=True)``).

    On any other call only the repairs that no loose spec can contradict are made: a parameter name that is a
    one-slip misspelling of a free declared one (:func:`is_misspelling`: ``sotr_by`` → ``sort_by``, but not the other
    spelling convention ``sortBy``, which real APIs and their spec files do mix), and a value *encoded as text* where
    the schema wants a boolean, array or object (``"true"`` → ``true``, ``'["a"]'`` → ``["a"]``;
    :func:`decode_value`).
    Unknown parameters are kept, numbers and numeric text are not converted either way, one-item lists are not
    unwrapped, enum spellings are not changed: real gold data does each of these where its spec says otherwise.

    Text-level repairs (parsing, tags, the output format) and the dependency reorder always apply, and so does writing
    numbers as text when the caller says its data writes every value as text (value style ``"text"``, e.g. API-Bank's
    gold; :data:`refiner.gate.VALUE_STYLES`). A value that already matches its declared type is otherwise never
    rewritten, in any wire format. Two coercions never happen at all, because they change what a value means: an
    enum value is never replaced by a merely *similar* member (``"5 minutes"`` is not ``"45 minutes"``, ``"openai"``
    is not ``"openapi"``), and a boolean is never turned into text (which text a tool wants for it, ``"true"``,
    ``"True"`` or ``"yes"``, the spec does not say, and BFCL's gold keeps the boolean).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.distance import DamerauLevenshtein

from refiner import formats
from refiner.calls import Count, ToolCall, dependency_order, is_reference, preview
from refiner.formats.reading import Reading, tool_index
from refiner.gate import (  # what the gate accepts, which tier 1 leaves alone, and the gate on tier 1's output
    REPAIR,
    Finding,
    GateReport,
    check_reading,
    check_text,
    is_declared_default,
    json_text,
    json_type,
    type_matches,
)

UNKNOWN_TOOLS = ("keep", "drop")  # what tier 1 does with a call to a tool the request does not offer

# Similarity cutoffs (rapidfuzz ``ratio`` on normalised names, 0..100) and the lead the best candidate needs over
# the second best; chosen on the corruption-recovery test (tests/test_repair_real.py) so that no correct call moves.
# Enum values get no similarity snapping at all (see the module docstring).
TOOL_CUTOFF = 80.0
PARAM_CUTOFF = 75.0
MARGIN = 5.0

_MAX_DEPTH = 32
# Counted bounds (a real call list has a few calls of a few arguments; a 200 KB text can hold 100,000 values):
# names longer than MAX_SNAP_NAME_CHARS are matched exactly only (similarity costs grow with length squared); at
# most MAX_SNAP_PARAMS unknown parameter names of a call are paired with declared ones; at most MAX_COERCED_VALUES
# values (arguments, items, properties) of a call list are coerced; the rest are left as written.
MAX_SNAP_NAME_CHARS = 256
MAX_SNAP_PARAMS = 64
MAX_COERCED_VALUES = 4096
# Name comparisons (a written name against a declared one) per call list: snapping a tool name compares it with
# every tool, pairing parameter names every unknown name with every free parameter.
MAX_NAME_COMPARISONS = 8192
_INT_TEXT = re.compile(r"[+-]?\d{1,30}")
_NUM_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_NUMBERS = re.compile(r"[+-]?\d+(?:[.,]\d+)*")


def action(code: str, message: str, call: int | None = None, tool: str | None = None,
           param: str | None = None) -> Finding:
    """The finding that records one repair tier 1 made (severity ``repair``; ``code``: its kind, see the module
    docstring). ``call`` is the call's index in the output list (None for text-level repairs)."""
    return Finding(code, message, call, tool, param, REPAIR)


@dataclass
class Tier1:
    """Outcome of tier-1 repair on one upstream text."""

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
    ``strict: true`` (both read from ``ToolSpec.extra``)."""
    extra = getattr(spec, "extra", None) or {}
    return extra.get("additionalProperties") is False or extra.get("strict") is True


# ----------------------------------------------------------------------------------------------------------------
# Name snapping


@functools.lru_cache(maxsize=4096)
def normalise_name(name: str) -> str:
    """Lower-case, separators removed: ``getWeather``, ``get_weather`` and ``Get-Weather`` are one name."""
    return _NON_ALNUM.sub("", name.lower())


def snap(
    name: str, candidates: Sequence[str], cutoff: float, margin: float = MARGIN, *, count: Count | None = None
) -> str | None:
    """The candidate ``name`` was meant to be: a unique normalised match, else the most similar one when it scores at
    least ``cutoff`` and leads the runner-up by ``margin``; ``None`` when there is no such candidate."""
    if not candidates:
        return None
    if len(name) > MAX_SNAP_NAME_CHARS:
        return None
    if count is not None:  # one comparison per candidate, from the call list's allowance
        if count.left < len(candidates):
            return None
        count.left -= len(candidates)
    key = normalise_name(name)
    exact = [c for c in candidates if normalise_name(c) == key]
    if len(exact) == 1:
        return exact[0]
    if exact or not key:
        return None
    scored = sorted(
        ((fuzz.ratio(key, normalise_name(c)), c) for c in candidates if len(c) <= MAX_SNAP_NAME_CHARS),
        key=lambda t: -t[0],
    )
    if not scored:
        return None
    best_score, best = scored[0]
    if best_score < cutoff:
        return None
    if len(scored) > 1 and best_score - scored[1][0] < margin:
        return None
    return best


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_IDENTIFIER = re.compile(r"[^\W\d][\w.\-]*")
_WORD_SEP = re.compile(r"[^0-9a-z]+")


@functools.lru_cache(maxsize=4096)  # (a long call list names the same few tools again and again)
def name_words(name: str) -> frozenset[str]:
    """The lower-case words of a name, split at separators and camelCase humps, a plural ``s`` dropped
    (``scienceFacts.getWeights`` → ``{"science", "fact", "get", "weight"}``)."""
    words = _WORD_SEP.split(_CAMEL.sub("_", name).lower())
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words if w)


def snap_by_arguments(
    name: str, arguments: Mapping[str, Any], tools: Mapping[str, Any], *, count: Count | None = None,
    identifiers_only: bool = False,
) -> str | None:
    """The tool a call to the unknown tool ``name`` meant, when its name and arguments both say so: the one offered
    tool whose name has only words of ``name`` or ``name`` only words of it (:func:`name_words`: ``math.gcd_info`` →
    ``math.gcd``, ``get_weather`` → ``get_weather_forecast``), that declares every argument the call passes and has
    every required parameter among them; ``None`` when the call passes no argument, or no tool, or more than one,
    fits. A changed word is never enough (``DeleteReminder`` is not ``AddReminder``, whatever their parameters).
    ``identifiers_only``: ``name`` must look like a tool name (letters, digits, ``_``, ``.``, ``-``), for calls read
    from a text in another format than its own, where a name with the format's markers in it
    (``commentary to=functions.get_news <|constrain|>json`` from a gpt-oss text read as Mistral's) comes from a
    misreading that may have lost other calls: it is left to the model.
    One comparison per offered tool, from ``count``'s allowance (``None`` when it has too few left); names longer
    than :data:`MAX_SNAP_NAME_CHARS` are not compared."""
    if not arguments or len(name) > MAX_SNAP_NAME_CHARS or (identifiers_only and not _IDENTIFIER.fullmatch(name)):
        return None
    if count is not None:
        if count.left < len(tools):
            return None
        count.left -= len(tools)
    words = name_words(name)
    fits = []
    for tool in tools:
        if len(tool) > MAX_SNAP_NAME_CHARS:
            continue
        tool_words = name_words(tool)
        if not (words <= tool_words or tool_words <= words):
            continue
        spec = tools[tool]  # (read only for the tools whose names fit)
        params = getattr(spec, "params", None) or {}
        required = getattr(spec, "required", None) or ()
        if all(k in params for k in arguments) and all(r in arguments for r in required):
            fits.append(tool)
            if len(fits) > 1:
                return None
    return fits[0] if fits else None


def _word_breaks(name: str) -> set[int]:
    """Where a name's words end, as offsets into its normalised form (``sort_by`` and ``sortBy``: ``{4}``)."""
    words = [w for w in re.split(r"[^0-9a-z]+", _CAMEL.sub("_", name).lower()) if w]
    breaks, at = set(), 0
    for w in words[:-1]:
        at += len(w)
        breaks.add(at)
    return breaks


def is_misspelling(written: str, declared: str) -> bool:
    """Whether ``written`` is one slip away from ``declared``: their normalised forms (:func:`normalise_name`) differ
    by exactly one inserted, dropped, replaced or swapped character, both have at least four characters, and they
    hold the same digits; or the same letters with a separator moved inside a word (``fullt_erm_only`` for
    ``full_term_only``). Names that differ only in case or separators between the same words (``sortBy`` /
    ``sort_by``), or by words joined or split (``zipcode`` / ``zip_code``), are two spelling conventions, not a slip
    (a markdown-escaped name, ``detail\\_level`` for ``detail_level``, is a slip);
    ``min_price`` / ``max_price`` are two slips apart; ``line1`` / ``line2`` differ in a digit."""
    if max(len(written), len(declared)) > MAX_SNAP_NAME_CHARS:
        return False
    if "\\_" in written and written.replace("\\_", "_") == declared:  # markdown-escaped: detail\_level
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
    """Assigns unknown parameter names to free schema parameters, best pairs first, each used once (at most
    MAX_SNAP_PARAMS unknown names, and as many comparisons as ``count`` has left)."""
    pairs: list[tuple[float, int, str, str]] = []
    unknown = [u for u in unknown if len(u) <= MAX_SNAP_NAME_CHARS][:MAX_SNAP_PARAMS]
    free = [p for p in free if len(p) <= MAX_SNAP_NAME_CHARS]
    if count is not None:
        fits = max(count.left, 0) // max(len(free), 1)
        unknown = unknown[:fits]
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
            continue  # ambiguous: leave it for the model
        out[u] = p
        taken_u.add(u)
        taken_p.add(p)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Values


def coerce_value(
    param: Any, value: Any, depth: int = 0, *, strings: bool = False, count: Count | None = None
) -> Any:
    """``value`` converted to the parameter's declared type where the conversion is lossless and unambiguous;
    otherwise ``value`` itself (the same object). ``strings``: every value is written as text (value style "text"),
    so a number becomes its text; a boolean stays a boolean (which text a tool wants for it is not in the spec).
    At most as many values as ``count`` has left (:data:`MAX_COERCED_VALUES` by default) are looked at."""
    if count is None:
        count = Count(MAX_COERCED_VALUES)
    if param is None or depth > _MAX_DEPTH or not count.take() or is_reference(value):
        return value
    ptype = getattr(param, "type", None)
    if is_declared_default(param, value):
        return value
    if strings:
        if ptype is None:
            return value
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, int, float)):
            value = value[0]  # ["Paris"]: the one item
        finite = not isinstance(value, float) or math.isfinite(value)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return json_text(value) if number and finite else value  # a boolean's text is not in the spec: kept
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
            new_d = {
                k: coerce_value(props[k], v, depth + 1, count=count) if k in props else v for k, v in value.items()
            }
            if any(new_d[k] is not value[k] for k in value):
                value = new_d
    return value


def decode_value(param: Any, value: Any) -> Any:
    """``value`` decoded when it is text standing for the boolean, array or object the schema declares (``"true"``,
    ``"False"``, ``'["a", "b"]'``, ``'{"k": 1}'``); otherwise ``value`` itself (the same object)."""
    ptype = getattr(param, "type", None)
    if ptype not in ("boolean", "array", "object") or not isinstance(value, str) or is_reference(value):
        return value
    return _convert(ptype, value)


def _convert(ptype: str | None, value: Any) -> Any:
    if isinstance(value, list) and len(value) == 1 and ptype in ("string", "integer", "number", "boolean"):
        if isinstance(value[0], list):
            return value  # one level of list is unwrapped, no more
        inner = value[0] if type_matches(ptype, value[0]) else _convert(ptype, value[0])
        return inner if type_matches(ptype, inner) else value  # ["Paris"] for a string: the one item
    if ptype == "integer":
        if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
            return int(value.strip())
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _NUM_TEXT.fullmatch(value.strip()):
            f = float(value.strip())
            if math.isfinite(f) and f.is_integer() and abs(f) < 2**53:
                return int(f)
    elif ptype == "number":
        if isinstance(value, str):
            s = value.strip()
            if _INT_TEXT.fullmatch(s):
                return int(s)
            if _NUM_TEXT.fullmatch(s):
                f = float(s)
                if math.isfinite(f):
                    return f
    elif ptype == "boolean":
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    elif ptype == "string":
        if isinstance(value, bool):
            return value  # which text a tool wants for a boolean is not in the spec (see the module docstring)
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float) and math.isfinite(value):
            return repr(value)
    elif ptype in ("array", "object"):
        if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                return value
            if json_type(parsed) == ptype:
                return parsed
    return value


def _snap_enum(enum: list[Any], value: Any) -> Any:
    try:
        if any(value == e and json_type(value) == json_type(e) for e in enum):
            return value
    except Exception:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        matches = [e for e in enum if isinstance(e, str) and e.strip() == _number_text(value)]
        return matches[0] if len(matches) == 1 else value
    if not isinstance(value, str):
        return value
    text_enum = [e for e in enum if isinstance(e, str)]
    if not text_enum:
        numeric = [e for e in enum if isinstance(e, (int, float)) and not isinstance(e, bool)]
        matches = [e for e in numeric if _number_text(e) == value.strip()]
        return matches[0] if len(matches) == 1 else value
    return enum_spelling(value, text_enum)


def enum_spelling(value: str, members: Sequence[str]) -> str:
    """The one member that ``value`` spells with another case, spacing or punctuation (``"3D"`` → ``"3d"``,
    ``"in progress"`` → ``"IN_PROGRESS"``), else ``value``. Numbers must stay exactly as written: ``"-1"`` is not
    ``"1"`` and ``"1.5"`` is not ``"15"``."""
    key = normalise_name(value)
    if not key:
        return value
    numbers = _NUMBERS.findall(value)
    hits = [m for m in members if normalise_name(m) == key and _NUMBERS.findall(m) == numbers]
    return hits[0] if len(hits) == 1 else value


def _number_text(x: float) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


# ----------------------------------------------------------------------------------------------------------------
# Calls


def repair_call(
    call: ToolCall,
    index: int,
    tools: Mapping[str, Any],
    actions: list[Finding],
    *,
    strings: bool = False,
    trust_spec: bool = False,
    count: Count | None = None,
    compare: Count | None = None,
    misread: bool = False,
    paired: dict[tuple, dict[str, str]] | None = None,
) -> ToolCall:
    """One call with its tool name, parameter names and values repaired against ``tools``; appends what it did
    (at most as many values coerced as ``count`` has left, :data:`MAX_COERCED_VALUES` by default, and as many name
    comparisons as ``compare`` has left, :data:`MAX_NAME_COMPARISONS` by default).

    Names and values are fully repaired only on a failing call (tool snapped, or a required parameter missing) or
    against a spec that is closed or trusted (``trust_spec``); any other call gets only misspelling snaps and decoded
    values (see the module docstring). Unknown parameters are dropped only
    when no required one is missing (else one of them may be the missing value under another name, which the model
    can still use). ``strings``: value style "text" (see :data:`refiner.gate.VALUE_STYLES`). ``misread``: the call
    was read from a text in another format than its own (see :func:`snap_by_arguments`). ``paired``: the parameter
    renames already settled for the call list, by the names written and the names free (a long list repeats its
    misspellings: each is compared once)."""
    n_before = len(actions)
    name = _snap_tool(call, index, tools, actions, compare, misread)
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
        if renames:
            args = {renames.get(k, k): v for k, v in args.items()}
            for old, new in renames.items():
                actions.append(action("snap_param", f"parameter {old!r} -> {new!r}", index, name, new))
    if believe and all(r in args for r in required):
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
    return ToolCall.trusted(name, args, call.outputs, call.step)  # (args: a dict built here; name: a str)


def _short(value: Any, limit: int = 60) -> str:
    """A value as JSON for a message, cut to ``limit`` characters; a large or deep value as its bounded
    :func:`~refiner.calls.preview` (its cost does not grow with the value)."""
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
    calls: Sequence[ToolCall],
    tools: Iterable[Any] | Mapping[str, Any] | None,
    *,
    fmt: str | None = None,
    trust_spec: bool = False,
    text_values: bool = False,
    misread: bool = False,
) -> tuple[list[ToolCall], list[Finding]]:
    """Tier-1 repair of a call list: names, parameters, values (when tools are known; see :func:`repair_call` for
    when a call's spec is believed, and ``misread``), then dependency order."""
    actions: list[Finding] = []
    index = tool_index(tools)
    out = list(calls)
    if index:
        names_only = fmt is not None and formats.get(fmt).names_only
        fixed: list[ToolCall] = []
        count = Count(MAX_COERCED_VALUES)
        compare = Count(MAX_NAME_COMPARISONS)
        paired: dict[tuple, dict[str, str]] = {}
        for i, c in enumerate(out):
            if names_only:
                name = _snap_tool(c, i, index, actions, compare, by_arguments=False)
                fixed.append(c if name == c.name else replace(c, name=name))
            else:
                fixed.append(
                    repair_call(c, i, index, actions, strings=text_values, trust_spec=trust_spec, count=count,
                                compare=compare, misread=misread, paired=paired)
                )
        out = fixed
    order = dependency_order(out)
    if order is not None and order != list(range(len(out))):
        actions.append(action("reorder", f"calls reordered by their references: {order}"))
        out = [out[i] for i in order]
    return out, actions


def _snap_tool(
    call: ToolCall, index: int, tools: Mapping[str, Any], actions: list[Finding], compare: Count | None,
    misread: bool = False, *, by_arguments: bool = True,
) -> str:
    """The tool ``call`` meant: its name, else the offered tool it snaps to (:func:`snap`, then, ``by_arguments``,
    :func:`snap_by_arguments`), recorded in ``actions``. A name snaps only while the call list's comparisons last: one
    per offered tool, so with too few left neither snap can compare (and the names are not even listed)."""
    name = call.name
    if name in tools or (compare is not None and compare.left < len(tools)):
        return name
    hit, why = snap(name, list(tools), TOOL_CUTOFF, count=compare), ""
    if hit is None and by_arguments:
        hit = snap_by_arguments(name, call.arguments, tools, count=compare, identifiers_only=misread) or None
        why = " (the one tool whose parameters fit the call's arguments)"
    if hit is None:
        return name
    actions.append(action("snap_tool", f"tool {name!r} -> {hit!r}{why}", index, hit))
    return hit


# ----------------------------------------------------------------------------------------------------------------
# Texts


def cut_call_index(before: GateReport, cut_off: bool = False) -> int | None:
    """The index (in ``before.calls``) of the call the text stops inside, when it is to be left out: the text stops
    there mid-value, or ``cut_off`` (the upstream is known to have hit its token limit) and it stops there at all."""
    cut = before.cut
    if cut is None or cut.index is None or not 0 <= cut.index < len(before.calls) or (cut.clean and not cut_off):
        return None
    return cut.index


def repair_parsed(
    before: GateReport,
    text: str,
    fmt: str,
    tools: Iterable[Any] | Mapping[str, Any] | None,
    *,
    out_fmt: str | None = None,
    trust_spec: bool = False,
    text_values: bool = False,
    cut_off: bool = False,
    offered: Mapping[str, Any] | None = None,
    unknown_tools: str = "keep",
) -> Tier1:
    """Tier 1 given the gate's report on ``text`` (in ``fmt``): repaired calls rendered in ``out_fmt`` (default
    ``fmt``), gated again. A strictly valid text whose calls need no repair is returned verbatim. ``trust_spec``:
    treat every tool spec as exact (see the module docstring); ``text_values``: value style "text"; ``cut_off``:
    the upstream is known to have stopped at its token limit, so a call the text stops inside is left out even when
    only its closing brackets are missing (:func:`cut_call_index`); ``offered``: the tools' parameters, for the
    reading of the output (:func:`refiner.gate.check_text`); ``unknown_tools``: ``"keep"`` or ``"drop"`` a call to a
    tool the request does not offer, once names near an offered one are snapped (:data:`UNKNOWN_TOOLS`; with every
    call dropped the text is empty)."""
    out_fmt = out_fmt or fmt
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
    index = tool_index(tools)
    unknown = [i for i, c in enumerate(calls) if c.name not in index] if unknown_tools == "drop" and index else []
    for i in unknown:
        actions.append(action("drop_unknown_tool", f"call #{i} ({calls[i].name}) names no offered tool: dropped", i,
                              calls[i].name))
    if unknown and len(unknown) == len(calls):
        none = check_reading(Reading("", out_fmt, [], strict_ok=True), index)  # (no call is a valid answer)
        return Tier1(text="", calls=[], actions=actions, before=before, after=none)
    calls = [c for i, c in enumerate(calls) if i not in unknown] if unknown else calls
    if not actions or (not calls and dropped is None):
        return Tier1(text=text, calls=list(before.calls), actions=[], before=before, after=before)
    try:
        new_text = formats.get(out_fmt).render(calls)
    except formats.RenderError:  # calls the output format cannot write (a tool name with spaces in a pythonic
        # format, say): nothing is changed, the gate's report on the upstream stands and the model sees it
        if dropped is not None:  # (but the cut call is still not one of the calls read)
            return Tier1(text=text, calls=source, actions=actions[:1], before=before, after=before)
        return Tier1(text=text, calls=list(before.calls), actions=[], before=before, after=before)
    after = check_text(new_text, out_fmt, tools, text_values=text_values, offered=offered)
    return Tier1(text=new_text, calls=calls, actions=actions, before=before, after=after)


def repair_text(
    text: str,
    fmt: str,
    tools: Iterable[Any] | Mapping[str, Any] | None,
    *,
    out_fmt: str | None = None,
    trust_spec: bool = False,
    text_values: bool = False,
    cut_off: bool = False,
) -> Tier1:
    """Tier 1 on one upstream text in ``fmt``: parse, gate, repair, render, gate again (options: see
    :func:`repair_parsed`)."""
    index = tool_index(tools)
    report = check_text(text, fmt, index, text_values=text_values)
    return repair_parsed(
        report, text, fmt, index, out_fmt=out_fmt, trust_spec=trust_spec, text_values=text_values, cut_off=cut_off
    )
