"""Kimi K3's XTML tool calls: channel elements written with control tokens, ``<|open|>NAME ATTRS<|sep|>`` and
``<|close|>NAME<|sep|>``; the calls are a ``tools`` channel::

    <|open|>tools<|sep|>
      <|open|>call tool="get_weather" index="1"<|sep|>
        <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
        <|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>
      <|close|>call<|sep|>
    <|close|>tools<|sep|>

``index`` counts the calls from 1; a ``string`` value is raw text up to the first ``<|close|>argument<|sep|>`` that
the next element follows, any other type (``number``, ``integer``, ``boolean``, ``null``, ``array``, ``object``)
JSON; attribute values escape ``&`` and ``"``. The ``think`` and ``response`` channels come before ``tools``;
``<|close|>message<|sep|>`` ends the turn. A grammar of its own (elements end in ``<|sep|>``, six types, escaped
attributes); its literals are an :class:`XtmlSpelling`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, lenient_json, take_items
from refiner.formats.message import AnswerParts, trim_turn_end
from refiner.formats.strict import JSON_DECODER, decode_at, token_sections
from refiner.formats.tags import respell_tokens
from refiner.formats.text import dumps, reasoning_offset, skip_ws
from refiner.formats.xmlvalues import MAX_ATTR_CHARS, Finder, followed

_ATTR = re.compile(r'\s+([A-Za-z_][\w.-]*)="([^"]*)"')
_ATTRS = re.compile(r'(?:\s+[A-Za-z_][\w.-]*="[^"]*")*\s*')
_ENTITY = re.compile(r"&(amp|quot|lt|gt);")
_ENTITIES = {"amp": "&", "quot": '"', "lt": "<", "gt": ">"}
# The JSON types a typed (non-string) value may have, by the type attribute's value.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "number": (int, float), "integer": (int,), "boolean": (bool,), "null": (type(None),), "array": (list,),
    "object": (dict,),
}


@dataclass(frozen=True)
class XtmlSpelling:
    """The channel syntax: control tokens and element names, as the model writes them."""

    open: str = "<|open|>"
    close: str = "<|close|>"
    sep: str = "<|sep|>"
    section: str = "tools"
    call: str = "call"
    argument: str = "argument"
    name_attr: str = "tool"
    index_attr: str = "index"
    key_attr: str = "key"
    type_attr: str = "type"
    string_type: str = "string"
    response: str = "response"  # the answer text's channel
    message: str = "message"  # the turn's element (its closing element ends the turn)

    section_open = property(lambda s: s.open + s.section + s.sep)
    section_close = property(lambda s: s.close + s.section + s.sep)
    call_open = property(lambda s: s.open + s.call)  # attributes, then sep
    call_close = property(lambda s: s.close + s.call + s.sep)
    arg_open = property(lambda s: s.open + s.argument)  # attributes, then sep
    arg_close = property(lambda s: s.close + s.argument + s.sep)
    response_open = property(lambda s: s.open + s.response + s.sep)
    response_close = property(lambda s: s.close + s.response + s.sep)
    message_close = property(lambda s: s.close + s.message + s.sep)

@functools.lru_cache(maxsize=8)
def _patterns(s: XtmlSpelling) -> tuple[re.Pattern, re.Pattern]:
    """A call element's token followed by attributes or the separator; an element name after a control token,
    written in another case."""
    words = "|".join(re.escape(w) for w in (s.section, s.call, s.argument, s.response, s.message))
    return (re.compile(re.escape(s.call_open) + r"(?=\s|" + re.escape(s.sep) + ")"),
            re.compile(rf"({re.escape(s.open)}|{re.escape(s.close)})(?!{words})(?i:({words}))(?![\w])"))


def _unescape(value: str) -> str:
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], value) if "&" in value else value


def _escape(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"


class Xtml(WireFormat):
    """The grammar; each row's :class:`XtmlSpelling` is ``self.spelling`` (its rows: the catalog)."""

    spelling: XtmlSpelling

    @classmethod
    def tags_for(cls, s: XtmlSpelling) -> tuple[str, ...]:
        return (s.section_open, s.call_open, s.arg_open, s.arg_close, s.call_close, s.section_close)

    @classmethod
    def detection_for(cls, s: XtmlSpelling, rank: int) -> Detection:
        """The ``response`` channel's elements are closers (weak markers): an answer without calls is still read as
        this format's (its channel markup is taken out of the content, :meth:`answer_parts`), and a prompt-opened
        reasoning block ends where that channel opens (:mod:`refiner.formats.reasoning`)."""
        return Detection(rank=rank, markers=(s.section_open, s.call_open),
                         closers=(s.arg_close, s.call_close, s.section_close, s.response_open, s.response_close))

    def sniff(self, body: str, at: int) -> bool:
        """A call element's token followed by its attributes or its separator (as SGLang requires)."""
        s = self.spelling
        return not body.startswith(s.call_open, at) or _patterns(s)[0].match(body, at) is not None

    # Strict

    def parse_strict(self, text: str) -> list[ToolCall]:
        s = self.spelling
        return token_sections(self, text, s.section_open, s.call_open, s.section_close, self._strict_call)

    def _strict_attrs(self, text: str, pos: int, what: str) -> tuple[dict[str, str], int]:
        """The attributes of the element whose name ends at ``pos``, and where its content starts."""
        m = _ATTRS.match(text, pos)
        end = m.end() if m else pos
        if not text.startswith(self.spelling.sep, end):
            raise self.error(f"the {what} element is not closed by {self.spelling.sep}", end)
        return {k: _unescape(v) for k, v in _ATTR.findall(text, pos, end)}, end + len(self.spelling.sep)

    def _strict_call(self, text: str, pos: int) -> tuple[ToolCall, int]:
        s = self.spelling
        attrs, pos = self._strict_attrs(text, pos, s.call)
        name = attrs.get(s.name_attr, "")
        if not name.strip():
            raise self.error(f"a {s.call} element without a {s.name_attr} attribute", pos)
        args: dict[str, Any] = {}
        while True:
            pos = skip_ws(text, pos)
            if text.startswith(s.call_close, pos):
                return ToolCall.trusted(name, args), pos + len(s.call_close)
            if not text.startswith(s.arg_open, pos):
                if pos >= len(text):
                    raise self.error(f"missing {s.call_close}", pos)
                raise self.error(f"expected {s.arg_open} or {s.call_close}, got {text[pos : pos + 30]!r}", pos)
            a, pos = self._strict_attrs(text, pos + len(s.arg_open), s.argument)
            if s.key_attr not in a:
                raise self.error(f"an {s.argument} of {name!r} without a {s.key_attr} attribute", pos)
            key, typ = a[s.key_attr], a.get(s.type_attr, s.string_type)
            if key in args:
                raise self.error(f"argument {key!r} of {name!r} given twice", pos)
            if typ == s.string_type:
                end = self._string_end(text, pos)
                if end < 0:
                    raise self.error(f"unclosed {s.argument} {key!r}", pos)
                value: Any = text[pos:end]
            else:
                value, end = decode_at(self, text, pos)
                want = _JSON_TYPES.get(typ)
                if want is not None and type(value) not in want:
                    raise self.error(f"argument {key!r} is typed {typ!r} but holds {type(value).__name__}", pos)
                end = skip_ws(text, end)
                if not text.startswith(s.arg_close, end):
                    raise self.error(f"expected {s.arg_close} after the value of {key!r}", end)
            args[key] = value
            pos = end + len(s.arg_close)

    def _string_end(self, text: str, pos: int) -> int:
        """Where the ``string`` value at ``pos`` ends: the first closing element that the next argument or the
        call's end follows (whitespace aside), or -1."""
        s = self.spelling
        m = followed(s.arg_close, (s.arg_open, s.call_close)).search(text, pos)
        return -1 if m is None else m.start()

    # The answer's other parts

    def answer_parts(self, text: str) -> AnswerParts:
        """Content by channel, as vLLM's K3 reasoning parser strips it: the calls are the ``tools`` channel (from its
        opening element or first call to its closing element or the end); the content is the text outside it, less
        the ``response`` channel's elements and the turn's closing element."""
        s = self.spelling
        f = Finder(text)
        section = f.next(s.section_open, 0)
        call = f.next(_patterns(s)[0], 0)
        start = min((i for i in (section, call) if i >= 0), default=-1)
        if start < 0:
            return AnswerParts(self._content(text), None, (len(text), len(text)))
        close = text.rfind(s.section_close, start)
        end = close + len(s.section_close) if close >= 0 else len(text)
        return AnswerParts(self._content(text[:start]) + self._content(text[end:]), None, (start, end))

    def _content(self, text: str) -> str:
        s = self.spelling
        for token in (s.response_open, s.response_close, s.message_close):
            text = text.replace(token, "")
        return trim_turn_end(text)

    # Render

    def render(self, calls: Sequence[ToolCall]) -> str:
        s = self.spelling
        parts = [s.section_open]
        for i, c in enumerate(calls, start=1):
            if not c.name.strip():
                raise self.render_error(f"call #{i - 1} has no tool name")
            parts.append(f'{s.call_open} {s.name_attr}="{_escape(c.name)}" {s.index_attr}="{i}"{s.sep}')
            for k, v in c.arguments.items():
                if type(v) is str:
                    probe = v + s.arg_close + s.call_close
                    if self._string_end(probe, 0) != len(v):
                        raise self.render_error(f"the value of {k!r} holds {s.arg_close} before an element: it "
                                                "cannot be written as raw text")
                    typ, body = s.string_type, v
                else:
                    typ, body = _type_of(v), dumps(v)
                parts.append(f'{s.arg_open} {s.key_attr}="{_escape(k)}" {s.type_attr}="{typ}"{s.sep}{body}'
                             f"{s.arg_close}")
            parts.append(s.call_close)
        parts.append(s.section_close)
        return "".join(parts)

    # Lenient

    def recover(self, text: str, out: Lenient) -> None:
        s = self.spelling
        text = self._respell(text, out)
        pos = reasoning_offset(text)
        f = Finder(text)
        section = f.next(s.section_open, pos)
        first = f.next(_patterns(s)[0], pos)
        if first < 0:
            out.note("missing_tag", f"no {s.call_open} element found")
            if section >= 0:
                out.note("unreadable", f"a {s.section_open} channel holding no call: "
                                       f"{text[section + len(s.section_open) : section + 60]!r}")
            return
        if section < 0 or section > first:
            out.note("missing_tag", f"missing {s.section_open} before the first call")
        elif text[section + len(s.section_open) : first].strip():
            out.note("unreadable", f"text skipped before the first call: "
                                   f"{text[section + len(s.section_open) : first][:60]!r}")
        pos = first
        for _ in range(MAX_RECOVERED_ITEMS):
            if not take_items(1):
                return
            pos = self._recover_call(text, f, pos + len(s.call_open), out)
            if pos >= len(text):
                break
            nxt = f.next(_patterns(s)[0], pos)
            if nxt < 0:
                break
            between = text[pos:nxt]
            if between.strip() and not between.strip().startswith((s.section_close, s.section_open)):
                out.note("unreadable", f"text skipped between calls: {between.strip()[:60]!r}")
            pos = nxt
        if out.cut is None and out.calls and not text.startswith(s.section_close, skip_ws(text, pos)):
            out.note("missing_tag", f"missing {s.section_close} after the last call")

    def _lenient_attrs(self, text: str, f: Finder, pos: int) -> tuple[dict[str, str], int, bool]:
        """``(attrs, where the content starts, whether the separator came)``; without a separator, the element ends
        at the next control token."""
        s = self.spelling
        j, tag = f.first((s.sep, s.open, s.close), pos)
        if j - pos > MAX_ATTR_CHARS:
            j, tag = pos, None
        attrs = {k: _unescape(v) for k, v in _ATTR.findall(text, pos, j)}
        return attrs, j + len(s.sep) if tag == s.sep else j, tag == s.sep

    def _respell(self, text: str, out: Lenient) -> str:
        """Control tokens written wrong (:func:`~refiner.formats.tags.respell_tokens`) and element names in another
        case (``<|OPEN|>CALL``) read as written right."""
        s = self.spelling
        text = respell_tokens(text, (s.open, s.close, s.sep), out)
        pattern = _patterns(s)[1]
        if pattern.search(text) is None:
            return text
        out.note("missing_tag", "element names written in another case read as the names")
        return pattern.sub(lambda m: m.group(1) + m.group(2).lower(), text)

    def _recover_call(self, text: str, f: Finder, pos: int, out: Lenient) -> int:
        s = self.spelling
        attrs, pos, closed_tag = self._lenient_attrs(text, f, pos)
        name = attrs.get(s.name_attr, "").strip()
        if not closed_tag and pos >= len(text):  # cut inside the call's own element: nothing can be trusted
            out.note("unclosed", f"the text ends inside a {s.call} element")
            out.mark_cut(None)
            return len(text)
        if not closed_tag:
            out.note("missing_tag", f"the {s.call} element of {name[:60]!r} is not closed by {s.sep}")
        if not name:
            out.note("no_name", f"a {s.call} element without a {s.name_attr} attribute")
        args: dict[str, Any] = {}
        whole: dict[str, Any] = {}  # the arguments written whole (for a cut)
        skipped = False
        while True:
            pos = skip_ws(text, pos)
            if text.startswith(s.call_close, pos):
                pos += len(s.call_close)
                break
            if pos >= len(text):  # only closing elements are missing: a clean cut
                return self._end_call(out, name, args, whole, clean=True, at=pos)
            if text.startswith(s.call_open, pos) and self.sniff(text, pos) or text.startswith(s.section_close, pos):
                out.note("missing_tag", f"missing {s.call_close} after call {name[:60]!r}")
                break
            if not text.startswith(s.arg_open, pos):
                nxt, _ = f.first((s.arg_open, s.call_close, s.section_close, _patterns(s)[0]), pos + 1)
                if not skipped:
                    out.note("unreadable", f"text skipped in call {name[:60]!r}: {text[pos:nxt][:60]!r}")
                skipped = True
                pos = nxt
                continue
            if not take_items(1):
                return len(text)
            a, vstart, closed_tag = self._lenient_attrs(text, f, pos + len(s.arg_open))
            key = a.get(s.key_attr)
            if not closed_tag and vstart >= len(text):
                return self._end_call(out, name, args, whole, clean=False, at=vstart)
            if key is None:
                out.note("bad_argument", f"an {s.argument} of {name[:60]!r} without a {s.key_attr} attribute dropped")
            typ = a.get(s.type_attr, s.string_type)
            value, pos, cut = self._recover_value(text, f, vstart, typ, key or "", out)
            if key is not None:
                if key in args:
                    out.note("bad_argument", f"argument {key[:40]!r} given twice: the last value kept")
                args[key] = value
                if not cut:
                    whole[key] = value
            if cut:
                return self._end_call(out, name, args, whole, clean=False, at=pos)
        if name:
            out.calls.append(ToolCall(name, args))
        return pos

    def _end_call(self, out: Lenient, name: str, args: dict, whole: dict, *, clean: bool, at: int) -> int:
        """Keeps the call the text stops in, marks the cut, and returns ``at``."""
        if name:
            out.calls.append(ToolCall(name, args))
        out.note("missing_tag", f"missing {self.spelling.call_close} after call {name[:60]!r}")
        out.mark_cut(len(out.calls) - 1 if name else None, name or None, whole, clean=clean and bool(whole))
        return at

    def _recover_value(self, text: str, f: Finder, pos: int, typ: str, key: str, out: Lenient) -> tuple[Any, int, bool]:
        """``(value, where reading goes on, whether the text ends inside it)``: the value ends at the last closing
        element before the next element (the first, when other text follows it), else at that element (its closer
        lost) or the text's end (cut short)."""
        s = self.spelling
        nxt, tag = f.first((s.arg_open, s.call_close, s.call_open, s.section_close), pos)
        last = text.rfind(s.arg_close, pos, nxt)
        if last >= 0:
            end, after = last, last + len(s.arg_close)
            if text[after:nxt].strip():
                end = text.find(s.arg_close, pos, nxt)
                after = end + len(s.arg_close)
        elif tag is not None:
            out.note("missing_tag", f"missing {s.arg_close} after argument {key[:40]!r}")
            end = after = nxt
            if typ == s.string_type:
                end = pos + len(text[pos:nxt].rstrip())
        else:  # the text ends inside this value: cut short
            out.note("unclosed", f"argument {key[:40]!r} cut short")
            raw = text[pos:]
            return (raw if typ == s.string_type else lenient_json(raw, at_end=True)), len(text), True
        raw = text[pos:end]
        if typ == s.string_type:
            return raw, after, False
        try:
            return JSON_DECODER.decode(raw.strip()), after, False
        except (ValueError, RecursionError):
            pass
        value = lenient_json(raw.strip(), at_end=False)
        if value is None:
            out.note("bad_argument", f"argument {key[:40]!r} typed {typ!r} is not JSON: kept as text")
            return raw, after, False
        out.note("mended", f"the JSON value of argument {key[:40]!r} was mended")
        return value, after, False
