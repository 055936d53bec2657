"""The ``brace_kv`` grammar's reader (:mod:`refiner.formats.brace_kv`): one ``{key:value,...}`` object and what it
holds, strictly (every deviation raises the format's error) or leniently (deviations reported and read past, the place
a text stops in marked). The value grammar is in :mod:`refiner.formats.brace_kv`'s docstring.
"""

from __future__ import annotations

import re
from typing import Any

from refiner.formats.base import MAX_ARGUMENT_DEPTH, MAX_NOTES, Lenient
from refiner.formats.jsonfix import take_items
from refiner.formats.text import skip_ws

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None, "None": None}
LITERALS_SPELT = {True: "true", False: "false", None: "null"}
# Read leniently (reported): what models write in place of the template's literals.
LOOSE_LITERALS: dict[str, Any] = {"True": True, "False": False, "none": None, "nil": None, "NULL": None}
MAX_NUMBER_CHARS = 4000  # digits of a number read (Python refuses to convert longer integer strings)
_NOTHING = object()  # no value was read (the text stops, or a call token stands where one should be)
_INF = float("inf")


class _TooDeep(Exception):
    pass


class _Reader:
    """Reads one ``{...}`` object and what it holds, strictly (every deviation raises the format's error) or
    leniently (deviations are reported in ``out`` and read past; ``cut`` says where the text stops)."""

    def __init__(self, fmt: Any, text: str, out: Lenient | None) -> None:
        sp = fmt.spelling
        self.fmt, self.text, self.out, self.n = fmt, text, out, len(text)
        self.q, self.lq = sp.quote, len(sp.quote)
        self.tokens = (sp.call_open, sp.call_close)
        self.bare, self.key, self.skip_obj, self.skip_list = fmt.patterns()
        self.cut: bool | None = None  # None: the text does not stop inside the value; else whether it stops cleanly
        self.stopped = False  # (lenient) a call token stood where a key, value or bracket should be
        self.cut_key: str | None = None  # the top-level key whose value the text stops in (mid-value)

    def bad(self, message: str, pos: int, code: str = "bad_argument") -> None:
        if self.out is None:
            raise self.fmt.error(message, pos)
        if len(self.out.problems) < MAX_NOTES:
            self.out.note(code, message)

    def counted(self) -> bool:
        """(lenient) Whether a member or element more may be read: each is a counted item
        (:func:`~refiner.formats.jsonfix.take_items`); when they run out, the rest is not read."""
        if self.out is None or take_items(1):
            return True
        self.stopped = True
        return False

    def skip(self, pos: int, closer: str) -> int:
        """(lenient) Past text that cannot start a key or value: to the next ``,`` or ``closer`` (a counted item; when
        items run out, to the end of the text: the rest is not read)."""
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
        c = text[pos]
        if text.startswith(self.q, pos):
            return self.string(pos + self.lq)
        if c == "{":
            return self.obj(pos, depth)
        if c == "[":
            return self.array(pos, depth)
        m = self.bare.match(text, pos)
        raw, end = m.group().strip(), m.end()
        if not raw:
            self.bad(f"expected a value, got {text[pos : pos + 20]!r}", pos)
            return _NOTHING, pos
        if raw in LITERALS:
            value = LITERALS[raw]
        elif _NUMBER.fullmatch(raw) and len(raw) <= MAX_NUMBER_CHARS:
            value = float(raw) if any(c in raw for c in ".eE") else int(raw)
            if value in (_INF, -_INF):
                self.bad(f"number {raw[:40]} is out of range", pos)
                value = raw
        elif raw in LOOSE_LITERALS and self.out is not None:
            self.bad(f"{raw!r} written for {LITERALS_SPELT[LOOSE_LITERALS[raw]]}", pos)
            value = LOOSE_LITERALS[raw]
        else:
            self.bad(f"unquoted value {raw[:40]!r}" + ("" if self.out is None else " (kept as text)"), pos)
            value = raw
        if end >= self.n:  # the text ends with it: a literal is whole, a number or text may go on
            self.ends(end, raw in LITERALS)
        return value, end

    def string(self, pos: int) -> tuple[Any, int]:
        e = self.text.find(self.q, pos)
        if e < 0:
            if self.out is None:
                raise self.fmt.error(f"a string without its closing {self.q}", pos)
            self.cut = False
            return self.text[pos:], self.n
        return self.text[pos:e], e + self.lq

    def obj(self, pos: int, depth: int) -> tuple[Any, int]:
        if depth > MAX_ARGUMENT_DEPTH:
            if self.out is None:
                raise self.fmt.error(f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels", pos)
            raise _TooDeep
        text, result = self.text, {}
        pos = skip_ws(text, pos + 1)
        after_value = False
        while True:
            if self.ends(pos, after_value) or self.at_token(pos):
                return result, pos
            if text[pos] == "}":
                return result, pos + 1
            if not self.counted():
                return result, self.n
            if after_value:
                if text[pos] == ",":
                    pos = skip_ws(text, pos + 1)
                    if self.ends(pos, False) or self.at_token(pos):
                        return result, pos
                    if text[pos] == "}":
                        self.bad("a comma before }", pos)
                        return result, pos + 1
                else:
                    self.bad(f"expected , or }} after a value, got {text[pos : pos + 20]!r}", pos)
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
            if text[pos] != ":":
                self.bad(f"key {key[:40]!r} without a value", key_at)
                after_value = True
                continue
            if key in result:
                self.bad(f"key {key[:40]!r} written twice", key_at)
            value, pos = self.value(pos + 1, depth + 1)
            if value is not _NOTHING:
                result[key] = value
            if self.cut is not None or self.stopped:
                if depth == 0 and self.cut is False:
                    self.cut_key = key
                return result, pos
            pos = skip_ws(text, pos)
            after_value = True

    def array(self, pos: int, depth: int) -> tuple[Any, int]:
        if depth > MAX_ARGUMENT_DEPTH:
            if self.out is None:
                raise self.fmt.error(f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels", pos)
            raise _TooDeep
        text, result = self.text, []
        pos = skip_ws(text, pos + 1)
        after_value = False
        while True:
            if self.ends(pos, after_value) or self.at_token(pos):
                return result, pos
            if text[pos] == "]":
                return result, pos + 1
            if not self.counted():
                return result, self.n
            if after_value:
                if text[pos] == ",":
                    pos += 1
                else:
                    self.bad(f"expected , or ] after a value, got {text[pos : pos + 20]!r}", pos)
            value, end = self.value(pos, depth + 1)
            if value is not _NOTHING:
                result.append(value)
            elif end == pos and self.cut is None and not self.stopped:
                end = self.skip(pos, "]")
            pos = skip_ws(text, end)
            if self.cut is not None or self.stopped:
                return result, pos
            after_value = True
