"""Calls in markup no registered format knows (asked by :func:`refiner.formats.salvage.salvage` when the text holds no
other call), found by the offered tool and parameter names; ``T`` an offered tool, ``k`` a parameter it declares::

    element  := <TAG>T</TAG> ... (<k>VALUE</k>)*  |  <T [k="v"]>...</T>  |  <TAG name|tool|function="T">...</TAG>
                (arguments: child elements named k, <param name="k">, or k="v" attributes)
    labelled := [LABEL] T [":"] [k=v | k: v, ...] NL more     LABEL: Action: / tool = / ... at a line start; more:
                a JSON object (Action Input: {...}) or k: v lines
    yaml     := ["-"] T ":" NL (INDENT k ":" VALUE NL)+

The name is the whole of its field, only declared parameter names are arguments, a call needs one (an element of a tool
that requires none excepted), a value is a JSON literal or its text, one written as nothing is left out. With no such
markup, :mod:`refiner.formats.anchored` reads the structure the text repeats. Bounded by the constants below."""

from __future__ import annotations

import functools
import html
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.anchored import Found, anchored_calls, names_pattern, offered_names, param_names
from refiner.formats.strict import json_head
from refiner.formats.xmlvalues import retype_value

MAX_NAME_HITS = 256  # occurrences of offered names examined
WINDOW = 2048  # characters after a name read for its arguments
MAX_ARG_LINES = 64  # argument lines read after a labelled name
SCAN_BUDGET = 131_072  # characters of argument regions read in all (then the rest of the text is not read)
PREFIX = 300  # characters before a name looked at for its label or its element's tags
MAX_PARAM_ELEMENTS = 64  # argument elements read per call

KIND = "call found by the offered tool and parameter names"


_LABEL = re.compile(
    r"[ \t]*(?:[-*•][ \t]+|\d{1,2}[.)][ \t]+)?"
    r"(?:(?:[A-Za-z][A-Za-z _]{0,24})?(?:tool|action|function|name|call|command|api)(?:[ _]?name)?[ \t]*[:=][ \t]*)?"
    r"[\"'`*]*\Z",
    re.IGNORECASE,
)
_ARG_HEADER = re.compile(
    r"[ \t]*(?:[-*][ \t]+)?(?:[A-Za-z][A-Za-z _]{0,24})?(?:arguments|args|parameters|params|input|inputs)[ \t]*[:=]?"
    r"[ \t]*\Z",
    re.IGNORECASE,
)
_OPEN_TAG_BEFORE = re.compile(r"<([A-Za-z_][\w\-:.]{0,64})(?:\s[^<>]{0,256})?>[ \t]*\Z")
_NAME_ATTR_BEFORE = re.compile(r"<([A-Za-z_][\w\-:.]{0,64})\s[^<>]{0,256}?\b(?:name|tool|function)=[\"']\Z")
_CONTAINER_BEFORE = re.compile(r"<([A-Za-z_][\w\-:.]{0,64})(?:\s[^<>]{0,256})?>\s*\Z")
_OTHER_KEY = re.compile(r"[,;][ \t]*([A-Za-z_][\w\-]{0,64})[ \t]*[=:]")
_QUOTED = re.compile(r"(['\"]).*?(?<!\\)\1", re.DOTALL)
_ENTITY = re.compile(r"&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});")


@functools.lru_cache(maxsize=256)
def _param_patterns(params: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    """For a tool's declared parameter names: (an element's opening tag, a k="v" attribute, a k: v / k = v pair)."""
    alt = "|".join(re.escape(p) for p in sorted(params, key=len, reverse=True))
    element = re.compile(  # (its closing tag is found by str.find: no lazy scan per opening)
        r"<(?:(?P<tag>" + alt + r")|(?P<ptag>[A-Za-z_][\w\-]{0,32})\s+(?:name|key)=[\"']?(?P<pname>" + alt
        + r")[\"']?)(?:\s[^<>]{0,256})?>"
    )
    attr = re.compile(r"(?<![\w\-])(" + alt + r")=(\"[^\"<>]{0,4096}\"|'[^'<>]{0,4096}')")
    pair = re.compile(r"(?<![\w\-.])[\"']?(" + alt + r")[\"']?[ \t]*(?::(?!//)|=(?!=))[ \t]*")
    return element, attr, pair


def _text_value(raw: str, xml: bool = False) -> Any:
    """``raw``'s value: a JSON literal, else its text unquoted (entities decoded with ``xml``), or ``_NO_VALUE``."""
    raw = raw.strip()
    if xml and "&" in raw and _ENTITY.search(raw):
        raw = html.unescape(raw).strip()
    if not raw:
        return _NO_VALUE
    head = json_head(raw)
    if head is not None and head[1] == len(raw):
        return head[0]
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"`":
        return raw[1:-1]
    return {"True": True, "False": False, "None": None}.get(raw, raw)


_NO_VALUE: Any = object()


def _pairs(segment: str, pair: re.Pattern, notes: list[str], name: str) -> dict[str, Any]:
    """``k=v`` / ``k: v`` pairs of declared names in ``segment``, each value up to the next pair, a key or the end."""
    args: dict[str, Any] = {}
    hits = list(pair.finditer(segment))[:MAX_ARG_LINES]
    for i, m in enumerate(hits):
        stop = hits[i + 1].start() if i + 1 < len(hits) else len(segment)
        raw = segment[m.end() : stop].strip()
        if raw[:1] in ("'", '"'):  # a quoted value ends at its closing quote (one no backslash is written before)
            raw = quoted.group() if (quoted := _QUOTED.match(raw)) else raw
        else:
            other = _OTHER_KEY.search(raw)  # an undeclared key after a separator ends the value
            if other is not None:
                notes.append(f"{name}: {other.group(1)!r} is not a parameter it declares; passed over")
                raw = raw[: other.start()]
        _put(args, m.group(1), _text_value(raw.partition("```")[0].strip().rstrip(",;")), notes, name)
    return args


def _put(args: dict[str, Any], key: str, value: Any, notes: list[str], name: str) -> None:
    """``value`` under ``key`` unless the key is taken; a value written as nothing is left out, noted."""
    if value is _NO_VALUE:
        notes.append(f"{name}: parameter {key!r} written without a value; left out")
    else:
        args.setdefault(key, value)


class _Reader:
    def __init__(self, text: str, start: int, offered: Mapping[str, Sequence[str]]) -> None:
        self.text = text
        self.at = start
        self.offered = offered
        self.notes: list[str] = []
        self.spent = 0  # characters of argument regions read

    def typed(self, found: Found) -> Found:
        """``found`` with its values settled by their declared types, when the tool's specs are known (94105 for
        a string parameter is "94105": markup writes no types)."""
        specs, args = self.offered.get(found.call.name), found.call.arguments
        if not isinstance(specs, Mapping) or not any(k in specs for k in args):
            return found
        typed = {k: retype_value(specs[k], v) if k in specs else v for k, v in args.items()}
        return found._replace(call=ToolCall(found.call.name, typed)) if typed != args else found

    # -- XML-ish ------------------------------------------------------------------------------------------------

    def element(self, name: str, s: int, e: int) -> Found | None:
        text = self.text
        lo = max(self.at, s - PREFIX)
        lt = text.rfind("<", lo, s)  # (the tags before the name are matched from the last "<", anchored)
        head = None  # an opening tag naming the tool: (its tag, its start, where its attributes start)
        if text[s - 1 : s] == "<" and (e >= len(text) or text[e] in "> \t\n/"):  # <NAME ...>: the tag is the name
            head = name, s - 1, e
        elif lt >= 0 and (m := _NAME_ATTR_BEFORE.match(text, lt, s)) is not None and text[e : e + 1] in "\"'":
            head = m.group(1), m.start(), m.end(1)  # <TAG name="NAME" ...>
        if head is not None:
            tag, start, attrs_at = head
            head_end = text.find(">", e, e + 300)
            if head_end < 0:
                return None
            attrs = text[e:head_end] if attrs_at == e else text[attrs_at:head_end].replace(name, "", 1)
            body_start = head_end + 1
            region_end = head_end + 1 if text[head_end - 1] == "/" else self._closing(tag, head_end + 1)  # <T k="v"/>
        elif lt >= 0 and (m := _OPEN_TAG_BEFORE.match(text, lt, s)) is not None and text.startswith(f"</{m.group(1)}", e):
            tag, start = m.group(1), m.start()
            close = text.find(">", e, e + PREFIX) + 1 or e
            olt = text.rfind("<", max(self.at, start - PREFIX), start)
            outer = _CONTAINER_BEFORE.match(text, olt, start) if olt >= 0 else None
            inside = outer is not None and outer.group(1) != tag  # (then the container's closing tag ends the call)
            start = outer.start() if inside else start
            region_end = self._closing(outer.group(1), close) if inside else self._next_boundary(close)
            body_start, attrs = start, ""
        else:
            return None
        params = param_names(self.offered, name)
        args: dict[str, Any] = {}
        self.spent += region_end - body_start
        if params:
            element, attr, _ = _param_patterns(params)
            written = [(m.group(1), m.group(2)[1:-1]) for m in attr.finditer(attrs)]
            missing: set[str] = set()
            for m in itertools.islice(element.finditer(text, body_start, region_end), MAX_PARAM_ELEMENTS):
                closer = "</" + (m.group("tag") or m.group("ptag"))
                k = -1 if closer in missing else text.find(closer, m.end(), region_end)
                if k < 0:
                    missing.add(closer)
                    continue
                written.append((m.group("tag") or m.group("pname"), text[m.end() : k]))
            for key, raw in written:
                _put(args, key, _text_value(raw, xml=True), self.notes, name)
        if not args and (params or region_end <= body_start):
            return None  # (an element naming a tool that takes parameters, none given: a mention, not a call)
        return Found(start, region_end, ToolCall(name, args), "XML-ish element")

    def _closing(self, tag: str, pos: int) -> int:
        """The end of ``</tag>`` after ``pos`` within the window, else the next boundary."""
        k = self.text.find(f"</{tag}", pos, pos + WINDOW)
        return self._next_boundary(pos) if k < 0 else self.text.find(">", k) + 1 or len(self.text)

    def _next_boundary(self, pos: int) -> int:
        """Where a call read from ``pos`` stops when no container closes it: a blank line, or the window's end."""
        stop = min(len(self.text), pos + WINDOW)
        k = self.text.find("\n\n", pos, stop)
        return stop if k < 0 else k

    # -- lines ----------------------------------------------------------------------------------------------------

    def labelled(self, name: str, s: int, e: int) -> Found | None:
        text = self.text
        back = max(self.at, s - PREFIX)  # the name's line, within PREFIX characters before it and WINDOW after
        line_start = text.rfind("\n", back, s) + 1 or back
        line_end = text.find("\n", s, s + WINDOW)
        line_end = min(len(text), s + WINDOW) if line_end < 0 else line_end
        if not _LABEL.fullmatch(text, line_start, s) or not (params := param_names(self.offered, name)):
            return None
        _, _, pair = _param_patterns(params)
        tail = text[e:line_end].lstrip("\"'`* \t")
        tail = tail[1:].lstrip() if tail[:1] in (":", "=", "-") else tail
        if not tail.strip():  # the arguments on the following lines
            args, end, how = self.following(name, line_end, pair)
        elif pair.match(tail) is None:
            return None  # the name, then prose: "get_weather: returns the forecast"
        else:
            args, end, how = _pairs(tail, pair, self.notes, name), line_end, "labelled line"
        return Found(line_start, end, ToolCall(name, args), how) if args else None

    def following(self, name: str, pos: int, pair: re.Pattern) -> tuple[dict[str, Any], int, str]:
        """The arguments on the lines after a labelled name: a JSON object, or ``k: v`` lines up to another line."""
        text = self.text
        stop = min(len(text), pos + WINDOW)
        self.spent += stop - pos
        args: dict[str, Any] = {}
        end = pos
        for _ in range(MAX_ARG_LINES):
            if end >= stop:
                break
            nl = text.find("\n", end + 1, stop)
            line_end = stop if nl < 0 else nl
            line = text[end + 1 : line_end] if text[end : end + 1] == "\n" else text[end:line_end]
            blank = not line.strip() or line.strip().startswith("```")
            if blank and args:
                break
            if blank or _ARG_HEADER.fullmatch(line) is not None:  # (a header line holds no brace)
                end = line_end
                continue
            brace = line.find("{")
            if not args and brace >= 0 and (not line[:brace].strip() or _ARG_HEADER.fullmatch(line[:brace])):
                value, n = json_head(text, text.find("{", end, line_end)) or (None, pos)
                if not isinstance(value, dict):
                    return {}, pos, ""
                params = param_names(self.offered, name)
                kept = {k: v for k, v in value.items() if k in params}
                if len(kept) < len(value):
                    self.notes.append(f"{name}: {len(value) - len(kept)} argument(s) the tool does not declare passed "
                                      "over")
                return kept, n, "labelled line and JSON arguments"
            item = line.lstrip(" \t-*")
            if pair.match(item) is None:
                break
            args |= {k: v for k, v in _pairs(item, pair, self.notes, name).items() if k not in args}
            end = line_end
        return args, end, "YAML-ish block"


def calls_by_names(
    text: str, start: int, offered: Mapping[str, Sequence[str]], taken: Sequence[tuple[int, int]] = ()
) -> tuple[list[Found], list[str], int]:
    """The calls of ``text`` after ``start`` in markup no format knows, outside the ``taken`` spans: ``(calls, notes,
    name hits examined)``. Never raises."""
    names = offered_names(text, offered)
    if not names or start >= len(text):
        return [], [], 0
    reader = _Reader(text, start, offered)
    found: list[Found] = []
    hits = 0
    pos = start
    pattern = names_pattern(names)
    while hits < MAX_NAME_HITS and reader.spent < SCAN_BUDGET:
        m = pattern.search(text, pos)
        if m is None:
            break
        hits += 1
        s, e = m.span()
        got = None if any(a <= s < b for a, b in taken) else (
            reader.element(m.group(), s, e) or reader.labelled(m.group(), s, e))
        if got is not None:
            found.append(reader.typed(got))
        pos = s + 1 if got is None else max(got.end, e)
    if hits >= MAX_NAME_HITS or reader.spent >= SCAN_BUDGET:
        reader.notes.append(f"stopped after {hits} occurrences of offered tool names (the rest was not read)")
    if not found:  # markup none of the rules above knows: the structure the text repeats (refiner.formats.anchored)
        found, notes = anchored_calls(text, start, offered, taken)
        reader.notes.extend(notes)
    return found, reader.notes, hits
