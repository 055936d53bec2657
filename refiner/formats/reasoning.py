"""The reasoning block of an answer: where it is, what it says, where the answer after it starts. A family writes its
reasoning between its own markers (:attr:`WireFormat.reasoning`: ``<think>…</think>`` by default, Magistral's
``[THINK]…[/THINK]``, Gemma 4's ``<|channel>thought…<channel|>``); every registered format's pairs and call markers are
known here (:func:`learn`, called by ``base.register``), so one split (:func:`split_reasoning`) serves every reader and
the proxy. As vLLM's reasoning parsers read it:

- A block is only at the answer's start. When the answer (after blanks) opens with a pair's opener, the block ends at
  that pair's first closer; not closed, where a call begins (a call marker at a line start), else with the text.
- Without an opener (a template that writes it into the prompt: Qwen3 thinking, DeepSeek-R1, GLM, Kimi), a thinking
  closer still ends a block that began with the answer, unless a call began before it (a call marker no closer has
  closed since, or an answer that opens with ``[`` or ``{``): a value holding ``</think>`` never ends reasoning.
- ``opened=True`` (the request says the prompt opened the block): the answer starts inside it, up to the first closer
  of any pair, else where a call begins, else the end. ``opened=False``: only an explicit opener starts one.

Calls written inside reasoning are not calls (:data:`CALLS_IN_REASONING`): readers start after the block
(:func:`reasoning_offset`; a :class:`Read` hands one split to every reader of a text). ``Refiner(calls_in_reasoning=
True)`` reads calls from the reasoning too when the answer after it holds none (:func:`calls_text`). gpt-oss's analysis
channel is read by the harmony format itself."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from refiner.formats.markers import trie

THINK = ("<think>", "</think>")
CALLS_IN_REASONING = False  # the default policy: a call written inside reasoning stays reasoning

_PAIRS: dict[tuple[str, str], None] = {THINK: None}  # every registered family's pairs, in registration order
_OPENERS: set[str] = set()  # call markers of every registered format (tags that open or continue a call)
_CLOSERS: set[str] = set()  # tags that close a call or a call section
_LABELLED: dict[str, set[str]] = {}  # each registered format that writes line labels (:func:`line_labels`): its labels
_FENCED: dict[str, str] = {}  # open literals (blanks stripped) of rows whose tags are no markup, and their closes
_STATE: dict[str, Any] = {}  # what is made from the above (:func:`_state`), cleared when a format is registered
MAX_LABELS_SEEN = 64  # line labels looked at per text by :func:`labelled_formats`
BARE_CALL = re.compile(r"[A-Za-z_][\w.]*[ \t]*\(")  # a pythonic call with no tag or bracket around it
_MARKUP = set("<>|[]｜")
_BLANKS = re.compile(r"[ \t\r\n]*")
_OUTSIDE = re.compile(r"[^\"'()\[\]{}]*")  # text between the characters that matter outside strings
_INSIDE = {q: re.compile(r"[^" + q + r"\\\n]*") for q in "'\""}  # a string's text up to its quote, a \ or a newline
MAX_FENCED = 4096  # fenced calls read per text, joined values per region; past that the rest is taken as calls


def skip_blanks(text: str, pos: int = 0) -> int:
    """``pos`` after the blanks JSON allows (space, tab, line breaks; other Unicode whitespace is text here)."""
    return _BLANKS.match(text, pos).end()


def bracket_end(text: str, i: int) -> int:
    """The end of the bracketed value opening at ``text[i]`` (strings in either quote, ended by a newline too, so
    that a stray apostrophe cannot swallow the text), or -1 when the text stops first. Linear."""
    return Brackets(i).end(text)


class Brackets:
    """The end of a bracketed value opening at ``start``, as :func:`bracket_end` finds it, in a text that grows: each
    :meth:`end` reads on from where the last one stopped (linear over the whole text)."""

    def __init__(self, start: int) -> None:
        self.pos = start  # the next character to read
        self.depth = 0
        self.quote = ""  # the quote of the string being read
        self.closed = -1  # the value's end, once found

    def end(self, text: str) -> int:
        """The value's end in ``text`` (the text of the last call, grown), or -1 while the text stops first."""
        if self.closed >= 0:
            return self.closed
        i, n, depth, quote = self.pos, len(text), self.depth, self.quote  # (locals, for speed)
        while i < n:
            if not quote:
                c = text[i]
                if c not in "\"'":
                    if c in "([{":
                        depth += 1
                    elif c in ")]}":
                        depth -= 1
                        if depth <= 0:
                            self.closed = i + 1
                            return self.closed
                    i = _OUTSIDE.match(text, i + 1).end()
                    continue
                quote = c
                i += 1
            i = _INSIDE[quote].match(text, i).end()  # to the quote, a newline or an escape
            while i + 1 < n and text[i] == "\\":  # an escape: the next character is text
                i = _INSIDE[quote].match(text, i + 2).end()
            if i >= n or text[i] == "\\":
                break  # (the string goes on; after an escape at the end, its character is still to come)
            quote = ""
            i += 1
        self.pos, self.depth, self.quote = i, depth, quote
        return -1


def values_end(text: str, i: int) -> int:
    """The end of the bracketed values from ``text[i]`` joined by ``;`` or ``,`` (Llama 3's ``{...}; {...}``), or of
    the bare calls from there (``f(a=1)``, ``g(b=2)`` on the next line, ...)."""
    bare = text[i] not in "[{"
    for _ in range(MAX_FENCED):
        end = bracket_end(text, i)
        if end < 0:
            return len(text)
        j = skip_blanks(text, end)
        if j < len(text) and text[j] in ";,":
            i = skip_blanks(text, j + 1)
        elif bare and BARE_CALL.match(text, j):
            i = j
        else:
            return end
        if i >= len(text) or not (BARE_CALL.match(text, i) if bare else text[i] in "[{"):
            return end
    return len(text)


@functools.lru_cache(maxsize=64)
def _literals(opens: tuple[str, ...]) -> re.Pattern:
    return re.compile(trie(opens))


def fenced_calls(text: str, fenced: Mapping[str, str], start: int = 0, stop: int | None = None) -> Iterator[
        tuple[int, int]]:
    """The spans of the calls in ``text`` whose open literal (a key of ``fenced``, blanks stripped: :func:`fenced_tags`)
    begins in ``text[start:stop]``: from the literal to the close (its value in ``fenced``) after the JSON values or
    pythonic calls that follow it (:func:`values_end`), else to their end; a value the text stops in (or a literal with
    nothing after it) runs to the end. A literal followed by anything but ``[``, ``{`` or ``NAME(`` opens no call."""
    pattern, n = _literals(tuple(sorted(fenced))), len(text)
    pos, stop = start, n if stop is None else stop
    for _ in range(MAX_FENCED):
        m = pattern.search(text, pos, stop)
        if m is None:
            return
        j = skip_blanks(text, m.end())
        if j < n and text[j] not in "[{" and not BARE_CALL.match(text, j):
            pos = m.end()
            continue
        end = values_end(text, j) if j < n else n
        if end >= n:
            yield m.start(), n
            return
        k = skip_blanks(text, end)
        k = skip_blanks(text, k + 1) if text.startswith((";", ","), k) else k  # (a separator after the last call)
        if text.startswith(fenced[m.group()], k):
            end = k + len(fenced[m.group()])
        yield m.start(), end
        pos = end
    yield pos, n


def is_closing_tag(tag: str) -> bool:
    """Whether a format's tag closes a call or a section: ``</tool_call>``, ``<｜tool▁call▁end｜>``,
    ``<|tool_calls_section_end|>``, ``<tool_call|>`` (Gemma 4), ``<|call|>``, ``[/TOOL_CALLS]``."""
    t = tag.lower()
    if "><" in t:  # two tokens written as one tag (PLaMo 3's end-of-name + begin-arguments): the last one decides
        t = t[t.rindex("><") + 1 :]
    if t.startswith(("</", "[/")) or t == "<|call|>" or "end" in t or "close" in t:
        return True
    return t.startswith("<") and t.endswith("|>") and not t.startswith("<|") and "|" not in t[1:-2]


def format_tags(fmt: object) -> list[object]:
    """A format's tags, markers and closers, as its attributes hold them."""
    detection = getattr(fmt, "detection", None)
    return [*(getattr(fmt, "tags", ()) or ()), *(getattr(detection, "markers", ()) or ()),
            *(getattr(detection, "closers", ()) or ())]


def is_markup(tag: object) -> bool:
    """Whether a format's tag is markup (``<tool_call>``, ``[TOOL_CALLS]``, ``<｜tool▁sep｜>``), not a word or a key."""
    return isinstance(tag, str) and len(tag) >= 3 and bool(_MARKUP & set(tag)) and not tag.startswith(("'", '"'))


def line_labels(fmt: object) -> set[str]:
    """The call tags of a format that writes a label at a line start (a tag or marker that is no markup and begins
    with a line break: ReAct's ``\nAction Input: ``, Qwen-Agent's ``\n✿ARGS✿: ``, Onyx's ``\nto=``): each of its tags
    and markers that is no markup, less that line break (``Action: ``, ``✿FUNCTION✿: ``, ``to=``); none for others."""
    words = {t for t in format_tags(fmt) if isinstance(t, str) and t.strip() and not is_markup(t)}
    return {t.lstrip("\n") for t in words} if any(t[:1] == "\n" for t in words) else set()


def _look_alikes(labels: Iterable[str]) -> str:
    """Line labels as a model may write them wrong, as alternatives of a pattern (the longest first): in any case (the
    pattern's flags), with ``_``, ``-`` or blanks between their characters (a blank a label ends with may be lost)."""
    return "|".join(r"[_\- \t]*".join(map(re.escape, label.strip())) + r"[ \t]?" * (label != label.rstrip())
                    for label in sorted(labels, key=len, reverse=True))


_LINE_START = re.IGNORECASE | re.MULTILINE | re.ASCII  # (letters in another case are ASCII's only)


@functools.lru_cache(maxsize=64)
def label_look_alikes(labels: tuple[str, ...]) -> re.Pattern[str]:
    """Line labels as written or written wrong (:func:`_look_alikes`) at a line start."""
    return re.compile(r"^(?:" + _look_alikes(labels) + ")", _LINE_START)


def labelled_formats(text: str, start: int) -> dict[str, int]:
    """The formats one of whose line labels (:func:`line_labels`) stands at a line start of ``text`` after ``start``,
    as written or written wrong (:func:`label_look_alikes`): where each first does, by format name."""
    state, found = _state(), {}
    labelled, text = state["labelled"], "\n" + text  # (its match starts at the line break before a label)
    for _ in range(MAX_LABELS_SEEN if labelled is not None else 0):
        if (m := labelled.search(text, start)) is None:
            break
        found.setdefault(state["labelling"][m.lastindex - 1], m.start())
        start = m.end()
    return found


def fenced_tags(fmt: object) -> tuple[tuple[str, ...], str] | None:
    """For a row whose calls sit between literals that are no markup (Command R+'s ``Action:`` and a JSON code fence):
    its spelling's ``open`` (with ``alt_opens``) and ``close``; None if its open tag is markup or it has no close."""
    sp = getattr(fmt, "spelling", None)
    opens, close = (getattr(sp, "open", None), *(getattr(sp, "alt_opens", ()) or ())), getattr(sp, "close", None)
    usable = isinstance(close, str) and close and not is_markup(opens[0])
    return (opens, close) if usable and all(isinstance(o, str) and len(o.strip()) >= 3 for o in opens) else None


def learn(fmt: object) -> None:
    """Records a registered format's reasoning pairs and call markers (``base.register`` calls it)."""
    for pair in getattr(fmt, "reasoning", ()) or ():
        if isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) and p for p in pair):
            _PAIRS.setdefault(pair, None)
    detection = getattr(fmt, "detection", None)
    tags = format_tags(fmt)
    if any(isinstance(m, str) and m.endswith(":") for m in (getattr(detection, "markers", ()) or ())):
        # tags written with a per-checkpoint suffix (<tool_call:6124c78e>): every tag also in its suffixed form
        tags += [t[:-1] + ":" for t in tags if isinstance(t, str) and t.endswith(">")]
    for t in tags:
        if is_markup(t):
            (_CLOSERS if is_closing_tag(t) else _OPENERS).add(t)
    if labels := line_labels(fmt):
        _LABELLED.setdefault(getattr(fmt, "name", ""), labels)
    fenced = fenced_tags(fmt)
    if fenced is not None:
        for o in fenced[0]:
            _FENCED.setdefault(o.strip(), fenced[1])
    _STATE.clear()


def pairs() -> tuple[tuple[str, str], ...]:
    """Every known reasoning pair (the default ``<think>``/``</think>`` first)."""
    return _state()["pairs"]


def _state() -> dict[str, Any]:
    """The call tags as patterns and the pairs' openers and closers, made once per set of registered formats."""
    if not _STATE:
        labels = set().union(*_LABELLED.values())
        tokens, known, starts = _OPENERS | _CLOSERS, tuple(_PAIRS), _OPENERS | set(_FENCED) | labels
        tokens |= {"\n" + label for label in labels}  # (a label after its line break; one opening the text aside)
        think = {p[1] for p in known if "think" in p[1].lower()}
        _STATE.update(
            tokens=re.compile(trie(tokens)),  # (each matches nothing when there is nothing to find)
            labels=tuple(labels),
            labelling=tuple(_LABELLED),  # (the format of each group of ``labelled``)
            labelled=re.compile(r"\n(?:" + "|".join(f"({_look_alikes(ls)})" for ls in _LABELLED.values()) + ")",
                                _LINE_START) if _LABELLED else None,
            fenced=re.compile(trie(_FENCED)),
            line_call=re.compile(r"(?:^|\n)[ \t]*" + trie(starts)),
            prefixes=frozenset(m[:k] for m in starts for k in range(1, len(m))),
            pairs=known,
            opener=re.compile(r"[ \t\r\n]*(" + trie(p[0] for p in known) + ")"),  # (after the blanks)
            # an answer's opener (the longest written there) starts the first pair whose opener it begins with
            opening={o: next(p for p in known if o.startswith(p[0])) for o in dict.fromkeys(p[0] for p in known)},
            closers=re.compile(trie({p[1] for p in known})),  # (no closer begins another)
            think_closers=re.compile(trie(think)),
            # how they write "think": a text without any of these spellings holds none of them
            think_words=tuple(sorted({c[i : i + 5] for c in think for i in range(len(c) - 4)
                                      if c[i : i + 5].lower() == "think"})),
        )
    return _STATE


def think_closers() -> re.Pattern:
    """The thinking blocks' own closers (``</think>``, ``[/THINK]``...) as one pattern, without generic end tokens."""
    return _state()["think_closers"]


def inside_call(text: str, start: int, at: int) -> bool:
    """Whether position ``at`` lies inside a call that began at or after ``start``: the text from ``start`` opens
    with ``[``, ``{``, ``NAME(`` or a line label (an untagged call list, object or call line, a labelled call), the
    last call tag before ``at`` (a line label at a line start) opens or continues a call (no closing tag after it),
    or ``at`` lies in a call between a row's open and close literals that are no markup (:func:`fenced_calls`)."""
    i, state, last = skip_blanks(text, start), _state(), None
    if i < at and (text[i] in "[{" or BARE_CALL.match(text, i) or text.startswith(state["labels"], i)):
        return True
    for m in state["tokens"].finditer(text, start, at):
        last = m.group()
    if last is not None and last not in _CLOSERS:
        return True
    return (state["fenced"].search(text, start, at) is not None  # (no open literal: no fenced call)
            and any(a <= at < b for a, b in fenced_calls(text, _FENCED, start, at)))


def call_start(text: str, start: int, end: int | None = None) -> int:
    """Where the first call begins in ``text[start:end]`` (a call marker at the start of a line), else -1."""
    m = _state()["line_call"].search(text, start, len(text) if end is None else end)
    return -1 if m is None else m.start() + (m.group().startswith("\n"))


def may_start_call(line: str) -> bool:
    """Whether more text could turn ``line`` (the text after a line start so far) into the start of a call that
    :func:`call_start` finds: blanks, then part of a call marker."""
    rest = line.lstrip(" \t")
    return not rest or rest in _state()["prefixes"]


class Split(NamedTuple):
    """An answer's reasoning block: ``text[body_start:body_end]`` is the reasoning (``body_end < 0``: none), the answer
    (content and calls) starts at ``answer`` (0 when there is no block). ``closed``: it ended at its closer."""

    body_start: int = 0
    body_end: int = -1
    answer: int = 0
    closed: bool = False

    @property
    def found(self) -> bool:
        return self.body_end >= 0

    def reasoning(self, text: str) -> str | None:
        return text[self.body_start : self.body_end] if self.found else None


NONE = Split()


def split_reasoning(text: str, *, opened: bool | None = None) -> Split:
    """The reasoning block of ``text`` (see the module docstring); ``opened``: what the request says of the prompt
    (True: it opened the block, False: it closed it, None: not known). A :class:`Read` gives its own."""
    if not isinstance(text, str) or not text:
        return NONE
    if opened is None and type(text) is Read:
        return text.split
    return _split(text, opened)


class Read(str):
    """A text handed to its readers with its reasoning split made once (:func:`read`): a request's reading passes
    this object to detection, the strict and lenient readers and salvage, and each takes the split from it."""

    split: Split


def read(text: str) -> str:
    """``text`` as a :class:`Read` (itself when it already is one; a non-text as it is)."""
    if type(text) is Read or not isinstance(text, str):
        return text
    out = Read(text)
    out.split = _split(text, None) if text else NONE
    return out


def _unclosed(text: str, body: int) -> Split:
    """A block that no closer ends: it ends where a call begins, else with the text."""
    j = call_start(text, body)
    end = j if j >= 0 else len(text)
    return Split(body, end, end, False)


def _split(text: str, opened: bool | None) -> Split:
    state = _state()
    opener = state["opener"].match(text)
    if opener is not None:
        pair = state["opening"][opener.group(1)]
        body = opener.start(1) + len(pair[0])
        j = text.find(pair[1], body)
        return Split(body, j, j + len(pair[1]), True) if j >= 0 else _unclosed(text, body)
    if opened is False:
        return NONE
    # a closer with no opener before it: the prompt opened the block (said so, or not known); when not known, only the
    # thinking blocks' own closers count (</think>, [/THINK]...): a generic end token (<|end|>) is no sign of reasoning
    if opened:
        found = state["closers"].search(text)  # (the first closer)
    else:
        found = None
        for word in state["think_words"]:
            if word in text:
                found = state["think_closers"].search(text)
                break
    if found is not None:
        j = found.start()
        return Split(0, j, found.end(), True) if opened or not inside_call(text, 0, j) else NONE
    return _unclosed(text, 0) if opened else NONE


def reasoning_offset(text: str) -> int:
    """Where the answer starts: after the reasoning block (:func:`split_reasoning`, a :class:`Read`'s own), else 0."""
    return text.split.answer if type(text) is Read else split_reasoning(text).answer


def calls_text(text: str) -> str | None:
    """The text to read calls from when calls inside reasoning count: the reasoning, its markers taken out, before the
    answer, when the answer after the block holds no call (no call tag, not an untagged call list or object); None when
    there is no block or the answer has calls of its own (the block's are drafts or quotes of them)."""
    s = split_reasoning(text)
    if not s.found or not s.reasoning(text).strip():
        return None
    answer = text[s.answer :]
    if answer.lstrip()[:1] in ("[", "{") or any(_state()[k].search(answer) for k in ("tokens", "fenced")):
        return None
    return text[s.body_start : s.body_end] + "\n" + answer
