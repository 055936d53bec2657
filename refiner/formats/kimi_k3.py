"""Kimi K3's XTML calls: the ``kimi_k3`` row of the XML parameter grammar (:mod:`refiner.formats.xml_grammar`), elements
written with control tokens (``<|open|>NAME ATTRS<|sep|>``, ``<|close|>NAME<|sep|>``), calls in a ``tools`` channel::

    <|open|>tools<|sep|>
      <|open|>call tool="get_weather" index="1"<|sep|>
        <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
        <|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>
      <|close|>call<|sep|>
    <|close|>tools<|sep|>

``index`` counts the calls from 1; a ``string`` value is raw text, any other type JSON (``typing="named"``). The
``think`` and ``response`` channels come before ``tools``; ``<|close|>message<|sep|>`` ends the turn. The hook reads
control tokens and element names written wrong and takes the channel markup out of the answer's content."""

from __future__ import annotations

import re

from refiner.formats.base import Lenient, WireFormat
from refiner.formats.message import AnswerParts, trim_turn_end
from refiner.formats.tags import respell_tokens
from refiner.formats.xml_spelling import Hook

OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"
RESPONSE = (OPEN + "response" + SEP, CLOSE + "response" + SEP)
MESSAGE_CLOSE = CLOSE + "message" + SEP  # ends the turn
# An element name after a control token, written in another case.
_CASE = re.compile(r"(<\|open\|>|<\|close\|>)(?!tools|call|argument|response|message)"
                   r"(?i:(tools|call|argument|response|message))(?![\w])")


def _respell(fmt: WireFormat, text: str, start: int) -> tuple[str, list[str]] | None:
    """Control tokens written wrong (:func:`~refiner.formats.tags.respell_tokens`) and element names in another case
    (``<|OPEN|>CALL``) read as written right."""
    out = Lenient()
    text = respell_tokens(text, (OPEN, CLOSE, SEP), out)
    notes = [p.message for p in out.problems]
    if _CASE.search(text) is not None:
        notes.append("element names written in another case read as the names")
        text = _CASE.sub(lambda m: m.group(1) + m.group(2).lower(), text)
    return (text, notes) if notes else None


def _answer_parts(fmt: WireFormat, text: str) -> AnswerParts:
    """Content by channel, as vLLM's K3 reasoning parser strips it: the calls are the ``tools`` channel (from its
    opening element or first call to its closing element or the end); the content is the text outside it, less the
    ``response`` channel's elements and the turn's closing element."""
    s = fmt.spelling
    start = min((i for i in (text.find(s.section_open), text.find(s.call_open)) if i >= 0), default=-1)
    if start < 0:
        return AnswerParts(_content(text), None, (len(text), len(text)))
    close = text.rfind(s.section_close, start)
    end = close + len(s.section_close) if close >= 0 else len(text)
    return AnswerParts(_content(text[:start]) + _content(text[end:]), None, (start, end))


def _content(text: str) -> str:
    for token in (*RESPONSE, MESSAGE_CLOSE):
        text = text.replace(token, "")
    return trim_turn_end(text)


HOOK = Hook(respell=_respell, answer_parts=_answer_parts,
            closers=(CLOSE + "call" + SEP, CLOSE + "tools" + SEP, *RESPONSE))
