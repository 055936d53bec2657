"""The XML-ish parameter grammar: tool calls written as tags, one element (or key/value tag pair) per argument, the
values raw text between tags. One grammar, read from a spelling (:class:`~refiner.formats.xml_spelling.XmlSpelling`,
every literal); a model family that writes it is a row of the catalog (:mod:`refiner.formats.catalog`)::

    [SECTION_OPEN]                          optional; around every call, or around all of them
      CALL_OPEN NAME ...                    `<function=NAME>`, `<invoke name="NAME">`, or NAME + NAME_SEP (GLM, Hunyuan)
        KEY_OPEN KEY ... VALUE VALUE_CLOSE  `<parameter=KEY>V</parameter>`, `<parameter name="KEY">V</parameter>`, or
                                            `<arg_key>KEY</arg_key><arg_value>V</arg_value>`
      CALL_CLOSE
    [SECTION_CLOSE]

An opening tag ends at TAG_END (``>``, or a control token). Reasoning and prose may come before the first call, prose
after the last; whitespace between tags is free. A value is the text up to the first closing tag that the next
structural tag follows and that closes no value tag the value opens itself (as vLLM reads it:
:func:`~refiner.formats.xmlvalues.value_end`), less one newline at each end with ``strip_newline``; one holding tags is
written as a JSON string literal. Values are typed by the row's ``typing`` (:mod:`refiner.formats.xmlvalues`), then by
the tool specs. A parameter given twice is an error (strict), the last kept (lenient). What a row's table cannot say
goes into its one hook (:class:`~refiner.formats.xml_spelling.Hook`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import (
    ROW_CHARS,
    SPACED_NAME_PATTERN,
    Detection,
    Lenient,
    WireFormat,
    offered_tools,
)
from refiner.formats.message import AnswerParts
from refiner.formats.strict import JSON_DECODER
from refiner.formats.tags import respell_barred
from refiner.formats.text import reasoning_offset, skip_ws
from refiner.formats.xml_lenient import WORD, XmlReader
from refiner.formats.xml_spelling import JSON_TYPES, XmlSpelling, _attrs
from refiner.formats.xmlvalues import (
    MAX_ATTR_CHARS,
    followed,
    read_value,
    retype_calls,
    value_end,
    write_key,
    write_value,
)

CDATA = ("<![CDATA[", "]]>")  # a value written as XML's character data section (XmlSpelling.cdata)


@functools.lru_cache(maxsize=64)
def _suffixes(tags: tuple[str, ...], suffix: str) -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    """Patterns over ``tags`` and ``<think>`` for a row whose tags carry a ``:SUFFIX`` before ``>`` (any suffix read): a
    suffixed tag or a text ending inside one; a whole tag's suffix alone (removed at C speed); a tag written with
    ``suffix`` less its colon (``<tool_callopensource>``). Group 1 of the first and last: the tag before its suffix."""
    words = sorted({t[1:-1].lstrip("/") for t in tags if t.endswith(">")} | {"think"})
    head = r"(</?(?:" + "|".join(re.escape(w) for w in words) + r"))"
    behind = "|".join(f"(?<={re.escape(o + w + ':')})" for w in words for o in ("<", "</"))
    return (re.compile(head + r":(?:[^\s<>]{1,64}>|[^\s<>]{0,64}\Z)"),
            re.compile(r":(?:" + behind + r")[^\s<>]{1,64}(?=>)"), re.compile(head + re.escape(suffix[1:]) + ">"))


def _unsuffixed(m: re.Match) -> str:
    """A tag matched with its suffix, without it (cut inside it: the tag stays unclosed)."""
    return m.group(1) + (">" if m.group(0).endswith(">") else "")


_SPOKEN = re.compile(r"[\s()]")
_SPACED_NAME = re.compile(SPACED_NAME_PATTERN)


def _spoken(name: str) -> bool:
    """Whether a name written as text is words or a call written out (``f(a=1)``): it holds a space or a parenthesis."""
    return not name.isidentifier() and _SPOKEN.search(name) is not None


def _attr_value(value: str) -> str:
    """An attribute value as render writes it, with XML's entities for the characters a tag cannot hold."""
    return (value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", "&#10;").replace("\r", "&#13;"))


def _type_name(value: Any, raw: bool, typing: str) -> str:
    """The type attribute's value render writes: ``true`` / ``false`` (raw or JSON), or a type named."""
    if typing == "attr":
        return "true" if raw else "false"
    return "string" if raw else next((name for name, ts in JSON_TYPES.items() if type(value) in ts), "object")


class XmlParams(XmlReader, WireFormat):
    """The grammar: every method reads ``self.spelling`` (:class:`XmlSpelling`); its rows are in the catalog."""

    spelling: XmlSpelling
    _name: re.Pattern  # (of the row's tool names)
    _stops: dict[str, tuple[re.Pattern, re.Pattern]]  # (what ends a name or key, by its kind: lenient, strict)
    _next_tag: re.Pattern  # whitespace, then the call's closing tag (group 1) or a key tag (group 2), or neither
    _value_ends: re.Pattern  # a value's closing tag followed by the next key tag or the call's closing tag
    _value_quote: str  # the opening tag a raw value's own tag pairs start with (value_end)
    _read_raw: functools.partial  # read_value with the row's literals and value tags
    _key_attrs: re.Pattern  # a key tag's attributes and its end, from the key attribute on (attr rows)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A row's patterns, and the :class:`~refiner.formats.base.WireFormat` hooks its hook holds, as methods."""
        super().__init_subclass__(**kwargs)
        if "spelling" not in cls.__dict__:
            return
        s = cls.spelling
        cls._name = _SPACED_NAME if s.name_at == "text" else WORD
        # a name or key ends at the first of its stopping tags (of those at one position, the first listed)
        stops = {"eq": (s.tag_end, "\n"), "attr": (s.tag_end, "\n", "<"), "text": (s.name_sep, s.key_open, s.call_close,
                 s.call_open), "element": (s.key_close, s.value_open, "\n", s.call_close, s.call_open)}
        strict = {**stops, "attr": (s.tag_end, "<"), "element": (s.key_close,)}
        cls._stops = {k: tuple(re.compile("|".join(map(re.escape, table[k]))) for table in (stops, strict))
                      for k in stops}
        cls._next_tag = re.compile(rf"\s*(?:({re.escape(s.call_close)})|({re.escape(s.key_open)}))?")
        cls._value_ends = followed(s.value_close, (s.key_open, s.call_close))
        cls._value_quote = s.value_open if s.key_at == "element" else "\n" + s.key_open
        cls._read_raw = functools.partial(read_value, python_literals=s.python_literals, tags=s.value_tags)
        cls._key_attrs = re.compile(rf'{re.escape(s.key_attr)}="[^"<>\n]*"(?:\s+[\w\-:]+\s*=\s*"[^"<>\n]*")*\s*'
                                    rf"{re.escape(s.tag_end)}")
        cls.name_pattern = cls._name.pattern
        hook = s.hook
        for name in ("sniff", "region_start", "read_untagged", "answer_parts") if hook else ():
            if getattr(hook, name) is not None:
                setattr(cls, name, getattr(hook, name))
        cls.channels = bool(hook and hook.answer_parts)  # (Kimi K3's row reads channels)

    # The row contract (refiner.formats.family)

    @classmethod
    def tags_for(cls, s: XmlSpelling) -> tuple[str, ...]:
        return s.tags()

    @classmethod
    def detection_for(cls, s: XmlSpelling, rank: int) -> Detection:
        # call and key tags point here too (a section tag lost) unless another row holds them (family.markers_left)
        markers = [s.first_open, s.call_open, s.key_open]
        # closers, read only when a text holds no marker: one string each (each is a scan of the whole text)
        closers = [s.key_close, s.value_close] if s.key_at == "element" else [s.value_close]
        closers += ([s.call_close] if s.key_at == "eq" else []) + list(s.hook.closers if s.hook else ())
        also: tuple[str, ...] = ()
        if s.tag_suffix and s.suffix_optional:  # plain tags are the markers; a suffixed first tag is read too, and
            also = (s.first_open[:-1] + ":",)  # suffixed closers name the row (a broken text is read as this row's)
            closers += [c[:-1] + ":" for c in closers if c.endswith(">")]
        elif s.tag_suffix:  # the text holds <tool_call:SUFFIX>: the marker is the tag up to its suffix
            markers = [m[:-1] + ":" if m.endswith(">") else m for m in markers]
            closers = [c[:-1] + ":" if c.endswith(">") else c for c in closers]
        # (the strict reader reads no text without the first tag: parse_strict)
        return Detection(rank=rank, markers=tuple(dict.fromkeys(markers)), closers=tuple(dict.fromkeys(closers)),
                         also_read=also, strict_needs=() if s.tag_suffix else (s.first_open,))

    def is_name(self, name: str) -> bool:
        return name.isidentifier() or self._name.fullmatch(name) is not None  # (an identifier matches either pattern)

    def answer_parts(self, text: str) -> AnswerParts:
        """Rows whose tags carry a per-checkpoint suffix (``<tool_call:6124c78e>``): the text outside the calls is
        read as for any row, with the suffixes dropped; the calls' span is given in ``text``'s own positions."""
        if not self.spelling.tag_suffix or ":" not in text:
            return super().answer_parts(text)
        shifts, total = [], 0  # (where each dropped suffix ends in the plain text, the characters dropped up to it)
        for m in _suffixes(self.spelling.tags(), self.spelling.tag_suffix)[0].finditer(text):
            total += len(m.group(0)) - len(_unsuffixed(m))
            shifts.append((m.end() - total, total))
        parts = super().answer_parts(self._plain(text))
        a, b = (p + max((t for e, t in shifts if e <= p), default=0) for p in parts.calls)
        return AnswerParts(parts.content, parts.reasoning, (a, b))

    def _plain(self, text: str) -> str:
        """The text with a per-checkpoint tag suffix dropped from every tag (rows with ``tag_suffix``)."""
        s = self.spelling
        if not s.tag_suffix or ":" not in text:
            return text
        tag, whole, _ = _suffixes(s.tags(), s.tag_suffix)
        text = whole.sub("", text)
        m = tag.search(text, max(len(text) - 160, 0))  # (no whole suffixed tag is left: a text ending inside one)
        return text if m is None else text[: m.start()] + _unsuffixed(m)

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
        s = self.spelling
        body = self._plain(body[at : at + ROW_CHARS])
        at = skip_ws(body, len(s.section_open)) if s.section_open and body.startswith(s.section_open) else 0
        if not body.startswith(s.call_open, at):  # a section without a call, or a bare key tag: this row's only
            return not s.section_open  # when it writes no section (sectioned rows share their key tags)
        pos = at + len(s.call_open)
        if s.name_at == "text":
            m = self._stops["text"][True].search(body, pos)  # (where the walk ends the name)
            e = m.start() if m else len(body)
            if not self.is_name(body[pos:e].strip()):
                return False
            if s.name_sep.strip() and not body.startswith(s.name_sep, e):
                return False  # the row writes a tag after the name (Hunyuan's <tool_sep>): another row's call
            k = skip_ws(body, e + (len(s.name_sep) if body.startswith(s.name_sep, e) else 0))
        else:
            e = body.find(s.tag_end, pos)
            if e < 0:
                return "{" not in body[pos:]  # cut inside the name
            if s.name_at == "attr" and (e - pos > MAX_ATTR_CHARS or s.name_attr not in _attrs(body[pos:e])):
                return False
            if s.name_at == "attr" and body.endswith("/", 0, e):
                return True  # <invoke name="f"/>
            k = skip_ws(body, e + len(s.tag_end))
        if s.refused_attr and body.startswith(s.key_open, k):  # (another row's typed parameter)
            j = body.find(">", k, k + MAX_ATTR_CHARS + 1)
            if j >= 0 and s.refused_attr in _attrs(body[k + len(s.key_open) : j]):
                return False
        return k >= len(body) or body.startswith((s.key_open, s.call_close), k)

    # Lenient

    def recover(self, text: str, out: Lenient) -> None:
        """:meth:`_walk`'s lenient reading, after putting back the colon of this row's own tag suffix where a tag lost
        it (``<arg_valueopensource>``, a suffixed row's one-character slip; other suffixes stay as written)."""
        s = self.spelling
        text = respell_barred(text, s.tags(), out)
        if s.tag_suffix and s.tag_suffix[1:] in text:
            lost = _suffixes(s.tags(), s.tag_suffix)[2]
            text, n = lost.subn(lambda m: m.group(1) + s.tag_suffix + ">", text)
            if n:
                out.note("missing_tag", f"{n} tag(s) written without the ':' of {s.tag_suffix}")
        self._walk(self._plain(text), out.calls, out)

    # Strict

    def parse_strict(self, text: str) -> list[ToolCall]:
        s = self.spelling
        if (s.first_open if not s.tag_suffix else s.first_open[:-1]) not in text:  # one scan: detection tries
            raise self.error(f"no {s.first_open}...{s.section_close or s.call_close} block", 0)  # every row
        calls: list[ToolCall] = []
        self._walk(self._plain(text) if s.tag_suffix else text, calls, None)
        return calls

    def _junk_name(self, name: str) -> bool:
        """A name written as text with a space or parenthesis in it and no arguments (``<tool_call>not valid
        json</tool_call>``, ``<tool_call>f(a=1)</tool_call>``): words or another layout's call, not a call, unless the
        request offers a tool so named. A one-word name alone is an argument-less call (GLM writes those so)."""
        if self.spelling.name_at != "text" or not _spoken(name):
            return False
        offered = offered_tools()
        return offered is None or name not in offered

    def check_renderable(self, calls: Sequence[ToolCall]) -> None:
        super().check_renderable(calls)
        if self.spelling.name_at == "text":
            for i, c in enumerate(calls):
                if not c.arguments and _spoken(c.name):
                    raise self.render_error(f"call #{i}: {c.name!r} without arguments would read as text")

    def _type_of(self, attrs: dict[str, str], at: int | None) -> str | None:
        """The value's type by the row's type attribute (see :meth:`_recover_param`); ``None`` for a row without one,
        and, read leniently (``at`` is ``None``), for a flag neither ``true`` nor ``false``."""
        s = self.spelling
        flag = attrs.get(s.type_attr)
        if s.typing == "named":
            return flag or "string"
        if s.typing != "attr" or (at is None and flag not in ("true", "false")):
            return None
        if flag not in ("true", "false"):
            raise self.error(f"{s.type_attr}= must be \"true\" or \"false\", got {flag!r}", at)
        return "string" if flag == "true" else ""

    def _value_end(self, text: str, pos: int) -> int:
        s = self.spelling
        if s.cdata and text.startswith(CDATA[0], skip_ws(text, pos)):  # a CDATA section up to the next closing tag
            j = text.find(s.value_close, pos)
            if j >= 0 and text[pos:j].rstrip().endswith(CDATA[1]):
                return j
        end = value_end(text, pos, self._value_quote, s.value_close, self._value_ends)
        if end < 0:
            j = text.find(s.value_close, pos)
            if j >= 0 and skip_ws(text, j + len(s.value_close)) == len(text):
                raise self.error(f"missing {s.call_close}", len(text))
            what = "value" if s.key_at == "element" else "parameter value"
            raise self.error(f"unclosed {what} (no {s.value_close} followed by {s.key_open} or {s.call_close})", pos)
        return end

    def _value(self, raw: str, typ: str | None) -> Any:
        """A raw value's reading: by ``typ`` from a type attribute (``"string"``: the text as written; else JSON,
        else the text), else by the row's typing."""
        s = self.spelling
        if s.strip_newline:  # the template's newline at each end
            raw = raw.removeprefix("\n").removesuffix("\n")
        if s.cdata:
            t = raw.strip()
            if t.startswith(CDATA[0]) and t.endswith(CDATA[1]):  # a text written in a CDATA section, as it is
                return t[len(CDATA[0]) : -len(CDATA[1])]
        if typ == "string":
            return raw
        if typ is not None:
            try:
                return JSON_DECODER.decode(raw.strip())
            except (ValueError, RecursionError):
                return raw
        return self._read_raw(raw)

    # Render

    def render(self, calls: Sequence[ToolCall]) -> str:
        s = self.spelling
        sep = s.sep
        blocks = [self._render_call(c, i) for i, c in enumerate(calls, start=1)]
        if not s.section_open:
            text = (sep or "\n").join(blocks)
        elif s.section_per_call:
            text = "\n".join(f"{s.section_open}{sep}{b}{sep}{s.section_close}" for b in blocks)
        else:
            text = f"{s.section_open}{sep}{sep.join(blocks)}{sep}{s.section_close}"
        if s.tag_suffix:
            for t in sorted(set(s.tags()), key=len, reverse=True):
                if t.endswith(">"):
                    text = text.replace(t, t[:-1] + s.tag_suffix + ">")
        return text

    def _render_call(self, c: ToolCall, i: int) -> str:
        s = self.spelling
        sep = s.sep
        if s.name_at == "eq":
            head = f"{s.call_open}{c.name}>"
        elif s.name_at == "attr":
            index = f' {s.index_attr}="{i}"' if s.index_attr else ""
            head = f'{s.call_open}{s.name_attr}="{c.name}"{index}{s.tag_end}'
        else:
            head = f"{s.call_open}{c.name}{s.name_sep if s.name_sep.strip() else ''}"
        parts = [head]
        pad = "\n" if s.strip_newline else ""
        for k, v in c.arguments.items():
            if s.key_at == "element":
                key = write_key(k, s.key_close not in k)
                parts.append(f"{s.key_open}{key}{s.key_close}{sep}{s.value_open}{self._write(v)}{s.value_close}")
            elif s.key_at == "attr":
                # with a type attribute, a string as written (string="true") unless it holds a tag: then JSON; typed
                # by name, a string is written as it is when it reads back so
                raw = bool(s.type_attr) and type(v) is str and not any(t in v for t in s.value_tags)
                if s.typing == "named" and type(v) is str and not raw:
                    if self._value_end(v + s.value_close + s.call_close, 0) != len(v):
                        raise self.render_error(f"the value of {k!r} holds {s.value_close} before a tag: it cannot "
                                                "be written as raw text")
                    raw = True
                typed = f' {s.type_attr}="{_type_name(v, raw, s.typing)}"' if s.type_attr else ""
                body = v if raw else self._write(v)
                parts.append(f'{s.key_open}{s.key_attr}="{_attr_value(k)}"{typed}{s.tag_end}{pad}{body}{pad}'
                             f"{s.value_close}")
            else:
                key = write_key(k, ">" not in k and "\n" not in k and "\r" not in k)
                parts.append(f"{s.key_open}{key}>{pad}{self._write(v)}{pad}{s.value_close}")
        return sep.join((*parts, s.call_close))

    def _write(self, value: Any) -> str:
        return write_value(value, self.spelling.value_tags, python_literals=self.spelling.python_literals)

    # Typing by the tool specs

    def retype(self, calls: Sequence[ToolCall], tools: Mapping[str, Any]) -> list[ToolCall]:
        if self.spelling.typing == "named":  # (each value's type is written)
            return list(calls)
        return retype_calls(calls, tools, python_literals=self.spelling.python_literals)
