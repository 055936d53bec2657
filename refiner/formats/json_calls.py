"""JSON call objects or lists behind a model family's own tokens: the ``json_calls`` grammar. A family is a row of
the catalog (:mod:`refiner.formats.catalog`): a :class:`Family` and its :class:`JsonSpelling`.

| format | model families | shape (engine parser) |
|---|---|---|
| ``granite`` | IBM Granite 3.x | ``<|tool_call|>[{"name", "arguments"}, ...]`` (``granite_tool_parser.py``; Granite 3.1+ decodes the token as ``<tool_call>``, also read) |
| ``phi4_mini`` | Phi-4-mini | ``functools[{"name", "arguments"}, ...]`` (``phi4mini_tool_parser.py``) |
| ``minimax`` | MiniMax-Text-01 / M1 | ``<tool_calls>`` then one ``{"name", "arguments"}`` per line, ``</tool_calls>`` (``minimax_tool_parser.py``) |
| ``jamba`` | AI21 Jamba 1.5+, Tencent Hunyuan-A13B | ``<tool_calls>[{"name", "arguments"}, ...]</tool_calls>`` (``jamba_tool_parser.py``, ``hunyuan_a13b_tool_parser.py``) |
| ``nemotron`` | NVIDIA Llama-Nemotron | ``<TOOLCALL>[{"name", "arguments"}, ...]</TOOLCALL>`` (``nemotron_json_tool_parser.py``) |
| ``internlm`` | InternLM 2 / 2.5 | ``<|action_start|><|plugin|>\\n{"name", "parameters"}<|action_end|>`` per call (``internlm2_tool_parser.py``) |
| ``apertus`` | Swiss AI Apertus | ``<|tools_prefix|>[{"NAME": {...}}, ...]<|tools_suffix|>``: each call an object whose one key is the name (``apertus_tool_parser.py``) |
| ``command_a`` | Cohere Command A / R7B | ``<|START_ACTION|>[{"tool_call_id": "0", "tool_name", "parameters"}, ...]<|END_ACTION|>`` (llama.cpp's Command R7B handler; vLLM reads it through ``cohere_melody``) |
| ``gigachat3`` | GigaChat 3 | ``function call<|role_sep|>\\n{"name", "arguments"}``, one call a message (``GigaChat3-10B-A1.8B.jinja``; ``gigachat3_tool_parser.py``, which also reads ``<|function_call|>``) |
| ``longcat_json`` | LongCat-Flash-Chat | ``<longcat_tool_call>\\n{"name", "arguments"}\\n</longcat_tool_call>`` per call (``longcat_tool_parser.py``; the GLM layout in the same tags is the XML row ``longcat``) |
| ``inkling`` | Inkling | ``<|content_invoke_tool_json|>{"name", "args"}<|end_message|>`` per call, reasoning in ``<|content_thinking|>`` (vLLM ``parser/inkling.py``) |

A call object is its name plus the arguments under the family's key (rendering writes the first of
``JsonSpelling.arg_keys``; the others are accepted where the published parser accepts them). Text before the tag
(content, reasoning) and after the calls is allowed; a closing tag inside a string value is text (JSON is decoded
before the closing tag is looked for). MiniMax and Jamba/Hunyuan share ``<tool_calls>``: detection reads what follows
the tag (an object starts MiniMax's lines, a list Jamba's: the row's ``follows``).

Families read elsewhere: LongCat's newer layout and K2-Horizon (``<ifm|tool_call>NAME<ifm|arg_key>...``) write
key/value tags (:mod:`refiner.formats.xml_grammar`); PLaMo 3 writes its name and its JSON arguments in tokens of their own
(:mod:`refiner.formats.named_json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import MAX_NOTES, Detection, Lenient, WireFormat
from refiner.formats.family import POLICY, Family
from refiner.formats.jsonfix import open_at_cut
from refiner.formats.lenient import (
    TokenFinder,
    add_call,
    as_items,
    block_values,
    lenient_blocks,
    lenient_json_in_prose,
    written_before_cut,
)
from refiner.formats.strict import decode_at, expect_close, json_blocks, plain_calls, strict_fields
from refiner.formats.tags import Speller, brace_call_lines, respell_json_tags
from refiner.formats.text import dumps, reasoning_offset, skip_ws
from refiner.formats.xmlvalues import Finder

# Blocks read per text by strict parsing of the formats without a closing tag (real answers hold one list, or one
# object a call).
MAX_BLOCKS = 64
MAX_OBJECT_BLOCKS = 1024


@dataclass(frozen=True)
class JsonSpelling:
    """How one family wraps its JSON calls.

    ``open`` / ``close``: the tags around the calls (``close`` None: the JSON value ends them); ``payload``: ``"list"``
    (one JSON list of calls), ``"lines"`` (one call object per line) or ``"object"`` (one call object per block);
    ``arg_keys``: where the arguments are (the first is written); ``alt_opens``: other spellings of ``open``, read;
    ``tight``: the list follows ``open`` with no whitespace (``functools[``); ``name_key``: the key of the name;
    ``keyed``: a call is ``{"NAME": {arguments}}`` (Apertus); ``id_key``: a call id written beside the name, numbered
    from 0 when rendering (Command A's ``tool_call_id``); ``follows``: what the text after ``open`` starts with when it
    is this family's (detection among families sharing ``open``; empty: anything); ``lead`` / ``trail`` /
    ``between``: what rendering writes after ``open``, before ``close`` and between two blocks of the ``"object"``
    payload; ``respell``: tags written wrong are put right before a broken text is read; ``untagged``: a call object
    with no tag around it (a block that lost its tags) is this family's, unless its arguments are under
    ``"parameters"`` alone (Llama 3's JSON call).

    The fields marked :data:`~refiner.formats.family.POLICY` (``alt_opens``, ``tight``, ``follows``, ``respell``, ``untagged``) are how the
    row reads, not what the family writes: no chat template says them, and a row derived from one leaves them at
    their defaults."""

    open: str
    close: str | None
    payload: str
    arg_keys: tuple[str, ...] = ("arguments",)
    alt_opens: tuple[str, ...] = field(default=(), metadata=POLICY)
    tight: bool = field(default=False, metadata=POLICY)
    name_key: str = "name"
    keyed: bool = False
    id_key: str | None = None
    follows: tuple[str, ...] = field(default=(), metadata=POLICY)
    lead: str = "\n"
    between: str = "\n"
    trail: str = ""
    respell: bool = field(default=True, metadata=POLICY)
    untagged: bool = field(default=False, metadata=POLICY)


class JsonCalls(WireFormat):
    """The grammar; each of its rows in the catalog is a subclass made by :func:`~refiner.formats.family.make_row`."""

    spelling: JsonSpelling
    row: Family

    @classmethod
    def tags_for(cls, sp: JsonSpelling) -> tuple[str, ...]:
        return (sp.open,) if sp.close is None else (sp.open, sp.close)

    @classmethod
    def detection_for(cls, sp: JsonSpelling, rank: int) -> Detection:
        marker = sp.open + "[" if sp.tight else sp.open.rstrip()
        return Detection(rank=rank, markers=(marker,), closers=() if sp.close is None else (sp.close,),
                         also_read=tuple(t.rstrip() for t in sp.alt_opens))

    # ---- strict ------------------------------------------------------------------------------------------------

    def _call(self, obj: Any, pos: int, index: int) -> ToolCall:
        sp = self.spelling
        if sp.keyed:
            if type(obj) is not dict or len(obj) != 1:
                raise self.error(f"call #{index} must be an object with one key, the tool name", pos)
            (name, args), = obj.items()
            if not name.strip() or type(args) is not dict:
                raise self.error(f"call #{index}: the arguments of {name[:60]!r} must be a JSON object", pos)
            return ToolCall.trusted(name, args)
        key = next((k for k in sp.arg_keys if isinstance(obj, dict) and k in obj), sp.arg_keys[0])
        extra = (sp.id_key,) if sp.id_key else ()
        name, args, _ = strict_fields(self, obj, pos, what="call", index=index, name_key=sp.name_key, args_key=key,
                                      extra_keys=extra)
        return ToolCall.trusted(name, args)

    def _calls(self, values: list[tuple[Any, int]]) -> list[ToolCall]:
        sp = self.spelling
        if not sp.keyed and sp.id_key is None:
            fast = plain_calls((v for v, _ in values), name_key=sp.name_key, args_key=sp.arg_keys[0])
            if fast is not None:
                return fast
        return [self._call(v, p, i) for i, (v, p) in enumerate(values)]

    def _open_at(self, text: str, start: int, finder: Finder | None = None) -> tuple[int, str]:
        """The first open tag (any spelling) at or after ``start``: ``(position, tag)``, position -1 if none
        (``finder``: a reader that asks for ascending positions searches for a spelling the text lacks once)."""
        sp = self.spelling
        best, tag = -1, sp.open
        for t in (sp.open, *sp.alt_opens):
            i = text.find(t, start) if finder is None else finder.next(t, start)
            if i >= 0 and (best < 0 or i < best):
                best, tag = i, t
        return best, tag

    def parse_strict(self, text: str) -> list[ToolCall]:
        sp = self.spelling
        if sp.close is None:
            return self._calls(self._unclosed_values(text))
        if sp.payload == "lines":
            return self._calls(self._lines(text))
        values = list(json_blocks(self, text, sp.open, sp.close))
        if sp.payload == "object":
            for v, p in values:
                if not isinstance(v, dict):
                    raise self.error(f"{sp.open} must hold one JSON call object, got {type(v).__name__}", p)
            return self._calls(values)
        items = []
        for v, p in values:
            if not isinstance(v, list):
                raise self.error(f"{sp.open} must hold a JSON list of calls, got {type(v).__name__}", p)
            items.extend((item, p) for item in v)
        return self._calls(items)

    def _unclosed_values(self, text: str) -> list[tuple[Any, int]]:
        """The calls of the JSON value after each open tag (formats whose value ends the calls): a list's items, or
        one object."""
        sp = self.spelling
        start = reasoning_offset(text)
        finder = Finder(text)
        i, tag = self._open_at(text, start, finder)
        if i < 0:
            raise self.error(f"missing {sp.open}", start)
        opener = "{" if sp.payload == "object" else "["
        what = "a JSON call object" if sp.payload == "object" else "a JSON list of calls"
        items: list[tuple[Any, int]] = []
        cap = MAX_OBJECT_BLOCKS if opener == "{" else MAX_BLOCKS
        for _ in range(cap):
            pos = i + len(tag)
            if not sp.tight:
                pos = skip_ws(text, pos)
            if not text.startswith(opener, pos):
                raise self.error(f"{tag.strip()} must be followed by {what}", pos)
            value, end = decode_at(self, text, pos)
            items.extend((item, pos) for item in ([value] if opener == "{" else value))
            i, tag = self._open_at(text, end, finder)
            if i < 0:
                return items
        raise self.error(f"more than {cap} {sp.open.strip()} blocks", i)

    def _lines(self, text: str) -> list[tuple[Any, int]]:
        """MiniMax's blocks: call objects separated by line breaks between the tags."""
        sp = self.spelling
        start = reasoning_offset(text)
        i = text.find(sp.open, start)
        if i < 0:
            raise self.error(f"no {sp.open}...{sp.close} block", start)
        values: list[tuple[Any, int]] = []
        while i >= 0:
            pos = skip_ws(text, i + len(sp.open))
            while not text.startswith(sp.close, pos):
                if pos >= len(text):
                    raise self.error(f"{sp.open} without {sp.close}", i)
                if not text.startswith("{", pos):
                    expect_close(self, text, pos, sp.close)  # raises: text that is not a call object
                value, end = decode_at(self, text, pos)
                values.append((value, pos))
                pos = skip_ws(text, end)
                if not text.startswith(sp.close, pos) and "\n" not in text[end:pos]:
                    raise self.error("one call object per line", pos)
            i = text.find(sp.open, pos + len(sp.close))
        return values

    # ---- lenient -----------------------------------------------------------------------------------------------

    def _add(self, out: Lenient, item: Any) -> None:
        sp = self.spelling
        if sp.keyed and type(item) is dict and len(item) == 1:
            (name, args), = item.items()
            if type(args) is dict and name.strip():
                out.calls.append(ToolCall(str(name), {str(k): v for k, v in args.items()}))
                cut, outer = written_before_cut(args), open_at_cut(item)
                if cut is not None:  # the text stops inside the call (its arguments left open)
                    out.mark_cut(len(out.calls) - 1, name, *cut)
                elif outer is not None:
                    out.mark_cut(len(out.calls) - 1, name, args, outer[1].clean)
                return
        add_call(out, item)

    def recover(self, text: str, out: Lenient) -> None:
        sp = self.spelling
        if sp.close is not None:
            fixed = respell_json_tags(text, reasoning_offset(text), self._speller(), sp.open, sp.close) \
                if sp.respell else None
            if fixed is not None:  # tags written wrong
                text, notes = fixed
                for note in notes[:MAX_NOTES]:
                    out.note("missing_tag", note)
            for chunk in lenient_blocks(text, sp.open, sp.close, out.problems):
                items = block_values(brace_call_lines(chunk) if sp.payload == "lines" else chunk)
                if not items:
                    out.note("unreadable", f"unrecoverable block: {chunk.strip()[:80]!r}")
                for item in items:
                    self._add(out, item)
            return
        body = text[reasoning_offset(text) :]
        find = TokenFinder(body, (sp.open, *sp.alt_opens)).first  # (an open tag inside a JSON string is text)
        chunks: list[str] = []
        i, tag = find(0)
        while tag is not None and len(chunks) < (MAX_OBJECT_BLOCKS if sp.payload == "object" else MAX_BLOCKS):
            j, nxt = find(i + len(tag))
            chunks.append(body[i + len(tag) : j])
            i, tag = j, nxt
        if not chunks:
            out.note("missing_tag", f"missing {sp.open.strip()}")
            chunks = [body]
        for chunk in chunks:
            value = lenient_json_in_prose(chunk)
            if sp.payload == "list" and not isinstance(value, list):
                out.note("not_a_list", "calls are not a JSON list")
            for item in as_items(value):
                self._add(out, item)

    def _speller(self) -> Speller:
        speller = self.__dict__.get("_tag_speller")
        if speller is None:
            sp = self.spelling
            speller = self.__dict__["_tag_speller"] = Speller((sp.open, sp.close or ""))
        return speller

    def claims_value(self, value: Any) -> bool:
        sp = self.spelling
        return sp.untagged and isinstance(value, dict) and sp.name_key in value and (
            sp.arg_keys[0] in value or "parameters" not in value)

    def sniff(self, body: str, at: int) -> bool:
        """Among the families sharing this one's opening tag: whether what follows the tag is this one's."""
        follows = self.spelling.follows
        return not follows or body.startswith(follows, skip_ws(body, at + len(self.spelling.open)))

    # ---- render ------------------------------------------------------------------------------------------------

    def render(self, calls: Sequence[ToolCall]) -> str:
        sp = self.spelling
        objs = [self._obj(c, i) for i, c in enumerate(calls)]
        if sp.payload == "lines":
            return sp.open + "\n" + "".join(dumps(o) + "\n" for o in objs) + sp.close
        if sp.payload == "object":
            return sp.between.join(f"{sp.open}{sp.lead}{dumps(o)}{sp.trail}{sp.close or ''}" for o in objs)
        return f"{sp.open}{dumps(objs)}{sp.close or ''}"

    def _obj(self, c: ToolCall, i: int) -> dict[str, Any]:
        sp = self.spelling
        if sp.keyed:
            return {c.name: dict(c.arguments)}
        head = {sp.id_key: str(i)} if sp.id_key else {}
        return {**head, sp.name_key: c.name, sp.arg_keys[0]: dict(c.arguments)}
