"""gpt-oss (OpenAI harmony) tool calls: one message per call, addressed to ``functions.NAME``:
``<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>`` (the harmony
guide's header) or ``<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>`` (the chat
template's: :data:`TEMPLATE`).

The text is messages ``[<|start|>ROLE] HEADER <|message|> CONTENT <|end|> | <|call|> | <|return|>`` (the first may lack
``<|start|>``); a header holds the channel (``analysis``, ``commentary``, ``final``), optionally the recipient (after
the channel name, or before ``<|channel|>``) and the content type (``<|constrain|>json`` or ``json``). A message to
``functions.NAME`` is a call: one JSON object ending with ``<|call|>`` (the last may lack it); other messages are
skipped; a recipient outside ``functions.`` is an error; prose may come before and after the messages, not between.
Recovery reads each ``to=functions.NAME``, with or without its tokens. A text that stops inside a call's header holds no
call for it. The ``final`` channel is the answer whatever it holds (:meth:`Harmony.answer_spans`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from refiner.calls import ToolCall
from refiner.formats.base import NAME_PATTERN, ROW_CHARS, Detection, Lenient, WireFormat, markup_name, name_refused
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, take_items
from refiner.formats.lenient import TokenFinder, add_arguments_call, past_strings
from refiner.formats.message import AnswerParts, trim_turn_end
from refiner.formats.reasoning import bracket_end
from refiner.formats.strict import decode_at, expect_object
from refiner.formats.tags import respell_tokens
from refiner.formats.text import dumps, reasoning_offset, skip_ws
from refiner.formats.xmlvalues import Finder

START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
CALL, END, RETURN, CONSTRAIN = "<|call|>", "<|end|>", "<|return|>", "<|constrain|>"
TO = "to="
PREFIX = "functions."
_BODY_STOPS = (CALL, END, RETURN, START, CHANNEL, TO + PREFIX)  # what ends a call's arguments in recovery
CHANNELS = ("analysis", "commentary", "final")
_NAME = re.compile(NAME_PATTERN)
_WORD = re.compile(r"[^\s<]*")
# A recipient just before the first <|channel|> of a completion lacking <|start|>assistant (its "=" maybe lost).
_LEADING_RECIPIENT = re.compile(r"(?:assistant\s*)?to(?:=|[ \t]*:?[ \t]*(?=functions\.))[^\s<]+\s*\Z")
MAX_LEAD = 256  # how far before the first <|channel|> such a recipient is looked for
# A recipient whose "=" was lost ("commentary tofunctions.NAME", "to functions.NAME") in a header or at the start.
_LOST_EQUALS = re.compile(
    r"((?:<\|channel\|>[ \t]*(?:analysis|commentary|final)|assistant)[ \t]+|\A[ \t]*)to[ \t]*:?[ \t]*(?=functions\.)"
)
# A recipient glued to its channel's name, the <|channel|> token between them lost ("to=functions.NAMEcommentary json"),
# and the header's text before the recipient (back to the previous JSON value or token), which then holds no channel.
_GLUED_CHANNEL = re.compile(r"(.+?)(analysis|commentary|final)")
_HEADER_BEFORE = re.compile(r"[^}>\n]*\Z")
# What may follow a recipient before <|message|>: the channel, the content type, their tokens (the last maybe cut).
_HEADER_REST = re.compile(
    r"(?:\s|<\|(?:channel|constrain)\|>|analysis|commentary|final|json)*(?:<\|?[a-z]*\|?|[a-z]+)?\Z"
)
MAX_HEADER_REST = 64  # how long the rest of a header after its recipient may be
RECOVER_ARGS_WINDOW = 64  # how far after a recipient recovery looks for the arguments when <|message|> is lost


def _spaced(text: str, at: int) -> bool:
    """Whether the first ``<|start|>`` or ``<|channel|>`` from ``at`` on is followed by a space (a spaced row)."""
    seg = text[at : at + ROW_CHARS]
    i, token = Finder(seg).first((START, CHANNEL), 0)
    return token is not None and seg.startswith(" ", i + len(token))


def _first_header(text: str, lo: int, channel: int) -> int:
    """Where the header whose ``<|channel|>`` is at ``channel`` starts: at a recipient written before it (no earlier
    than ``lo``), else at the token."""
    lead = _LEADING_RECIPIENT.search(text, max(lo, channel - MAX_LEAD), channel)
    return lead.start() if lead else channel


@dataclass(frozen=True)
class HarmonySpelling:
    """How the row writes each call's header: the recipient before ``<|channel|>`` (``recipient_first``) or after the
    channel name; the content type (``json`` or ``<|constrain|>json``); whether the first message opens with
    ``<|start|>assistant`` (``start_first``; else the prompt's generation prefix wrote it); ``between``: the token
    that closes a call another call follows (LLM-jp-4.1's ``<|end|>``: read after any call too); ``spaced``: a space
    after the special tokens a word follows, as LLM-jp-4.1's tokenizer decodes them (written, and required after the
    text's first ``<|start|>`` or ``<|channel|>``). Reading accepts every other spelling."""

    recipient_first: bool
    content_type: str
    start_first: bool
    between: str = CALL
    spaced: bool = False


GUIDE = HarmonySpelling(recipient_first=False, content_type=CONSTRAIN + "json", start_first=True)
TEMPLATE = HarmonySpelling(recipient_first=True, content_type="json", start_first=False)


class Harmony(WireFormat):
    spelling: HarmonySpelling = TEMPLATE
    tags = (CHANNEL, START, CONSTRAIN, MESSAGE, CALL, END)
    detection = Detection(markers=(CHANNEL, START, TO + PREFIX), closers=(CALL,))
    channels = True
    name_pattern = NAME_PATTERN
    example = (
        "<|channel|>analysis<|message|>The user wants flights and the weather; two calls.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.search_flights <|constrain|>json<|message|>"
        '{"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}<|call|>'
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city": "London", "days": 3, "units": "metric"}<|call|>'
    )

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.spelling.spaced:  # the example as a spaced row writes it: the guide's calls in its own render
            cls.example = cls().render(Harmony().parse_strict(Harmony.example))

    def parse_strict(self, text: str) -> list[ToolCall]:
        begin, f = reasoning_offset(text), Finder(text)
        first, token = f.first((START, CHANNEL), begin)
        if token is None:
            raise self.error(f"no harmony message ({START} or {CHANNEL})", begin)
        if self.spelling.spaced and not _spaced(text, begin):
            raise self.error(f"no space after the first {START} or {CHANNEL} (the row's tokenizer writes one)", begin)
        pos = first + len(START) if token == START else _first_header(text, begin, first)
        calls: list[ToolCall] = []
        while True:
            m = f.next(MESSAGE, pos)
            if m < 0:
                raise self.error(f"missing {MESSAGE} after a header", pos)
            recipient, content_type = self._header(text, pos, m)
            pos = m + len(MESSAGE)
            if recipient is not None:
                call, pos = self._call(text, pos, recipient, content_type)
                calls.append(call)
            else:
                i, t = f.first((END, RETURN, CALL), pos)
                if t == CALL:
                    raise self.error(f"{CALL} ends a message without a recipient", i)
                pos = i + len(t) if t else len(text)  # (the last message may lack its stop token)
            k = skip_ws(text, pos)
            if not text.startswith(START, k):
                break
            pos = k + len(START)
        i, t = f.first((START, CHANNEL), pos)
        if t is not None:
            raise self.error("text between harmony messages", i)
        if not calls:
            raise self.error(f"no message addressed to {PREFIX}NAME", begin)
        return calls

    def _header(self, text: str, pos: int, end: int) -> tuple[str | None, str | None]:
        """The recipient and the content type of the header ``text[pos:end]`` (``None`` where it writes none)."""
        head, sep, chan = text[pos:end].partition(CHANNEL)
        if not sep:
            raise self.error(f"a header without {CHANNEL}", pos)
        words = head.split()
        if words and not words[0].startswith(TO):
            role = words.pop(0)
            if role != "assistant":
                raise self.error(f"a message from {role!r}, not the assistant", pos)
        chan, csep, ctype = chan.partition(CONSTRAIN)
        recipient, content_type = None, ctype.strip() if csep else None
        cwords = chan.split()
        if not cwords or cwords[0] not in CHANNELS:
            raise self.error(f"unknown channel {cwords[0] if cwords else ''!r}", pos)
        for w in words + cwords[1:]:
            if w.startswith(TO) and recipient is None:
                recipient = w[len(TO) :]
            elif w == "json" and content_type is None and recipient is not None:
                content_type = w
            else:
                raise self.error(f"unexpected {w[:40]!r} in a message header", pos)
        return recipient, content_type

    def _call(self, text: str, pos: int, recipient: str, content_type: str | None) -> tuple[ToolCall, int]:
        if not recipient.startswith(PREFIX):
            raise self.error(f"recipient {recipient[:60]!r} is not a function ({PREFIX}NAME)", pos)
        name = recipient[len(PREFIX) :]
        if _NAME.fullmatch(name) is None:
            raise self.error(name_refused(name), pos)
        if content_type not in (None, "json"):
            raise self.error(f"content type {content_type[:40]!r} of a call to {name!r} is not json", pos)
        at = skip_ws(text, pos)
        args, end = decode_at(self, text, at)
        args = expect_object(self, args, f"the arguments of {name!r}", at)
        end = skip_ws(text, end)
        close = next((c for c in (CALL, self.spelling.between) if text.startswith(c, end)), "")
        if not close and end < len(text):
            raise self.error(f"expected {CALL} after the arguments of {name!r}, got {text[end : end + 30]!r}", end)
        return ToolCall(name, args), end + len(close)

    def recover(self, text: str, out: Lenient) -> None:
        text = respell_tokens(text, self.tags + (RETURN,), out)
        text, lost = _LOST_EQUALS.subn(r"\1" + TO, text, MAX_RECOVERED_ITEMS)
        if lost:
            out.note("missing_tag", f"a recipient written without its '=': {PREFIX}NAME after 'to'")
        f = Finder(text)
        strings = TokenFinder(text, _BODY_STOPS)  # (a token inside the arguments' strings is text)
        pos = reasoning_offset(text)
        marker = TO + PREFIX
        for n in range(MAX_RECOVERED_ITEMS + 1):
            r = f.next(marker, pos)
            if r < 0:
                if n == 0:
                    out.note("missing_tag", f"no message addressed to {PREFIX}NAME")
                return
            if not take_items(1):  # (the parse's count of items read: a gave_up problem)
                return
            pos = self._recover_call(text, r + len(marker), f, strings, out)

    def _recover_call(self, text: str, pos: int, f: Finder, strings: TokenFinder, out: Lenient) -> int:
        name = _WORD.match(text, pos).group()
        head = _HEADER_BEFORE.search(text, max(0, pos - len(TO + PREFIX) - MAX_HEADER_REST), pos - len(TO + PREFIX))
        glued = _GLUED_CHANNEL.fullmatch(name)
        if glued and not any(c in head.group() for c in CHANNELS):
            out.note("missing_tag", f"missing {CHANNEL} between the recipient {name[:60]!r} and its channel")
            pos += len(glued.group(2))
            name = glued.group(1)
        pos += len(name)
        if pos >= len(text):
            out.note("unclosed", f"the text ends inside the tool name {name[:60]!r}")
            out.mark_cut(None)
            return pos
        markup = markup_name(name)
        if _NAME.fullmatch(name) is None:
            out.note("markup_name" if markup else "bad_name" if name else "no_name", name_refused(name))
        name = "" if markup else name  # (the call's body is read past; no call is made)
        stop, _ = f.first((TO + PREFIX, START), pos)
        m = f.next(MESSAGE, pos)
        if 0 <= m < stop:
            body_start = m + len(MESSAGE)
        else:  # the <|message|> token was lost (or every special token was dropped by the decoder)
            brace = text.find("{", pos, min(stop, pos + RECOVER_ARGS_WINDOW))
            if brace < 0 and stop == len(text) and len(rest := text[pos:].strip()) <= MAX_HEADER_REST \
                    and _HEADER_REST.fullmatch(rest):
                out.note("truncated", f"the text stops inside the header of the call to {name[:60]!r}")
                out.mark_cut(None)
                return len(text)
            out.note("missing_tag", f"missing {MESSAGE} in the call to {name[:60]!r}")
            body_start = brace if brace >= 0 else pos
        end, tag = past_strings(strings, body_start, *f.first(_BODY_STOPS, body_start))
        if tag is None:
            out.note("unclosed", f"the call to {name[:60]!r} is cut short")
        elif tag not in (CALL, self.spelling.between):
            out.note("missing_tag", f"missing {CALL} after the call to {name[:60]!r}")
        if name:
            add_arguments_call(out, name, text[body_start:end], at_end=tag is None)
        elif tag is None:
            out.mark_cut(None)
        return end + len(CALL) if tag == CALL else end

    def sniff(self, body: str, at: int) -> bool:
        """A spaced row claims a text only when its first token has its space."""
        return not self.spelling.spaced or _spaced(body, at)

    def region_start(self, body: str, at: int) -> int:
        """A header's recipient before its ``<|channel|>`` (the template's order) starts the calls the token finds."""
        return _first_header(body, 0, at) if body.startswith(CHANNEL, at) else at

    def answer_spans(self, text: str, start: int) -> list[tuple[int, int]]:
        """The messages on the ``final`` channel addressed to no one (the answer: JSON written there is text, not a
        call), each from its ``<|channel|>`` to its end token (or the next message, or the end of the text)."""
        spans: list[tuple[int, int]] = []
        f = Finder(text)
        pos = start
        while len(spans) < MAX_RECOVERED_ITEMS:
            c = f.next(CHANNEL, pos)
            if c < 0:
                break
            k = skip_ws(text, c + len(CHANNEL))
            end, tag = f.first((END, RETURN, CALL, START), k)
            m = f.next(MESSAGE, k)
            role = text[max(start, c - RECOVER_ARGS_WINDOW) : c].rpartition(START)[2].rpartition(END)[2]
            if text.startswith("final", k) and 0 <= m < end and TO not in text[k:m] and TO not in role:
                spans.append((c, end))
            pos = end + len(tag) if tag else len(text)
        return spans

    def answer_parts(self, text: str) -> AnswerParts:
        """Content and reasoning by channel, as vLLM's harmony reader returns them: analysis messages are reasoning,
        commentary messages without a recipient (preambles) and ``final`` messages are content, messages addressed
        to a recipient are calls; prose before the first message and after the last is content."""
        f = Finder(text)
        first, token = f.first((START, CHANNEL), 0)
        if token is None:
            return AnswerParts(trim_turn_end(text), None, (len(text), len(text)))
        if token == CHANNEL:
            first = _first_header(text, 0, first)
        content, thoughts = [text[:first]], []
        pos, last = first, first
        for _ in range(MAX_RECOVERED_ITEMS):
            if text.startswith(START, pos):
                pos += len(START)
            m = f.next(MESSAGE, pos)
            nxt = f.next(START, pos)
            if m < 0 or 0 <= nxt < m:  # a header without its message (cut there, or garbled): markup, not content
                last = len(text) if m < 0 and nxt < 0 else last
                break
            header = text[pos:m]
            body_at = skip_ws(text, m + len(MESSAGE))
            value_end = bracket_end(text, body_at) if TO in header and text.startswith("{", body_at) else -1
            end, tag = f.first((END, CALL, RETURN, START), max(m + len(MESSAGE), value_end))
            body = text[m + len(MESSAGE) : end if tag else len(text)]
            if TO not in header:
                (thoughts if header.partition(CHANNEL)[2].split()[:1] == ["analysis"] else content).append(body)
            pos = last = len(text) if tag is None else end + (len(tag) if tag != START else 0)
            k = skip_ws(text, pos)
            if not text.startswith((START, CHANNEL), k):
                break
            pos = k
        content.append(trim_turn_end(text[last:]))
        return AnswerParts("".join(content), "".join(thoughts) if thoughts else None, (first, last))

    def render(self, calls: Sequence[ToolCall]) -> str:
        sp = self.spelling
        gap = " " if sp.spaced else ""
        out = []
        for i, c in enumerate(calls):
            recipient = f"{TO}{PREFIX}{c.name}"
            header = (f" {recipient}{CHANNEL}{gap}commentary {sp.content_type}" if sp.recipient_first
                      else f"{CHANNEL}{gap}commentary {recipient} {sp.content_type}")
            start = f"{START}{gap}assistant" if i or sp.start_first else ""
            end = sp.between if i < len(calls) - 1 else CALL
            out.append(f"{start}{header}{MESSAGE}{gap}{dumps(dict(c.arguments))}{end}")
        return "".join(out)
