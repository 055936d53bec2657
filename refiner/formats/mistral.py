"""Mistral's tool calls after the ``[TOOL_CALLS]`` token, in the two shapes its tokenizers define (mistral-common,
vLLM ``mistral_tool_parser.py``); text before the token is the message content.

- ``mistral`` / ``mistral_tekken`` (tokenizers v2-v7): ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]``, one
  JSON list (an ``"id"`` per call accepted and dropped): rows of :mod:`refiner.formats.json_calls` whose ``gap`` is
  what the tokenizer writes between the token and the list (:data:`refiner.formats.catalog.MISTRAL`).
- ``mistral_v11`` (tokenizers v11+): ``[TOOL_CALLS]NAME[ARGS]{...}`` per call, also with ``[CALL_ID]ID`` before
  ``[ARGS]`` (dropped), or without ``[ARGS]`` (as vLLM reads it).

Detection tells them apart by what follows the token; reasoning (``<think>...</think>`` or ``[THINK]...[/THINK]``) may
come first. A ``[TOOL_CALLS]`` in a JSON string is text (:func:`~refiner.formats.lenient.tokens_outside_strings`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from refiner.calls import ToolCall
from refiner.formats.bare import IDENTIFIER, bare_calls
from refiner.formats.base import Detection, Lenient, WireFormat, marker_table, markup_name, name_refused
from refiner.formats.jsonfix import budget_spent
from refiner.formats.lenient import add_arguments_call, tokens_outside_strings
from refiner.formats.strict import JSON_DECODER, decode_at, first_tag, json_head
from refiner.formats.tags import respell_tokens
from refiner.formats.text import dumps, reasoning_offset, skip_ws

BOT, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
REASONING = (("[THINK]", "[/THINK]"), ("<think>", "</think>"))
MAX_SEGMENTS = 256  # [TOOL_CALLS] segments recovery reads at most (real answers hold a few)
# A v11 tool name: anything up to the next "[" or "{" with no bracket or brace, no whitespace at either end and no
# line break (the character classes alternate, so matching is linear).
V11_NAME = r"[^\s\[\]{}]+(?:[^\S\n]+[^\s\[\]{}]+)*"
_V11_NAME = re.compile(V11_NAME)
# A recovered tool name: a strict one without whitespace or markup (``ns:tool``, ``get-weather``); other text is prose.
_RECOVERED_NAME = re.compile(r"[^\s\[\]{}<>|\"'`]+")
_IDENTIFIER = re.compile(IDENTIFIER)
MAX_NAME_CHARS = 256  # how far back from an [ARGS] token recovery looks for the name before it


def _stands_as_token(token: str, text: str, end: int) -> bool:
    """Whether a look-alike of ``token`` ending at ``end`` stands where the token would: [ARGS] before the
    arguments' ``{``, [TOOL_CALLS] and [CALL_ID] before a name or id (not a bracketed word in prose or a value)."""
    if token == ARGS:
        return text.startswith("{", skip_ws(text, end))
    return text[end : end + 1].isalnum() or text.startswith("_", end)


def _name_start(text: str, lo: int, i: int) -> int | None:
    """Where the tool name just before ``text[i]`` (``[CALL_ID]ID`` after it allowed) starts when it stands on its
    own: an identifier starting the region at ``lo``, a line, or after a non-word; after a space only when nothing
    but whitespace comes before it (``Let me call f[ARGS]{...}`` is prose). ``None`` otherwise."""
    j = _run_start(text, max(lo, i - MAX_NAME_CHARS), i)
    name_end = i
    if text.endswith(CALL_ID, lo, j):
        name_end = j - len(CALL_ID)
        j = _run_start(text, max(lo, name_end - MAX_NAME_CHARS), name_end)
    if _IDENTIFIER.fullmatch(text, j, name_end) is None:
        return None
    return j if j == lo or text[j - 1] == "\n" or not text[j - 1].isspace() or not text[lo:j].strip() else None


def _run_start(text: str, lo: int, i: int) -> int:
    j = i
    while j > lo and (text[j - 1].isalnum() or text[j - 1] in "_.-"):
        j -= 1
    return j


# A [TOOL_CALLS] that starts a call: a name, then [CALL_ID]..., [ARGS] or the arguments' "{".
_BOT_CALL = re.compile(r"\[TOOL_CALLS\][\w.\-]{1,256}(?:\[CALL_ID\]|\[ARGS\]|\{)")
def _segments(body: str) -> tuple[str, list[str]]:
    """``(the text before the first [TOOL_CALLS], each call's text after its token)``; a call's arguments run to
    where they decode, else to the next token outside their strings."""
    i = body.find(BOT)
    lead = body[: i if i >= 0 else len(body)]
    segments: list[str] = []
    while i >= 0 and len(segments) <= MAX_SEGMENTS:
        s = i + len(BOT)
        nxt = body.find(BOT, s)
        brace = body.find("{", s, nxt if nxt >= 0 else len(body))
        if brace >= 0 and nxt >= 0:
            try:
                nxt = body.find(BOT, JSON_DECODER.raw_decode(body, brace)[1])
            except (ValueError, RecursionError):
                after = tokens_outside_strings(body, brace, BOT, starts_call=_BOT_CALL)
                nxt = after[0] if after else -1
        segments.append(body[s : nxt if nxt >= 0 else len(body)])
        i = nxt
    return lead, segments


class MistralV11(WireFormat):
    tags = (BOT, ARGS)
    detection = Detection(markers=(BOT,), closers=(ARGS,))
    name_pattern = V11_NAME

    def sniff(self, body: str, at: int) -> bool:
        """``[TOOL_CALLS]`` followed by a tool name (a list after it is the v2-v7 rows')."""
        return not body.startswith("[", skip_ws(body, at + len(BOT)))

    def parse_strict(self, text: str) -> list[ToolCall]:
        start, i = first_tag(self, text, BOT, f"missing {BOT}")
        if text.find(ARGS, start, i) >= 0:  # a call before the first token: its token was lost
            raise self.error(f"{ARGS} before the first {BOT}: each call is {BOT}NAME{ARGS}{{...}}", text.find(ARGS, start))
        calls, in_name = [], marker_table().in_name
        while True:
            pos = i + len(BOT)
            m = _V11_NAME.match(text, pos)
            if m is None:
                raise self.error(f"expected a tool name after {BOT}", pos)
            name, pos = m.group(), m.end()
            if in_name(name):  # another format's call after the token
                raise self.error(f"tool name {name[:60]!r} holds another format's marker", pos)
            if text.startswith(CALL_ID, pos):
                j = text.find(ARGS, pos)
                call_id = text[pos + len(CALL_ID) : j] if j >= 0 else ""
                if not call_id or call_id != call_id.strip() or "[" in call_id or "{" in call_id:
                    raise self.error(f"{CALL_ID} must be followed by an id and {ARGS}", pos)
                pos = j
            pos += len(ARGS) if text.startswith(ARGS, pos) else 0
            if not text.startswith("{", pos):
                raise self.error(f"expected {ARGS} and a JSON object after the tool name {name!r}", pos)
            args, end = decode_at(self, text, pos)
            calls.append(ToolCall(name, args))
            nxt = skip_ws(text, end)
            if text.startswith(BOT, nxt):
                i = nxt
                continue
            if text.find(BOT, nxt) >= 0 or text.find(ARGS, nxt) >= 0:  # a further call after text, or without BOT
                raise self.error(f"text between calls: each call is {BOT}NAME{ARGS}{{...}}", nxt)
            return calls

    def recover(self, text: str, out: Lenient) -> None:
        body = respell_tokens(text[reasoning_offset(text) :], (BOT, ARGS, CALL_ID), out, _stands_as_token)
        lead, segments = _segments(body)
        if not segments:
            out.note("missing_tag", f"missing {BOT}")
        if ARGS in lead:  # text before the first token: content, unless it holds NAME[ARGS]{...} (its token lost)
            self._recover_unmarked(lead, out, last=not segments)
        elif not segments:  # no token at all: NAME{...} calls with nothing around them
            if not bare_calls(body, 0, out):
                out.note("unreadable", "no call found")
            return
        for n, segment in enumerate(segments):
            if n >= MAX_SEGMENTS or len(out.calls) >= MAX_SEGMENTS or budget_spent():
                out.note("gave_up", f"gave up after {n} calls")
                return
            self._recover_call(segment, out, last=n == len(segments) - 1)

    def _recover_unmarked(self, lead: str, out: Lenient, last: bool) -> None:
        """The calls before the first ``[TOOL_CALLS]``, from the first ``NAME[ARGS]`` :func:`_name_start` accepts."""
        pos = 0
        for _ in range(MAX_SEGMENTS):
            i = lead.find(ARGS, pos)
            if i < 0:
                break
            j = _name_start(lead, pos, i)
            if j is not None:
                out.note("missing_tag", f"missing {BOT} before {lead[j:i][:60]!r}")
                self._recover_call(lead[j:], out, last)
                return
            pos = i + len(ARGS)
        out.note("not_a_call", f"not a call: {lead.strip()[:80]!r}")

    def _recover_call(self, segment: str, out: Lenient, last: bool) -> None:
        """The calls of one segment after a ``[TOOL_CALLS]``: one, or more when a further ``NAME[ARGS]{...}`` lost
        its token (reported); ``last``: the text ends in this segment."""
        for n in range(MAX_SEGMENTS):
            if n:
                out.note("missing_tag", f"missing {BOT} before a call")
            a, b = segment.find(ARGS), segment.find("{")
            cut = a if a >= 0 and (b < 0 or a < b) else b
            head = segment if cut < 0 else segment[:cut]
            name = " ".join(head.split(CALL_ID, 1)[0].split())
            if not name:
                out.note("no_name", f"call without a name: {segment[:80]!r}")
                return
            if _RECOVERED_NAME.fullmatch(name) is None:
                # a name after a foreign token or newline (its token lost or misspelt); else prose after a quoted token
                j = _name_start(head, 0, len(head)) if cut == a else None
                if j is None:
                    out.note("not_a_call", f"not a call: {segment.strip()[:80]!r}")
                    return
                out.note("missing_tag", f"missing {BOT} before {head[j:][:60]!r}")
                name = head[j:].split(CALL_ID, 1)[0]
            if markup_name(name):
                out.note("markup_name", name_refused(name))
                return
            if cut < 0:
                out.note("unclosed", f"the call {name!r} has no arguments (cut short?)")
                out.calls.append(ToolCall(name, {}))
                if last:  # the text stops in the name, or right after it
                    out.mark_cut(len(out.calls) - 1)
                return
            raw = segment[cut + len(ARGS) :] if cut == a else segment[cut:]
            args, end = json_head(raw, skip_ws(raw, 0)) or (None, 0)
            if not isinstance(args, dict):  # ("key": value, ... after a lost "{" decodes as the first key)
                add_arguments_call(out, name, raw, at_end=last)
                return
            out.calls.append(ToolCall(name, {str(k): v for k, v in args.items()}))
            segment = raw[end:]
            if ARGS not in segment or len(out.calls) >= MAX_SEGMENTS:
                return

    def render(self, calls: Sequence[ToolCall]) -> str:
        return "".join(f"{BOT}{c.name}{ARGS}{dumps(dict(c.arguments))}" for c in calls)
