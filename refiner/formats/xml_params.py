"""The XML-ish parameter grammar: tool calls written as tags, one element (or key/value tag pair) per argument, the
values raw text between tags. One grammar, read from a spelling (:class:`XmlSpelling`); a model family that writes
it is a row of :data:`ROWS` (see :mod:`refiner.formats.family`), not a module.

The shape, in general terms (every literal comes from the row's spelling)::

    [SECTION_OPEN]                                  optional; around every call, or around all of them
      CALL_OPEN NAME ...                            the name: `<function=NAME>`, `<invoke name="NAME">`, or the
                                                    text after the tag up to NAME_SEP (GLM, Hunyuan)
        KEY_OPEN KEY ... VALUE VALUE_CLOSE          `<parameter=KEY>V</parameter>`,
                                                    `<parameter name="KEY" [string="true"]>V</parameter>`, or
                                                    `<arg_key>KEY</arg_key><arg_value>V</arg_value>`
      CALL_CLOSE
    [SECTION_CLOSE]

Reading (the same for every row):

- reasoning and prose may come before the first call, prose after the last; whitespace between tags is free;
- a value is the text up to its closing tag, less one newline at each end where the row says so
  (``strip_newline``: Qwen3-Coder writes ``<parameter=K>\\nV\\n</parameter>``; Seed-OSS, the same tags, does not);
- an attribute-named call or parameter reads ``name="..."`` (single quotes and bare values too, XML's entities
  decoded; ``render`` writes a name holding ``"``, ``<``, ``>``, ``&`` or a line break with entities); an invoke
  closed in its own tag (``<invoke name="f"/>``) is a call without arguments;
- a closing section tag (or, without sections, a closing call tag) before the first opening one is a call whose
  opening tag was lost: not strictly valid, and recovery reads that call too;
- a closing value tag ends the value only when the next structural tag follows it (whitespace aside) and it does
  not close a value tag the value opens itself (:func:`refiner.formats.xmlvalues.value_end`, as vLLM's parser
  does): code quoting the tags is read whole. A value whose own closing tag is followed by a further parameter
  *inside the value* (``x</parameter>\\n<parameter=y>``) cannot be told from two parameters in raw-text XML: such a
  value is written (``render``) as a JSON string literal, which reads back as itself;
- typing (``typing``): ``"json"`` (the template writes strings raw, anything else as JSON: GLM, MiniMax-M2,
  Hunyuan), ``"python"`` (the template's ``| string`` writes Python's ``True`` / ``False`` / ``None``: Qwen3-Coder,
  Seed-OSS), or ``"attr"`` (a type attribute on the parameter tag, ``type_attr="string"``: DSML's
  ``string="true"`` value is the string as written, ``string="false"`` is JSON); see
  :mod:`refiner.formats.xmlvalues`. With the tool specs known, :meth:`XmlParams.retype` settles untyped values by
  their declared types (vLLM's parsers type these values by the schema the same way);
- a parameter given twice is an error (strict), the last kept (lenient);
- recovery (``parse_lenient``) also reads an answer the model wrote as a JSON string (a literal ``\\n`` next to
  the row's tags, ``\\"`` in values: decoded) and closing tags with a number appended (``</parameter1>``), besides
  cut texts, lost tags and JSON arguments written inside the call's tags.

What a row's table cannot say goes into its one named hook (:class:`Hook`: lenient tag repair, a family's own
detection or untagged reading), registered by name in :data:`HOOKS`.
"""

from __future__ import annotations

import bisect
import functools
import html
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat, all_formats, offered_tools, remember
from refiner.formats.family import Family, register_rows
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, lenient_json, take_items
from refiner.formats.lenient import written_before_cut
from refiner.formats.message import AnswerParts
from refiner.formats.strict import JSON_DECODER
from refiner.formats.tags import MAX_TAG_HITS, Speller
from refiner.formats.text import dumps, reasoning_offset, skip_ws
from refiner.formats.xmlvalues import (
    MAX_ATTR_CHARS,
    Finder,
    mark_xml_cut,
    read_key,
    read_value,
    retype_calls,
    stops_in_call,
    strip_one_newline,
    value_end,
    write_key,
    write_value,
)

DETECT_CHARS = 2_000  # of text after a marker read to tell a row from others sharing it
MAX_NOTES = 8  # problems reported per text for tags read in place of others
NAME_LINE_CHARS = 400  # how far above its first key a call's start is looked for
TYPE_CHARS = 400  # how far a type element's closing tag is looked for (XmlSpelling.type_open)
# A tool name: no whitespace, angle brackets, braces or quotes (vLLM's XML parsers reject the same); rows whose name
# is the text after the call tag (GLM) allow single spaces between words.
NAME_PATTERN = r"[^\s<>{}\"']+"
SPACED_NAME_PATTERN = r"[^\s<>{}\"']+(?: [^\s<>{}\"']+)*"
_ATTR = re.compile(r"""([A-Za-z_][\w:.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
# The attributes as rendering writes them (a name, then at most one more): read in one match.
_SIMPLE_ATTRS = re.compile(r"""\s*name="([^"&]*)"(?:\s+([A-Za-z_][\w:.-]*)="([^"&]*)")?\s*""")


@dataclass(frozen=True)
class XmlSpelling:
    """One row's spelling of the grammar (see the module doc). Tag literals are written exactly as the model writes
    them (special tokens as text).

    - ``call_open`` / ``call_close``: a call's tags; where the name sits is ``name_at``: ``"eq"`` (``<function=`` NAME
      ``>``), ``"attr"`` (``<invoke`` attributes ``>``, the name in ``name="..."``) or ``"text"`` (the text after
      ``call_open`` up to ``name_sep``, a key or the call's end: GLM's ``<tool_call>NAME\\n``, Hunyuan's
      ``<tool_call>NAME<tool_sep>``);
    - ``key_open`` / ``key_close`` and ``key_at``: ``"eq"`` (``<parameter=`` KEY ``>``, ``key_close`` unused),
      ``"attr"`` (``<parameter`` attributes ``>``, the key in ``name="..."``, a type in ``type_attr``) or
      ``"element"`` (``<arg_key>`` KEY ``</arg_key>``, then ``value_open``);
    - ``value_open`` (``"element"`` only) / ``value_close``;
    - ``section_open`` / ``section_close``: tags around the calls (``""``: none); ``section_per_call``: one section
      per call (Qwen3-Coder's ``<tool_call>``), else one around all of them (MiniMax-M2's ``<minimax:tool_call>``);
    - ``strip_newline``: one newline at each end of a value is the template's, not the value's;
    - ``typing``: ``"json"``, ``"python"`` or ``"attr"`` (see the module doc), ``type_attr`` the attribute;
    - ``sep``: what ``render`` writes between tags (the template's layout); ``tag_suffix``: a per-checkpoint suffix
      written before every tag's ``>`` (Hunyuan HY v4's ``:6124c78e``; any ``:SUFFIX`` is read);
    - ``hook``: the name of the row's :class:`Hook` in :data:`HOOKS` (``""``: none);
    - ``type_open`` / ``type_close`` (``"element"`` keys only): a type element the model may write between a key and
      its value (K2-Horizon's ``xml_typed`` layout, ``<ifm|arg_type>string</ifm|arg_type>``); not strictly valid
      in the row, read by recovery: ``string`` is the text as written, ``any`` the row's typing, another type
      JSON."""

    call_open: str
    call_close: str
    name_at: str = "eq"
    key_open: str = "<parameter="
    value_close: str = "</parameter>"
    key_at: str = "eq"
    key_close: str = ">"
    value_open: str = ""
    section_open: str = ""
    section_close: str = ""
    section_per_call: bool = False
    name_sep: str = "\n"
    strip_newline: bool = False
    typing: str = "json"
    type_attr: str = ""
    sep: str = "\n"
    tag_suffix: str = ""
    hook: str = ""
    type_open: str = ""
    type_close: str = ""

    def __post_init__(self) -> None:
        if self.name_at not in ("eq", "attr", "text") or self.key_at not in ("eq", "attr", "element"):
            raise ValueError(f"name_at / key_at not known: {self.name_at!r} / {self.key_at!r}")
        if self.typing not in ("json", "python", "attr") or (self.typing == "attr") != bool(self.type_attr):
            raise ValueError(f"typing {self.typing!r} with type_attr {self.type_attr!r}")
        if (self.key_at == "element") != bool(self.value_open):
            raise ValueError("value_open is the element key style's (and only its)")
        if bool(self.section_open) != bool(self.section_close):
            raise ValueError("a section has both tags or neither")
        if bool(self.type_open) != bool(self.type_close) or (self.type_open and self.key_at != "element"):
            raise ValueError("a type element has both tags, and only with element keys")

    @property
    def python_literals(self) -> bool:
        return self.typing == "python"

    @property
    def value_tags(self) -> tuple[str, str]:
        """The tags a raw string value may not hold (it is then written as a JSON string literal)."""
        return (self.value_open if self.key_at == "element" else self.key_open), self.value_close

    @property
    def first_open(self) -> str:
        return self.section_open or self.call_open

    def tags(self) -> tuple[str, ...]:
        tags = [self.section_open, self.call_open, self.key_open]
        if self.key_at == "element":
            tags += [self.key_close, self.value_open]
        tags += [self.value_close, self.call_close, self.section_close]
        if self.name_at == "text" and self.name_sep.strip():
            tags.insert(2, self.name_sep)
        return tuple(t for t in tags if t)


@dataclass(frozen=True)
class Hook:
    """What a row's table cannot say, in one named place. Every field is optional.

    ``respell(fmt, text, start) -> (text, notes) | None``: the text with tags written wrong read as the grammar's
    (lenient reading only); ``sniff(fmt, body, at) -> bool``: replaces the grammar's detection check;
    ``region_start(fmt, body, at) -> int`` and ``read_untagged(fmt, text, start, offered)``: see
    :class:`~refiner.formats.base.WireFormat`."""

    respell: Callable[..., tuple[str, list[str]] | None] | None = None
    sniff: Callable[..., bool] | None = None
    region_start: Callable[..., int] | None = None
    read_untagged: Callable[..., Any] | None = None


HOOKS: dict[str, Hook] = {}


def _attrs(raw: str) -> dict[str, str]:
    """The attributes of a tag's text (``name="f" string="true"``; single quotes and bare values read too), XML's
    character entities decoded (``render`` writes a name holding ``"``, ``<``, ``>``, ``&`` or a newline with them)."""
    m = _SIMPLE_ATTRS.fullmatch(raw)
    if m is not None:
        if m.group(2) is None:
            return {"name": m.group(1)}
        return {"name": m.group(1), m.group(2): m.group(3)}
    out = {}
    for m in _ATTR.finditer(raw):
        value = next(g for g in m.groups()[1:] if g is not None)
        out[m.group(1)] = html.unescape(value) if "&" in value else value
    return out


def _attr_value(value: str) -> str:
    """An attribute value as ``render`` writes it: XML's entities where the value holds a character the tag cannot
    (quotes, brackets, ampersands, line breaks)."""
    if not any(c in value for c in '"<>&\n\r'):
        return value
    return (value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", "&#10;").replace("\r", "&#13;"))


class XmlParams(WireFormat):
    """The grammar: every method reads ``self.spelling`` (:class:`XmlSpelling`); rows are registered by
    :func:`refiner.formats.family.register_rows`."""

    spelling: XmlSpelling

    # The row contract (refiner.formats.family)

    @classmethod
    def tags_for(cls, s: XmlSpelling) -> tuple[str, ...]:
        return s.tags()

    @classmethod
    def detection_for(cls, s: XmlSpelling, rank: int) -> Detection:
        # the call and key tags point at this row too (a section tag lost), unless a row registered before holds
        # them (Seed-OSS's <function= is Qwen3-Coder's, dots.llm's <invoke is MiniMax-M2's): a text with only those
        # is read as the first row's
        taken = {m for f in all_formats() for m in f.detection.markers}
        markers = [s.first_open]
        if s.section_open:
            markers.append(s.call_open)
        markers.append(s.key_open)
        # closers (read only when a text holds no marker at all): the value's; the key's for element keys; the
        # call's for "=" keys (one string each: every one is a scan of the whole text in detection)
        closers = [s.value_close]
        if s.key_at == "element":
            closers.insert(0, s.key_close)
        elif s.key_at == "eq":
            closers.append(s.call_close)
        if s.tag_suffix:  # the text holds <tool_call:SUFFIX>: the marker is the tag up to its suffix
            markers = [m[:-1] + ":" if m.endswith(">") else m for m in markers]
            closers = [c[:-1] + ":" if c.endswith(">") else c for c in closers]
        markers = markers[:1] + [m for m in markers[1:] if m not in taken]
        return Detection(rank=rank, markers=tuple(dict.fromkeys(markers)), closers=tuple(dict.fromkeys(closers)))

    @property
    def hook(self) -> Hook:
        return HOOKS.get(self.spelling.hook) or _NO_HOOK

    @property
    def name_pattern(self) -> str:  # type: ignore[override]
        return SPACED_NAME_PATTERN if self.spelling.name_at == "text" else NAME_PATTERN

    def is_name(self, name: str) -> bool:
        if not name:
            return False
        if self.spelling.name_at == "text":
            return re.fullmatch(SPACED_NAME_PATTERN, name) is not None
        return not any(c.isspace() or c in "<>{}\"'" for c in name)

    def answer_parts(self, text: str) -> AnswerParts:
        """Rows whose tags carry a per-checkpoint suffix (``<tool_call:6124c78e>``): the text outside the calls is
        read as for any row, with the suffixes dropped; the calls' span is given in ``text``'s own positions."""
        if not self.spelling.tag_suffix or ":" not in text:
            return super().answer_parts(text)
        ends, shifts, total = [], [], 0  # where each dropped suffix ends in the plain text, and the shift after it
        for m in _suffix_pattern(self.spelling.tags()).finditer(text):
            total += len(m.group(0)) - len(_unsuffixed(m))
            ends.append(m.end() - total)
            shifts.append(total)
        parts = super().answer_parts(self._plain(text))

        def back(p: int) -> int:
            k = bisect.bisect_right(ends, p)
            return p + (shifts[k - 1] if k else 0)

        a, b = parts.calls
        return AnswerParts(parts.content, parts.reasoning, (back(a), back(b)))

    def _plain(self, text: str) -> str:
        """The text with a per-checkpoint tag suffix dropped from every tag (rows with ``tag_suffix``)."""
        s = self.spelling
        if not s.tag_suffix or ":" not in text:
            return text
        # (the strict and the lenient reading of one text, and salvage's, drop the suffixes once)
        return remember(text, ("unsuffixed", s.tags()), lambda: _unsuffix(s.tags(), text))

    def answer_start(self, text: str) -> int:
        """Where the answer starts: after the reasoning (the first ``</think>``, or the first closer of the row's
        own reasoning blocks: Seed-OSS's ``</seed:think>``)."""
        start = reasoning_offset(text)
        for _, close in self.reasoning:
            if close != "</think>":
                i = text.find(close)
                if i >= 0:
                    start = max(start, i + len(close))
        return start

    # Detection

    def sniff(self, body: str, at: int) -> bool:
        """A marker that opens this row's layout: a section tag followed by this row's call tag, a call tag
        followed by its name (and the row's tag after it, Hunyuan's ``<tool_sep>``) and then a parameter, the call's
        end or the end of the text (not by JSON); a bare key tag, for a row without a section."""
        if self.hook.sniff is not None:
            return self.hook.sniff(self, body, at)
        s = self.spelling
        body = self._plain(body[at : at + DETECT_CHARS])
        if s.section_open and body.startswith(s.section_open):
            k = skip_ws(body, len(s.section_open))
            if not body.startswith(s.call_open, k):
                return False
            at = k
        elif body.startswith(s.call_open):
            at = 0
        else:  # a bare key tag: this row's only when it writes no section (sectioned rows share their key tags)
            return not s.section_open
        pos = at + len(s.call_open)
        if s.name_at == "text":
            e = _first(body, (s.name_sep, s.key_open, s.call_close), pos)
            if not self.is_name(body[pos:e].strip()):
                return False
            if s.name_sep.strip() and not body.startswith(s.name_sep, e):
                return False  # the row writes a tag after the name (Hunyuan's <tool_sep>): another row's call
            k = skip_ws(body, e + (len(s.name_sep) if body.startswith(s.name_sep, e) else 0))
        else:
            e = body.find(">", pos)
            if e < 0:
                return "{" not in body[pos:]  # cut inside the name
            if s.name_at == "attr" and (e - pos > MAX_ATTR_CHARS or "name" not in _attrs(body[pos:e])):
                return False
            if s.name_at == "attr" and body.endswith("/", 0, e):
                return True  # <invoke name="f"/>
            k = skip_ws(body, e + 1)
        return k >= len(body) or body.startswith((s.key_open, s.call_close), k)

    def region_start(self, body: str, at: int) -> int:
        if self.hook.region_start is not None:
            return self.hook.region_start(self, body, at)
        return at

    def read_untagged(
        self, text: str, start: int, offered: Mapping[str, Sequence[str]]
    ) -> tuple[int, int, list[ToolCall]] | None:
        if self.hook.read_untagged is not None:
            return self.hook.read_untagged(self, text, start, offered)
        return None

    # Strict

    def parse_strict(self, text: str) -> list[ToolCall]:
        s = self.spelling
        if (s.first_open if not s.tag_suffix else s.first_open[:-1]) not in text:  # one scan: detection tries
            raise self.error(f"no {s.first_open}...{s.section_close or s.call_close} block", 0)  # every row
        text = self._plain(text)
        start = self.answer_start(text)
        i = text.find(s.first_open, start)
        if i < 0:
            raise self.error(f"no {s.first_open}...{s.section_close or s.call_close} block", start)
        f = Finder(text)
        calls: list[ToolCall] = []
        prev = start
        while i >= 0:
            closer = s.section_close or s.call_close
            stray = text.find(closer, prev, i)
            if stray >= 0:  # a call before it lost its opening tag (it is not prose: it is closed)
                raise self.error(f"{closer} without its {s.first_open}", stray)
            pos = i
            if s.section_open:
                pos = skip_ws(text, pos + len(s.section_open))
            while True:
                if not text.startswith(s.call_open, pos):
                    what = s.call_open + ("NAME>" if s.name_at == "eq" else "")
                    raise self.error(f"expected {what} after {s.section_open}, got {text[pos : pos + 30]!r}", pos)
                pos = self._strict_call(text, pos + len(s.call_open), f, calls)
                if not s.section_open:
                    break
                pos = skip_ws(text, pos)
                if text.startswith(s.section_close, pos):
                    pos += len(s.section_close)
                    break
                if pos >= len(text):
                    raise self.error(f"missing {s.section_close}", pos)
                if s.section_per_call or not text.startswith(s.call_open, pos):
                    raise self.error(f"unexpected text {text[pos : pos + 30]!r} before {s.section_close}", pos)
            prev = pos
            i = text.find(s.first_open, pos)
        return calls

    def _strict_call(self, text: str, pos: int, f: Finder, calls: list[ToolCall]) -> int:
        s = self.spelling
        if s.name_at == "text":
            e, tag = f.first((s.name_sep, s.key_open, s.call_close), pos)
            name = text[pos:e].strip()
            pos = e + len(s.name_sep) if tag == s.name_sep and s.name_sep.strip() else e
        else:
            j = text.find(">", pos, pos + MAX_ATTR_CHARS + 1)
            if j < 0:
                raise self.error(f"unclosed {s.call_open}", pos)
            name = text[pos:j] if s.name_at == "eq" else _attrs(text[pos:j]).get("name", "")
            pos = j + 1
            if s.name_at == "attr" and text.endswith("/", 0, j):  # <invoke name="f"/>: a call without arguments
                if not self.is_name(name):
                    raise self.error(f"tool name {name[:60]!r} is not allowed", pos)
                calls.append(ToolCall.trusted(name, {}))
                return pos
        if not self.is_name(name):
            raise self.error(f"tool name {name[:60]!r} is not allowed", pos)
        args: dict[str, Any] = {}
        while True:
            pos = skip_ws(text, pos)
            if text.startswith(s.call_close, pos):
                pos += len(s.call_close)
                break
            if not text.startswith(s.key_open, pos):
                if pos >= len(text):
                    raise self.error(f"missing {s.call_close}", pos)
                raise self.error(f"expected {s.key_open} or {s.call_close}, got {text[pos : pos + 30]!r}", pos)
            key, string, pos = self._strict_key(text, pos + len(s.key_open), f)
            if key in args:
                raise self.error(f"parameter {key!r} of {name!r} given twice", pos)
            end = self._value_end(text, pos)
            args[key] = self._value(text[pos:end], string)
            pos = end + len(s.value_close)
        if not args and self._junk_name(name):
            raise self.error(f"{name[:60]!r} alone between call tags is text, not an argument-less call", pos)
        calls.append(ToolCall.trusted(name, args))
        return pos

    def _junk_name(self, name: str) -> bool:
        """A name written as text with spaces in it and no argument after it (``<tool_call>not valid json
        </tool_call>``): words between the call tags, not a call, unless the request offers a tool of that name. A
        one-word name alone is an argument-less call (GLM writes those so)."""
        if self.spelling.name_at != "text" or not any(c.isspace() for c in name):
            return False
        offered = offered_tools()
        return offered is None or name not in offered

    def check_renderable(self, calls: Sequence[ToolCall]) -> None:
        super().check_renderable(calls)
        if self.spelling.name_at == "text":
            for i, c in enumerate(calls):
                if not c.arguments and any(ch.isspace() for ch in c.name):
                    raise self.render_error(f"call #{i}: {c.name!r} without arguments would read as text")

    def _strict_key(self, text: str, pos: int, f: Finder) -> tuple[str, bool | None, int]:
        """The key at ``pos`` (after the key tag), whether the value is typed a string by an attribute (``None``:
        no attribute), and where the value starts."""
        s = self.spelling
        if s.key_at == "element":
            j = f.next(s.key_close, pos)
            if j < 0:
                raise self.error(f"missing {s.key_close}", pos)
            key = read_key(text[pos:j])
            if key is None:
                raise self.error("a quoted parameter name is not a JSON string", pos)
            k = skip_ws(text, j + len(s.key_close))
            if not text.startswith(s.value_open, k):
                raise self.error(f"expected {s.value_open} after the {key!r} key, got {text[k : k + 30]!r}", k)
            return key, None, k + len(s.value_open)
        if s.key_at == "attr":
            j = text.find(">", pos, pos + MAX_ATTR_CHARS + 1)
            if j < 0:
                raise self.error(f"unclosed {s.key_open}", pos)
            attrs = _attrs(text[pos:j])
            if "name" not in attrs:
                raise self.error(f"a {s.key_open} without a name", pos)
            string = None
            if s.type_attr:
                flag = attrs.get(s.type_attr)
                if flag not in ("true", "false"):
                    raise self.error(f"{s.type_attr}= must be \"true\" or \"false\", got {flag!r}", pos)
                string = flag == "true"
            return attrs["name"], string, j + 1
        if text.startswith('"', pos):  # a name written as a JSON string literal
            try:
                key, end = JSON_DECODER.raw_decode(text, pos)
            except (ValueError, RecursionError):
                raise self.error("a quoted parameter name is not a JSON string", pos) from None
            if type(key) is not str or not text.startswith(">", end):
                raise self.error(f"expected > after the quoted parameter name at {end}", pos)
            return key, None, end + 1
        j = text.find(">", pos)
        if j < 0:
            raise self.error(f"unclosed {s.key_open}", pos)
        key = text[pos:j]
        if "\n" in key:
            raise self.error(f"a parameter name runs over a line: {key[:40]!r}", pos)
        return key, None, j + 1

    def _value_end(self, text: str, pos: int) -> int:
        s = self.spelling
        quote = s.value_open if s.key_at == "element" else "\n" + s.key_open
        end = value_end(text, pos, quote, s.value_close, (s.key_open, s.call_close))
        if end < 0:
            j = text.find(s.value_close, pos)
            if j >= 0 and skip_ws(text, j + len(s.value_close)) == len(text):
                raise self.error(f"missing {s.call_close}", len(text))
            what = "value" if s.key_at == "element" else "parameter value"
            raise self.error(f"unclosed {what} (no {s.value_close} followed by {s.key_open} or {s.call_close})", pos)
        return end

    def _value(self, raw: str, string: bool | None) -> Any:
        """A raw value's reading: ``string`` from a type attribute (True: the text as written; False: JSON, else
        the text), else the row's typing."""
        s = self.spelling
        if s.strip_newline:
            raw = strip_one_newline(raw)
        if string is True:
            return raw
        if string is False:
            try:
                value, end = JSON_DECODER.raw_decode(raw.strip(), 0)
            except (ValueError, RecursionError):
                return raw
            return value if end == len(raw.strip()) else raw
        return read_value(raw, s.python_literals, s.value_tags)

    # Lenient

    def recover(self, text: str, out: Lenient) -> None:
        s = self.spelling
        text = self._plain(text)
        pos = self.answer_start(text)
        text, notes = self._mend(text, pos)
        for note in notes[:MAX_NOTES]:
            out.note("missing_tag", note)
        respell = self.hook.respell or _respell_generic
        fixed = respell(self, text, pos)
        if fixed is not None:
            text, notes = fixed
            for note in notes[:MAX_NOTES]:
                out.note("missing_tag", note)
        f = Finder(text)
        first_key = f.next(s.key_open, pos)
        in_section = False
        for n in range(MAX_RECOVERED_ITEMS + 1):
            c = f.next(s.call_open, pos)
            if c < 0:
                if n == 0:
                    what = s.call_open + ("NAME>" if s.name_at == "eq" else "")
                    out.note("missing_tag", f"no {what} found")
                    if first_key >= 0:
                        out.note("no_name", f"arguments without a {s.call_open}: no call can be named")
                return
            if n == 0 and 0 <= first_key < c:
                out.note("unreadable", f"arguments before the first {s.call_open} dropped")
            if not take_items(1):  # (the parse's count of items read: a gave_up problem)
                return
            if s.section_open and not (in_section and not text[pos:c].strip()):
                o = f.next(s.section_open, pos)
                if o < 0 or o > c:
                    out.note("missing_tag", f"missing {s.section_open} before call #{n + 1}")
                elif skip_ws(text, o + len(s.section_open)) != c:
                    out.note("unreadable", f"text skipped before {s.call_open}: {text[o + len(s.section_open) : c][:60]!r}")
            pos, in_section = self._recover_call(text, c + len(s.call_open), f, out)

    def _mend(self, text: str, pos: int) -> tuple[str, list[str]]:
        """Two slips every row is read through (lenient reading only): a text written with JSON string escapes
        (the model wrote its answer as a JSON string: ``\\n`` between the tags, ``\\"`` in values), read with them
        decoded when a literal ``\\n`` stands next to one of the row's structural tags; and a closing tag with a
        number appended (``</parameter1>``), read as the closing tag."""
        s = self.spelling
        notes = []
        body = text[pos:]
        tags = (s.key_open, s.value_close, s.call_close)
        if "\\n" in body and any("\\n" + t in body or t + "\\n" in body for t in tags):
            body = _JSON_ESCAPE.sub(_unescape, body)
            notes.append("the calls were written with JSON string escapes (a literal \\n between tags): read decoded")
        for close in (s.value_close, s.call_close, s.key_close if s.key_at == "element" else ""):
            if close.endswith(">") and close[:-1] in body:
                pattern = re.compile(re.escape(close[:-1]) + r"\d{1,3}>")
                if pattern.search(body):
                    body = pattern.sub(close, body)
                    notes.append(f"a closing tag with a number appended read as {close}")
        return (text if not notes else text[:pos] + body), notes

    def _recover_call(self, text: str, pos: int, f: Finder, out: Lenient) -> tuple[int, bool]:
        """Reads one call (``pos``: after its call tag): ``(where reading goes on, whether the call's section goes
        on after it)``."""
        s = self.spelling
        if s.name_at == "text":
            e, tag = f.first((s.name_sep, s.key_open, s.call_close, s.call_open), pos)
            name = text[pos:e].strip()
            pos = e + len(s.name_sep) if tag == s.name_sep and s.name_sep.strip() else e
            if not name:
                out.note("no_name", f"a {s.call_open} block without a tool name")
            elif not self.is_name(name):
                out.note("bad_name", f"tool name {name[:60]!r} is not allowed")
        else:
            name_end, which = f.first((">", "\n"), pos)
            raw = text[pos : min(name_end, pos + MAX_ATTR_CHARS)]  # (a longer tag is not read for attributes)
            name = raw.strip() if s.name_at == "eq" else _attrs(raw).get("name", "").strip()
            pos = name_end + 1 if which == ">" else name_end
            if which is None:  # cut inside the name: no call can be trusted
                out.note("unclosed", f"the text ends inside the tool name {name[:60]!r}")
                out.mark_cut(None)
                return pos, False
            if which != ">":
                out.note("missing_tag", f"the {s.call_open}{name}> tag is not closed")
            if not self.is_name(name):
                out.note("bad_name" if name else "no_name", f"tool name {name[:60]!r} is not allowed")
            if which == ">" and s.name_at == "attr" and raw.endswith("/"):  # a call without arguments
                if name:
                    out.calls.append(ToolCall(name, {}))
                return self._after_call(text, pos, name, out)
        args: dict[str, Any] = {}
        closed = False
        whole = pos  # where the last value written whole ends (the name, at first)
        cut: tuple[dict[str, Any], bool] | None = None  # the text stops inside this call: (written whole, clean)
        stops = tuple(t for t in (s.key_open, s.call_close, s.call_open, s.section_close, s.section_open) if t)
        while pos < len(text):
            pos = skip_ws(text, pos)
            if text.startswith(s.call_close, pos):
                pos += len(s.call_close)
                closed = True
                break
            if text.startswith(s.key_open, pos):
                if not take_items(1):  # the rest is not read: this call, read in part, is left out
                    return len(text), False
                pos, cut_key = self._recover_param(text, pos + len(s.key_open), f, args, out)
                if cut_key is None:
                    whole = pos
                else:  # the text ends inside this parameter's value
                    cut = {k: v for k, v in args.items() if k != cut_key}, False
                continue
            nxt, tag = f.first(stops, pos)
            junk = text[pos:nxt]
            value = lenient_json(junk, at_end=tag is None) if junk.startswith("{") and not args else None
            if isinstance(value, dict):  # JSON arguments inside the call's tags (as Llama 3.1 writes them)
                out.note("missing_tag", f"arguments of {name!r} written as JSON instead of {s.key_open} tags")
                args.update((str(k), v) for k, v in value.items())
                cut, whole = written_before_cut(value), nxt
            elif tag in (s.key_open, s.call_close) or junk.strip():
                out.note("unreadable", f"text skipped in call {name!r}: {junk[:60]!r}")
            pos = nxt
            if tag not in (s.key_open, s.call_close):
                break
        tail = s.call_close + (s.section_close if s.section_per_call else "")
        if not closed:
            out.note("missing_tag", f"missing {s.call_close} after call {name!r}")
            if s.name_at == "text" and not args:  # a name line alone: a cut text or prose mentioning the tag
                out.note("unreadable", f"a {s.call_open} with neither arguments nor {s.call_close} dropped: "
                         f"{name[:60]!r}")
                mark_xml_cut(out, "", args, cut, stops_in_call(text, whole, tail, (s.key_open,)))
                return pos, False
        if name and not args and self._junk_name(name):
            out.note("not_a_call", f"{name[:60]!r} alone between call tags is text, not a call")
            name = ""
        if name:
            out.calls.append(ToolCall(name, args))
        if not closed:
            mark_xml_cut(out, name, args, cut, stops_in_call(text, whole, tail, (s.key_open,)))
        return self._after_call(text, pos, name, out)

    def _after_call(self, text: str, pos: int, name: str, out: Lenient) -> tuple[int, bool]:
        """After a call read leniently: its section's closing tag, if it has one: ``(where reading goes on, whether
        the section goes on with a further call)``."""
        s = self.spelling
        if not s.section_open:
            return pos, False
        k = skip_ws(text, pos)
        if text.startswith(s.section_close, k):
            return k + len(s.section_close), False
        if not s.section_per_call and text.startswith(s.call_open, k):
            return pos, True
        if s.section_per_call or k < len(text):
            out.note("missing_tag", f"missing {s.section_close} after call {name!r}")
        return pos, False

    def _recover_param(self, text: str, pos: int, f: Finder, args: dict, out: Lenient) -> tuple[int, str | None]:
        """Reads one parameter into ``args``: ``(where reading goes on, its key when the text ends inside its
        value, else None)``."""
        s = self.spelling
        string: bool | None = None
        if s.key_at == "element":
            j, tag = f.first((s.key_close, s.value_open, "\n", s.call_close, s.call_open), pos)
            raw = text[pos:j]
            key = read_key(raw)
            key = raw.strip() if key is None else key
            if tag == s.key_close:
                pos = skip_ws(text, j + len(s.key_close))
            else:
                out.note("missing_tag", f"missing {s.key_close} after key {key[:40]!r}")
                pos = skip_ws(text, j)
            if s.type_open and text.startswith(s.type_open, pos):  # a type element (see XmlSpelling)
                t = text.find(s.type_close, pos, pos + len(s.type_open) + TYPE_CHARS)
                if t >= 0:
                    kind = text[pos + len(s.type_open) : t].strip().lower()
                    string = True if kind == "string" else None if kind in ("any", "") else False
                    pos = skip_ws(text, t + len(s.type_close))
            if text.startswith(s.value_open, pos):
                vstart = pos + len(s.value_open)
            else:  # the value's opening tag was lost: the value is the text up to the next tag
                out.note("missing_tag", f"missing {s.value_open} after key {key[:40]!r}")
                vstart = pos
                nxt, _ = f.first((s.value_close, s.key_open, s.call_close, s.call_open), pos)
                if not text[pos:nxt].strip():
                    out.note("bad_argument", f"key {key[:40]!r} without a value dropped")
                    after = nxt + len(s.value_close) if text.startswith(s.value_close, nxt) else nxt
                    return after, key if nxt >= len(text) else None
        else:
            key_end, which = f.first((">", "\n"), pos)
            raw = text[pos : min(key_end, pos + MAX_ATTR_CHARS)]
            if s.key_at == "attr":
                attrs = _attrs(raw)
                key = attrs.get("name", raw.strip())
                flag = attrs.get(s.type_attr) if s.type_attr else None
                string = None if flag not in ("true", "false") else flag == "true"
            else:
                key = read_key(raw)
                key = raw.strip() if key is None else key
            if which != ">":
                out.note("missing_tag", f"the {s.key_open}{key[:40]}> tag is not closed")
                vstart = key_end
            else:
                vstart = key_end + 1
        # the value ends at its closing tag, unless a new parameter (on a new line, for raw-text keys) or the end of
        # the call or section comes first (the closing tag was lost), or at the end of the text (cut short)
        next_key = s.key_open if s.key_at == "element" else "\n" + s.key_open
        stop_tags = (next_key, s.call_close) + ((s.section_close, s.section_open) if s.section_open else (s.call_open,))
        close = f.next(s.value_close, vstart)
        stop, tag = f.first(stop_tags, vstart)
        cut = False
        if 0 <= close <= stop:
            end, after = close, close + len(s.value_close)
        else:
            end, after = stop, stop
            if tag is None:
                out.note("unclosed", f"parameter {key[:40]!r} cut short")
                cut = True
            else:
                out.note("missing_tag", f"missing {s.value_close} after parameter {key[:40]!r}")
                if not s.strip_newline:
                    end = vstart + len(text[vstart:end].rstrip())  # the newline the template puts before the tag
                elif tag != next_key and text.startswith("\n\n", end - 2):
                    end -= 1  # the template's newlines on both sides of the lost tag
        if key in args:
            out.note("bad_argument", f"parameter {key[:40]!r} given twice: the last value kept")
        args[key] = self._value(text[vstart:end], string)
        return after, key if cut else None

    # Render

    def render(self, calls: Sequence[ToolCall]) -> str:
        s = self.spelling
        sep = s.sep
        blocks = [self._render_call(c) for c in calls]
        if not s.section_open:
            text = sep.join(blocks) if sep else "\n".join(blocks)
        elif s.section_per_call:
            text = "\n".join(f"{s.section_open}{sep}{b}{sep}{s.section_close}" for b in blocks)
        else:
            text = f"{s.section_open}{sep}{sep.join(blocks)}{sep}{s.section_close}"
        if s.tag_suffix:
            text = self._suffixed(text)
        return text

    def _render_call(self, c: ToolCall) -> str:
        s = self.spelling
        sep = s.sep
        if s.name_at == "eq":
            head = f"{s.call_open}{c.name}>"
        elif s.name_at == "attr":
            head = f'{s.call_open}name="{c.name}">'
        else:
            head = f"{s.call_open}{c.name}{s.name_sep if s.name_sep.strip() else ''}"
        parts = [head]
        pad = "\n" if s.strip_newline else ""
        for k, v in c.arguments.items():
            if s.key_at == "element":
                key = write_key(k, s.key_close not in k)
                parts.append(f"{s.key_open}{key}{s.key_close}{sep}{s.value_open}{self._write(v)}{s.value_close}")
            elif s.key_at == "attr":
                typed = ""
                if s.type_attr:  # a string as written (string="true") unless it holds a tag: then JSON, as any value
                    raw = type(v) is str and not any(t in v for t in s.value_tags)
                    typed = f' {s.type_attr}="{"true" if raw else "false"}"'
                    body = v if raw else self._write(v, attr_typed=True)
                else:
                    body = self._write(v)
                parts.append(f'{s.key_open}name="{_attr_value(k)}"{typed}>{pad}{body}{pad}{s.value_close}')
            else:
                key = write_key(k, ">" not in k and "\n" not in k and "\r" not in k)
                parts.append(f"{s.key_open}{key}>{pad}{self._write(v)}{pad}{s.value_close}")
        if s.name_at == "text" and sep == "\n":  # GLM: NAME\n, each pair followed by \n, then the close
            return "".join(p + sep for p in parts[:1]) + "".join(p + sep for p in parts[1:]) + s.call_close
        parts.append(s.call_close)
        return sep.join(parts)

    def _write(self, value: Any, attr_typed: bool = False) -> str:
        s = self.spelling
        if attr_typed:  # a typed attribute says "JSON": always JSON, "<" escaped where a tag would appear
            text = dumps(value)
            return text.replace("<", "\\u003c") if any(t in text for t in s.value_tags) else text
        return write_value(value, s.value_tags, python_literals=s.python_literals)

    def _suffixed(self, text: str) -> str:
        s = self.spelling
        for t in sorted(set(s.tags()), key=len, reverse=True):
            if t.endswith(">"):
                text = text.replace(t, t[:-1] + s.tag_suffix + ">")
        return text

    # Typing by the tool specs

    def retype(self, calls: Sequence[ToolCall], tools: Mapping[str, Any]) -> list[ToolCall]:
        return retype_calls(calls, tools, python_literals=self.spelling.python_literals)


_NO_HOOK = Hook()


@functools.lru_cache(maxsize=64)
def _speller(tags: tuple[str, ...]) -> Speller:
    return Speller(tags)


_LOST_NAME = re.compile(r"""name\s*=\s*(?:"[^"\n<>]*"|'[^'\n<>]*')\s*/?>""")
LINE_INDENT_CHARS = 64  # how far before a lost tag's name="..." its line start is looked for


def _word(tag: str) -> str:
    """A tag's word as the speller names it (:mod:`refiner.formats.tags`)."""
    return tag.rstrip().strip("<>[]/=|")


def _respell_generic(fmt: XmlParams, text: str, start: int) -> tuple[str, list[str]] | None:
    """The repair of tags written wrong for a row without a hook of its own (lenient reading only): a look-alike of
    one of the row's tags (:mod:`refiner.formats.tags`: other case, ``_`` / ``-`` changed, ``[...]`` for ``<...>``, a
    lost ``>``, one letter off) is that tag, an opening look-alike of the value's closer inside a value its closer;
    and for rows naming calls and keys in attributes, a lost call or parameter tag before a line's
    ``name="..."`` is put back (a parameter's when the value's closer follows before the call's, else a call's).
    Another format's tag stays text. ``None`` when nothing was changed."""
    s = fmt.spelling
    tags = tuple(t for t in s.tags() if t.endswith((">", " ")))
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []
    speller = _speller(tags)
    if speller.written_wrong(text, start):
        by_word: dict[tuple[str, bool], str] = {}
        for t in tags:
            by_word.setdefault((_word(t), t.startswith(("</", "[/"))), t)
        hits = list(itertools.islice(speller.scan(text, start), MAX_TAG_HITS + 1))
        if len(hits) <= MAX_TAG_HITS:
            in_value = False
            value_word = _word(s.value_close)
            for h in hits:
                if h.word is None:
                    continue
                tag = by_word.get((h.word, h.closing))
                if in_value and h.word == value_word and not h.closing:
                    tag = s.value_close  # the closer written without its slash
                if tag is None:
                    continue
                if tag in (s.value_open or s.key_open,):
                    in_value = True
                elif tag == s.value_close:
                    in_value = False
                if h.exact:
                    continue
                new = tag.rstrip() if tag.endswith(" ") or not h.ended and not tag.endswith(">") else tag
                if tag.endswith(" ") and text[h.end : h.end + 1] not in (" ", "\t", "\n"):
                    new = tag
                if new == text[h.start : h.end]:
                    continue  # an attribute tag written as it is (the speller reads it without its space)
                edits.append((h.start, h.end, new))
                notes.append(f"tag {text[h.start : h.end][:40]!r} read as {new.strip()}")
    if s.name_at == "attr" and "name" in text:
        for m in itertools.islice(_LOST_NAME.finditer(text, start), MAX_TAG_HITS):
            lo = max(start, m.start() - LINE_INDENT_CHARS)
            before = text[lo : m.start()]
            nl = before.rfind("\n")
            if before[nl + 1 :].strip() or (nl < 0 and lo > start):
                continue  # not at the start of its line: a tag's own attribute (or prose)
            after = skip_ws(text, m.end())
            if after >= len(text) or text.startswith((s.key_open, s.call_close), after):
                put = s.call_open  # the call's name: parameters or the call's end follow
            elif s.key_at == "attr":
                put = s.key_open  # a value follows
            else:
                continue
            edits.append((m.start(), m.start(), put))
            notes.append(f"missing {put.strip()} put back before {m.group(0).strip()[:40]!r}")
    if not edits:
        return None
    edits.sort(key=lambda e: e[0])
    parts, pos = [], 0
    for a, b, new in edits:
        if a < pos:
            continue
        parts += [text[pos:a], new]
        pos = b
    parts.append(text[pos:])
    return "".join(parts), notes


def _suffixed_words(tags: tuple[str, ...]) -> list[str]:
    """The words of ``tags`` (and of the reasoning block's ``<think>``) that a row with ``tag_suffix`` suffixes."""
    return sorted({t[1:-1].lstrip("/") for t in tags if t.endswith(">")} | {"think"})


@functools.lru_cache(maxsize=64)
def _suffix_pattern(tags: tuple[str, ...]) -> re.Pattern:
    """A tag of ``tags`` (and the reasoning block's ``<think>``) with a ``:SUFFIX`` before its ``>``, or a text that
    ends inside such a tag's suffix (cut short: ``</arg_value:61``)."""
    alts = "|".join(re.escape(w) for w in _suffixed_words(tags))
    return re.compile(r"(</?(?:" + alts + r")):(?:[^\s<>]{1,64}>|[^\s<>]{0,64}\Z)")


def _unsuffix(tags: tuple[str, ...], text: str) -> str:
    """``text`` with the suffix dropped from every tag of ``tags`` (:func:`_suffix_pattern`): the whole tags by a
    template (no Python call per tag), then a tag the text ends inside."""
    whole, cut = _suffix_parts(tags)
    text = whole.sub("", text)
    m = cut.search(text, max(len(text) - 160, 0))
    return text if m is None else text[: m.start()] + _unsuffixed(m)


@functools.lru_cache(maxsize=64)
def _suffix_parts(tags: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern]:
    """:func:`_suffix_pattern`'s two cases apart: a whole tag's suffix alone (found from its ``:``, replaced by
    nothing: the substitution then runs at C speed), and a text that ends inside a tag's suffix."""
    head = _suffix_pattern(tags).pattern.split(":(?:", 1)[0]
    behind = "|".join(f"(?<={re.escape(o + w + ':')})" for w in _suffixed_words(tags) for o in ("<", "</"))
    return re.compile(r":(?:" + behind + r")[^\s<>]{1,64}(?=>)"), re.compile(head + r":[^\s<>]{0,64}\Z")


def _unsuffixed(m: re.Match) -> str:
    """A tag matched by :func:`_suffix_pattern` without its suffix; a text cut inside the suffix ends inside the tag
    (``</arg_value``: a cut, as the same text without a suffix reads), not after a tag read whole."""
    return m.group(1) + (">" if m.group(0).endswith(">") else "")
_JSON_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_ESCAPED = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(m: re.Match) -> str:
    e = m.group(1)
    return chr(int(e[1:], 16)) if e[0] == "u" else _ESCAPED[e]


def _first(text: str, tags: Sequence[str], pos: int) -> int:
    best = len(text)
    for t in tags:
        if t:
            j = text.find(t, pos, best)
            if j >= 0:
                best = j
    return best


# ----------------------------------------------------------------------------------------------------------------
# The rows (refiner.formats.family): a family that writes this grammar is one more row here.

QWEN3_CODER = XmlSpelling(
    section_open="<tool_call>", section_close="</tool_call>", section_per_call=True,
    call_open="<function=", call_close="</function>", strip_newline=True, typing="python", hook="qwen3_coder",
)
GLM45 = XmlSpelling(
    call_open="<tool_call>", call_close="</tool_call>", name_at="text",
    key_open="<arg_key>", key_close="</arg_key>", key_at="element", value_open="<arg_value>",
    value_close="</arg_value>", hook="glm45",
)


def _dsml(bar: str, section: str) -> XmlSpelling:
    """DeepSeek's DSML: ``bar`` is ``<｜DSML｜`` (V3.2, V4) or ``<｜DSML｜ `` (V4.1), ``section`` the block's word."""
    close = "</" + bar[1:]
    return XmlSpelling(
        section_open=f"{bar}{section}>", section_close=f"{close}{section}>",
        call_open=f"{bar}invoke ", call_close=f"{close}invoke>", name_at="attr",
        key_open=f"{bar}parameter ", value_close=f"{close}parameter>", key_at="attr", typing="attr", type_attr="string",
    )


def _invoke(section: str, prefix: str = "", param: str = "parameter") -> XmlSpelling:
    """``<SECTION><PREFIXinvoke name="f"><PREFIXparameter name="k">v</PREFIXparameter></PREFIXinvoke></SECTION>``
    (MiniMax-M2, dots.llm, Muse Glimmer): strings raw, other values JSON."""
    return XmlSpelling(
        section_open=f"<{section}>", section_close=f"</{section}>",
        call_open=f"<{prefix}invoke ", call_close=f"</{prefix}invoke>", name_at="attr",
        key_open=f"<{prefix}{param} ", value_close=f"</{prefix}{param}>", key_at="attr",
    )


def _kv(prefix: str = "", *, section: str = "", name_sep: str = "\n", sep: str = "\n", suffix: str = "") -> XmlSpelling:
    """The key/value tag pairs (GLM's layout): ``<PREFIXtool_call>NAME[NAME_SEP]<PREFIXarg_key>k</PREFIXarg_key>
    <PREFIXarg_value>v</PREFIXarg_value></PREFIXtool_call>``, in a ``section`` when given."""
    return XmlSpelling(
        section_open=f"<{section}>" if section else "", section_close=f"</{section}>" if section else "",
        call_open=f"<{prefix}tool_call>", call_close=f"</{prefix}tool_call>", name_at="text", name_sep=name_sep,
        key_open=f"<{prefix}arg_key>", key_close=f"</{prefix}arg_key>", key_at="element",
        value_open=f"<{prefix}arg_value>", value_close=f"</{prefix}arg_value>", sep=sep, tag_suffix=suffix,
    )


VLLM = "vllm-project/vllm vllm/tool_parsers/"
SGLANG = "sgl-project/sglang python/sglang/srt/function_call/"
LLAMA_CPP = "ggml-org/llama.cpp models/templates/"

# Hunyuan's <tool_calls> section is shared with the JSON formats minimax (262) and jamba (263), its <tool_call> and
# <arg_key> with qwen3_coder and glm45: its rows rank before all of them (their sniff needs the <tool_call> inside).
ROWS_HUNYUAN = (
    (Family("hunyuan_v4", "Hunyuan HY v4: <tool_calls:S><tool_call:S>NAME<arg_key:S>KEY</arg_key:S><arg_value:S>VALUE"
            "</arg_value:S></tool_call:S></tool_calls:S>, S a per-checkpoint suffix (any is read)",
            sources=(VLLM + "hy_v4_tool_parser.py",)),
     _kv(section="tool_calls", name_sep="\n", sep="", suffix=":6124c78e")),
    (Family("hunyuan_v3", "Hunyuan HY v3: <tool_calls><tool_call>NAME<tool_sep><arg_key>KEY</arg_key><arg_value>VALUE"
            "</arg_value></tool_call></tool_calls> (strings raw, other values JSON)",
            sources=(VLLM + "hy_v3_tool_parser.py",)),
     _kv(section="tool_calls", name_sep="<tool_sep>", sep="")),
)

# Qwen3-Coder and GLM share <tool_call> with apibank (60) and hermes (70): they rank before them, Qwen3-Coder first.
ROWS_TOOL_CALL = (
    (Family("qwen3_coder", "Qwen3-Coder XML: <tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n"
            "</function>\\n</tool_call> per call (strings raw, other values JSON)",
            models=("Qwen/Qwen3-Coder-480B-A35B-Instruct", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3.5-397B-A17B"),
            sources=(VLLM + "qwen3coder_tool_parser.py", SGLANG + "qwen3_coder_detector.py",
                     "Qwen/Qwen3-Coder-480B-A35B-Instruct chat_template.jinja")),
     QWEN3_CODER),
    (Family("glm45", "GLM-4.5/4.6: <tool_call>NAME\\n<arg_key>KEY</arg_key>\\n<arg_value>VALUE</arg_value>\\n"
            "</tool_call> per call (strings raw, other values JSON)",
            models=("zai-org/GLM-4.5", "zai-org/GLM-4.5-Air", "zai-org/GLM-4.6", "zai-org/GLM-4.7"),
            sources=(VLLM + "glm4_moe_tool_parser.py", VLLM + "glm47_moe_tool_parser.py",
                     SGLANG + "glm4_moe_detector.py", LLAMA_CPP + "glm_4_5.jinja", LLAMA_CPP + "GLM-4.6.jinja")),
     GLM45),
)

# Markers of their own: ranked after the sentinel formats (DeepSeek V3/V3.1 at 200/201).
ROWS_OWN_MARKERS = (
    (Family("deepseek_v32", "DeepSeek V3.2 DSML: <｜DSML｜function_calls><｜DSML｜invoke name=\"NAME\"><｜DSML｜parameter "
            "name=\"KEY\" string=\"true|false\">VALUE</｜DSML｜parameter>...</｜DSML｜invoke></｜DSML｜function_calls>",
            models=("deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Exp"),
            sources=(VLLM + "deepseekv32_tool_parser.py", LLAMA_CPP + "DeepSeek-V3.2.jinja",
                     "deepseek-ai/DeepSeek-V3.2 encoding/encoding_dsv32.py")),
     _dsml("<｜DSML｜", "function_calls")),
    (Family("deepseek_v4", "DeepSeek V4 DSML: V3.2's invoke/parameter elements inside <｜DSML｜tool_calls>",
            models=("deepseek-ai/DeepSeek-V4-Flash",), sources=(VLLM + "deepseekv4_tool_parser.py",)),
     _dsml("<｜DSML｜", "tool_calls")),
    (Family("deepseek_v41", "DeepSeek V4.1 DSML: a space after the bar (<｜DSML｜ invoke ...>), inside <｜DSML｜ calls>",
            models=("deepseek-ai/DeepSeek-V4.1-Flash",), sources=(VLLM + "deepseekv41_engine_tool_parser.py",)),
     _dsml("<｜DSML｜ ", "calls")),
    (Family("minimax_m2", "MiniMax-M2: <minimax:tool_call><invoke name=\"NAME\"><parameter name=\"KEY\">VALUE"
            "</parameter></invoke></minimax:tool_call> (strings raw, other values JSON)",
            models=("MiniMaxAI/MiniMax-M2", "MiniMaxAI/MiniMax-M2.1", "MiniMaxAI/MiniMax-M2.5"),
            sources=(VLLM + "minimax_m2_tool_parser.py", LLAMA_CPP + "unsloth-MiniMax-M2.jinja")),
     _invoke("minimax:tool_call")),
    (Family("seed_oss", "Seed-OSS: <seed:tool_call><function=NAME><parameter=KEY>VALUE</parameter></function>"
            "</seed:tool_call> per call, reasoning in <seed:think>",
            models=("ByteDance-Seed/Seed-OSS-36B-Instruct",), reasoning=(("<seed:think>", "</seed:think>"),),
            sources=(VLLM + "seed_oss_tool_parser.py", LLAMA_CPP + "ByteDance-Seed-OSS.jinja")),
     XmlSpelling(section_open="<seed:tool_call>", section_close="</seed:tool_call>", section_per_call=True,
                 call_open="<function=", call_close="</function>", typing="python")),
    (Family("step3", "Step-3: <｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"NAME\">"
            "<steptml:parameter name=\"KEY\">VALUE</steptml:parameter></steptml:invoke><｜tool_call_end｜>"
            "<｜tool_calls_end｜>", models=("stepfun-ai/step3",),
            sources=(VLLM + "step3_tool_parser.py", SGLANG + "step3_detector.py")),
     XmlSpelling(section_open="<｜tool_calls_begin｜>", section_close="<｜tool_calls_end｜>",
                 call_open="<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke ",
                 call_close="</steptml:invoke><｜tool_call_end｜>", name_at="attr",
                 key_open="<steptml:parameter ", value_close="</steptml:parameter>", key_at="attr")),
    (Family("dots1", "dots.llm: <dots_function_call><invoke name=\"NAME\"><parameter name=\"KEY\">VALUE</parameter>"
            "</invoke></dots_function_call>", models=("rednote-hilab/dots.llm1.inst",),
            sources=("vllm-project/vllm vllm/frontend/processing/tool_parsers/dots_tool_parser.py",)),
     _invoke("dots_function_call")),
    (Family("muse_glimmer", "Muse Glimmer (ATEM): <atem:function_calls><atem:invoke name=\"NAME\"><atem:parameter "
            "name=\"KEY\">VALUE</atem:parameter></atem:invoke></atem:function_calls>",
            sources=(VLLM + "muse_glimmer_tool_parser.py",)),
     _invoke("atem:function_calls", "atem:")),
    (Family("minicpm5", "MiniCPM5: <function name=\"NAME\"><param name=\"KEY\">VALUE</param></function> per call",
            sources=("vllm-project/vllm vllm/frontend/processing/tool_parsers/minicpm5xml_tool_parser.py",)),
     XmlSpelling(call_open="<function ", call_close="</function>", name_at="attr", key_open="<param ",
                 value_close="</param>", key_at="attr")),
    (Family("longcat", "LongCat (GLM's layout): <longcat_tool_call>NAME\\n<longcat_arg_key>KEY</longcat_arg_key>\\n"
            "<longcat_arg_value>VALUE</longcat_arg_value>\\n</longcat_tool_call>",
            sources=(VLLM + "longcat_tool_parser.py",)),
     _kv("longcat_")),
    (Family("k2_horizon", "K2-Horizon: <ifm|tool_calls><ifm|tool_call>NAME<ifm|arg_key>KEY</ifm|arg_key><ifm|arg_value>"
            "VALUE</ifm|arg_value></ifm|tool_call></ifm|tool_calls> (the default 'xml' tool_call_format; strings raw, "
            "other values JSON; the 'xml_typed' layout's <ifm|arg_type> elements are read by recovery)",
            models=("k2-horizon/K2-Horizon",), sources=(VLLM + "k2_horizon_tool_parser.py",)),
     replace(_kv("ifm|", section="ifm|tool_calls", sep=""),
             type_open="<ifm|arg_type>", type_close="</ifm|arg_type>")),
)

ROWS = ROWS_TOOL_CALL + ROWS_HUNYUAN + ROWS_OWN_MARKERS
register_rows(XmlParams, 51, ROWS_TOOL_CALL)  # first: later rows leave them the <tool_call> family's markers
register_rows(XmlParams, 47, ROWS_HUNYUAN)
register_rows(XmlParams, 230, ROWS_OWN_MARKERS)
