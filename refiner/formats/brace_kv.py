"""The ``brace_kv`` grammar: calls ``call:NAME{key:value,...}`` between a family's call tokens (its rows are in
:mod:`refiner.formats.catalog`), Gemma 4's ``<|tool_call>call:NAME{k:<|"|>v<|"|>,n:5}<tool_call|>``. Values: a string is
the raw text between two quote tokens (no escapes); ``true``/``false``; ``null`` (also ``None``); a number as Python's
``str`` writes it; ``{key:value,...}``; ``[value,...]``. Keys are bare (spaces included) or quoted, in the calls' own
order. Whitespace around the punctuation is free; content may stand around.

Lenient reading: a call the text stops in is cut; a call that lost its closing token or braces ends at the next
call token; a bare value that is no literal or number is text (reported). Tokens written wrong are read as the
tokens, and a ``call:NAME{`` at a line start or after a token-like end (``>``, ``]``, ``|``) is a call that lost its
token (vLLM's ``skip_special_tokens``): each reported as ``missing_tag``, and refused strictly."""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import MAX_ARGUMENT_DEPTH, MAX_NOTES, Detection, Lenient, WireFormat
from refiner.formats.family import Family
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.lenient import run_together
from refiner.formats.tags import apply_edits, letters, tag_look_alike
from refiner.formats.text import skip_ws
from refiner.formats.xml_lenient import slip
from refiner.formats.xmlvalues import Finder

NAME_PATTERN = r"[^\s{}\[\]<>,\"'`|]+"
_NAME = re.compile(NAME_PATTERN)
# A key written bare reads back as itself.
_BARE_KEY = re.compile(r"[^\s:,{}\[\]<>|\"]+(?: [^\s:,{}\[\]<>|\"]+)*")
MAX_RESPELT = 4096  # token look-alikes looked at per text (lenient reading)
MAX_BARE_TRIES = 512  # call:NAME{ looked at per call where the text has no call token (lenient reading)


@dataclass(frozen=True)
class BraceSpelling:
    """A call: ``call_open`` + ``keyword`` + NAME + ``{...}`` + ``call_close``; strings between two ``quote`` tokens."""

    call_open: str
    call_close: str
    quote: str
    keyword: str = "call:"


_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None, "None": None}
# Read leniently (reported): what models write in place of the template's literals.
LOOSE_LITERALS: dict[str, Any] = {"True": True, "False": False, "none": None, "nil": None, "NULL": None}
MAX_NUMBER_CHARS = 4000  # digits of a number read (Python refuses to convert longer integer strings)
LOST_QUOTE_CHARS = 400  # how far a string's closing quote token is looked for when its opening one was lost
_NOTHING = object()  # no value was read (the text stops, or a call token stands where one should be)
_INF = float("inf")


class _TooDeep(Exception):
    pass


class _Reader:
    """Reads one ``{...}`` object, strictly (a deviation raises) or leniently (deviations noted in ``out``)."""

    def __init__(self, fmt: Any, text: str, out: Lenient | None) -> None:
        sp = fmt.spelling
        self.fmt, self.text, self.out, self.n = fmt, text, out, len(text)
        self.q, self.lq = sp.quote, len(sp.quote)
        self.tokens = (sp.call_open, sp.call_close)
        self.bare, self.key, self.skip_obj, self.skip_list, self.member, self.element = fmt.patterns
        self.cut: bool | None = None  # None: the text does not stop inside the value; else whether it stops cleanly
        self.stopped = False  # (lenient) a call token stood where a key, value or bracket should be
        self.cut_key: str | None = None  # the top-level key whose value the text stops in (mid-value)

    def bad(self, message: str, pos: int, code: str = "bad_argument") -> None:
        slip(self.fmt, self.out, code if self.out is None or len(self.out.problems) < MAX_NOTES else None, message, pos)

    def counted(self) -> bool:
        """(lenient) Whether one more member or element may be read (a counted item: :func:`take_items`)."""
        if self.out is None or take_items(1):
            return True
        self.stopped = True
        return False

    def skip(self, pos: int, closer: str) -> int:
        """(lenient) Past text that cannot start a key or value: to the next ``,`` or ``closer`` (a counted item)."""
        if not self.counted():
            return self.n
        m = (self.skip_obj if closer == "}" else self.skip_list).match(self.text, pos)
        return max(m.end(), pos + 1)

    def at_token(self, pos: int) -> bool:
        if self.out is not None and self.text.startswith(self.tokens, pos):
            self.stopped = True
            self.bad(f"{self.text[pos : pos + 20]!r} where a value or closing bracket should be", pos, "unclosed")
            return True
        return False

    def ends(self, pos: int, clean: bool) -> bool:
        """Whether the text ends at ``pos`` (strict: raises; lenient: records the cut)."""
        if pos < self.n:
            return False
        if self.out is None:
            raise self.fmt.error("the text ends inside a call", pos)
        self.cut = clean
        return True

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        text = self.text
        pos = skip_ws(text, pos)
        if self.ends(pos, False) or self.at_token(pos):
            return _NOTHING, pos
        if text.startswith(self.q, pos):
            return self.string(pos + self.lq)
        if text[pos] in "{[":
            return self.container(pos, depth)
        m = self.bare.match(text, pos)
        raw, end = m.group().strip(), m.end()
        if not raw:
            self.bad(f"expected a value, got {text[pos : pos + 20]!r}", pos)
            return _NOTHING, pos
        if self.out is not None and raw not in LITERALS and not _NUMBER.fullmatch(raw):
            e = self.lost_open_quote(pos)
            if e >= 0:
                self.bad(f"the opening {self.q} of {text[pos:e][:40]!r} was lost", pos, "mended")
                return text[pos:e], e + self.lq
        value = self.scalar(raw, pos)
        if end >= self.n:  # the text ends with it: a literal is whole, a number or text may go on
            self.ends(end, raw in LITERALS)
        return value, end

    def lost_open_quote(self, pos: int) -> int:
        """(lenient) Where the closing quote of a string at ``pos`` lacking its opening one stands, with no ':', bracket
        or call token before it and ',', '}', ']' or the end after it, within :data:`LOST_QUOTE_CHARS`; else -1."""
        text = self.text
        e = text.find(self.q, pos, pos + LOST_QUOTE_CHARS)
        before = text[pos:e] if e >= 0 else ""
        if e < 0 or any(c in before for c in ":{}[]") or any(t in before for t in self.tokens):
            return -1
        k = skip_ws(text, e + self.lq)
        return e if k >= self.n or text[k] in ",}]" else -1

    def plain(self, m: re.Match) -> Any:
        """A plain member or element's value: a string without the quote's first character, a literal or a number."""
        return m["string"] if m["scalar"] is None else self.scalar(m["scalar"], m.start("scalar"))

    def scalar(self, raw: str, pos: int) -> Any:
        """A bare value: a literal, a number (in range, at most :data:`MAX_NUMBER_CHARS` long), else text (reported)."""
        if raw in LITERALS:
            return LITERALS[raw]
        if _NUMBER.fullmatch(raw) and len(raw) <= MAX_NUMBER_CHARS:
            value = int(raw) if raw.lstrip("-").isdigit() else float(raw)
            if value not in (_INF, -_INF):
                return value
            self.bad(f"number {raw[:40]} is out of range", pos)
            return raw
        if raw in LOOSE_LITERALS and self.out is not None:
            self.bad(f"{raw!r} written for {json.dumps(LOOSE_LITERALS[raw])}", pos)
            return LOOSE_LITERALS[raw]
        self.bad(f"unquoted value {raw[:40]!r}" + ("" if self.out is None else " (kept as text)"), pos)
        return raw

    def string(self, pos: int) -> tuple[Any, int]:
        e = self.text.find(self.q, pos)
        if e < 0:
            if self.out is None:
                raise self.fmt.error(f"a string without its closing {self.q}", pos)
            self.cut = False
            return self.text[pos:], self.n
        return self.text[pos:e], e + self.lq

    def container(self, pos: int, depth: int) -> tuple[Any, int]:
        """The object or list whose bracket is at ``pos``, and where reading goes on."""
        if depth > MAX_ARGUMENT_DEPTH:
            if self.out is None:
                raise self.fmt.error(f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels", pos)
            raise _TooDeep
        text, keyed = self.text, self.text[pos] == "{"
        closer, plain, result = ("}", self.member, {}) if keyed else ("]", self.element, [])
        pos = skip_ws(text, pos + 1)
        after_value, key = False, None
        while True:  # (it ends at the text's end, a call token, its closer, or when its items are spent)
            if self.ends(pos, after_value) or self.at_token(pos):
                return result, pos
            if text[pos] == closer:
                return result, pos + 1
            if not self.counted():
                return result, self.n
            if after_value and text[pos] != ",":
                self.bad(f"expected , or {closer} after a value, got {text[pos : pos + 20]!r}", pos)
            elif after_value:
                pos = skip_ws(text, pos + 1) if keyed else pos + 1
                if self.ends(pos, False) or self.at_token(pos):
                    return result, pos
                if keyed and text[pos] == "}":
                    self.bad("a comma before }", pos)
                    return result, pos + 1
            m = plain.match(text, pos)  # (in one match, as the steps below: bench_worst_case needs it)
            if m is not None and not (keyed and m["key"] in result):
                if keyed:
                    result[m["key"]] = self.plain(m)
                else:
                    result.append(self.plain(m))
                pos, after_value = m.end(), m["comma"] is None
                continue
            if keyed:
                key_at = pos
                if text.startswith(self.q, pos):
                    key, pos = self.string(pos + self.lq)
                    if self.cut is not None:
                        return result, pos
                else:
                    m = self.key.match(text, pos)
                    key, pos = m.group().strip(), m.end()
                    if self.ends(pos, False):
                        return result, pos
                    if not key:
                        self.bad(f"expected a key, got {text[pos : pos + 20]!r}", pos)
                        if self.at_token(pos):
                            return result, pos
                        pos = self.skip(pos, "}")
                        after_value = True  # (a comma after the junk separates what follows)
                        if self.stopped:
                            return result, pos
                        continue
                pos = skip_ws(text, pos)
                if self.ends(pos, False):
                    return result, pos
                if text[pos] == ":":
                    pos += 1
                elif self.out is not None and text.startswith(self.q, pos):  # a string right after the key
                    self.bad(f"the ':' after key {key[:40]!r} was lost", key_at, "mended")
                else:
                    self.bad(f"key {key[:40]!r} without a value", key_at)
                    after_value = True
                    continue
                if key in result:
                    self.bad(f"key {key[:40]!r} written twice", key_at)
            value, end = self.value(pos, depth + 1)
            if value is _NOTHING and not keyed and end == pos and self.cut is None and not self.stopped:
                end = self.skip(pos, "]")
            elif value is not _NOTHING and keyed:
                result[key] = value
            elif value is not _NOTHING:
                result.append(value)
            pos = skip_ws(text, end)
            if self.cut is not None or self.stopped:
                if depth == 0 and self.cut is False:
                    self.cut_key = key
                return result, pos
            after_value = True


class BraceKV(WireFormat):
    """The grammar; each of its rows in the catalog is a subclass made by :func:`~refiner.formats.family.make_row`."""

    spelling: BraceSpelling
    row: Family
    name_pattern = NAME_PATTERN
    bounds_depth = True

    @classmethod
    def tags_for(cls, spelling: BraceSpelling) -> tuple[str, ...]:
        return (spelling.call_open, spelling.quote, spelling.call_close)

    @classmethod
    def detection_for(cls, spelling: BraceSpelling, rank: int) -> Detection:
        return Detection(rank=rank, markers=(spelling.call_open,), closers=(spelling.call_close,))

    @functools.cached_property
    def patterns(self) -> tuple[re.Pattern, ...]:
        """(a bare value, a bare key, junk in an object, junk in a list): text up to the punctuation that ends one,
        never into a token; then a plain member and a plain element (a bare key, and a string, literal or number,
        followed by a comma or the closing bracket)."""
        sp = self.spelling
        tokens = (sp.call_open, sp.call_close, sp.quote)
        stop = "|".join(re.escape(t) for t in tokens)
        firsts = re.escape("".join(sorted({t[0] for t in tokens})))

        def upto(ends: str) -> re.Pattern:  # (runs without a token's first character pass in one step)
            return re.compile(rf"(?:[^{ends}{firsts}]+|(?!{stop})[{firsts}])*")

        ends = rf":,{{}}\[\]{firsts}"
        key = rf"(?=[^{ends}]*:)[^\s{ends}](?:[^{ends}]*[^\s{ends}])?"  # (the colon first: no backtracking)
        calls = "|".join(re.escape(t) for t in (sp.call_open, sp.call_close))
        q, q0 = re.escape(sp.quote), re.escape(sp.quote[0])

        def blank(name: str) -> str:  # (whitespace taken whole: a failed match does not give it back char by char)
            return rf"(?=(?P<{name}>\s*))(?P={name})"

        scalar = "|".join((*LITERALS, _NUMBER.pattern))
        value = rf"{blank('lead')}(?!{calls})(?:{q}(?P<string>[^{q0}]*){q}|(?P<scalar>{scalar}))"

        def then(closer: str) -> str:  # (a comma is taken with the value when a key or value follows it)
            comma = rf"(?P<comma>,){blank('gap')}(?!{calls})(?=[^\s\{closer}])"
            return rf"{blank('trail')}(?:{comma}|(?=[,\{closer}]))"

        return (upto(r",{}\[\]"), upto(r":,{}\[\]"), upto(r",}"), upto(r",\]"),
                re.compile(rf"(?P<key>{key})\s*:{value}{then('}')}"), re.compile(rf"{value}{then(']')}"))

    def answer_start(self, text: str) -> int:
        """After the family's reasoning block, or its closer alone, before the first call token; else 0."""
        first = text.find(self.spelling.call_open)
        limit = len(text) if first < 0 else first
        start = 0
        for open_, close in self.reasoning:
            o = text.find(open_, 0, limit)
            e = text.find(close, o + len(open_)) if o >= 0 else text.find(close, 0, limit)
            if e >= 0:  # (an opener never closed: the text was cut in the reasoning, or the model went on anyway)
                start = max(start, e + len(close))
        return start

    def parse_strict(self, text: str) -> list[ToolCall]:
        calls: list[ToolCall] = []
        self._read(text, calls, None)
        return calls

    def recover(self, text: str, out: Lenient) -> None:
        self._read(text, out.calls, out)

    def _read(self, text: str, calls: list[ToolCall], out: Lenient | None) -> None:
        """Reads the calls after the reasoning into ``calls``: leniently when given a :class:`Lenient` to note what
        it recovers from (tokens written wrong put right first), else strictly, raising where it would recover."""
        start = self.answer_start(text)
        if out is not None:
            text = self._respell(text, start, out)
        finder = Finder(text)
        i = self._next_call(text, start, out, finder)
        if i < 0:
            slip(self, out, "missing_tag", f"no {self.spelling.call_open} found", start)
            return
        for _ in range(MAX_RECOVERED_ITEMS) if out is not None else itertools.count():
            if out is not None and not take_items(1):
                return
            try:
                pos = self._read_call(text, i, calls, out, finder)
            except _TooDeep:
                out.note("bad_arguments", f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels; the rest is not read")
                return
            # (strictly, a call:NAME{ without its token after the first call is content)
            i = self._next_call(text, pos, out, finder, bare=out is not None)
            if i < 0:
                return

    def _next_call(self, text: str, pos: int, out: Lenient | None, finder: Finder, bare: bool = True) -> int:
        """Where the next ``call:NAME{...}`` starts, after its token, or, with ``bare``, :meth:`_bare_call`; else -1."""
        sp = self.spelling
        i = finder.next(sp.call_open, pos)  # (a text without the token is searched once, not once per call)
        early = self._bare_call(text, pos, i if i >= 0 else len(text)) if bare else -1
        if early >= 0:  # its token was written wrong or lost
            if out is None or sum(p.code == "missing_tag" for p in out.problems[-MAX_NOTES:]) < MAX_NOTES:
                slip(self, out, "missing_tag", f"{sp.keyword}NAME{{...}} without its {sp.call_open}", early)
            return early
        return i if i < 0 else i + len(sp.call_open)

    def _bare_call(self, text: str, pos: int, end: int) -> int:
        """Where the next ``call:NAME{`` before ``end`` at a line start or after a token-like end starts, or -1."""
        sp = self.spelling
        ends = ("\n", "}", sp.call_close, ">", "]", "|")
        open_cut = sp.call_open[:-1].lower()  # (the call token with its > lost, in any case)
        bare = re.compile(rf"{re.escape(sp.keyword)}{NAME_PATTERN}\s*\{{")
        for _ in range(MAX_BARE_TRIES):
            m = bare.search(text, pos, end)
            if m is None:
                return -1
            before = text[max(0, m.start() - 64) : m.start()].rstrip(" \t")
            if not before or before.endswith(ends) or before.lower().endswith(open_cut):
                return m.start()
            pos = m.end()
        return -1

    def _respell(self, text: str, start: int, out: Lenient) -> str:
        """(lenient) Look-alikes of the row's tokens written as the tokens; tokens sharing letters are told apart by the
        bar's side, else by ``call:`` after an opener; one inside a string value is its text."""
        sp = self.spelling
        swapped = sp.quote.replace('"', "'")  # (a quote token of no letters, written with the other quote)
        if swapped != sp.quote and text.find(swapped, start) >= 0:
            out.note("missing_tag", f"{sp.quote} written as {swapped!r}")
            text = text[:start] + text[start:].replace(swapped, sp.quote)
        tokens = [t for t in dict.fromkeys((sp.call_open, sp.call_close, sp.quote)) if any(c.isalpha() for c in t)]
        lead = r"[<\[]"
        found = self.__dict__.get("_look_alikes")
        if found is None:  # (the bracket, then what may follow it: a storm of brackets fails there, once per bracket)
            alts = "|".join(f"(?:{tag_look_alike(t).pattern[len(lead):]})" for t in tokens)
            found = self.__dict__["_look_alikes"] = re.compile(rf"{lead}(?=/?\|?\s*[A-Za-z])(?:{alts})", re.IGNORECASE)
        by_letters: dict[str, list[str]] = {}
        for t in tokens:
            by_letters.setdefault(letters(t), []).append(t)
        edits: list[tuple[int, int, str]] = []
        lettered: dict[str, str] = {}  # (each look-alike spelling's letters, told once per text)
        quotes, seen = 0, start  # quote tokens before ``seen``: an odd count puts a look-alike inside a string value
        for m in itertools.islice(found.finditer(text, start), MAX_RESPELT):
            got = m.group()
            quotes, seen = quotes + text.count(sp.quote, seen, m.start()), m.start()
            if got in tokens or quotes % 2:
                continue
            choices = by_letters.get(lettered.get(got) or lettered.setdefault(got, letters(got)), [])
            if len(choices) > 1:
                bar_first = got[1:2] == "|"
                bar_last = got.rstrip(">]")[-1:] == "|"
                if bar_first != bar_last:
                    choices = [t for t in choices if (t[1:2] == "|") == bar_first]
                else:
                    opens = text.startswith(sp.keyword, skip_ws(text, m.end()))
                    choices = [t for t in choices if (t == sp.call_open) == opens]
            if len(choices) != 1:
                continue
            edits.append((m.start(), m.end(), choices[0]))
            seen = m.end()
            quotes += choices[0] == sp.quote
            if len(edits) <= MAX_NOTES:
                out.note("missing_tag", f"{choices[0]} written as {got!r}")
        return apply_edits(text, edits) if edits else text

    def _read_call(self, text: str, pos: int, calls: list[ToolCall], out: Lenient | None, finder: Finder) -> int:
        """Reads the call after its token into ``calls``: where reading goes on."""
        sp = self.spelling
        if text.startswith(sp.keyword, pos):
            pos += len(sp.keyword)
        elif out is None or len(out.problems) < MAX_NOTES:
            slip(self, out, "missing_tag", f"{sp.call_open} not followed by {sp.keyword}", pos)
        m = _NAME.match(text, pos)
        brace = skip_ws(text, m.end()) if m is not None else pos
        if out is not None and m is not None and m[0].endswith(":") and len(out.problems) < MAX_NOTES and (
                k := run_together(m[0][:-1])):  # the "{" lost between an offered tool's name and its first key
            slip(self, out, "missing_tag", f"missing '{{' after {m[0][:k]!r}", pos)
            return self._read_call(text[: pos + k] + "{" + text[pos + k :], pos, calls, out, finder) - 1
        if m is None or not text.startswith("{", brace) or (out is None and brace > m.end()):
            if brace >= len(text):  # (in the tool name, or after it)
                slip(self, out, "unclosed", "the text ends before the arguments of a call", pos)
                out.mark_cut(None)
                return len(text)
            end_at, tag = finder.first((sp.call_close, sp.call_open), pos)  # junk ends at the next call token
            if out is None or len(out.problems) < MAX_NOTES:
                what = f"not a call between the call tokens: {text[pos : min(end_at, pos + 80)]!r}"
                slip(self, out, "unreadable", what, pos)
            return end_at + len(sp.call_close) if tag == sp.call_close else end_at
        name = m.group()
        reader = _Reader(self, text, out)
        # (arguments are level 1 strictly, as MAX_ARGUMENT_DEPTH counts; level 0 leniently: parse_lenient drops deeper)
        args, pos = reader.container(brace, 0 if out is not None else 1)
        calls.append(ToolCall(name, args))
        if reader.cut is not None:
            whole = {k: v for k, v in args.items() if k != reader.cut_key}
            out.mark_cut(len(calls) - 1, name, whole, reader.cut)
            return pos
        pos = skip_ws(text, pos)
        if text.startswith(sp.call_close, pos):
            return pos + len(sp.call_close)
        if pos >= len(text):
            slip(self, out, "missing_tag", f"missing {sp.call_close}", pos)
            out.mark_cut(len(calls) - 1, name, args, True)
        elif not reader.stopped:
            slip(self, out, "missing_tag", f"missing {sp.call_close} after the arguments of {name!r}", pos)
        return pos

    def render(self, calls: Sequence[ToolCall]) -> str:
        sp = self.spelling
        try:
            args = [write_quoted(dict(c.arguments), sp.quote, sp.quote, self._key) for c in calls]
        except ValueError as e:
            raise self.render_error(str(e)) from None
        return "".join(f"{sp.call_open}{sp.keyword}{c.name}{a}{sp.call_close}" for c, a in zip(calls, args))

    def _key(self, key: str) -> str:
        """A key bare when it reads back as itself, else between the quote tokens."""
        q = self.spelling.quote
        return key if _BARE_KEY.fullmatch(key) and not any(t in key for t in self.tags) else write_quoted(key, q, q)


def write_quoted(value: Any, q_open: str, q_close: str, key: Callable[[str], str] = str, spaced: bool = False) -> str:
    """``value`` written compact as Gemma writes it (``spaced``: a space after each ``,`` and ``:``): strings between
    the quote tokens, keys by ``key`` (bare), other values as JSON (in the calls' own order: the templates' dictsort
    would reorder what a cut keeps). ``ValueError`` for a string holding ``q_close`` or a value JSON cannot hold."""
    if isinstance(value, str):
        if q_close in value:
            raise ValueError(f"a string holding {q_close} cannot be written: {value[:60]!r}")
        return q_open + value + q_close
    comma, colon = (", ", ": ") if spaced else (",", ":")
    if isinstance(value, dict):
        return "{" + comma.join(f"{key(str(k))}{colon}{write_quoted(v, q_open, q_close, key, spaced)}"
                                for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + comma.join(write_quoted(v, q_open, q_close, key, spaced) for v in value) + "]"
    if value is None or isinstance(value, (bool, int)) or isinstance(value, float) and math.isfinite(value):
        return json.dumps(value)
    raise ValueError(f"{value!r} cannot be written: not a JSON value")
