"""Reading a format's tags when the text writes them wrong. :class:`Speller` reports each token at a ``<`` or ``[`` that
may stand for one of a format's tags as a :class:`Hit`: one of its tags exactly; a word of its vocabulary in any case,
with ``_``, ``-`` or nothing between any two letters, after ``<``, ``</``, ``[`` or ``[/``, ended by ``>``, ``]`` or
``=``, or not ended when more text follows and the word does not run on into another tag (``<arg_keytable</arg_key>``,
not ``<tool_calls>``); one letter off a word of five letters or more, ended; another registered format's special token,
exactly. A token cut by the end of the text is none. The format's reader decides from where its grammar stands which tag
a hit takes the place of. Also the other dialects' respellings: :func:`respell_tokens` (sentinel tokens),
:func:`tag_look_alike` (the pythonic formats' opening tag) and :func:`respell_json_tags` (JSON blocks). Each ``<`` and
``[`` is tried once against patterns of bounded length."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from refiner.formats.base import MAX_NOTES, Lenient, all_formats
from refiner.formats.markers import trie
from refiner.formats.text import skip_ws

MAX_WORD = 40  # letters of a tag word looked at (a longer run is not a tag)
FUZZY_MIN = 5  # letters a word needs before a one-letter slip is read as it


@dataclass(frozen=True, slots=True)
class Hit:
    """A tag token, ``text[start:end]``. ``word``: the vocabulary word it spells (``"arg_key"``), or ``None`` for
    another format's tag (``foreign``); ``closing``: written ``</...`` or ``[/...``; ``eq``: ended by ``=``; ``exact``:
    one of the format's own tags exactly; ``ended``: ended by ``>``, ``]`` or ``=`` (not when its end was lost)."""

    start: int
    end: int
    word: str | None
    closing: bool = False
    eq: bool = False
    exact: bool = False
    ended: bool = True

    @property
    def foreign(self) -> bool:
        return self.word is None


def letters(word: str) -> str:
    """A tag's word with case and everything but letters and digits dropped (``<Arg-Key>`` -> ``argkey``)."""
    return _NOT_ALNUM.sub("", word.lower())


def tag_word(tag: str) -> str:
    """A tag's word as the speller names it (``</arg_key>`` -> ``arg_key``)."""
    return tag.strip("<>[]/=|")


def osa_distance(a: str, b: str) -> int:
    """0 for the same word, 1 for words one insertion, deletion, substitution or swap of neighbours apart, else 2."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), len(b))  # (the first difference)
    if len(a) == len(b):
        if a[i + 1 :] == b[i + 1 :]:
            return 1  # one letter changed
        return 1 if a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2 :] == b[i + 2 :] else 2
    return 1 if len(a) == len(b) + 1 and a[i + 1 :] == b[i:] else 2


@functools.lru_cache(maxsize=64)
def foreign_tags(own: tuple[str, ...]) -> tuple[str, ...]:
    """The special tokens of every registered format but those in ``own`` that a scan at ``<`` / ``[`` can meet
    (they start with one of them and hold a letter), longest first."""
    found = {t for f in all_formats() for t in f.tags if t[:1] in ("<", "[") and any(ch.isalpha() for ch in t)}
    return tuple(sorted(found.difference(own), key=lambda t: (-len(t), t)))


_NOT_ALNUM = re.compile(r"[\W_]+")  # (what str.isalnum refuses, on every code point)
_GENERIC = re.compile(r"[<\[](/?)([A-Za-z][A-Za-z_\-]{1,%d})([>\]=])" % MAX_WORD)
_RUN = re.compile(r"[A-Za-z0-9_\-]*")
MAX_FUZZY = 128  # one-letter-off comparisons one scan makes at most (each costs a few microseconds)
MAX_TAG_HITS = 256  # tag tokens a text may hold for its tags to be put right (real answers hold a few dozen)
MAX_JSON_TAG_HITS = 64  # the same for the JSON-block formats (two tags a block)


class Speller:
    """The tag tokens of a text for a format whose tags are ``tags`` (its own, exactly as it writes them)."""

    def __init__(self, tags: Sequence[str]) -> None:
        self.tags = tuple(t for t in dict.fromkeys(tags) if t)
        self.words = tuple(dict.fromkeys(tag_word(t) for t in self.tags))
        self._exact = {t: (tag_word(t), t.startswith(("</", "[/")), t.endswith("=")) for t in self.tags}
        self._cores = {letters(w): w for w in self.words if letters(w)}  # (``` has no letters to misspell)
        alts = sorted(self._cores, key=len, reverse=True)
        body = "|".join("[_\\-]?".join(re.escape(ch) for ch in core) for core in alts)
        self._own = r"[<\[](/?)(?i:(%s))([>\]=])?" % body
        self._near = functools.lru_cache(maxsize=4096)(self._nearest)

    @functools.cached_property
    def _patterns(self) -> tuple[re.Pattern, ...]:
        """The scanner; the same without the words one letter off might match (once their budget is spent); the
        scanner passing over the format's own tags written exactly (:meth:`written_wrong`)."""
        tags = foreign_tags(self.tags)  # (built at first use: every format registered)
        foreign = "(?<=<)%s|(?<=\\[)%s" % (trie([t[1:] for t in tags if t[0] == "<"]),
                                           trie([t[1:] for t in tags if t[0] == "["]))
        # the bracket first (found at C speed), then what may follow it (a bracket storm fails there, not per branch)
        lead = r"[<\[](?=[/A-Za-z|\uff5c])"
        own, generic = self._own[len("[<\\[]") :], _GENERIC.pattern[len("[<\\[]") :]
        exact = "|".join(f"(?<={re.escape(t[0])}){re.escape(t[1:])}"
                         for t in sorted(self.tags, key=len, reverse=True))
        return (re.compile(r"%s(?:(%s)|%s|%s)" % (lead, foreign, own, generic)),
                re.compile(r"%s(?:(%s)|%s)" % (lead, foreign, own)),
                re.compile(r"%s(?!%s)(?:(%s)|%s|%s)" % (lead, exact, foreign, own, generic)))

    def written_wrong(self, text: str, start: int = 0) -> bool:
        """Whether ``text[start:]`` may hold the format's tag written wrong or another format's tag (one regex pass)."""
        return self._patterns[2].search(text, start) is not None

    def _hit(self, text: str, m: re.Match, budget: list[int]) -> Hit | None:
        if m.group(1) is not None:  # another format's tag
            return Hit(m.start(), m.end(), None)
        if m.group(3) is not None:  # a word of the vocabulary, in some spelling
            raw = m.group(0)
            if raw in self._exact:
                word, closing, eq = self._exact[raw]
                return Hit(m.start(), m.end(), word, closing, eq, True)
            hit = self._spelt(text, m)
            if hit is not None:
                return hit
            g = _GENERIC.match(text, m.start())  # the word runs on: maybe one letter off another word
            return None if g is None else self._fuzzy(g.start(), g.end(), g.group(1), g.group(2), g.group(3), budget)
        return self._fuzzy(m.start(), m.end(), m.group(5), m.group(6), m.group(7), budget)

    def _spelt(self, text: str, m: re.Match) -> Hit | None:
        word = self._cores.get(letters(m.group(3)))
        if word is None:  # matched only through a letter case-folding pairs with another (ı~i, ſ~s, K~k)
            return None
        end = m.group(4)
        if end is None:  # no closing ">": more text must follow, and not run on into a longer tag word
            run = _RUN.match(text, m.end()).end()
            if run > m.end() and text.startswith((">", "]"), run):
                return None
            if skip_ws(text, m.end()) >= len(text):
                return None
        return Hit(m.start(), m.end(), word, bool(m.group(2)), end == "=", False, end is not None)

    def _fuzzy(self, start: int, end: int, slash: str, raw: str, close: str, budget: list[int]) -> Hit | None:
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        word = self._near(letters(raw))
        return None if word is None else Hit(start, end, word, bool(slash), close == "=", False)

    def _nearest(self, core: str) -> str | None:
        """The one word of the vocabulary ``core`` is one letter off, if just one is."""
        best = [w for c, w in self._cores.items()
                if len(c) >= FUZZY_MIN and abs(len(c) - len(core)) <= 1 and osa_distance(core, c) <= 1]
        return best[0] if len(best) == 1 else None

    def scan(self, text: str, start: int = 0, end: int | None = None) -> Iterator[Hit]:
        """The tag tokens starting in ``text[start:end]``, in order, none overlapping."""
        end = len(text) if end is None else end
        budget = [MAX_FUZZY]  # tokens that may be one letter off a word, looked at (the rest are not tags)
        full, plain, _ = self._patterns
        pos = start
        while pos < end:
            m = (full if budget[0] > 0 else plain).search(text, pos)
            if m is None or m.start() >= end:
                return
            hit = self._hit(text, m, budget)
            if hit is None:
                pos = m.start() + 1
                continue
            yield hit
            pos = hit.end


_PAYLOAD = re.compile(r"[ \t\r\n]*[\[{]")


def respell_json_tags(text: str, start: int, speller: Speller, open_tag: str, close_tag: str
                      ) -> tuple[str, list[str]] | None:
    """For JSON calls between ``open_tag`` and ``close_tag``: the text with a tag written wrong put right, and the
    changes; ``None`` when nothing was. Outside a block, a look-alike of either tag or another format's tag followed by
    ``{`` or ``[`` is the opening tag; inside one, such a token alone ending its line right after ``}`` or ``]`` and
    outside a JSON string is the closing tag. Other tokens are text, as is a closing tag inside a JSON string."""
    if not speller.written_wrong(text, start):
        return None
    edits: list[tuple[int, int, str]] = []
    inside, pos, quotes = False, start, 0  # pos: how far the text is read; quotes: unescaped '"' in the block so far
    for h in tag_hits(speller, text, start, MAX_JSON_TAG_HITS):
        while True:  # the block's tags written right, up to this token's end
            tag = close_tag if inside else open_tag
            j = text.find(tag, pos, h.end)
            if j < 0:
                break
            if inside:
                quotes += _quotes(text, pos, j)
            pos = j + len(tag)
            if not (inside and quotes % 2):  # (a closing tag in a string is its text)
                inside, quotes = not inside, 0
        if h.exact:
            continue
        if not inside:
            if _PAYLOAD.match(text, h.end):
                edits.append((h.start, h.end, open_tag))
                inside, pos, quotes = True, h.end, 0
            continue
        if h.start > pos:
            quotes += _quotes(text, pos, h.start)
            pos = h.start
        if quotes % 2:
            continue  # inside a JSON string: the value's text
        line_end = text.find("\n", h.end)
        rest = text[h.end : line_end if line_end >= 0 else len(text)]
        if not rest.strip() and text[start : h.start].rstrip().endswith(("}", "]")):
            edits.append((h.start, h.end, close_tag))
            inside, pos = False, h.end
    if not edits:
        return None
    return apply_edits(text, edits), [f"tag {text[a:b][:40]!r} read as {new}" for a, b, new in edits]


def _quotes(text: str, start: int, end: int) -> int:
    """The unescaped ``"`` in ``text[start:end]``."""
    return text.count('"', start, end) - text.count('\\"', start, end)


def respelt(out: Lenient, text: str, fixed: tuple[str, list[str]] | None) -> str:
    """The text a respelling gave (its first notes kept in ``out`` as ``missing_tag`` problems), else ``text``."""
    if fixed is None:
        return text
    for note in fixed[1][:MAX_NOTES]:
        out.note("missing_tag", note)
    return fixed[0]


def tag_hits(speller: Speller, text: str, start: int, limit: int = MAX_TAG_HITS) -> list[Hit]:
    """The tag tokens of ``text[start:]``; none past ``limit`` (a tag storm, not an answer: read as written)."""
    hits = list(itertools.islice(speller.scan(text, start), limit + 1))
    return hits if len(hits) <= limit else []


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """``text`` with each ``(start, end, new)`` edit made, by start (one overlapping an earlier edit left out)."""
    parts, pos = [], 0
    for a, b, new in sorted(edits, key=lambda e: e[0]):
        if a >= pos:
            parts += [text[pos:a], new]
            pos = b
    parts.append(text[pos:])
    return "".join(parts)


_KEY_LINE = re.compile(r"""(?m)^[ \t]*(?=["']name["'][ \t]*:[^\n]*\}[ \t\r]*$)""")


def brace_call_lines(chunk: str) -> str:
    """For a block holding one call object per line (API-Bank, MiniMax): a line that opens with the call's
    ``"name":`` key and ends with ``}``, first in the block or after a line that ends with ``}``, lost its ``{``,
    which is put back (a line of an object written over several lines follows its ``{``, and is left)."""
    if "name" not in chunk:
        return chunk
    parts, pos = [], 0
    for m in itertools.islice(_KEY_LINE.finditer(chunk), MAX_TAG_HITS):
        k = pos + len(chunk[pos : m.start()].rstrip()) - 1  # (the last character before the line, blanks aside)
        if k < 0 or chunk[k] == "}":
            parts += [chunk[pos : m.end()], "{"]
            pos = m.end()
    return "".join(parts) + chunk[pos:] if parts else chunk


# Sentinel tokens written wrong: between bars, ``<|call|>`` / ``<｜tool▁sep｜>`` (either bar; the brackets ``<>``, ``[]``
# or lost: the opening one is the character before a match), and bracketed words, ``[TOOL_CALLS]``.
_BARRED = re.compile(r"[|｜][^\s|｜<>\[\]{}\"']{1,48}[|｜][>\]]?")
_BRACKETED = re.compile(r"\[[A-Za-z][A-Za-z_\- ]{0,30}\]")
_BARRED_TOKEN = re.compile(r"<[|｜][^|｜<>]*[|｜]>")  # a whole <|...|> token, or DeepSeek's <｜...｜>
_NOISE = re.compile(r"[\s_\-▁|｜<>\[\]]")
MAX_SCANNED = 4096  # token-shaped spans looked at per text (a storm past this many is left as written)


@functools.lru_cache(maxsize=4096)
def token_key(token: str) -> str:
    """What is left of a token once case, separators, bars and brackets are dropped."""
    return _NOISE.sub("", token).lower()


def respell_tokens(text: str, tokens: Iterable[str], out: Lenient | None = None,
                   allow: Callable[[str, str, int], bool] | None = None) -> str:
    """``text`` with every look-alike of one of ``tokens`` written as that token (each reported in ``out`` as a
    ``missing_tag`` problem: the token itself is missing). ``tokens`` are all barred (``<|x|>``) or all bracketed
    (``[X]``). ``allow(token, text, end)``: whether a look-alike of ``token`` that ends at ``end`` stands where the
    token would (by default, anywhere but inside a JSON string: after an odd number of unescaped ``"`` since the last
    token). Only the first :data:`MAX_SCANNED` token-shaped spans are looked at."""
    table = {token_key(t): t for t in tokens}
    pattern = _BRACKETED if all(t.startswith("[") for t in table.values()) else _BARRED
    exact = set(table.values())
    parts: list[str] = []
    pos = notes = seen = quotes = 0  # quotes: unescaped '"' in text[:seen] since the last token
    for m in itertools.islice(pattern.finditer(text), MAX_SCANNED):
        token = table.get(token_key(m.group()))  # (the key leaves out the bracket before a match)
        if token is None:
            continue
        start = m.start() - (pattern is _BARRED and text[m.start() - 1 : m.start()] in ("<", "["))
        found = text[start : m.end()]
        if found in exact:
            seen, quotes = m.end(), 0
            continue
        quotes += _quotes(text, seen, start)  # (start >= seen: a match's "<" or "[" ends no earlier match)
        seen = start
        if quotes % 2 or (allow is not None and not allow(token, text, m.end())):
            continue  # inside a JSON string (the value's text), or where the token does not stand
        parts += (text[pos:start], token)
        pos = seen = m.end()
        quotes = 0
        if out is not None and notes < MAX_NOTES:
            out.note("missing_tag", f"{token} written as {found!r}")
            notes += 1
    return "".join(parts) + text[pos:] if parts else text


def respell_barred(text: str, tags: Iterable[str], out: Lenient) -> str:
    """``text`` with look-alikes of the ``<|...|>`` tokens a row's ``tags`` hold (found in them joined: two tags may
    make one token) written as those tokens (:func:`respell_tokens`)."""
    barred = _BARRED_TOKEN.findall("".join(tags))
    return respell_tokens(text, barred, out) if barred else text


@functools.lru_cache(maxsize=64)
def tag_look_alike(tag: str) -> re.Pattern:
    """A pattern matching ``tag`` as a model may misspell it: in any case, with ``_``, ``-``, a space or nothing
    between its letters, in square brackets, its ``>`` (or ``|>``) lost."""
    core = r"[_\-\s]?".join(map(re.escape, (c for c in tag if c.isalnum())))
    return re.compile(r"[<\[]/?\|?\s*" + core + r"\s*\|?[>\]]?", re.IGNORECASE)
