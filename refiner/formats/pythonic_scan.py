"""Linear scans of broken pythonic text (lenient reading): strings (as Python reads them, or as meant when an escape was
forgotten), brackets and commas outside them, each bracket's closer, where a list that lost its opening tag starts."""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from refiner.formats.reasoning import label_look_alikes
from refiner.formats.tags import tag_look_alike

_PLAIN = re.compile(r"[^\"'()\[\]{},]*")
# What may follow a value: a quote before it may end a leniently read string.
_MAY_FOLLOW = r"[ \t\r\n]*(?:[,)\]}:]|\Z)"
CLOSING_QUOTE = re.compile(f"[\"'](?={_MAY_FOLLOW})")  # a quote that may end a value
# A string's text up to its closing quote as Python reads it (False), or leniently (True): up to an unescaped quote
# followed by what may follow a value, so an unescaped quote inside a value ('sed -n '1,5p' f') stays text. Text
# between escapes and quotes is taken whole and a run of quotes but its last in one step; each text has one reading,
# so one not closed is given up after one more pass (Python 3.10 has no possessive quantifier).
_BODY = {(q, lenient): rf"[^{q}\\]*(?:(?:\\.|{q}+(?={q}(?!{q}))|{q}(?!{q})(?!{_MAY_FOLLOW}))[^{q}\\]*)*" if lenient
         else rf"[^{q}\\]*(?:\\.[^{q}\\]*)*" for q in "'\"" for lenient in (False, True)}
STRICT_STRING = {q: re.compile(f"{q}{_BODY[q, False]}{q}", re.DOTALL) for q in "'\""}  # from its opening quote
# Text up to a bracket, a comma or a quote that opens no string, strings as Python reads them taken in one match.
_PLAIN_OR_STRINGS = re.compile(r"""(?:[^"'()\[\]{},]+|""" + "|".join(p.pattern for p in STRICT_STRING.values()) + ")*",
                               re.DOTALL)


@functools.lru_cache(maxsize=4)
def _closing_quotes(src: str, q: str) -> list[int]:
    """Positions of the quotes ``q`` in ``src`` that are not escaped and are followed by what may follow a value."""
    found = []
    for m in CLOSING_QUOTE.finditer(src):
        p = k = m.start()
        while k > 0 and src[k - 1] == "\\":
            k -= 1
        if (p - k) % 2 == 0 and src[p] == q:
            found.append(p)
    return found


def string_end(src: str, i: int, end: int | None = None, *, lenient_quotes: bool = False) -> int:
    """The index after the string whose opening quote is ``src[i]``, ``-1`` when it is not closed before ``end`` (the
    text's end by default); with ``lenient_quotes``, a quote not followed by what may follow a value does not end it."""
    q = src[i]
    end = len(src) if end is None else end
    if lenient_quotes:
        ends = _closing_quotes(src, q)
        k = bisect.bisect_right(ends, i)
        if k < len(ends):
            return ends[k] + 1 if ends[k] < end else -1
    m = STRICT_STRING[q].match(src, i, end)
    return -1 if m is None else m.end()


def _unquoted(src: str, start: int = 0, end: int | None = None, *, lenient_quotes: bool = False
              ) -> Iterator[tuple[int, str]]:
    """``(index, char)`` for each bracket and comma of ``src[start:end]`` outside quoted strings, and last ``(index,
    quote)`` of a string that is not closed before ``end``."""
    end = len(src) if end is None else end
    plain = _PLAIN if lenient_quotes else _PLAIN_OR_STRINGS
    i = start
    while i < end:
        i = plain.match(src, i, end).end()
        if i >= end:
            return
        ch = src[i]
        if ch == "'" or ch == '"':
            j = string_end(src, i, end, lenient_quotes=lenient_quotes)
            if j < 0:
                yield i, ch
                return
            i = j
            continue
        yield i, ch
        i += 1


def split_top_level(src: str) -> list[str]:
    """``src`` cut at commas outside brackets and leniently quoted strings (:func:`string_end`)."""
    parts, depth, last = [], 0, 0
    for i, ch in _unquoted(src, lenient_quotes=True):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append(src[last:i])
            last = i + 1
    parts.append(src[last:])
    return parts


def matching_paren(src: str, open_at: int, *, lenient_quotes: bool = False) -> int:
    """Index of the ``)`` closing the ``(`` at ``open_at`` (quotes respected), or ``len(src)`` if none."""
    return Brackets(src, lenient_quotes=lenient_quotes).closer(open_at)


@dataclass
class _Walk:
    """A walk over a text's brackets and commas outside strings, from a bracket on."""

    at: int  # where it goes on
    open: list[int] = field(default_factory=list)  # the brackets it passed that are not closed yet
    marks: list[int] = field(default_factory=list)  # the brackets and commas it passed, in order


class Brackets:
    """The brackets of one text paired with their closers (quotes respected, as :func:`_unquoted` reads them; a
    closer closes the last bracket of any kind left open). A bracket is paired by the walk that passed it outside
    strings, which goes on from where it stopped; a walk starts only at a bracket no walk passed (one inside a string
    as the others read it), so the brackets of a text are paired in about one pass however many are asked about."""

    def __init__(self, src: str, *, lenient_quotes: bool = False) -> None:
        self.src = src
        self.lenient = lenient_quotes
        self.walks: dict[int, _Walk] = {}  # opening bracket -> the walk that passed it
        self.closers: dict[int, int] = {}  # opening bracket -> its closer

    def closer(self, open_at: int, end: int | None = None, max_marks: int | None = None) -> int:
        """Index of the closer of the bracket at ``open_at`` if before ``end`` (the text's end by default), else
        ``end``; ``-1`` when more than ``max_marks`` brackets and commas (the opening one included) come first."""
        end = len(self.src) if end is None else end
        walk = self.walks.get(open_at)
        if walk is None:
            walk = self.walks[open_at] = _Walk(open_at)
        if walk.at <= self.closers.get(open_at, end - 1):  # (the walk passes the closer, for the marks it counts)
            self._walk(walk, open_at, end)
        close = min(self.closers.get(open_at, end), end)
        if max_marks is not None:
            passed = bisect.bisect_left(walk.marks, min(close + 1, end)) - bisect.bisect_left(walk.marks, open_at)
            if passed > max_marks:
                return -1
        return close

    def _walk(self, walk: _Walk, open_at: int, end: int) -> None:
        """``walk`` on up to ``end``, or until the bracket at ``open_at`` is closed."""
        marks, opened, at = walk.marks, walk.open, max(walk.at, end)
        for i, ch in _unquoted(self.src, walk.at, end, lenient_quotes=self.lenient):
            if ch == "'" or ch == '"':
                at = i  # (a string not closed before ``end``: read again from its quote when asked further)
                break
            marks.append(i)
            if ch in "([{":
                opened.append(i)
                self.walks.setdefault(i, walk)
            elif ch in ")]}" and opened:
                self.closers[last := opened.pop()] = i
                if last == open_at:
                    at = i + 1
                    break
        walk.at = at


_BRACKET_RUN = re.compile(r"[()\[\]{}]+")
_STEP = dict.fromkeys("([{", 1) | dict.fromkeys(")]}", -1)


def _strings(lenient_double: bool, lenient_single: bool) -> str:
    """A pattern for one string, each kind of quote read leniently or as Python reads it (:data:`_BODY`)."""
    return "|".join(f"{q}{_BODY[q, lenient]}{q}" + (f"(?={_MAY_FOLLOW})" if lenient else "")
                    for q, lenient in (('"', lenient_double), ("'", lenient_single)))


# By whether '"' and "'" strings are read leniently: a string, else a quote that no such string closes with the rest
# of the text after it (as group 1 after '"', group 2 after "'").
_MODES = [(d, s) for d in (False, True) for s in (False, True)]
_STRING_OR_REST = {mode: re.compile(f"{_strings(*mode)}|\"(.*)|'(.*)", re.DOTALL) for mode in _MODES}
_MAY_CLOSE = {q: re.compile(f"{q}(?={_MAY_FOLLOW})") for q in "\"'"}  # a quote that may close a lenient string


def open_brackets(src: str) -> tuple[int, bool]:
    """``(depth, in_string)`` at the end of ``src``: brackets left open (a closer with none open is ignored), and
    whether a leniently quoted string is left open (:func:`string_end`). The text is split once at its strings, up to
    a quote that no lenient string closes, and the brackets of the pieces between them taken at once. Such a quote has
    no closable quote after it, so from there that kind of quote is read as Python reads it; a quote that closes no
    string either leaves one open. (A second walk beside :func:`_unquoted`: bench_worst_case's storms need it.)"""
    # (a kind of quote none of which may end a lenient string is read as Python reads it from the start)
    lenient = {q: _MAY_CLOSE[q].search(src) is not None for q in "\"'"}
    depth, i, n = 0, 0, len(src)
    while True:
        parts = _STRING_OR_REST[(lenient['"'], lenient["'"])].split(src[i:])  # (text, rest after ", rest after ')*
        depth = _after_run(depth, "".join(_BRACKET_RUN.findall("".join(parts[::3]))))
        rest = None if len(parts) == 1 else parts[-3] if parts[-3] is not None else parts[-2]
        if rest is None:
            return depth, False
        i = n - len(rest) - 1  # (the quote no string closes)
        if not lenient[src[i]]:
            return depth, True
        lenient[src[i]] = False


def _after_run(depth: int, run: str) -> int:
    """The depth after the brackets ``run`` from ``depth`` (a closer with none open is ignored)."""
    if not run.lstrip("([{"):
        return depth + len(run)
    if not run.lstrip(")]}"):
        return max(depth - len(run), 0)
    sums = list(itertools.accumulate(map(_STEP.__getitem__, run)))
    return sums[-1] + max(depth, -min(sums))


MAX_TAG_PREFIX = 256  # characters at a body's start (its opening tag missing) looked at for a misspelt tag
# Up to four tags of another kind: <...>, <|...|> (also with full-width bars), [...] or a quoted word, holding no call;
# an XML tag's start glued to a name (<function=name(...)); a lone ']' glued to one.
_TAG_LIKE = re.compile(
    r'(?:[ \t]*(?:<[^<>\n()]{1,64}>|\[[^\[\]\n()=,]{1,64}\]|"[^"\n()=,]{1,64}"|<[\w|]{1,32}=(?=[^\W\d])|\](?=[^\W\d]))){0,4}'
)
_LIST_START = re.compile(r"\[[ \t]*[^\W\d][\w.]*[ \t]*\(")
_LINE_LIST_START = re.compile(r"\n[ \t]*(\[[ \t]*[^\W\d][\w.]*[ \t]*\()")


def after_opening_tag(body: str, tag: str) -> int:
    """Where the calls start in ``body`` (its ``tag`` missing): after ``tag`` misspelt (:func:`tag_look_alike`; a
    label such as ``Call: ``, :func:`~refiner.formats.reasoning.label_look_alikes`) or up to four tags of another kind
    (:data:`_TAG_LIKE`); else 0."""
    head = body[:MAX_TAG_PREFIX]
    m = (label_look_alikes((tag,)) if tag[:1].isalnum() else tag_look_alike(tag)).match(head.lstrip())
    if m is not None:
        return len(head) - len(head.lstrip()) + m.end()
    return _TAG_LIKE.match(head).end()


def list_start(body: str) -> int:
    """Where the call list (``[name(``) starts: within :data:`MAX_TAG_PREFIX` characters after one word holding no
    space or ``(`` (a misspelt or foreign tag: ``<functionlist>[f(a=1)]``), else at the start of a line after prose (a
    reply, a blank line, the list); else 0."""
    m = _LIST_START.search(body, 0, MAX_TAG_PREFIX)
    if m is not None:
        before = body[: m.start()].strip()
        if "(" not in before and not any(ch.isspace() for ch in before):
            return m.start()
    m = _LINE_LIST_START.search(body)
    return 0 if m is None else m.start(1)
