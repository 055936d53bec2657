"""JSON call objects behind a model family's own tag: one grammar, six wrappers (the table at the end).

| format | model families | shape (vLLM / SGLang parser) |
|---|---|---|
| ``granite`` | IBM Granite 3.x | ``<|tool_call|>[{"name", "arguments"}, ...]`` (``granite_tool_parser.py``; Granite 3.1+ decodes the token as ``<tool_call>``, also read) |
| ``phi4_mini`` | Phi-4-mini | ``functools[{"name", "arguments"}, ...]`` (``phi4mini_tool_parser.py``) |
| ``minimax`` | MiniMax-Text-01 / M1 | ``<tool_calls>`` then one ``{"name", "arguments"}`` per line, ``</tool_calls>`` (``minimax_tool_parser.py``) |
| ``jamba`` | AI21 Jamba 1.5+, Tencent Hunyuan-A13B | ``<tool_calls>[{"name", "arguments"}, ...]</tool_calls>`` (``jamba_tool_parser.py``, ``hunyuan_a13b_tool_parser.py``) |
| ``nemotron`` | NVIDIA Llama-Nemotron | ``<TOOLCALL>[{"name", "arguments"}, ...]</TOOLCALL>`` (``nemotron_json_tool_parser.py``) |
| ``internlm`` | InternLM 2 / 2.5 | ``<|action_start|><|plugin|>\\n{"name", "parameters"}<|action_end|>`` per call (``internlm2_tool_parser.py``) |

A call object is ``name`` plus the arguments under the family's key (rendering writes the first of
``Family.arg_keys``; the others are accepted where the published parser accepts them). Text before the tag
(content, reasoning) and after the calls is allowed; a closing tag inside a string value is text (JSON is decoded
before the closing tag is looked for). MiniMax and Jamba/Hunyuan share ``<tool_calls>``: detection reads what follows
the tag (an object starts MiniMax's lines, a list Jamba's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat, register
from refiner.formats.lenient import add_call, as_items, block_values, lenient_blocks, lenient_json_in_prose
from refiner.formats.strict import decode_at, expect_close, json_blocks, plain_calls, strict_fields
from refiner.formats.tags import Speller, brace_call_lines, respell_json_tags
from refiner.formats.text import dumps, reasoning_offset, skip_ws

# Blocks read per text by strict parsing of the formats without a closing tag (real answers hold one).
MAX_BLOCKS = 64
MAX_NOTES = 8  # problems reported per text for tags read in place of others


@dataclass(frozen=True)
class Family:
    open: str  # the tag before the calls (for a "list" payload without close, the list follows it directly)
    close: str | None  # the closing tag, or None when the JSON value ends the calls
    payload: str  # "list": one JSON list of calls; "lines": one call object per line; "object": one call per block
    arg_keys: tuple[str, ...] = ("arguments",)
    alt_opens: tuple[str, ...] = ()  # other spellings of the open tag, accepted when reading
    tight: bool = False  # the list must follow the open tag with no whitespace (functools[...])


class TaggedJson(WireFormat):
    family: Family

    # ---- strict ------------------------------------------------------------------------------------------------

    def _call(self, obj: Any, pos: int, index: int) -> ToolCall:
        keys = self.family.arg_keys
        key = next((k for k in keys if isinstance(obj, dict) and k in obj), keys[0])
        name, args, _ = strict_fields(self, obj, pos, what="call", index=index, args_key=key)
        return ToolCall.trusted(name, args)

    def _calls(self, values: list[tuple[Any, int]]) -> list[ToolCall]:
        fast = plain_calls((v for v, _ in values), args_key=self.family.arg_keys[0])
        if fast is not None:
            return fast
        return [self._call(v, p, i) for i, (v, p) in enumerate(values)]

    def _open_at(self, text: str, start: int) -> tuple[int, str]:
        """The first open tag (any spelling) at or after ``start``: ``(position, tag)``, position -1 if none."""
        best, tag = -1, self.family.open
        for t in (self.family.open, *self.family.alt_opens):
            i = text.find(t, start)
            if i >= 0 and (best < 0 or i < best):
                best, tag = i, t
        return best, tag

    def parse_strict(self, text: str) -> list[ToolCall]:
        f = self.family
        if f.close is None:
            return self._calls(self._unclosed_lists(text))
        if f.payload == "lines":
            return self._calls(self._lines(text))
        values = list(json_blocks(self, text, f.open, f.close))
        if f.payload == "object":
            for v, p in values:
                if not isinstance(v, dict):
                    raise self.error(f"{f.open} must hold one JSON call object, got {type(v).__name__}", p)
            return self._calls(values)
        items = []
        for v, p in values:
            if not isinstance(v, list):
                raise self.error(f"{f.open} must hold a JSON list of calls, got {type(v).__name__}", p)
            items.extend((item, p) for item in v)
        return self._calls(items)

    def _unclosed_lists(self, text: str) -> list[tuple[Any, int]]:
        """The items of the JSON list after each open tag (formats whose list ends the calls)."""
        f = self.family
        start = reasoning_offset(text)
        i, tag = self._open_at(text, start)
        if i < 0:
            raise self.error(f"missing {f.open}", start)
        items: list[tuple[Any, int]] = []
        for _ in range(MAX_BLOCKS):
            pos = i + len(tag)
            if not f.tight:
                pos = skip_ws(text, pos)
            if not text.startswith("[", pos):
                raise self.error(f"{tag} must be followed by a JSON list of calls", pos)
            value, end = decode_at(self, text, pos)
            items.extend((item, pos) for item in value)
            i, tag = self._open_at(text, end)
            if i < 0:
                return items
        raise self.error(f"more than {MAX_BLOCKS} {f.open} lists", i)

    def _lines(self, text: str) -> list[tuple[Any, int]]:
        """MiniMax's blocks: call objects separated by line breaks between the tags."""
        f = self.family
        start = reasoning_offset(text)
        i = text.find(f.open, start)
        if i < 0:
            raise self.error(f"no {f.open}...{f.close} block", start)
        values: list[tuple[Any, int]] = []
        while i >= 0:
            pos = skip_ws(text, i + len(f.open))
            while not text.startswith(f.close, pos):
                if pos >= len(text):
                    raise self.error(f"{f.open} without {f.close}", i)
                if not text.startswith("{", pos):
                    expect_close(self, text, pos, f.close)  # raises: text that is not a call object
                value, end = decode_at(self, text, pos)
                values.append((value, pos))
                pos = skip_ws(text, end)
                if not text.startswith(f.close, pos) and "\n" not in text[end:pos]:
                    raise self.error("one call object per line", pos)
            i = text.find(f.open, pos + len(f.close))
        return values

    # ---- lenient -----------------------------------------------------------------------------------------------

    def recover(self, text: str, out: Lenient) -> None:
        f = self.family
        if f.close is not None:
            fixed = respell_json_tags(text, reasoning_offset(text), self._speller(), f.open, f.close)
            if fixed is not None:  # tags written wrong
                text, notes = fixed
                for note in notes[:MAX_NOTES]:
                    out.note("missing_tag", note)
            for chunk in lenient_blocks(text, f.open, f.close, out.problems):
                items = block_values(brace_call_lines(chunk) if f.payload == "lines" else chunk)
                if not items:
                    out.note("unreadable", f"unrecoverable block: {chunk.strip()[:80]!r}")
                for item in items:
                    add_call(out, item)
            return
        body = text[reasoning_offset(text) :]
        for t in f.alt_opens:
            body = body.replace(t, f.open)
        chunks = body.split(f.open)[1 : MAX_BLOCKS + 1]
        if not chunks:
            out.note("missing_tag", f"missing {f.open}")
            chunks = [body]
        for chunk in chunks:
            value = lenient_json_in_prose(chunk)
            if not isinstance(value, list):
                out.note("not_a_list", "calls are not a JSON list")
            for item in as_items(value):
                add_call(out, item)

    def _speller(self) -> Speller:
        speller = self.__dict__.get("_tag_speller")
        if speller is None:
            speller = self.__dict__["_tag_speller"] = Speller((self.family.open, self.family.close or ""))
        return speller

    # ---- render ------------------------------------------------------------------------------------------------

    def render(self, calls: Sequence[ToolCall]) -> str:
        f = self.family
        objs = [{"name": c.name, f.arg_keys[0]: dict(c.arguments)} for c in calls]
        if f.payload == "lines":
            return f.open + "\n" + "".join(dumps(o) + "\n" for o in objs) + f.close
        if f.payload == "object":
            return "\n".join(f"{f.open}\n{dumps(o)}{f.close}" for o in objs)
        return f"{f.open}{dumps(objs)}{f.close or ''}"


def _next_char(body: str, at: int, tag: str) -> str:
    """The first character after ``tag`` at ``at`` and any whitespace ("" at the end of the text)."""
    j = skip_ws(body, at + len(tag))
    return body[j : j + 1]


@register
class Granite(TaggedJson):
    name = "granite"
    description = 'Granite 3.x: <|tool_call|>[{"name": ..., "arguments": {...}}, ...]'
    family = Family("<|tool_call|>", None, "list", alt_opens=("<tool_call>",))
    tags = ("<|tool_call|>",)
    detection = Detection(rank=260, markers=("<|tool_call|>",))
    example = (
        '<|tool_call|>[{"name": "search_flights", "arguments": {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}}, {"name": "get_weather", "arguments": {"city": "London", "days": 3, "units": "metric"}}]'
    )


@register
class Phi4Mini(TaggedJson):
    name = "phi4_mini"
    description = 'Phi-4-mini: functools[{"name": ..., "arguments": {...}}, ...]'
    family = Family("functools", None, "list", arg_keys=("arguments", "parameters"), tight=True)
    tags = ("functools",)
    detection = Detection(rank=261, markers=("functools[",))
    example = (
        'functools[{"name": "search_flights", "arguments": {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}}, {"name": "get_weather", "arguments": {"city": "London", "days": 3, "units": "metric"}}]'
    )


@register
class MiniMax(TaggedJson):
    name = "minimax"
    description = 'MiniMax: <tool_calls>\\n{"name": ..., "arguments": {...}} per line\\n</tool_calls>'
    family = Family("<tool_calls>", "</tool_calls>", "lines")
    tags = ("<tool_calls>", "</tool_calls>")
    detection = Detection(rank=262, markers=("<tool_calls>",), closers=("</tool_calls>",))
    example = (
        '<tool_calls>\n'
        '{"name": "search_flights", "arguments": {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}}\n'
        '{"name": "get_weather", "arguments": {"city": "London", "days": 3, "units": "metric"}}\n'
        '</tool_calls>'
    )

    def sniff(self, body: str, at: int) -> bool:
        """``<tool_calls>`` followed by an object is MiniMax's (one per line), or by its ``"name"`` key (its ``{``
        lost); by a list, Jamba's / Hunyuan's."""
        j = skip_ws(body, at + len("<tool_calls>"))
        return body.startswith("{", j) or body.startswith('"name"', j)


@register
class Jamba(TaggedJson):
    name = "jamba"
    description = 'Jamba / Hunyuan: <tool_calls>[{"name": ..., "arguments": {...}}, ...]</tool_calls>'
    family = Family("<tool_calls>", "</tool_calls>", "list")
    tags = ("<tool_calls>", "</tool_calls>")
    detection = Detection(rank=263, markers=("<tool_calls>",), closers=("</tool_calls>",))
    example = (
        '<tool_calls>[{"name": "search_flights", "arguments": {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}}, {"name": "get_weather", "arguments": {"city": "London", "days": 3, "units": "metric"}}]</tool_calls>'
    )


@register
class Nemotron(TaggedJson):
    name = "nemotron"
    description = 'Nemotron: <TOOLCALL>[{"name": ..., "arguments": {...}}, ...]</TOOLCALL>'
    family = Family("<TOOLCALL>", "</TOOLCALL>", "list")
    tags = ("<TOOLCALL>", "</TOOLCALL>")
    detection = Detection(rank=264, markers=("<TOOLCALL>",), closers=("</TOOLCALL>",))
    example = (
        '<TOOLCALL>[{"name": "search_flights", "arguments": {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}}, {"name": "get_weather", "arguments": {"city": "London", "days": 3, "units": "metric"}}]</TOOLCALL>'
    )


@register
class InternLM(TaggedJson):
    name = "internlm"
    description = 'InternLM 2: <|action_start|><|plugin|>\\n{"name": ..., "parameters": {...}}<|action_end|> per call'
    family = Family("<|action_start|><|plugin|>", "<|action_end|>", "object", arg_keys=("parameters", "arguments"))
    tags = ("<|action_start|><|plugin|>", "<|action_end|>")
    detection = Detection(rank=265, markers=("<|action_start|><|plugin|>",), closers=("<|action_end|>",))
    example = (
        '<|action_start|><|plugin|>\n'
        '{"name": "search_flights", "parameters": {"origin": "New York", "destination": "London", "date": "2024-08-15", "max_stops": 1}}<|action_end|>\n'
        '<|action_start|><|plugin|>\n'
        '{"name": "get_weather", "parameters": {"city": "London", "days": 3, "units": "metric"}}<|action_end|>'
    )
