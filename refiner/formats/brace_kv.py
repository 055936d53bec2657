"""Calls written ``call:NAME{key:value,...}`` between a family's call tokens, strings between a quote token: the
``brace_kv`` grammar. A family is a row of the catalog (:mod:`refiner.formats.catalog`); the reader of one
``{...}`` object is :mod:`refiner.formats.brace_reader`.

| format | models | shape (chat template; engine parser) |
|---|---|---|
| ``gemma4`` | Gemma 4 | ``<|tool_call>call:NAME{k:<|"|>v<|"|>,n:5}<tool_call|>`` per call, reasoning in ``<|channel>thought...<channel|>`` (``google-gemma-4`` chat template's ``format_argument``; vLLM ``gemma4_tool_parser.py``) |
| ``functiongemma`` | FunctionGemma | ``<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>`` per call (vLLM ``functiongemma_tool_parser.py``) |

The value grammar, as the templates write it: a string is the raw text between two quote tokens (no escapes: line
breaks, quotes, braces and the call tokens themselves are text inside it); ``true`` / ``false``; ``null`` (a Jinja
``None`` renders as ``None``, also read); a number as Python's ``str`` writes it (``-3``, ``2.5``, ``1e-05``,
``1e+21``); an object ``{key:value,...}``; a list ``[value,...]``. Keys are written bare, spaces included
(``Basic LLM Chain:{...}``); a key between quote tokens is also read (vLLM does), and rendering writes one that way
when a bare key could not hold it (empty, with ``:`` ``,`` brackets or outer spaces). The templates write keys in
Jinja ``dictsort`` order (case-insensitive); rendering keeps the calls' own order (so a text cut short holds a prefix
of the arguments), and reading keeps the text's order. Whitespace
around the punctuation is free (SGLang's tests write ``, ``). Calls follow each other with or without text between
them; content may come before and after them.

Lenient reading: a call the text stops in is read as written and marked (:class:`~refiner.formats.base.Cut`); a
call whose closing token or braces were lost ends at the next call token; a value that is no literal, number or
quoted string is kept as text and reported; text between the call tokens that is not ``call:NAME{...}`` (a name with
spaces, no braces) is no call. The row's tokens written wrong (case, separators, brackets, a lost ``>``) are read as
the tokens, and a ``call:NAME{`` that starts a line or follows a token-like end (``>``, ``]``, ``|``, another
format's tag) is a call whose token was lost: a serving stack that drops special tokens (vLLM's
``skip_special_tokens``) leaves Gemma 4's calls as ``call:f{city:Paris}``, whose unquoted values are kept as text.
Each is reported as ``missing_tag``; strictly, a ``call:NAME{`` after a token-like end before the first call token is
refused (its token was written wrong). A string holding the quote token cannot be written (``render`` raises): inside
a string, only the quote token ends it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring as _json_string  # (C speed: a str as a JSON string, unicode kept)
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import MAX_ARGUMENT_DEPTH, Detection, Lenient, WireFormat, memo
from refiner.formats.brace_reader import LITERALS_SPELT, MAX_NOTES, _Reader, _TooDeep
from refiner.formats.family import Family
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.strict import JSON_DECODER
from refiner.formats.tags import letters, tag_look_alike
from refiner.formats.text import skip_ws
from refiner.formats.xmlvalues import Finder

NAME_PATTERN = r"[^\s{}\[\]<>,\"'`|]+"
_NAME = re.compile(NAME_PATTERN)
# A key written bare reads back as itself.
_BARE_KEY = re.compile(r"[^\s:,{}\[\]<>|\"]+(?: [^\s:,{}\[\]<>|\"]+)*")
MAX_RESPELT = 4096  # token look-alikes looked at per text (lenient reading)
MAX_BARE_TRIES = 512  # call:NAME{ looked at per call where the text has no call token (lenient reading)


@dataclass(frozen=True)
class BraceSpelling:
    """One family's tokens: ``call_open`` + ``keyword`` + NAME + ``{...}`` + ``call_close``, strings between two
    ``quote`` tokens."""

    call_open: str
    call_close: str
    quote: str
    keyword: str = "call:"


_ASK = object()  # (not given, or not kept yet)
# a bare key, as the split read takes it
_KEY = r"[^\s:,{}\[\]<>\"|](?:[^:,{}\[\]<>\"|\n]*[^\s:,{}\[\]<>\"|])?"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("a key written twice")
    return value


# strict JSON (NaN and Infinity refused, numbers a float cannot hold refused) that also refuses a key written twice
_FAST_DECODER = json.JSONDecoder(parse_constant=JSON_DECODER.parse_constant, parse_float=JSON_DECODER.parse_float,
                                 object_pairs_hook=_no_duplicates)


def _json_object(body: str) -> dict | None:
    """The object that ``body`` is, whole, as the split read's strict decoder reads it; None for anything else."""
    try:
        value, stop = _FAST_DECODER.raw_decode(body)
    except (ValueError, RecursionError):
        return None
    return value if type(value) is dict and stop == len(body) else None


class BraceKV(WireFormat):
    """The grammar; each of its rows in the catalog is a subclass made by :func:`~refiner.formats.family.make_row`."""

    spelling: BraceSpelling
    row: Family
    name_pattern = NAME_PATTERN

    @classmethod
    def tags_for(cls, spelling: BraceSpelling) -> tuple[str, ...]:
        return (spelling.call_open, spelling.quote, spelling.call_close)

    @classmethod
    def detection_for(cls, spelling: BraceSpelling, rank: int) -> Detection:
        return Detection(rank=rank, markers=(spelling.call_open,), closers=(spelling.call_close,))

    def patterns(self) -> tuple[re.Pattern, re.Pattern, re.Pattern, re.Pattern]:
        """(a bare value, a bare key, junk in an object, junk in a list): text up to the next punctuation that ends
        one, and never into a token."""
        got = self.__dict__.get("_patterns")
        if got is None:
            sp = self.spelling
            tokens = (sp.call_open, sp.call_close, sp.quote)
            stop = "|".join(re.escape(t) for t in tokens)
            firsts = re.escape("".join(sorted({t[0] for t in tokens})))

            def upto(ends: str) -> re.Pattern:  # (runs without a token's first character pass in one step)
                return re.compile(rf"(?:[^{ends}{firsts}]+|(?!{stop})[{firsts}])*")

            got = self.__dict__["_patterns"] = (upto(r",{}\[\]"), upto(r":,{}\[\]"), upto(r",}"), upto(r",\]"))
        return got

    def answer_start(self, text: str) -> int:
        """Where the answer starts: after the family's reasoning block when one opens before the first call token
        (a call drafted inside it is reasoning), or after its closer alone before the first call token (the opener
        may be in the prompt); else 0. A closer quoted in a call's string comes after a call token: not taken."""
        first = text.find(self.spelling.call_open)
        limit = len(text) if first < 0 else first
        start = 0
        for open_, close in self.reasoning:
            o = text.find(open_, 0, limit)
            e = text.find(close, o + len(open_)) if o >= 0 else text.find(close, 0, limit)
            if e >= 0:  # (an opener never closed: the text was cut in the reasoning, or the model went on anyway)
                start = max(start, e + len(close))
        return start

    # ---- strict ------------------------------------------------------------------------------------------------

    def parse_strict(self, text: str) -> list[ToolCall]:
        sp = self.spelling
        start = self.answer_start(text)
        i = text.find(sp.call_open, start)
        if i < 0:
            raise self.error(f"no {sp.call_open}", start)
        early = self._bare_call(text, start, i, after_tag=True)
        if early >= 0:  # content before the first call token holds a call: its token was written wrong or lost
            raise self.error(f"{sp.keyword}NAME{{...}} without its {sp.call_open}", early)
        calls = []
        kept, finder = memo(text), Finder(text)
        while i >= 0:
            pos = i + len(sp.call_open)
            if not text.startswith(sp.keyword, pos):
                raise self.error(f"expected {sp.keyword}NAME{{...}} after {sp.call_open}", pos)
            pos += len(sp.keyword)
            m = _NAME.match(text, pos)
            if m is None or not text.startswith("{", m.end()):
                raise self.error(f"expected a tool name and {{ after {sp.keyword}", pos)
            got = self._fast_args(text, m.end(), finder, kept)
            args, pos = got if got is not None else _Reader(self, text, None).obj(m.end(), 0)
            pos = skip_ws(text, pos)
            if not text.startswith(sp.call_close, pos):
                raise self.error(f"expected {sp.call_close} after the arguments of {m.group()!r}", pos)
            calls.append(ToolCall.trusted(m.group(), args))
            i = text.find(sp.call_open, pos + len(sp.call_close))
        return calls

    def _fast_args(self, text: str, brace: int, finder: Finder, kept: dict | None | object = _ASK
                   ) -> tuple[dict, int] | None:
        """The arguments object at ``brace`` read by :meth:`_split_read`; ``None`` where it cannot, and the reader
        then reads it and explains. ``finder``: the text's :class:`~refiner.formats.xmlvalues.Finder`, asked for
        positions that never decrease."""
        # (strict and lenient readings of one text, by the gate, detection and salvage, read a call alike: once;
        # ``kept``: the text's memo, when the caller has it: base.memo)
        if kept is _ASK:
            kept = memo(text)
        if kept is None:
            return self._split_read(text, brace, finder)
        key = ("brace_kv fast", self.name, brace)
        got = kept.get(key, _ASK)
        if got is _ASK:
            got = kept[key] = self._split_read(text, brace, finder)
        return got

    # The one fast path beside the reader: on many short calls the reader alone is the slower (bench_worst_case).
    def _split_read(self, text: str, brace: int, finder: Finder) -> tuple[dict, int] | None:
        """``(arguments, where the closing token starts)`` of the call whose object opens at ``brace``, read at C
        speed: the text up to the call's closing token, split at the quote tokens, is strings (the odd pieces)
        between the rest, where only bare keys need quoting: found by one C-level split of the rest joined, and each
        string and key written as JSON by a C-level map, then decoded by a strict decoder that refuses what the
        reader refuses (duplicate keys, NaN, numbers a float cannot hold). ``None`` at any doubt: no closing token
        before the next call token, an odd number of quotes (the closing token is inside a string), a JSON quote,
        ``None`` or a ``<`` outside the strings, anything the decoder refuses, or a family whose tokens are not
        ``<...>`` with one ``<``. Whatever it accepts, the reader reads the same way (tested). Each call's read ends
        before the next call token: the reads of all the calls of a text pass over it about once."""
        sp = self.spelling
        if not self._splits:
            return None
        close = finder.next(sp.call_close, brace)
        if close < 0 or text.find(sp.call_open, brace, close) >= 0:
            return None
        region = text[brace:close]
        pieces = region.split(sp.quote)
        if not len(pieces) & 1:
            return None
        outside = "<".join(pieces[0::2])  # (no key reaches over a "<": the keys are found in one pass)
        if '"' in outside or "None" in outside or outside.count("<") != len(pieces) // 2:  # (a "<" of its own)
            return None
        parts = self._keys(outside)  # [text, "{ ", key, text, ", ", key, ..., text]
        parts[2::3] = map(_json_string, parts[2::3])
        pieces[0::2] = "".join(parts).split("<")
        pieces[1::2] = map(_json_string, pieces[1::2])
        value = _json_object("".join(pieces).rstrip())
        return None if value is None else (value, close)

    @functools.cached_property
    def _splits(self) -> bool:
        sp = self.spelling
        tokens = (sp.quote, sp.call_close)
        return all(t[:1] == "<" and t[-1:] == ">" and t.count("<") == 1 for t in tokens) and not (
            sp.quote.startswith(sp.call_close) or sp.call_close.startswith(sp.quote))

    @functools.cached_property
    def _keys(self) -> Callable[[str], list[str]]:
        return re.compile(rf"([{{,][ \t\r\n]*)({_KEY})(?=[ \t\r\n]*:)").split

    # ---- lenient -----------------------------------------------------------------------------------------------

    def recover(self, text: str, out: Lenient) -> None:
        sp = self.spelling
        start = self.answer_start(text)
        text = self._respell(text, start, out)
        finder = Finder(text)
        i = self._next_call(text, start, out, finder)
        if i < 0:
            out.note("missing_tag", f"no {sp.call_open} found")
            return
        for _ in range(MAX_RECOVERED_ITEMS):
            if i < 0 or not take_items(1):
                return
            try:
                pos = self._recover_call(text, i, out, finder)
            except _TooDeep:
                out.note("bad_arguments", f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels; the rest is not read")
                return
            i = self._next_call(text, pos, out, finder)

    def _next_call(self, text: str, pos: int, out: Lenient, finder: Finder) -> int:
        """(lenient) Where the next call's ``call:NAME{...}`` starts: after the next call token, or before it where
        a ``call:NAME{`` starts a line or follows what ends like a token (its own token lost, or written as another
        format's: a serving stack that drops special tokens leaves none at all); -1 when there is none."""
        sp = self.spelling
        i = finder.next(sp.call_open, pos)  # (a text without the token is searched once, not once per call)
        early = self._bare_call(text, pos, i if i >= 0 else None, after_tag=True)
        if early >= 0:
            if sum(p.code == "missing_tag" for p in out.problems[-MAX_NOTES:]) < MAX_NOTES:
                out.note("missing_tag", f"{sp.keyword}NAME{{...}} without its {sp.call_open}")
            return early
        return i if i < 0 else i + len(sp.call_open)

    def _bare_call(self, text: str, pos: int, end: int | None = None, after_tag: bool = False) -> int:
        """Where the next ``call:NAME{`` (before ``end``) that starts a line (or the text, or follows a call's
        closing token or closing brace; with ``after_tag``, also anything ending like a token: ``>``, ``]``, ``|``)
        starts, or -1."""
        sp = self.spelling
        pattern = self.__dict__.get("_bare")
        if pattern is None:
            pattern = self.__dict__["_bare"] = re.compile(rf"{re.escape(sp.keyword)}{NAME_PATTERN}\s*\{{")
        ends = ("\n", "}", sp.call_close, *((">", "]", "|") if after_tag else ()))
        open_cut = sp.call_open[:-1].lower()  # (the call token with its > lost, in any case)
        for _ in range(MAX_BARE_TRIES):
            m = pattern.search(text, pos, len(text) if end is None else end)
            if m is None:
                return -1
            before = text[max(0, m.start() - 64) : m.start()].rstrip(" \t")
            if not before or before.endswith(ends) or (after_tag and before.lower().endswith(open_cut)):
                return m.start()
            pos = m.end()
        return -1

    def _respell(self, text: str, start: int, out: Lenient) -> str:
        """(lenient) The row's tokens written wrong (another case, ``_`` / ``-`` changed or dropped, ``[...]`` for
        ``<...>``, a lost ``>``: :func:`~refiner.formats.tags.tag_look_alike`) written as the tokens. Gemma 4's call
        tokens share their letters: a bar after the bracket opens a call, a bar before the end closes one, and
        without either the keyword after it says (``call:`` opens). At most MAX_RESPELT tokens are looked at."""
        sp = self.spelling
        tokens = [t for t in dict.fromkeys((sp.call_open, sp.call_close, sp.quote)) if any(c.isalpha() for c in t)]
        if not tokens:
            return text
        found = self.__dict__.get("_look_alikes")
        if found is None:
            lead = r"[<\[]"
            alts = "|".join(f"(?:{tag_look_alike(t).pattern[len(lead):]})" for t in tokens)
            # (the bracket, then what may follow it: a storm of brackets fails there, once per bracket)
            found = self.__dict__["_look_alikes"] = re.compile(rf"{lead}(?=/?\|?\s*[A-Za-z])(?:{alts})", re.IGNORECASE)
        by_letters: dict[str, list[str]] = {}
        for t in tokens:
            by_letters.setdefault(letters(t), []).append(t)
        parts, last, notes = [], start, 0
        for n, m in enumerate(found.finditer(text, start)):
            if n >= MAX_RESPELT:
                break
            got = m.group()
            if got in tokens:
                continue
            choices = by_letters.get(letters(got), [])
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
            parts += (text[last : m.start()], choices[0])
            last = m.end()
            if notes < MAX_NOTES:
                out.note("missing_tag", f"{choices[0]} written as {got!r}")
                notes += 1
        if not parts:
            return text
        parts.append(text[last:])
        return text[:start] + "".join(parts)

    def _recover_call(self, text: str, pos: int, out: Lenient, finder: Finder) -> int:
        sp = self.spelling
        if text.startswith(sp.keyword, pos):
            pos += len(sp.keyword)
        elif len(out.problems) < MAX_NOTES:
            out.note("missing_tag", f"{sp.call_open} not followed by {sp.keyword}")
        m = _NAME.match(text, pos)
        if m is not None and m.end() >= len(text):
            out.note("unclosed", "the text ends inside a tool name")
            out.mark_cut(None)
            return len(text)
        brace = skip_ws(text, m.end()) if m is not None else pos
        if m is None or not text.startswith("{", brace):
            if brace >= len(text):
                out.note("unclosed", "the text ends before the arguments of a call")
                out.mark_cut(None)
                return len(text)
            end_at, tag = finder.first((sp.call_close, sp.call_open), pos)  # junk ends at the next call token
            if len(out.problems) < MAX_NOTES:
                out.note("unreadable", f"not a call between the call tokens: {text[pos : min(end_at, pos + 80)]!r}")
            return end_at + len(sp.call_close) if tag == sp.call_close else end_at
        name = m.group()
        fast = self._fast_args(text, brace, finder)
        if fast is not None:  # (a call written whole, in a text broken elsewhere)
            out.calls.append(ToolCall(name, fast[0]))
            return fast[1] + len(sp.call_close)
        reader = _Reader(self, text, out)
        args, pos = reader.obj(brace, 0)
        out.calls.append(ToolCall(name, args))
        if reader.cut is not None:
            whole = {k: v for k, v in args.items() if k != reader.cut_key}
            out.mark_cut(len(out.calls) - 1, name, whole, reader.cut)
            return pos
        pos = skip_ws(text, pos)
        if text.startswith(sp.call_close, pos):
            return pos + len(sp.call_close)
        if pos >= len(text):
            out.note("missing_tag", f"missing {sp.call_close}")
            out.mark_cut(len(out.calls) - 1, name, args, True)
        elif not reader.stopped:
            out.note("missing_tag", f"missing {sp.call_close} after the arguments of {name!r}")
        return pos

    # ---- render ------------------------------------------------------------------------------------------------

    def render(self, calls: Sequence[ToolCall]) -> str:
        sp = self.spelling
        return "".join(f"{sp.call_open}{sp.keyword}{c.name}{self._value(dict(c.arguments))}{sp.call_close}"
                       for c in calls)

    def _value(self, v: Any) -> str:
        q = self.spelling.quote
        if isinstance(v, str):
            if q in v:
                raise self.render_error(f"a string holding {q} cannot be written: {v[:60]!r}")
            return f"{q}{v}{q}"
        if v is True or v is False or v is None:
            return LITERALS_SPELT[v]
        if isinstance(v, int):
            return str(int(v))
        if isinstance(v, float):
            if not math.isfinite(v):
                raise self.render_error(f"{v} is not a JSON number")
            return repr(v)
        if isinstance(v, dict):  # (in the calls' own order: the templates' dictsort would reorder what a cut keeps)
            return "{" + ",".join(f"{self._key(str(k))}:{self._value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ",".join(self._value(x) for x in v) + "]"
        raise self.render_error(f"a value of type {type(v).__name__} cannot be written")

    def _key(self, key: str) -> str:
        if _BARE_KEY.fullmatch(key) and not any(t in key for t in self.tags):
            return key
        return self._value(key)
