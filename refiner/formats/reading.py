"""One reading of a request's upstream text: the format it is read in, and the calls it holds.

    got = read_upstream(text, wanted=None, tools=index)
    got.fmt, got.out_fmt, got.calls, got.strict_ok, got.strict_reason, got.text_cut, got.cut, got.salvaged

The text's reasoning is split off once, it is detected at most once and its markers searched once; it is read
strictly at most once per format (``tried`` keeps the readings by format), leniently once in the format it is read
in, and salvage (:mod:`refiner.formats.salvage`) takes that reading for the whole text. A text in which nothing
could start a call (:func:`could_hold_calls`) gets no salvage, and in the default format no lenient read.

Choosing the format: the result is written in the requested format (else the refiner's, else the upstream's). The
upstream is read in the requested format when it is strictly valid there, else in the detected format when strictly
valid in it (and the text does not open with the requested one's markers) or (broken) carries that format's tags and
none of the requested one's, else in the requested one, leniently; a text stopping inside the requested format's calls
is read in it. With no format asked for and none detected, the answer takes the dialect salvage found the calls in."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import MAX_LENIENT_CHARS, Cut, FormatError, Lenient, get, marker_positions, marker_table
from refiner.formats.detect import Sniffed, Strict, detect_with_calls, strict_reading
from refiner.formats.reasoning import read
from refiner.formats.salvage import Salvage, is_offered, salvage
from refiner.formats.text import reasoning_offset, skip_ws, strip_reasoning
from refiner.specs.catalog import CatalogParams, ToolCatalog

DEFAULT_FORMAT = "hermes"  # when neither the request nor the refiner names one and detection finds none
_PLAUSIBLE_NAME = re.compile(r"[^\W\d][\w.\-]*")


@dataclass
class Reading:
    """What one text holds, read in one format. ``strict_reason``: why the text is not valid in ``fmt`` (None when
    it is); ``text_cut``: where the text stops inside a call, as ``fmt`` read it; ``cut``: the same for ``calls``;
    ``mended``: the reader restored one lost or doubled character and read the whole text with it; ``salvaged``:
    where the calls were found when salvage's reading replaced the format's; ``detected``: what detection said."""

    text: str
    fmt: str
    calls: list[ToolCall]
    strict_ok: bool = False
    strict_reason: str | None = None
    text_cut: Cut | None = None
    cut: Cut | None = None
    mended: bool = False
    salvaged: Salvage | None = None
    out_fmt: str = ""
    detected: str | None = None
    lenient: Lenient | None = None  # the format's own lenient reading (salvage takes it for the whole text)


# ---- Tools, as the readers use them --------------------------------------------------------------------------------


def tool_index(tools: Iterable[Any] | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Tool specs by name (``None`` when no tool list is known: tool and parameter checks are then skipped)."""
    if tools is None or type(tools) is ToolCatalog or isinstance(tools, ToolCatalog):  # (the exact type told first)
        return tools  # (as it is: a copy of a catalog would read every spec)
    if isinstance(tools, Mapping):
        return dict(tools)
    return {t.name: t for t in tools}


def params_by_tool(tools: Iterable[Any] | Mapping[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """Parameter specs by tool and parameter name (what a lenient reader may settle a repair by); None with no tools."""
    index = tool_index(tools)
    if not index:
        return None
    if type(index) is ToolCatalog or isinstance(index, ToolCatalog):
        return CatalogParams(index)
    return {name: dict(getattr(spec, "params", None) or {}) for name, spec in index.items()}


# ---- The format ----------------------------------------------------------------------------------------------------


def choose_formats(
    text: str,
    wanted: str | None,
    tried: Strict | None = None,
    markers: dict[str, int] | None = None,
    sniffed: Sniffed | None = None,
) -> tuple[str, str, str | None]:
    """``(format to read in, output format, detected format)`` (see the module docstring); ``wanted``: the requested
    format, else the refiner's; the rest as in :func:`~refiner.formats.detect.detect_with_calls`."""
    tried = {} if tried is None else tried
    if wanted and strict_reading(get(wanted), text, tried) is not None:
        return wanted, wanted, None
    detected, calls = detect_with_calls(text, tried, markers, sniffed)
    if detected and calls is None and wanted and len(text) > MAX_LENIENT_CHARS:  # (detection does not parse texts
        calls = strict_reading(get(detected), text, tried)  # that long strictly)
    if detected and (wanted is None or (calls is not None and not _opened_in(wanted, detected, text))
                     or _marked_as(detected, wanted, text)):
        return detected, wanted or detected, detected
    upstream_fmt = wanted or DEFAULT_FORMAT
    return upstream_fmt, upstream_fmt, detected


def _opened_in(wanted: str, detected: str, text: str) -> bool:
    """Whether a marker of the requested format comes before every marker of the detected one."""
    body = strip_reasoning(text)
    first = min((i for m in get(wanted).detection.markers if (i := body.find(m)) >= 0), default=-1)
    return first >= 0 and all(not 0 <= body.find(m) <= first for m in get(detected).detection.markers)


def _marked_as(detected: str, wanted: str, text: str) -> bool:
    """Whether a broken text carries the detected format's own tags and none of the requested format's."""
    body = strip_reasoning(text)
    own, other = get(detected).detection, get(wanted).detection
    return any(m in body for m in (*own.markers, *own.closers)) and not any(
        m in body for m in (*other.markers, *other.closers)
    )


# ---- Reading -------------------------------------------------------------------------------------------------------


def read_text(
    text: str,
    fmt: str,
    tools: Iterable[Any] | Mapping[str, Any] | None,
    *,
    tried: Strict | None = None,
    offered: Mapping[str, Any] | None = None,
    lenient: bool = True,
) -> Reading:
    """``text`` read in ``fmt``: strictly, then leniently when that fails (the strict reading in ``tried`` when it
    was made), values typed by the tools' specs. ``offered``: :func:`params_by_tool` of ``tools``, when the caller
    has it; ``lenient`` False: the caller knows the lenient reading would find nothing (:func:`could_hold_calls`)."""
    wire = get(fmt)
    tried = {} if tried is None else tried
    calls = error = None
    if fmt in tried or len(text) > MAX_LENIENT_CHARS or not lenient:  # (parse_lenient does not try a text that
        calls = strict_reading(wire, text, tried)  # long strictly)
        error = tried[fmt]
    if calls is not None:
        out = Reading(text, fmt, calls, True)
    elif not lenient:
        out = Reading(text, fmt, [], False, error.message)
    else:  # (with no strict reading made, parse_lenient makes it and says why it failed)
        got = wire.parse_lenient(text, tools=_offered(tools, offered), strict_error=error)
        if error is None:
            tried[fmt] = got.calls if got.ok else (got.strict_error or FormatError(fmt, "not valid"))
        error = error or got.strict_error
        reason = None if got.ok else error.message if error is not None else "; ".join(map(str, got.problems[:3]))
        mended = len(text) <= MAX_LENIENT_CHARS and any(p.code == "mended" for p in got.problems)
        out = Reading(text, fmt, got.calls, got.ok, reason, got.cut, got.cut, mended, lenient=None if got.ok else got)
    if out.calls and tools is not None and (index := tool_index(tools)):  # values a format writes as untyped text
        out.calls = wire.retype(out.calls, index)  # take their declared types
    return out


def _offered(tools: Any, offered: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return offered if offered is not None else params_by_tool(tools)


@dataclass
class Detected:
    """A text's format as its caller detected it (:func:`detect_upstream`), for :func:`read_upstream`. ``fmt``: None
    when none was found; ``calls``: the strict reading when the text is valid in ``fmt``; ``tried``, ``markers``,
    ``sniffed``: what detection made; ``reading``: the text read with the request's tools, if the caller made it."""

    text: str  # the text as read (its reasoning split: refiner.formats.reasoning.read)
    fmt: str | None
    calls: list[ToolCall] | None
    tried: Strict
    markers: dict[str, int]
    sniffed: Sniffed = field(default_factory=dict)
    reading: Reading | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "sniffed": {}}  # (format objects stay in their process: salvage sniffs again)


def detect_upstream(text: str) -> Detected:
    """``text``'s format detected once, with what the detection made on the way."""
    body = read(text)
    tried: Strict = {}
    sniffed: Sniffed = {}
    markers = marker_positions(body)
    fmt, calls = detect_with_calls(body, tried, markers, sniffed)
    return Detected(body, fmt, calls, tried, markers, sniffed)


def read_upstream(
    text: str,
    wanted: str | None,
    tools: Iterable[Any] | Mapping[str, Any] | None,
    *,
    offered: Mapping[str, Any] | None = None,
    detected: Detected | None = None,
) -> Reading:
    """A request's upstream read once (see the module docstring). ``offered``: as for :func:`read_text`; ``detected``:
    the caller's detection of ``text`` that found a format: the text is read and written in it (``wanted`` aside)."""
    given = text
    markers: dict[str, int] | None = None
    offered = _offered(tools, offered)
    own: Reading | None = None  # the text read in the requested format, when it is not strictly valid there
    if detected is not None and detected.fmt is not None:
        text, tried, markers, sniffed = detected.text, detected.tried, detected.markers, detected.sniffed
        fmt = out_fmt = found = detected.fmt
        quiet = not could_hold_calls(text, markers, offered)
    else:
        tried, sniffed = {}, {}
        text = read(text)  # (its reasoning split made once, for every reader below)
        quiet = False
        valid = wanted and strict_reading(get(wanted), text, tried) is not None
        if not valid:  # (detection runs: its search for markers is salvage's too)
            markers = marker_positions(text)
            quiet = not could_hold_calls(text, markers, offered)
            own = read_text(text, wanted, tools, tried=tried, offered=offered) if wanted and not quiet else None
        # valid in the requested format, or stopping inside its calls (other formats' markers are in their values)
        if valid or own is not None and own.text_cut is not None:
            fmt = out_fmt = wanted
            found = None
        else:
            fmt, out_fmt, found = choose_formats(text, wanted, tried, markers, sniffed)
    # (the default format reads only JSON: with no quote, its lenient reading finds nothing, not even a cut string)
    plain = quiet and fmt == DEFAULT_FORMAT and text.find('"', text.split.answer) < 0
    got = own if own is not None and fmt == wanted else read_text(text, fmt, tools, tried=tried, offered=offered,
                                                                   lenient=not plain)
    got.out_fmt, got.detected = out_fmt, found
    if not (quiet or got.strict_ok or got.mended):  # (salvage reads only a text its format does not read whole)
        got = salvaged(got, tools, offered=offered, markers=markers, tried=tried, sniffed=sniffed)
    got.text = given
    if got.salvaged is not None and got.salvaged.fmt and not wanted and found is None:
        got.out_fmt = got.salvaged.fmt
    return got


def could_hold_calls(text: str, markers: Mapping[str, int], offered: Mapping[str, Any] | None) -> bool:
    """Whether anything in ``text`` (reasoning split) could start a call: any format's marker or closer (``markers``:
    their positions), a bracket after the reasoning, a line marker opening the answer, an offered tool's name."""
    if markers:
        return True
    at = reasoning_offset(text)
    if text.find("{", at) >= 0 or text.find("[", at) >= 0 or text.find("(", at) >= 0:
        return True
    first = skip_ws(text, at)
    if any(text.startswith(m[1:], first) for m in marker_table().line_markers):
        return True
    return bool(offered) and any(name and name in text for name in offered)


# ---- Salvage: the calls read wherever they are, when that is the better reading ------------------------------------


def salvaged(
    reading: Reading,
    tools: Iterable[Any] | Mapping[str, Any] | None,
    *,
    offered: Mapping[str, Any] | None = None,
    markers: dict[str, int] | None = None,
    tried: Strict | None = None,
    sniffed: Sniffed | None = None,
) -> Reading:
    """``reading`` (of a text not valid in its format) with the calls read wherever the model put them
    (:func:`refiner.formats.salvage.salvage`), values typed by the specs, when that reading is better than the format's
    own lenient one; else ``reading``. Better: more calls to offered tools (plausibly named ones without a tool list)
    with no markup in them (:func:`_frayed`), then more calls to offered tools, then more spelled exactly as offered,
    then fewer calls to other names, then more arguments. When salvage read the whole text and found no call, the
    lenient reading's calls were made of prose and give way. ``offered``: :func:`params_by_tool` of ``tools``, when the
    caller has it; ``markers``, ``tried``, ``sniffed``: what the caller already made (:func:`read_upstream`)."""
    if reading.strict_ok or reading.mended:
        return reading
    offered = _offered(tools, offered)
    known = {reading.fmt: reading.lenient} if reading.lenient is not None else None
    found = salvage(reading.text, offered, known, markers, tried, sniffed)
    if found.complete and not found.calls:  # (every structured shape is salvage's to read)
        better = bool(reading.calls)
    else:
        better = _score(found.calls, offered) > _score(reading.calls, offered)
    if not better:
        return reading
    calls = list(found.calls)
    index = tool_index(tools)
    if index:  # values a site's format writes as untyped text are settled by the specs
        site_fmt = {id(c): site.fmt for site in found.sites if site.fmt for c in site.calls}
        calls = [get(site_fmt[id(c)]).retype([c], index)[0] if id(c) in site_fmt else c for c in calls]
    cut = reading.text_cut  # (the cut call, left out, has no index)
    return replace(reading, calls=calls, cut=None if cut is None else Cut(None, cut.name, {}, cut.clean), salvaged=found)


def _score(calls: Sequence[ToolCall], offered: Mapping[str, Any] | None) -> tuple[int, int, int, int, int]:
    judged: dict[str, tuple[bool, bool]] = {}  # (each name judged once: a long list repeats a few)
    clean = good = exact = args = 0
    for c in calls:
        if c.name not in judged:
            judged[c.name] = (is_offered(c.name, offered), c.name in offered) if offered else (
                (_PLAUSIBLE_NAME.fullmatch(c.name) is not None,) * 2)
        good, exact, args = good + judged[c.name][0], exact + judged[c.name][1], args + len(c.arguments)
        clean += judged[c.name][0] and not _frayed(c)
    return clean, good, exact, good - len(calls), args


_MARKUP_CHARS = re.compile(r"[\"'`{}\[\]<>]")


def _frayed(call: ToolCall) -> bool:
    """Whether a reading took some of the call's markup for its text: a quote or bracket in its name or in an
    argument's key, or a string argument that starts with a quote not closed exactly at its end, or ends in more
    closing braces or brackets than it opens (a trailing comma aside)."""
    if _MARKUP_CHARS.search(call.name) or any(_MARKUP_CHARS.search(k) for k in call.arguments):
        return True
    for value in call.arguments.values():
        s = value.strip() if isinstance(value, str) else ""
        if not s:
            continue
        if s[0] in "\"'" and s.find(s[0], 1) != len(s) - 1:
            return True
        tail = s.rstrip(",;")
        if tail and tail[-1] in "}]" and tail.count(tail[-1]) > tail.count("{" if tail[-1] == "}" else "["):
            return True
    return False
