"""The ``named_json`` grammar: a tool name, then its arguments as one JSON object, between a family's tokens (its rows,
a :class:`Family` and a :class:`NamedSpelling` each, are in :mod:`refiner.formats.catalog`). The arguments are decoded
before the closing token is looked for, so a string may hold it. Text may come before the calls and after a closed
section. A row without tokens of its own (Functionary v3.2's ``>>>NAME\\n{...}``) is untagged: its marker is
``call_open`` at a line start followed by a name and ``name_close`` (``sniff``).

Lenient reading: each call token starts a call, which ends at its closing token, the next call token or the end of
the text (a cut); text between the tokens that is not a tool name is no call (reported). A ``loose`` row (DeepSeek,
Kimi-K2) reads its spelling as tokens and words with whitespace free between them, and recovers by its tokens: a
call whose call token was lost starts before its anchor (:class:`_Layout`), a foreign token before a call's head is
dropped, lost words around the name are reported, ``also``'s layouts are read too, and calls that lost every token
are read by :mod:`refiner.formats.bare`. A ``counter`` row reads a name that is only a counter or ``invalid``
(Kimi's ``functions.0``) as the one offered tool, else as no call (reported)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from refiner.calls import ToolCall
from refiner.formats.bare import IDENTIFIER, bare_calls
from refiner.formats.base import (
    MAX_NOTES,
    ROW_CHARS,
    Detection,
    FormatError,
    Lenient,
    WireFormat,
    marker_table,
    markup_name,
    name_refused,
    offered_tools,
)
from refiner.formats.family import POLICY, Family
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.lenient import TokenFinder, add_arguments_call, object_ends_before, past_strings
from refiner.formats.pythonic import IDENTIFIER_NAME, render_call, strict_call_list
from refiner.formats.pythonic_sentinels import MAX_CLOSE_TRIES, recover_list
from refiner.formats.reasoning import label_look_alikes, line_labels
from refiner.formats.strict import decode_at, expect_object, first_tag, token_sections
from refiner.formats.tags import MAX_SCANNED, respell_barred, token_key
from refiner.formats.text import dumps, reasoning_offset, skip_ws
from refiner.formats.xmlvalues import Finder

NAME_PATTERN = r"[^\s<>{}\[\]\"'`|:,]+"
_NAME = re.compile(NAME_PATTERN)
MAX_CALLS = 1024  # calls a strict read of a section-less text takes at most
MAX_ID_CHARS = 64  # a call id before the name (NamedSpelling.id_close)
MAX_NAME_CHARS = 256  # of a tool name claims_text reads after each call opener
_ID = re.compile(r"[^\s<>{}\[\]\"'`|]{1,64}")
_PIECE = re.compile(r"<[^<>\s]+>|[^\s<]+|<")  # a loose spelling's pieces: tokens and words
# Another format's token left where a call token was lost (<tool_call>, [TOOL_CALLS]): not part of the name after it.
_FOREIGN_TOKEN = re.compile(r"\s*(?:<[^<>\n]{1,40}>|\[[^\[\]\n]{1,40}\])\s*")
_NAMED_OBJECT = re.compile(r'\{\s*"name"\s*:\s*"[^"\n]*"\s*,\s*"(?:arguments|parameters)"\s*:')  # a call's own JSON
_PYTHON_HEAD = re.compile(rf"({IDENTIFIER_NAME})\s*\(")  # a Python call's name and its "("
_NO_NAME = re.compile(r"(?:invalid)?(?:\.?[0-9]+)?")  # what a counted row writes for a name it could not give


@dataclass(frozen=True)
class NamedSpelling:
    """``section_open`` / ``section_close``: the tokens around all the calls (``None``: none); per call, ``call_open`` +
    NAME + ``name_close`` + the JSON arguments + ``call_close`` (whitespace before its token is written, not required);
    ``joiner``: written between two calls; ``text_recipients``: names that start text, not a call (Functionary's
    ``all``); ``args_prefix``: written before the JSON, read when present (PLaMo 3); ``call_marker``: with no section,
    ``call_open`` is a marker wherever it occurs (else at a line start only); ``id_close``: a call id after
    ``call_open`` closed by this token, before the name (Solar Open), and ``counter``: written after the name and before
    the call's place in the turn (Kimi-K2's ``NAME:0``): both read and dropped, written as the place from 0;
    ``text_key``: a body that does not open a JSON object is read as this one argument's text (CWM's ``command``),
    written as JSON; ``header``: a turn header a token-less row's first call may follow, read and a marker of the row
    (Onyx keeps harmony's ``<|start|>assistant ``); ``python_call``: the arguments are written as a Python call
    repeating the name, ``NAME(a=1)`` (DeepSeek-Coder-V2), keyword literals read strictly, positional values placed on
    the offered tool's parameters by recovery (reported). Reading policies (:data:`~refiner.formats.family.POLICY`):
    ``loose`` (the module's docstring); ``names``: a tool name's pattern; ``also``: the family's other layouts, read by
    recovery; ``respelt``: ``(look-alike, token)`` pairs, read as the token (reported)."""

    section_open: str | None
    section_close: str | None
    call_open: str
    name_close: str
    call_close: str = ""
    joiner: str = ""
    text_recipients: tuple[str, ...] = ()
    args_prefix: str = ""
    call_marker: bool = False
    id_close: str = ""
    counter: str = ""
    text_key: str = ""
    header: str = ""
    python_call: bool = False
    loose: bool = field(default=False, metadata=POLICY)
    names: str = field(default=NAME_PATTERN, metadata=POLICY)
    also: tuple[NamedSpelling, ...] = field(default=(), metadata=POLICY)
    respelt: tuple[tuple[str, str], ...] = field(default=(), metadata=POLICY)

    @property
    def close(self) -> str:
        """The token that closes a call, as read."""
        return self.call_close.strip()


def _pieces(text: str | None) -> tuple[str, ...]:
    return tuple(_PIECE.findall(text or ""))


def _is_token(piece: str) -> bool:
    return len(piece) > 2 and piece[0] == "<" and piece[-1] == ">"


@dataclass(frozen=True)
class _Layout:
    """A spelling as pieces (a plain row's: its call token, ``name_close`` and closing token whole, nothing else):
    ``call``, the call token, and ``opens``, the pieces after it; ``anchor``, the first token after it; ``before``,
    the words before the anchor when the name follows it (V3's ``function``); ``prefix``, words written onto the name
    (Kimi's ``functions.``); ``names``, ``name_close``'s pieces, and ``name_end``, what ends the name; ``closes``,
    ``call_close``'s pieces before its token ``close``; ``words``, the words that tell this layout's calls from
    another's (V3's code fence); ``bare``, a loose row's call that lost every token (a name, then the JSON object)."""

    call: str
    opens: tuple[str, ...]
    anchor: str
    before: str
    prefix: str
    names: tuple[str, ...]
    name_end: str
    closes: tuple[str, ...]
    close: str
    words: tuple[str, ...]
    bare: re.Pattern[str] | None


def _respell_labels(text: str, labels: set[str], out: Lenient) -> str:
    """``text`` with each of a row's line labels (:func:`~refiner.formats.reasoning.line_labels`) written wrong at a
    line start written as the label, each reported as a ``missing_tag`` problem."""
    if not labels:
        return text
    keys, parts, pos = {token_key(label): label for label in labels}, [], 0
    for m in itertools.islice(label_look_alikes(tuple(sorted(labels))).finditer(text), MAX_SCANNED):
        label = keys[token_key(m.group())]
        if m.group() != label:
            parts += (text[pos : m.start()], label)
            pos = m.end()
            out.note("missing_tag", f"{label!r} written as {m.group()!r}")
    return "".join(parts) + text[pos:] if parts else text


@lru_cache(maxsize=64)
def layout(sp: NamedSpelling) -> _Layout:
    if not sp.loose:
        return _Layout(sp.call_open, (), sp.name_close, "", "", (), sp.name_close, (), sp.close, (), None)
    opens, names, close = _pieces(sp.call_open), _pieces(sp.name_close), _pieces(sp.call_close)
    k = next((i for i, p in enumerate(opens[1:]) if _is_token(p)), None)
    anchor = opens[1 + k] if k is not None else next(p for p in names if _is_token(p))
    before = "".join(opens[1 : 1 + k]) if k is not None else ""
    prefix = "".join(opens[2 + k :] if k is not None else opens[1:])
    lead = sp.name_close[: len(sp.name_close) - len(sp.name_close.lstrip())]
    counter = rf"{re.escape(sp.counter)}[0-9]+" if sp.counter else ""
    last = (r"(?:" + r"\s*".join(re.escape(p) for p in close[:-1]) + r"\s*)?") if close[:-1] else ""
    word = re.escape(before) + r"\s*" if before else ""
    head = rf"{last}{word}{re.escape(prefix)}({IDENTIFIER}){counter}"
    tail = "".join(rf"\s*{re.escape(w)}" for w in names if not _is_token(w))
    bare = re.compile(head + tail + (r"\s*" if tail else "") + r"(?=\{)")
    words = tuple(w for w in (*names, *close[:-1]) if not _is_token(w))
    return _Layout(opens[0], opens[1:], anchor, before, prefix, names, lead or names[0], close[:-1], close[-1], words,
                   bare)


class NamedJson(WireFormat):
    """The grammar; each of its rows in the catalog is a subclass made by :func:`~refiner.formats.family.make_row`."""

    spelling: NamedSpelling
    row: Family
    layout: _Layout  # (the row's spelling as pieces)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "spelling" in cls.__dict__:
            cls.layout = layout(cls.spelling)

    @property
    def name_pattern(self) -> str:  # type: ignore[override]
        return self.spelling.names

    @classmethod
    def tags_for(cls, sp: NamedSpelling) -> tuple[str, ...]:
        if sp.loose:
            parts = (sp.section_open, sp.call_open, sp.name_close, sp.call_close, sp.section_close)
            return tuple(dict.fromkeys(p for part in parts for p in _pieces(part) if _is_token(p)))
        tokens = (sp.section_open, sp.call_open, sp.id_close, sp.name_close, sp.close, sp.section_close)
        return tuple(t for t in tokens if t and t.strip())

    @classmethod
    def detection_for(cls, sp: NamedSpelling, rank: int) -> Detection:
        if sp.section_open is not None:
            lay = layout(sp)
            closers = (lay.close, sp.section_close, lay.anchor) if sp.loose else (sp.section_close, sp.close)
            return Detection(rank=rank, markers=(sp.section_open, lay.call), closers=closers, claim_needs=())
        if sp.call_marker:
            return Detection(rank=rank, markers=(sp.call_open,), closers=(sp.close,) if sp.close else (),
                             claim_needs=(sp.call_open,))
        header = (sp.header + sp.call_open,) if sp.header else ()  # no token of its own: a call prefix at a line start
        return Detection(rank=rank, markers=("\n" + sp.call_open, *header), bare=True, strict_needs=(sp.call_open,),
                         claim_needs=(sp.call_open,))

    def _name_ok(self, name: str) -> bool:
        return re.fullmatch(self.spelling.names, name) is not None and not marker_table().in_name(name)

    def parse_strict(self, text: str) -> list[ToolCall]:
        sp = self.spelling
        if sp.section_open is not None:
            return token_sections(self, text, sp.section_open, self.layout.call, sp.section_close, self._call)
        start, i = first_tag(self, text, sp.call_open, f"no {sp.call_open}NAME{sp.name_close.strip()}")
        calls: list[ToolCall] = []
        for _ in range(MAX_CALLS):
            pos = i + len(sp.call_open)
            if any(text.startswith(r + sp.name_close, pos) for r in sp.text_recipients):
                i = text.find(sp.call_open, pos)  # a text block: up to the next recipient
            else:
                call, pos = self._call(text, pos)
                calls.append(call)
                pos = skip_ws(text, pos)
                if pos < len(text) and not text.startswith(sp.call_open, pos):  # prose after the calls ends them
                    return self._after_calls(text, pos, calls)
                i = pos if pos < len(text) else -1
            if i < 0:
                if not calls:
                    raise self.error("no call, only text", start)
                return calls
        raise self.error(f"more than {MAX_CALLS} calls", i)

    def _after_calls(self, text: str, pos: int, calls: list[ToolCall]) -> list[ToolCall]:
        """``calls``, the text from ``pos`` on being prose; raises when a call of this row follows it."""
        later = text.find(self.spelling.call_open, pos)
        if later >= 0 and self.sniff(text, later):
            raise self.error(f"a call after prose, not after the calls: {text[pos:pos + 30]!r}", pos)
        return calls

    def _expect(self, text: str, pos: int, pieces: Sequence[str], where: str) -> int:
        """Past ``pieces`` at ``pos``, whitespace free before each."""
        for piece in pieces:
            pos = skip_ws(text, pos)
            if not text.startswith(piece, pos):
                raise self.error(f"expected {piece} {where}, got {text[pos:pos + 30]!r}", pos)
            pos += len(piece)
        return pos

    def _past_id(self, text: str, pos: int) -> int:
        """Past a call id and ``id_close`` at ``pos``; -1 when none is there."""
        j = text.find(self.spelling.id_close, pos, pos + MAX_ID_CHARS + len(self.spelling.id_close))
        return -1 if j < 0 or _ID.fullmatch(text, pos, j) is None else j + len(self.spelling.id_close)

    def _call(self, text: str, pos: int) -> tuple[ToolCall, int]:
        sp, lay = self.spelling, self.layout
        pos = self._expect(text, pos, lay.opens, f"after {lay.call}")
        if (k := self._past_id(text, pos) if sp.id_close else pos) < 0:
            raise self.error(f"expected a call id and {sp.id_close} after {sp.call_open}", pos)
        pos = k
        j = text.find(lay.name_end, pos) if lay.name_end else m.end() if (m := _NAME.match(text, pos)) else pos
        if j < 0:
            raise self.error(f"missing {sp.name_close!r} after the tool name", pos)
        name = text[pos:j]
        if sp.counter:
            name, found, index = name.rpartition(sp.counter)
            if not found or not index.strip().isdigit():
                raise self.error(f"call id {text[pos:j][:60]!r} is not {lay.prefix}NAME{sp.counter}INDEX", pos)
        if not self._name_ok(name):
            raise self.error(name_refused(name), pos)
        at = self._expect(text, j, lay.names, "after the tool name") if sp.loose else j + len(sp.name_close)
        at = skip_ws(text, at)
        if sp.args_prefix and text.startswith(sp.args_prefix, at):
            at += len(sp.args_prefix)
        if sp.text_key and not text.startswith("{", at):
            end = text.find(sp.close, at)
            if end < 0 or not text[at:end].strip():
                raise self.error(f"expected the text of {name!r} and {sp.close}", at)
            return ToolCall(name, {sp.text_key: text[at:end].strip()}), end + len(sp.close)
        if sp.python_call:
            args, end = self._python_arguments(text, at, name)
        else:
            args, end = decode_at(self, text, at)
            args = expect_object(self, args, f"the arguments of {name!r}", at)
        return ToolCall(name, args), self._expect(text, end, (*lay.closes, lay.close),
                                                           f"after the arguments of {name!r}")

    def _python_arguments(self, text: str, at: int, name: str) -> tuple[dict, int]:
        """The keyword arguments of the Python call ``NAME(...)`` at ``at``, up to the call's closing token (one
        inside a string value is text: the next is tried), and where the call ends."""
        lay = self.layout
        if (m := _PYTHON_HEAD.match(text, at)) is None or m.group(1) != name:
            raise self.error(f"expected the call {name}(...) after the tool name, got {text[at:at + 30]!r}", at)
        k, error = at, None
        for _ in range(MAX_CLOSE_TRIES):
            if (k := text.find(lay.close, k)) < 0:
                break
            body = text[at:k].rstrip()
            for word in lay.closes[::-1]:
                body = body.removesuffix(word).rstrip()
            k += len(lay.close)
            try:
                if not body.endswith(")"):
                    raise self.error(f"the call to {name!r} is not closed by ')'", at + len(body))
                calls = strict_call_list(self, "[" + body + "]", at - 1)
                if len(calls) == 1:
                    return dict(calls[0].arguments), at + len(body)
                raise self.error(f"{len(calls)} calls in the block of {name!r}", at)
            except FormatError as e:
                error = error or e
        raise error or self.error(f"missing {lay.close} after the call to {name!r}", at)

    def recover(self, text: str, out: Lenient) -> None:
        """The lenient reading of the module docstring (a call that lost its call token: :meth:`_lost_call`)."""
        sp = self.spelling
        layouts = [self.layout, *map(layout, sp.also)]  # the row's own first
        lay = layouts[0]
        text = respell_barred(text, self.tags, out)
        labels = line_labels(self)
        text = _respell_labels(text, labels, out)
        for alt, token in sp.respelt:
            if alt in text:
                text = text.replace(alt, token)
                out.note("missing_tag", f"{alt} written for {token}")
        start = reasoning_offset(text)
        f = Finder(text)  # (each stop searched once over the text, however many calls)
        # a call ends at the next call token, the section's end or (a loose row's) its closing token, outside strings
        strings = TokenFinder(text, (lay.close if sp.loose else "", lay.call, sp.section_close))
        first, section = f.next(lay.call, start), f.next(sp.section_open or "", start)
        if sp.section_open is not None and (section < 0 or 0 <= first < section):
            out.note("missing_tag", f"missing {sp.section_open}")
        pos, unreadable = start, 0
        labelled = lay.anchor[:1] == "\n" and lay.anchor[1:] in labels  # (a label row: its name label is a line label)
        for n in range(MAX_RECOVERED_ITEMS + 1):
            c = f.next(lay.call, pos)
            each = sp.loose or labelled  # (a plain row's call token is looked for as lost before its first call only)
            s = f.next(lay.anchor, pos) if each or n == 0 and lay.anchor else -1
            while 0 <= s < (c if c >= 0 else len(text)):  # a call whose call token was lost: its anchor comes first
                tokens = (sp.section_open, lay.close, sp.section_close)  # it starts after one, or a line break
                ends = (i + len(t) for t in tokens if t and (i := text.rfind(t, pos, s)) >= 0)
                at = self._lost_call(text, max(pos, text.rfind("\n", pos, s) + 1, *ends), s, each)
                if at < 0:
                    s = f.next(lay.anchor, s + 1) if each else -1
                    continue
                if not take_items(1):
                    return
                out.note("missing_tag", f"missing {lay.call}")
                pos, _ = self._recover_call(text, at, f, out, strings, layouts, True)
                s = f.next(lay.anchor, pos) if each else -1
            if c < 0:
                if n == 0 and not out.calls and not (sp.loose and any(bare_calls(text, start, out, x.bare)
                                                                      for x in layouts)):
                    out.note("missing_tag", f"no {lay.call} found")
                    if not sp.loose:  # (a loose row goes on to report its section's end)
                        return
                break
            if not take_items(1):  # (the parse's count of items read: a gave_up problem)
                return
            pos, read = self._recover_call(text, c + len(lay.call), f, out, strings, layouts, unreadable < MAX_NOTES)
            unreadable += not read
        if sp.section_close and f.next(sp.section_close, start) < 0:
            out.note("missing_tag", f"missing {sp.section_close}")

    def _lost_call(self, text: str, at: int, anchor: int, labelled: bool) -> int:
        """Where a call whose call token was lost starts, its anchor at ``anchor`` and its line at ``at``: there for a
        loose row; for a label row (``labelled``), or a plain row's call whose JSON object follows the anchor, after
        another format's token, when the line up to the anchor holds a tool's name alone (after the row's call id)
        (an offered one, when the request's tools are known); else -1."""
        sp = self.spelling
        if sp.loose:
            return at
        body = skip_ws(text, anchor + len(self.layout.anchor))
        if not labelled and not text.startswith("{", body + len(sp.args_prefix) * text.startswith(sp.args_prefix, body)):
            return -1
        at = m.end() if (m := _FOREIGN_TOKEN.match(text, at, anchor)) is not None else at
        k = self._past_id(text, at) if sp.id_close else -1
        name, tools = text[max(at, k):anchor].strip(), offered_tools()
        return at if _NAME.fullmatch(name) is not None and (tools is None or name in tools) else -1

    def _recover_call(self, text: str, pos: int, f: Finder, out: Lenient, strings: TokenFinder,
                      layouts: list[_Layout], loud: bool) -> tuple[int, bool]:
        """Reads the call after the call token at ``pos`` (a loose row's in any of its layouts; a label row's name label
        may be another format's token): where it ends, and False when it is no call (noted when ``loud``)."""
        sp, lay = self.spelling, layouts[0]
        plain = f.first(strings.tokens, pos)
        end, tag = past_strings(strings, pos, *plain)
        # a closer or a call read past as inside a string, after an object that closes before it and does not decode
        # across it: the string runs on from a quote lost in the object, and the call ends there
        if plain[0] < end and (plain[1] == lay.close or plain[1] == lay.call and self.sniff(text, plain[0])):
            head = text[pos : plain[0]]
            for w in (lay.close, *lay.closes[::-1]):
                head = head.rstrip().removesuffix(w)
            if object_ends_before(text, pos, pos + len(head)):
                end, tag = plain
        if sp.id_close and 0 <= (k := self._past_id(text, pos)) <= end:  # the call id before the name: dropped
            pos = k
        seg = text[pos:end]
        after = end + len(lay.close) if tag == lay.close else end
        if lay.anchor:
            head, sep, rest = seg.partition(lay.anchor)
        else:  # the name ends where the JSON object starts
            brace = seg.find("{")
            head, sep, rest = (seg, "", seg) if brace < 0 else (seg[:brace].strip(), "{", seg[brace:])
        if sep and head in sp.text_recipients:
            return after, True  # a text block
        if not sp.loose and lay.close and (k := rest.rfind(lay.close)) >= 0:  # a plain row's, past the JSON strings
            k = past_strings(TokenFinder(rest, (lay.close,)), 0, k, lay.close)[0]
            rest, tag = (rest[:k], lay.close) if k < len(rest) else (rest, tag)
        cut = tag is None
        if lay.close and tag != lay.close:
            out.note("unclosed" if cut else "missing_tag", f"missing {lay.close} after {seg[:60]!r}")
        befores = {x.before for x in layouts if x.before}
        words = tuple(w for x in layouts for w in x.words)
        head = _drop_foreign(head) if sp.loose else head
        if cut and (not sep and (sp.loose or _NAME.fullmatch(head.strip() or "-"))
                    or head in befores and "\n" not in rest):
            out.note("unclosed", f"the text ends inside a tool name: {seg[:60]!r}")
            out.mark_cut(None)
            return after, True
        if not sep:
            out.note("missing_tag", f"missing {lay.anchor or '{'!r} after the tool name in {seg[:60]!r}")
            line, nl, lines = seg.strip().partition("\n")
            if nl and words and lines.lstrip().startswith(min(words, key=len)):  # V3's name line, its word glued on
                head, rest = _drop_foreign(line), lines
                for b in befores:
                    if head.startswith(b) and self._name_ok(head[len(b):].strip()):
                        head = head[len(b):]
            else:
                brace = seg.find("{")
                head, rest = (seg, "") if brace < 0 else (seg[:brace], seg[brace:])
                if sp.loose:
                    head = _drop_foreign(head)
                elif rest:  # (another format's token in place of the anchor)
                    head = _drop_foreign_after(head, lay.anchor)
        name = head
        if head in befores:  # the name follows the anchor, on its line
            name, _, rest = rest.partition("\n")
        body = rest.strip().replace(sp.args_prefix, "", 1)
        word = next((w for w in sorted(words, key=len, reverse=True) if body.startswith(w)), "")
        body = body[len(word):].strip()
        for x in layouts:
            for w in x.closes[::-1]:
                body = body.removesuffix(w).rstrip()
        call_id = name.strip()  # (a counted row's id: prefix, name, counter)
        whole = call_id.startswith(lay.prefix)
        name = call_id[len(lay.prefix):] if whole else call_id
        if sp.counter:
            left, found, index = name.rpartition(sp.counter)
            name, whole = (left, whole) if found and index.isdigit() else (name, False)
        name = name.strip()
        if not sp.loose and _NAME.fullmatch(name) is None:
            if loud:
                out.note("unreadable", f"not a call: {seg[:80]!r}")
            return after, False
        if markup_name(name):
            out.note("markup_name", name_refused(name))
            if cut:
                out.mark_cut(None)
            return after, False
        counted = bool(sp.counter) and _NO_NAME.fullmatch(name) is not None
        tools = offered_tools() if counted else None
        if not name or counted and (tools is None or len(tools) != 1):
            out.note(*(("unnamed_call", f"call id {call_id[:60]!r} names no tool") if name
                       else ("no_name", f"a call without a tool name: {seg[:60]!r}")))
            if cut:
                out.mark_cut(None)
            return after, True
        if counted:
            name = next(iter(tools))
            out.note("bad_name", f"call id {call_id[:60]!r} names no tool; read as the one tool offered, {name!r}")
        elif not whole:
            out.note("bad_name", f"call id {call_id[:60]!r} is not {lay.prefix}NAME{sp.counter}INDEX")
        if sp.loose and not self._name_ok(name):
            out.note("bad_name", name_refused(name))
        if sp.text_key and body and not body.startswith("{"):
            out.calls.append(ToolCall(name, {sp.text_key: body}))
            if cut:
                out.mark_cut(len(out.calls) - 1, name)
            return after, True
        if sp.python_call and not body.startswith("{"):
            _add_python_call(self, out, name, body, cut)
        else:
            add_arguments_call(out, name, body, at_end=cut)
        return after, True

    # ---- detection of the token-less rows ----------------------------------------------------------------------

    def sniff(self, body: str, at: int) -> bool:
        """``call_open`` (after ``section_open``; then a call id) followed by a tool name and ``name_close``, not by
        prose (``>>> x``); after the row's ``header``, a name holding no other format's marker (harmony's
        ``to=functions.``) and a JSON object; a loose row's first call written in its layout."""
        sp = self.spelling
        if sp.loose:
            lay, seg = self.layout, body[at : at + ROW_CHARS]
            c = seg.find(lay.call)
            if c >= 0:  # the first call after its call token: ``before`` and the anchor, or a word of the layout
                seg = seg[c + len(lay.call) :].split(lay.close, 1)[0]
            if sp.python_call:  # the block's word on the line after the name tells it from rows sharing its tokens
                line_end = seg.find("\n", max(seg.find(lay.anchor), 0))  # (the name's line, its anchor lost or not)
                return line_end >= 0 and seg[line_end:].lstrip().startswith(lay.names[0])
            if c >= 0 and lay.before and seg.lstrip().startswith(lay.before + lay.anchor):
                return True
            return not (lay.words or c >= 0 and lay.before) or any(w in seg for w in lay.words)
        if sp.section_open and body.startswith(sp.section_open, at):  # a sectioned row: a call token after it
            at = skip_ws(body, at + len(sp.section_open))
        at += body.startswith("\n" + sp.call_open, at)  # (a line-start marker: the call after its line break)
        header = sp.header and body.startswith(sp.header, at)
        at += len(sp.header) if header else 0
        k = self._past_id(body, at + len(sp.call_open)) if sp.id_close else at + len(sp.call_open)  # (Solar Open's id)
        m = _NAME.match(body, k) if k >= 0 else None
        if m is None or not body.startswith(sp.name_close, m.end()):
            return False
        if not sp.name_close:  # a name glued to its JSON, which names no call itself (Hermes' object after a word)
            brace = skip_ws(body, m.end())
            if not body.startswith("{", brace) or _NAMED_OBJECT.match(body, brace) is not None:
                return False
        if header:
            return not marker_table().in_name(body[at : m.end()]) and body.startswith(
                "{", skip_ws(body, m.end() + len(sp.name_close)))
        return not marker_table().in_name(m.group())

    def region_start(self, body: str, at: int) -> int:
        """Token-less rows: the region starts at the earliest call token at a line start that runs on to the marker's
        call with no blank line between (a first call at the text's start has no marker)."""
        sp = self.spelling
        if sp.section_open is not None:
            return at
        for _ in range(MAX_NOTES * 64):
            j = body.rfind(sp.call_open, 0, at)
            if j < 0 or (j > 0 and body[j - 1] != "\n") or "\n\n" in body[j:at]:
                return at
            at = j
        return at

    def claims_text(self, body: str) -> bool:
        """A text with no marker: a line ``call_open`` + NAME, then a JSON object (Functionary's shape)."""
        sp = self.spelling
        if sp.section_open is not None:
            return False
        i = body.find(sp.call_open)
        while 0 <= i < 20_000:
            k = i + len(sp.call_open)
            m = _NAME.match(body, k, k + MAX_NAME_CHARS)
            if (m is not None and body.startswith(sp.name_close, m.end()) and m.group() not in sp.text_recipients
                    and body.startswith("{", skip_ws(body, m.end() + len(sp.name_close)))):
                return i == 0 or body[i - 1] == "\n" or body.startswith(sp.call_open, 0)
            i = body.find(sp.call_open, i + 1)
        return False

    def render(self, calls: Sequence[ToolCall]) -> str:
        sp = self.spelling
        items = sp.joiner.join(
            f"{sp.call_open}{f'{i}{sp.id_close}' if sp.id_close else ''}{c.name}"
            f"{f'{sp.counter}{i}' if sp.counter else ''}{sp.name_close}{sp.args_prefix}"
            f"{render_call(c.name, dict(c.arguments)) if sp.python_call else dumps(dict(c.arguments))}{sp.call_close}"
            for i, c in enumerate(calls)
        )
        return f"{sp.section_open or ''}{items}{sp.section_close or ''}"


def _add_python_call(fmt: NamedJson, out: Lenient, name: str, body: str, cut: bool) -> None:
    """Adds a Python block's call (:func:`recover_list`) under the tool name before it; another name is reported."""
    n = len(out.calls)
    recover_list(fmt, "[" + body + ("" if cut else "]"), out, read_whole=True, at_end=cut)
    for i, call in enumerate(out.calls[n:], n):
        if call.name != name:
            out.note("bad_name", f"the block of {name!r} calls {call.name[:60]!r}; read as {name!r}")
            out.calls[i] = ToolCall(name, call.arguments)


def _drop_foreign_after(head: str, anchor: str) -> str:
    """A call's head, before its arguments' object, without what stands in place of the name's closing token
    ``anchor``: its words written otherwise (`` JSON`` for `` json``), or up to two other formats' tokens."""
    words = len(anchor.split())
    parts = head.rstrip().rsplit(None, words) if words else ()
    if len(parts) > words and token_key("".join(parts[1:])) == token_key(anchor):
        return parts[0]
    end = len(head)
    for _ in range(2):
        k = max(head.rfind("<", 0, end), head.rfind("[", 0, end))
        end = k if k > 0 and _FOREIGN_TOKEN.fullmatch(head, k, end) is not None else end
    return head[:end]


def _drop_foreign(head: str) -> str:
    """A call's head with another format's token before it dropped."""
    head = head.strip()
    m = _FOREIGN_TOKEN.match(head)
    return head[m.end() :].strip() if m is not None and m.end() < len(head) else head
