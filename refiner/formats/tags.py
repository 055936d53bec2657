"""Reading a format's tags when the text writes them wrong: a tag speller for the lenient readers.

A model (or a lossy pipeline) sometimes writes a format's tags not quite as the format defines them: in another case
(``<PARAMETER=base>``), with a separator dropped, changed or added (``<argvalue>``, ``<arg-key>``, ``<func_tion=``),
in square brackets (``[/arg_value]``), without its closing ``>`` (``<arg_key``), a closing tag without its slash
(``<arg_value>`` where ``</arg_value>`` belongs), one letter off (``<arg_kye>``, ``</arg_valu>``), or replaced by a
special token of another format (``<|tool_call_end|>``). :class:`Speller` finds such tokens: each is reported as a
:class:`Hit` naming the word of the format's vocabulary it spells (``arg_key``), or as another format's tag, and the
format's reader decides from where it stands in the grammar which tag it takes the place of (a reader asks only where
its grammar expects a tag, so a value's own text is never read as one).

What counts as a tag token, at a ``<`` or ``[``:

- one of the format's own tags exactly;
- one of the vocabulary's words spelt with any case, with ``_`` or ``-`` (or nothing) between any two letters, after
  ``<``, ``</``, ``[`` or ``[/`` and ended by ``>``, ``]`` or ``=``; or not ended at all, when more text follows
  (the lost ``>``: ``<arg_keytable</arg_key>``) and the word does not run on into another tag (``<tool_calls>`` is
  not ``<tool_call>`` with text after it);
- one letter off one of the vocabulary's words of five letters or more (a letter lost, added, changed, or two
  swapped), ended by ``>``, ``]`` or ``=``;
- a special token of another registered format (one that holds a letter and starts with ``<`` or ``[``), exactly.

A token without its end at the very end of the text is not read as a tag: the text was cut inside it.

Scanning is linear: each ``<`` and ``[`` is tried once against patterns of bounded length.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from refiner.formats.base import all_formats

MAX_WORD = 40  # letters of a tag word looked at (a longer run is not a tag)
FUZZY_MIN = 5  # letters a word needs before a one-letter slip is read as it


@dataclass(frozen=True, slots=True)
class Hit:
    """A tag token of the text: ``text[start:end]``. ``word``: the vocabulary word it spells (``"arg_key"``), or
    ``None`` for another format's tag (``foreign``); ``closing``: written with a slash (``</...``, ``[/...``);
    ``eq``: ended by ``=``; ``exact``: written exactly as one of the format's own tags; ``ended``: ended by ``>``,
    ``]`` or ``=`` (not when its end was lost)."""

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


def _letters(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum())


def _tag_word(tag: str) -> str:
    return tag.strip("<>[]/=|")


def osa_distance(a: str, b: str, cutoff: int = 1) -> int:
    """The optimal-string-alignment distance of two short words (insertions, deletions, substitutions and swaps of
    neighbours), or ``cutoff + 1`` when it is larger than ``cutoff``."""
    if abs(len(a) - len(b)) > cutoff:
        return cutoff + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > cutoff:
            return cutoff + 1
        prev2, prev = prev, cur
    return prev[-1] if prev[-1] <= cutoff else cutoff + 1


@functools.lru_cache(maxsize=64)
def foreign_tags(own: tuple[str, ...]) -> tuple[str, ...]:
    """The special tokens of every registered format but those in ``own`` that a scan at ``<`` / ``[`` can meet
    (they start with one of them and hold a letter), longest first."""
    found = {
        t
        for f in all_formats()
        for t in f.tags
        if t and t[0] in "<[" and any(ch.isalpha() for ch in t) and t not in own
    }
    return tuple(sorted(found, key=lambda t: (-len(t), t)))


_CANDIDATE = re.compile(r"[<\[]")
_GENERIC = re.compile(r"[<\[](/?)([A-Za-z][A-Za-z_\-]{1,%d})([>\]=])" % MAX_WORD)
_RUN = re.compile(r"[A-Za-z0-9_\-]*")


class Speller:
    """The tag tokens of a text for a format whose tags are ``tags`` (its own, exactly as it writes them)."""

    def __init__(self, tags: Sequence[str]) -> None:
        self.tags = tuple(dict.fromkeys(tags))
        self.words = tuple(dict.fromkeys(_tag_word(t) for t in self.tags))
        self._exact = {t: (_tag_word(t), t.startswith(("</", "[/")), t.endswith("=")) for t in self.tags}
        self._cores = {_letters(w): w for w in self.words}
        alts = sorted(self._cores, key=len, reverse=True)
        body = "|".join("[_\\-]?".join(re.escape(ch) for ch in core) for core in alts)
        self._pattern = re.compile(r"[<\[](/?)(%s)([>\]=])?" % body, re.IGNORECASE)

    def at(self, text: str, pos: int) -> Hit | None:
        """The tag token starting at ``pos``, if one does."""
        for tag, (word, closing, eq) in self._exact.items():
            if text.startswith(tag, pos):
                return Hit(pos, pos + len(tag), word, closing, eq, True)
        m = self._pattern.match(text, pos)
        if m is not None:
            hit = self._spelt(text, m)
            if hit is not None:
                return hit
        for tag in foreign_tags(self.tags):
            if text.startswith(tag, pos):
                return Hit(pos, pos + len(tag), None)
        m = _GENERIC.match(text, pos)
        if m is not None:
            word = self._near(m.group(2))
            if word is not None:
                return Hit(pos, m.end(), word, bool(m.group(1)), m.group(3) == "=", False)
        return None

    def _spelt(self, text: str, m: re.Match) -> Hit | None:
        word = self._cores[_letters(m.group(2))]
        end = m.group(3)
        if end is None:  # no closing ">": more text must follow, and not run on into a longer tag word
            run = _RUN.match(text, m.end()).end()
            if run > m.end() and text.startswith((">", "]"), run):
                return None
            if not text[m.end() :].strip():
                return None
        return Hit(m.start(), m.end(), word, bool(m.group(1)), end == "=", False, end is not None)

    def _near(self, raw: str) -> str | None:
        core = _letters(raw)
        best = [w for c, w in self._cores.items() if len(c) >= FUZZY_MIN and osa_distance(core, c) <= 1]
        return best[0] if len(best) == 1 else None

    def scan(self, text: str, start: int = 0, end: int | None = None) -> Iterator[Hit]:
        """The tag tokens of ``text[start:end]``, in order, none overlapping."""
        end = len(text) if end is None else end
        pos = start
        for m in _CANDIDATE.finditer(text, start, end):
            i = m.start()
            if i < pos:
                continue
            hit = self.at(text, i)
            if hit is not None:
                yield hit
                pos = hit.end


_PAYLOAD = re.compile(r"[ \t\r\n]*[\[{]")


def respell_json_tags(text: str, start: int, speller: Speller, open_tag: str, close_tag: str
                      ) -> tuple[str, list[str]] | None:
    """For a format whose calls are JSON between ``open_tag`` and ``close_tag`` (API-Bank, MiniMax, Jamba...): the
    text with a tag written wrong where the grammar places one put right, and what was changed; ``None`` when nothing
    was. Outside a block, a look-alike of either tag or another format's tag followed by the JSON (``{`` or ``[``,
    whitespace aside) is the opening tag; inside one, such a token standing alone at the end of its line right after
    the JSON (``}`` or ``]``) is the closing tag. Any other token is text (a string's content)."""
    edits: list[tuple[int, int, str]] = []
    inside = False
    for h in speller.scan(text, start):
        if h.exact:
            inside = text.startswith(open_tag, h.start) if open_tag != close_tag else not inside
            continue
        if not inside:
            if _PAYLOAD.match(text, h.end):
                edits.append((h.start, h.end, open_tag))
                inside = True
            continue
        line_end = text.find("\n", h.end)
        rest = text[h.end : line_end if line_end >= 0 else len(text)]
        if not rest.strip() and text[start : h.start].rstrip().endswith(("}", "]")):
            edits.append((h.start, h.end, close_tag))
            inside = False
    if not edits:
        return None
    parts, pos, notes = [], 0, []
    for a, b, new in edits:
        parts += [text[pos:a], new]
        notes.append(f"tag {text[a:b][:40]!r} read as {new}")
        pos = b
    parts.append(text[pos:])
    return "".join(parts), notes


_KEY_LINE = re.compile(r"""[ \t]*["']name["']\s*:.*\}\s*""")


def brace_call_lines(chunk: str) -> str:
    """For a block holding one call object per line (API-Bank, MiniMax): a line that opens with the call's
    ``"name":`` key and ends with ``}``, first in the block or after a line that ends with ``}``, lost its ``{``,
    which is put back (a line of an object written over several lines follows its ``{``, and is left)."""
    if "name" not in chunk:
        return chunk
    lines = chunk.split("\n")
    prev = ""
    for k, line in enumerate(lines):
        if (not prev or prev.endswith("}")) and _KEY_LINE.fullmatch(line):
            at = len(line) - len(line.lstrip())
            lines[k] = line[:at] + "{" + line[at:]
        if line.strip():
            prev = lines[k].rstrip()
    return "\n".join(lines)
