"""The reasoning block of an answer, separated from its content (:class:`Reasoning`, whole or streamed, for the proxy
and the vLLM plugin alike)."""

from __future__ import annotations

from collections.abc import Iterable

from refiner.formats.reasoning import call_start, inside_call, may_start_call, pairs, split_reasoning, think_closers

_BLANK = " \t\r\n"


def trim_edges(text: str, lead: bool, trail: bool) -> str:
    """``text`` without the blank run it begins with (``lead``) and the one it ends with (``trail``) when that run
    holds a line break: the separators a chat template writes around a reasoning block and before the calls."""
    if lead:
        body = text.lstrip(_BLANK)
        if "\n" in text[: len(text) - len(body)]:
            text = body
    if trail:
        body = text.rstrip(_BLANK)
        if "\n" in text[len(body) :]:
            text = body
    return text


class EdgeTrim:
    """:func:`trim_edges` on a text that arrives in pieces: edge blanks are held until text follows or it ends."""

    def __init__(self, lead: bool) -> None:
        self.lead = lead
        self.pending = ""
        self.started = False  # text other than blanks was sent

    def feed(self, piece: str) -> str:
        if not piece:
            return ""
        text = self.pending + piece
        body = text.rstrip(_BLANK)
        if not body:
            self.pending = text
            return ""
        self.pending = text[len(body) :]
        if not self.started:
            self.started = True
            body = trim_edges(body, self.lead, False)
        return body

    def end(self, trail: bool) -> str:
        """The rest once the text has ended; ``trail``: trimmed, and none when only blanks came."""
        rest, self.pending = self.pending, ""
        if not self.started:
            return "" if trail else trim_edges(rest, self.lead, False)
        return trim_edges(rest, False, trail)


def lean_opens(text: str, cut: bool) -> bool:
    """For a model whose template opens the block by default (:func:`refiner.proxy.thinking.leans`): whether its
    answer ``text``, with no opener and no thinking closer, was written inside that block: when it was ``cut``, when
    a call begins a line, or when it is longer than :data:`HOLD_CHARS`; never when it opens with ``[`` or ``{``."""
    if text.lstrip(_BLANK)[:1] in ("[", "{"):
        return False
    return cut or len(text) > HOLD_CHARS or call_start(text, 0) >= 0


COMPACT_AFTER = 4096  # characters of sent reasoning kept before they are dropped from the buffer
HOLD_CHARS = 16_384  # characters held while it is not known whether the prompt opened a reasoning block
LINE_LOOK = 256  # characters of a line start looked at for a call marker (blanks, then the marker)


class Reasoning:
    """The reasoning block of one answer: whole, :meth:`read`; streamed, :meth:`feed` and :meth:`end` give
    ``(reasoning, answer)`` pieces that join to what :meth:`read` gives. ``opened``: whether the prompt opened the
    block (None: not known; then the answer is held up to :data:`HOLD_CHARS`, and ``lean``: :func:`lean_opens`);
    ``lead``: the answer after a block loses its leading line break (streamed, it is held until it is more than
    blanks, and :attr:`confirmed` then says the block has ended)."""

    def __init__(self, opened: bool | None, lean: bool = False, lead: bool = False) -> None:
        self.opened = opened
        self.lead: str | None = "" if lead else None  # the answer held while only blanks came after the block
        self.lean = lean and opened is None
        self.cut = False
        self.known = pairs()
        self.text = ""
        self.state = "start"  # start | inside | answer
        self.body = 0  # where the block's text starts
        self.sent = 0  # text[body:sent] has been sent as reasoning
        self._close_with(())
        self.longest = max(len(c) for p in self.known for c in p)
        self.found = False  # a block was found (the answer opened one, or the prompt did)
        self.trim = EdgeTrim(lead=True)
        self.scanned = 0  # text[:scanned] was searched for closers and call starts
        self.call_at = -1  # where a call begins inside the block (held from there), once found
        self.floor = 0  # searches start at or after this (1 once sent text was dropped: text[0] is no line start)

    def _close_with(self, closers: Iterable[str]) -> None:
        self.closers = tuple(dict.fromkeys(closers))
        self.closer_prefixes = {c[:k] for c in self.closers for k in range(1, len(c))}
        self.closer_starts = {c[0] for c in self.closers}

    def read(self, text: str, cut: bool = False) -> tuple[str | None, str]:
        """``(reasoning, answer)`` of a whole answer; reasoning None when there is no block."""
        s = split_reasoning(text, opened=self.opened)
        if self.lean and not s.found and not think_closers().search(text) and lean_opens(text, cut):
            s = split_reasoning(text, opened=True)
        if not s.found:
            return None, text
        return trim_edges(s.reasoning(text), True, True), trim_edges(text[s.answer :], self.lead is not None, False)

    @property
    def confirmed(self) -> bool:
        """The block has ended (or there is none) and, with ``lead``, the answer's first text has come."""
        return self.state == "answer" and self.lead is None

    def feed(self, piece: str) -> tuple[str, str]:
        if self.state == "answer":
            return "", self._answer(piece, False)
        self.text += piece
        return self._trimmed(*self._advance(final=False), False)

    def end(self, cut: bool = False) -> tuple[str, str]:
        """The rest once the answer has ended; ``cut``: it ended on the token limit."""
        if self.state == "answer":
            return "", self._answer("", True)
        self.cut = cut
        return self._trimmed(*self._advance(final=True), True)

    def _trimmed(self, reasoning: str, answer: str, final: bool) -> tuple[str, str]:
        """The reasoning without the line breaks around the block (:func:`trim_edges`)."""
        out = self.trim.feed(reasoning)
        if self.state == "answer" and self.found:
            out += self.trim.end(True)
        return out, self._answer(answer, final)

    def _answer(self, text: str, final: bool) -> str:
        """``text`` of the answer, with ``lead`` its leading line break after a block dropped once it is known."""
        if self.lead is None or self.state != "answer":
            return text
        if not self.found:
            self.lead = None
            return text
        self.lead += text
        if not (self.lead.strip() or final):
            return ""
        out, self.lead = trim_edges(self.lead, True, False), None
        return out

    def _advance(self, final: bool) -> tuple[str, str]:
        text = self.text
        if self.state == "start":
            if not text:
                self.state = "answer"
                return "", ""
            i = len(text) - len(text.lstrip(_BLANK))
            rest = text[i:]
            # wait while more text may still make (a longer) opener: "<|channel>" may go on as "<|channel>thought\n"
            if not final and (not rest or any(len(p[0]) > len(rest) and p[0].startswith(rest) for p in self.known)):
                return "", ""
            pair = next((p for p in self.known if rest.startswith(p[0])), None)
            self.found = pair is not None or self.opened is True
            if pair is not None:
                self.state, self.body, closers = "inside", i + len(pair[0]), (pair[1],)
            elif self.opened:
                self.state, self.body, closers = "inside", 0, tuple(p[1] for p in self.known)
            elif self.opened is None and rest[:1] not in ("[", "{"):  # an answer opening with [ or { holds a call
                self.state, closers = "undecided", ()  # (it looks for the thinking blocks' own closers)
            else:
                self.state, self.text = "answer", ""
                return "", text
            self.sent = self.body
            self._close_with(closers)
        if self.state == "undecided":
            return self._undecided(final)
        look = max(self.body, self.sent, self.scanned - self.longest)  # closers were looked for before this
        found = min(((j, c) for c in self.closers if (j := text.find(c, look)) >= 0), default=None)
        if found is not None:
            j, closer = found
            out = text[self.sent : j], text[j + len(closer) :]
            self.state, self.text = "answer", ""
            return out
        if self.call_at < 0:
            self.call_at = call_start(text, max(self.body, self.sent, self.scanned - LINE_LOOK, self.floor))
        self.scanned = len(text)
        if final:
            cut = self.call_at if self.call_at >= 0 else len(text)
            out = text[self.sent : cut], text[cut:]
            self.state, self.text = "answer", ""
            return out
        hold = len(text)
        if self.call_at >= 0:
            hold = self.call_at
        else:
            nl = text.rfind("\n", max(self.body, self.sent - 1))
            line = nl + 1 if nl >= 0 else (0 if self.body == 0 and self.floor == 0 else -1)
            if line >= 0 and may_start_call(text[line : line + LINE_LOOK]):
                hold = max(nl, 0)  # a line that may still begin a call
            for k in range(max(len(text) - self.longest + 1, self.body, self.sent), len(text)):
                if text[k] in self.closer_starts and text[k:] in self.closer_prefixes:
                    hold = min(hold, k)  # may be the start of a closer
                    break
        hold = max(hold, self.sent)
        out = text[self.sent : hold]
        self.sent = hold
        self._compact()
        return out, ""

    def _undecided(self, final: bool) -> tuple[str, str]:
        """Not known whether the prompt opened a block: held until a closer, the end or :data:`HOLD_CHARS`."""
        text = self.text
        found = think_closers().search(text, max(self.scanned - self.longest, 0))
        self.scanned = len(text)
        if found is not None and not inside_call(text, 0, found.start()):
            self.found, self.state, self.text = True, "answer", ""
            return text[: found.start()], text[found.end() :]
        if found is None and self.lean and (len(text) > HOLD_CHARS or (final and lean_opens(text, self.cut))):
            # the text held so far was written inside the block the prompt opened
            self.state, self.body, self.sent, self.scanned, self.found = "inside", 0, 0, 0, True
            self._close_with(p[1] for p in self.known)
            return self._advance(final)
        if found is not None or final or len(text) > HOLD_CHARS:
            self.state, self.text = "answer", ""  # a closer inside a call, or none: no block
            return "", text
        return "", ""

    def _compact(self) -> None:
        """Drops sent reasoning from ``text`` but one character (no line start any more), for linear time."""
        if self.sent < COMPACT_AFTER or self.call_at >= 0:
            return
        cut = self.sent - 1
        self.text = self.text[cut:]
        self.sent -= cut
        self.scanned = max(self.scanned - cut, 0)
        self.body = max(self.body - cut, 0)
        self.floor = 1
