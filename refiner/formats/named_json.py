"""A tool name, then its arguments as one JSON object, between a family's tokens: the ``named_json`` grammar. A family
is a row of the catalog (:mod:`refiner.formats.catalog`): a :class:`Family` and its :class:`NamedSpelling`.

| format | models | shape (engine parser) |
|---|---|---|
| ``plamo3`` | PLaMo 3 | ``<|plamo:begin_tool_requests:plamo|>`` then per call ``<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>NAME<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{...}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>``, then ``<|plamo:end_tool_requests:plamo|>`` (vLLM ``plamo3_tool_parser.py``; the JSON-constraint tokens are also read when absent, as older vLLM parsers wrote them) |
| ``functionary_v32`` | Functionary v3.2 | ``>>>NAME\\n{...}`` per call; ``>>>all\\n`` starts text, not a call (llama.cpp ``functionary-v3-2`` handler) |

The arguments are decoded before the closing token is looked for, so a string may hold it. Text before the calls
(content, reasoning) is allowed, and so is anything after a closed section. Functionary v3.2 writes no token of its
own (``>>>`` is plain text): it is an untagged format (``Detection.bare``) whose marker is ``>>>`` at a line start,
counted only when a tool name and a line break follow it (``sniff``; a text whose only such ``>>>`` is prose, a
Python prompt's ``>>> x``, is still named after it by detection's last rule, and reads as no call). Inside another
format's JSON string a line break is ``\\n``, so a value holding ``>>>`` is no marker. DeepSeek V3/V3.1's rows are this
grammar's spellings read by their own module's readers (:mod:`refiner.formats.deepseek`: either layout recovered);
Kimi-K2 writes the same shape in a module of its own (:mod:`refiner.formats.kimi_k2`).

Lenient reading: each call token starts a call; a call without its closing tokens ends at the next call token or
the end of the text (a cut: :class:`~refiner.formats.base.Cut`); text between the tokens that is not a tool name is
no call (reported).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from refiner.calls import ToolCall
from refiner.formats.base import MAX_NOTES, Detection, Lenient, WireFormat
from refiner.formats.family import Family
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.lenient import TokenFinder, add_arguments_call, past_strings
from refiner.formats.strict import decode_at, token_sections
from refiner.formats.tags import respell_tokens
from refiner.formats.text import dumps, reasoning_offset, skip_ws
from refiner.formats.xmlvalues import Finder

NAME_PATTERN = r"[^\s<>{}\[\]\"'`|:,]+"
_NAME = re.compile(NAME_PATTERN)
_BARRED_TOKEN = re.compile(r"<\|[^|<>]*\|>")
MAX_CALLS = 1024  # calls a strict read of a section-less text takes at most
MAX_ID_CHARS = 64  # a call id before the name (NamedSpelling.id_close)
_ID = re.compile(r"[^\s<>{}\[\]\"'`|]{1,64}")


@dataclass(frozen=True)
class NamedSpelling:
    """``section_open`` / ``section_close``: the tokens around all the calls (``None``: none); per call,
    ``call_open`` + NAME + ``name_close`` + the JSON arguments + ``call_close`` (whitespace before its token is
    layout, written and not required); ``joiner``: what rendering writes between two calls; ``text_recipient``: a
    name that starts text, not a call (Functionary's ``all``);
    ``args_prefix``: what the model writes before the JSON (PLaMo 3's JSON-constraint tokens): written, and read
    when present; ``call_marker``: with no section, ``call_open`` is a tag of its own, a marker wherever it occurs
    (else it is a prefix, a marker at a line start only); ``id_close``: a call id written right after ``call_open``
    and closed by this token, before the name (Solar Open's ``<|tool_call:begin|>ID<|tool_call:name|>NAME``): read
    and dropped, and written as the call's place in the turn, from 0."""

    section_open: str | None
    section_close: str | None
    call_open: str
    name_close: str
    call_close: str = ""
    joiner: str = ""
    text_recipient: str | None = None
    args_prefix: str = ""
    call_marker: bool = False
    id_close: str = ""

    @property
    def close(self) -> str:
        """The token that closes a call, as read."""
        return self.call_close.strip()


class NamedJson(WireFormat):
    """The grammar; each of its rows in the catalog is a subclass made by :func:`~refiner.formats.family.make_row`."""

    spelling: NamedSpelling
    row: Family
    name_pattern = NAME_PATTERN

    @classmethod
    def tags_for(cls, sp: NamedSpelling) -> tuple[str, ...]:
        tokens = (sp.section_open, sp.call_open, sp.id_close, sp.name_close, sp.close, sp.section_close)
        return tuple(t for t in tokens if t and t.strip())

    @classmethod
    def detection_for(cls, sp: NamedSpelling, rank: int) -> Detection:
        if sp.section_open is None and sp.call_marker:
            return Detection(rank=rank, markers=(sp.call_open,), closers=(sp.close,) if sp.close else ())
        if sp.section_open is None:  # no token of its own: a call prefix at a line start is its marker (inside a
            # JSON string a line break is written \n, so another format's value holding the prefix is no marker)
            return Detection(rank=rank, markers=("\n" + sp.call_open,), bare=True)
        return Detection(rank=rank, markers=(sp.section_open, sp.call_open), closers=(sp.section_close, sp.close))

    # ---- strict ------------------------------------------------------------------------------------------------

    def parse_strict(self, text: str) -> list[ToolCall]:
        sp = self.spelling
        if sp.section_open is not None:
            return token_sections(self, text, sp.section_open, sp.call_open, sp.section_close, self._call)
        start = reasoning_offset(text)
        i = text.find(sp.call_open, start)
        if i < 0:
            raise self.error(f"no {sp.call_open}NAME", start)
        calls: list[ToolCall] = []
        for _ in range(MAX_CALLS):
            pos = i + len(sp.call_open)
            if sp.text_recipient is not None and text.startswith(sp.text_recipient + sp.name_close, pos):
                i = text.find(sp.call_open, pos)  # a text block: up to the next recipient
            else:
                call, pos = self._call(text, pos)
                calls.append(call)
                pos = skip_ws(text, pos)
                if pos < len(text) and not text.startswith(sp.call_open, pos):  # prose after the calls ends them
                    later = text.find(sp.call_open, pos)
                    if later >= 0 and self.sniff(text, later):
                        raise self.error(f"a call after prose, not after the calls: {text[pos:pos + 30]!r}", pos)
                    return calls
                i = pos if pos < len(text) else -1
            if i < 0:
                if not calls:
                    raise self.error("no call, only text", start)
                return calls
        raise self.error(f"more than {MAX_CALLS} calls", i)

    def _call(self, text: str, pos: int) -> tuple[ToolCall, int]:
        sp = self.spelling
        if sp.id_close:
            j = text.find(sp.id_close, pos, pos + MAX_ID_CHARS + len(sp.id_close))
            if j < 0 or _ID.fullmatch(text, pos, j) is None:
                raise self.error(f"expected a call id and {sp.id_close} after {sp.call_open}", pos)
            pos = j + len(sp.id_close)
        j = text.find(sp.name_close, pos)
        if j < 0:
            raise self.error(f"missing {sp.name_close!r} after the tool name", pos)
        name = text[pos:j]
        if _NAME.fullmatch(name) is None:
            raise self.error(f"tool name {name[:60]!r} is not allowed", pos)
        at = skip_ws(text, j + len(sp.name_close))
        if sp.args_prefix and text.startswith(sp.args_prefix, at):
            at += len(sp.args_prefix)
        args, end = decode_at(self, text, at)
        if type(args) is not dict:
            raise self.error(f"the arguments of {name!r} must be a JSON object, got {type(args).__name__}", at)
        if sp.close:
            end = skip_ws(text, end)
            if not text.startswith(sp.close, end):
                raise self.error(f"expected {sp.close} after the arguments of {name!r}", end)
            end += len(sp.close)
        return ToolCall.trusted(name, args), end

    # ---- lenient -----------------------------------------------------------------------------------------------

    def recover(self, text: str, out: Lenient) -> None:
        sp = self.spelling
        tokens = self._barred_tokens()
        if tokens:  # (PLaMo 3's tokens written wrong: other case, separators, brackets, a lost >)
            text = respell_tokens(text, tokens, out)
        start = reasoning_offset(text)
        if sp.section_open is not None and text.find(sp.section_open, start) < 0:
            out.note("missing_tag", f"missing {sp.section_open}")
        i = text.find(sp.call_open, start)
        if i < 0:
            out.note("missing_tag", f"no {sp.call_open} found")
            return
        stops = tuple(t for t in (sp.call_open, sp.section_close) if t)
        strings = TokenFinder(text, stops)  # (a token inside the arguments' strings is text)
        plain = Finder(text)  # (each stop searched once over the text, however many calls)
        unreadable = 0
        for _ in range(MAX_RECOVERED_ITEMS):
            if i < 0 or not take_items(1):
                break
            pos = i + len(sp.call_open)
            end, _ = past_strings(strings, pos, plain.first(stops, pos)[0], None)
            unreadable += not self._recover_call(text, pos, end, out, quiet=unreadable >= MAX_NOTES)
            i = plain.next(sp.call_open, end) if end < len(text) else -1
        if sp.section_close and text.find(sp.section_close, start) < 0:
            out.note("missing_tag", f"missing {sp.section_close}")

    def _barred_tokens(self) -> tuple[str, ...]:
        """The row's tokens when every one of them is a barred token (``<|...|>``), else none."""
        got = self.__dict__.get("_barred")
        if got is None:
            parts = [t for tag in self.tags for t in _BARRED_TOKEN.findall(tag)]
            whole = all(_BARRED_TOKEN.sub("", tag) == "" for tag in self.tags)
            got = self.__dict__["_barred"] = tuple(dict.fromkeys(parts)) if whole and parts else ()
        return got

    def _recover_call(self, text: str, pos: int, end: int, out: Lenient, quiet: bool = False) -> bool:
        """Reads the call from ``pos`` (after its call token) to ``end``; False when it is not a call (noted unless
        ``quiet``)."""
        sp = self.spelling
        seg = text[pos:end]
        if sp.id_close:  # the call id before the name: dropped
            head, found, rest = seg.partition(sp.id_close)
            if found and _ID.fullmatch(head.strip()):
                seg = rest
        name, sep, body = seg.partition(sp.name_close)
        if sp.text_recipient is not None and name == sp.text_recipient and sep:
            return True  # a text block
        at_end = end >= len(text)
        closed = bool(sp.close) and sp.close in body
        if closed:
            body = body[: body.rfind(sp.close)]
        elif sp.close:
            out.note("missing_tag" if not at_end else "unclosed", f"missing {sp.close} after {seg[:60]!r}")
        if not sep:
            if at_end and _NAME.fullmatch(name.strip() or "-"):
                out.note("unclosed", "the text ends inside a tool name")
                out.mark_cut(None)
                return True
            brace = seg.find("{")
            name, body = (seg, "") if brace < 0 else (seg[:brace], seg[brace:])
            out.note("missing_tag", f"missing {sp.name_close!r} after the tool name in {seg[:60]!r}")
        name = name.strip()
        if sp.args_prefix:
            body = body.replace(sp.args_prefix, "", 1)
        if _NAME.fullmatch(name) is None:
            if not quiet:
                out.note("unreadable", f"not a call: {seg[:80]!r}")
            return False
        add_arguments_call(out, name, body, at_end=at_end and not closed)
        return True

    # ---- detection of the token-less rows ----------------------------------------------------------------------

    def sniff(self, body: str, at: int) -> bool:
        """``call_open`` followed by a tool name and ``name_close`` (``>>>get_weather\n``), not by prose (a Python
        prompt's ``>>> x``)."""
        sp = self.spelling
        if sp.id_close:  # a row with call ids: its section token, then a call token, an id, a name
            if sp.section_open and body.startswith(sp.section_open, at):
                at = skip_ws(body, at + len(sp.section_open))
            if not body.startswith(sp.call_open, at):
                return False
            k = at + len(sp.call_open)
            j = body.find(sp.id_close, k, k + MAX_ID_CHARS + len(sp.id_close))
            if j < 0 or _ID.fullmatch(body, k, j) is None:
                return False
            m = _NAME.match(body, j + len(sp.id_close))
            return m is not None and body.startswith(sp.name_close, m.end())
        m = _NAME.match(body, at + len(sp.call_open))
        return m is not None and body.startswith(sp.name_close, m.end())

    def region_start(self, body: str, at: int) -> int:
        """Token-less rows (Functionary): the marker is the call token at a line start, so a first call at the very
        start of the text has none; the calls' region starts at the earliest call token at a line start that runs on
        to the marker's call with no blank line between."""
        sp = self.spelling
        if sp.section_open is not None:
            return at
        start = at
        for _ in range(MAX_NOTES * 64):
            j = body.rfind(sp.call_open, 0, start)
            if j < 0 or (j > 0 and body[j - 1] != "\n") or "\n\n" in body[j:start]:
                return start
            start = j
        return start

    def claims_text(self, body: str) -> bool:
        """A text with no marker: a line ``call_open`` + NAME, then a JSON object (Functionary's shape)."""
        sp = self.spelling
        if sp.section_open is not None:
            return False
        i = body.find(sp.call_open)
        while 0 <= i < 20_000:
            m = _NAME.match(body, i + len(sp.call_open))
            if (m is not None and body.startswith(sp.name_close, m.end()) and m.group() != sp.text_recipient
                    and body.startswith("{", skip_ws(body, m.end()))):
                return i == 0 or body[i - 1] == "\n" or body.startswith(sp.call_open, 0)
            i = body.find(sp.call_open, i + 1)
        return False

    # ---- render ------------------------------------------------------------------------------------------------

    def render(self, calls: Sequence[ToolCall]) -> str:
        sp = self.spelling
        items = sp.joiner.join(
            f"{sp.call_open}{f'{i}{sp.id_close}' if sp.id_close else ''}{c.name}{sp.name_close}{sp.args_prefix}"
            f"{dumps(dict(c.arguments))}{sp.call_close}"
            for i, c in enumerate(calls)
        )
        return f"{sp.section_open or ''}{items}{sp.section_close or ''}"
