"""The ``json_calls`` grammar: JSON call objects or lists behind a model family's own tokens (its rows, a
:class:`Family` and a :class:`JsonSpelling` each, are in :mod:`refiner.formats.catalog`). A call object is its name plus
the arguments under the family's key. Text may come before the tag and after the calls; a closing tag inside a string
value is text. Rows sharing an opening tag are told apart by ``follows``. The ``"joined"`` payload (Llama 3) is call
objects joined by a separator, the tag optional: a further call object in the prose around them, whole or broken, makes
the text strictly invalid (read leniently)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import DETECT_CHARS, Detection, FormatError, Lenient, WireFormat, markup_name
from refiner.formats.brace_kv import write_quoted
from refiner.formats.family import POLICY, Family
from refiner.formats.jsonfix import budget_spent, lenient_json, open_at_cut
from refiner.formats.lenient import (
    TokenFinder,
    add_call,
    as_items,
    block_values,
    lenient_blocks,
    lenient_json_in_prose,
    tokens_outside_strings,
    written_before_cut,
)
from refiner.formats.pythonic import render_call, strict_call_list
from refiner.formats.pythonic_scan import matching_paren
from refiner.formats.reasoning import is_markup
from refiner.formats.strict import decode_at, expect_str, expect_str_list, json_blocks, json_head, strict_fields
from refiner.formats.tags import Speller, brace_call_lines, respell_json_tags, respelt
from refiner.formats.text import dumps, next_bracket, reasoning_offset, skip_ws
from refiner.formats.xmlvalues import Finder

MAX_BLOCKS = 64  # list blocks read per text by strict parsing of the rows without a closing tag
MAX_OBJECT_BLOCKS = 1024  # object blocks, likewise
MAX_CANDIDATES = 64  # the "joined" payload: "{"/"[" in the prose around the calls decoded strictly
MAX_OBJECTS = 256  # the "joined" payload: "{" read by recovery
_BUILTIN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\.call\(")
_WS = frozenset(" \t\r\n")


@dataclass(frozen=True)
class JsonSpelling:
    """How one family wraps its JSON calls. ``open`` / ``close``: the tags around the calls (``close`` None: the JSON
    value ends them); ``payload``: ``"list"`` (one JSON list), ``"lines"`` (a call object per line), ``"objects"`` (call
    objects one after another, written a line each), ``"object"`` (one per block) or ``"joined"`` (joined by ``between``
    stripped, ``open`` optional and not written); ``arg_keys``: where the arguments are (the first written);
    ``type_key``: a key whose value must be ``"function"``; ``builtins``: tools written ``NAME.call(key=value, ...)``
    after ``open`` (read for any name); ``alt_opens``: other spellings of ``open``; ``tight``: no whitespace after
    ``open``; ``gap``: written between ``open`` and a list; ``once``: ``open`` is written once (a second one is invalid
    strictly and noise in recovery); ``name_key``; ``keyed``: a call is ``{"NAME": {arguments}}``; ``flat``: a call's
    arguments are the keys of its object beside ``name_key``; ``text_names``: names whose call is a text answer, no call
    (read and dropped); ``id_key``: a call id numbered from 0; ``dropped``: keys a call may hold a string under, read
    and not written; ``follows``: what follows ``open`` in this row's texts (empty: anything); ``lead`` / ``trail`` /
    ``between``: written after ``open``, before ``close`` and between blocks or calls; ``respell``: tags written wrong
    are put right in recovery; ``untagged``: an untagged call object is this row's unless its arguments are under
    ``"parameters"`` alone; ``section``: the tags written around all the blocks (a marker, read as text around them, not
    required); ``in_prose``: recovery reads a block's first JSON value, the prose around it skipped, as rows without
    ``close`` do; ``outputs_key``: a call's output labels (a list of strings; the row's calls are then order sensitive).
    :data:`~refiner.formats.family.POLICY` fields are how the row reads, not what the family writes; ``stop``: recovery
    ends a block left open there; ``by_args``: among rows sharing ``open``, a block is this row's when its calls hold
    their arguments under ``arg_keys[0]``, not ``"arguments"`` (:meth:`JsonCalls.sniff`); ``marker``: what detection
    looks for in place of ``open`` (for an ``open`` other texts hold too); ``quote``: a token written around strings in
    place of ``"`` (both are read; the arguments' strings are written with it; read by :class:`QuotedJsonCalls`)."""

    open: str
    close: str | None
    payload: str
    arg_keys: tuple[str, ...] = ("arguments",)
    alt_opens: tuple[str, ...] = field(default=(), metadata=POLICY)
    tight: bool = field(default=False, metadata=POLICY)
    gap: str = ""
    once: bool = field(default=False, metadata=POLICY)
    name_key: str = "name"
    keyed: bool = False
    flat: bool = False
    text_names: tuple[str, ...] = ()
    id_key: str | None = None
    dropped: tuple[str, ...] = ()
    follows: tuple[str, ...] = field(default=(), metadata=POLICY)
    lead: str = "\n"
    between: str = "\n"
    trail: str = ""
    respell: bool = field(default=True, metadata=POLICY)
    untagged: bool = field(default=False, metadata=POLICY)
    type_key: str | None = None
    builtins: tuple[str, ...] = ()
    section: tuple[str, str] | None = None
    in_prose: bool = field(default=False, metadata=POLICY)
    outputs_key: str | None = None
    stop: str | None = field(default=None, metadata=POLICY)
    by_args: bool = field(default=False, metadata=POLICY)
    marker: str | None = field(default=None, metadata=POLICY)
    quote: str | None = None


def _blanks_from(text: str, end: int, low: int) -> int:
    """Where the run of JSON whitespace that ends at ``end`` starts, ``low`` at the lowest."""
    while end > low and text[end - 1] in _WS:
        end -= 1
    return end


def _earliest(text: str, key: str) -> int:
    """Where ``key`` first occurs in ``text`` quoted either way, or -1."""
    i, j = text.find(f'"{key}"'), text.find(f"'{key}'")
    return j if i < 0 or 0 <= j < i else i


class JsonCalls(WireFormat):
    """The grammar; each of its rows in the catalog is a subclass made by :func:`~refiner.formats.family.make_row`."""

    spelling: JsonSpelling
    row: Family

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "spelling" in cls.__dict__ and cls.spelling.outputs_key:
            cls.outputs, cls.order_sensitive = "list", True

    @classmethod
    def tags_for(cls, sp: JsonSpelling) -> tuple[str, ...]:
        tags = (sp.open,) if sp.close is None else (sp.open, sp.close)
        return tags if sp.section is None else (sp.section[0], *tags, sp.section[1])

    @classmethod
    def detection_for(cls, sp: JsonSpelling, rank: int) -> Detection:
        marker = sp.marker or (sp.open + "[" if sp.tight else sp.open.rstrip())
        markers = (marker,) if sp.section is None else (sp.section[0], marker)
        # a close that is no markup (a code fence) closes any fenced text: no sign of this row
        closers = (sp.close,) if sp.close is not None and is_markup(sp.close) else ()
        return Detection(rank=rank, markers=markers, closers=closers,
                         bare=sp.payload == "joined", also_read=tuple(t.rstrip() for t in sp.alt_opens))

    # ---- strict ------------------------------------------------------------------------------------------------

    def _call(self, obj: Any, pos: int, index: int) -> ToolCall:
        sp = self.spelling
        if sp.keyed:
            if type(obj) is not dict or len(obj) != 1:
                raise self.error(f"call #{index} must be an object with one key, the tool name", pos)
            (name, args), = obj.items()
            if not name.strip() or type(args) is not dict:
                raise self.error(f"call #{index}: the arguments of {name[:60]!r} must be a JSON object", pos)
            return ToolCall(name, args)
        if sp.flat and type(obj) is dict:
            obj = {sp.name_key: obj.get(sp.name_key), sp.arg_keys[0]: {k: v for k, v in obj.items() if k != sp.name_key}}
        key = next((k for k in sp.arg_keys if isinstance(obj, dict) and k in obj), sp.arg_keys[0])
        extra = tuple(k for k in (sp.id_key, sp.type_key, sp.outputs_key, *sp.dropped) if k)
        name, args, extras = strict_fields(self, obj, pos, what="call", index=index, name_key=sp.name_key,
                                           args_key=key, extra_keys=extra)
        for k in sp.dropped:
            if k in extras:
                expect_str(self, extras[k], f"{k!r} of call #{index}", pos)
        if sp.payload == "joined" and key not in obj:
            raise self.error(f"call #{index} has no {key!r}", pos)
        if sp.type_key and extras.get(sp.type_key, "function") != "function":
            raise self.error(f"{sp.type_key!r} of call #{index} must be 'function'", pos)
        if sp.outputs_key:
            labels = expect_str_list(self, extras.get(sp.outputs_key, []), f"{sp.outputs_key!r} of call #{index}", pos)
            return ToolCall(name, args, labels)
        return ToolCall(name, args)

    def parse_strict(self, text: str) -> list[ToolCall]:
        sp = self.spelling
        if sp.payload == "joined":
            return self._joined(text)
        if sp.payload in ("lines", "objects"):  # (rows with a closing tag)
            opener = self._opener(text)  # the spelling written
            values = list(json_blocks(self, text, opener, sp.close, many=True))
            for _, p in values if sp.payload == "lines" else ():
                j = _blanks_from(text, p, 0)
                if "\n" not in text[j:p] and not text.endswith(opener, 0, j):
                    raise self.error("one call object per line", p)
        else:
            kind, what = (dict, "one JSON call object") if sp.payload == "object" else (list, "a JSON list of calls")
            blocks = json_blocks(self, text, self._opener(text), sp.close) if sp.close else self._unclosed_values(text)
            values = []
            for v, p in list(blocks):  # (every block decoded first)
                if not isinstance(v, kind):
                    raise self.error(f"{sp.open} must hold {what}, got {type(v).__name__}", p)
                values.extend([(v, p)] if kind is dict else ((item, p) for item in v))
        calls = [self._call(v, p, i) for i, (v, p) in enumerate(values)]
        return [c for c in calls if c.name not in sp.text_names] if sp.text_names else calls

    def _opener(self, text: str) -> str:
        """The spelling of the open tag written first in the answer (``open`` when no other is written)."""
        sp = self.spelling
        return sp.alt_opens and Finder(text).first((sp.open, *sp.alt_opens), reasoning_offset(text))[1] or sp.open

    def _unclosed_values(self, text: str) -> Iterator[tuple[Any, int]]:
        """The JSON value after each open tag and where it starts (rows whose JSON value ends the calls)."""
        sp = self.spelling
        start = reasoning_offset(text)
        first, opens = Finder(text).first, (sp.open, *sp.alt_opens)
        i, tag = first(opens, start)
        if tag is None:
            raise self.error(f"missing {sp.open}", start)
        opener, what = ("{", "a JSON call object") if sp.payload == "object" else ("[", "a JSON list of calls")
        cap = MAX_OBJECT_BLOCKS if opener == "{" else MAX_BLOCKS
        for _ in range(cap):
            pos = i + len(tag) if sp.tight else skip_ws(text, i + len(tag))
            if not text.startswith(opener, pos):
                raise self.error(f"{tag.strip()} must be followed by {what}", pos)
            value, end = decode_at(self, text, pos)
            if sp.trail and not text.startswith(sp.trail, skip_ws(text, end)):  # the closer the row writes after it
                raise self.error(f"{what} must be followed by {sp.trail!r}", end)
            yield value, pos
            i, tag = first(opens, end)
            if tag is None:
                return
            if sp.once:
                raise self.error(f"a second {sp.open}: all calls are one list after the first", i)
        raise self.error(f"more than {cap} {sp.open.strip()} blocks", i)

    def _joined(self, text: str) -> list[ToolCall]:
        """The ``"joined"`` payload, read strictly (the module docstring)."""
        sp, sep = self.spelling, self.spelling.between.strip()
        start = reasoning_offset(text)
        tag = text.find(sp.open, start)
        brace = text.find("{", start)
        if tag >= 0 and (brace < 0 or tag < brace):  # (a tag quoted inside a value is text)
            self._call_object(text, start, tag, prose=True)
            pos = skip_ws(text, tag + len(sp.open))
            if sp.builtins and _BUILTIN.match(text, pos):
                call, end = self._builtin_call(text, pos, strict=True)
                self._call_object(text, end, len(text), prose=True)
                return [call]
            if not text.startswith("{", pos):
                raise self.error(f"{sp.open} must be followed by a JSON call object", pos)
        else:
            pos = self._call_object(text, start, len(text), prose=False)
            if pos < 0:
                raise self.error(f'no JSON call object {{"{sp.name_key}": ..., "{sp.arg_keys[0]}": {{...}}}} found',
                                 start)
        calls: list[ToolCall] = []
        while True:
            value, end = decode_at(self, text, pos)
            calls.append(self._call(value, pos, len(calls)))
            nxt = skip_ws(text, end)
            if not text.startswith(sep, nxt):
                break
            pos = skip_ws(text, nxt + len(sep))
        self._call_object(text, end, len(text), prose=True)
        return calls

    def _builtin_call(self, text: str, pos: int, *, strict: bool) -> tuple[ToolCall, int]:
        """The built-in tool call ``NAME.call(...)`` at ``pos`` and where it ends; raises when it is not one."""
        m = _BUILTIN.match(text, pos)
        close = matching_paren(text, m.end() - 1, lenient_quotes=not strict)
        if close >= len(text):
            raise self.error(f"{m.group(1)}.call( is not closed", pos)
        [call] = strict_call_list(self, "[" + text[pos : close + 1] + "]", pos - 1)
        return ToolCall(m.group(1), call.arguments), close + 1

    def _call_object(self, text: str, a: int, b: int, *, prose: bool) -> int:
        """Where the first JSON object with a name key in ``text[a:b]`` starts (-1: none); raises at a name key in
        text that does not decode before it; with ``prose`` (the text around the calls), raises at any such object and
        at a name key anywhere in ``text[a:b]`` that does not decode."""
        pos = last = a
        for _ in range(MAX_CANDIDATES):
            pos = next_bracket(text, pos)
            if pos < 0 or pos >= b:
                break
            if (head := json_head(text, pos)) is None:
                pos += 1
                continue
            value, end = head
            self._check_gap(text, last, pos)
            if isinstance(value, dict) and self.spelling.name_key in value:
                if prose:
                    raise self.error("a call object that is not joined to the others by "
                                     f"{self.spelling.between.strip()!r}", pos)
                return pos  # a call, or a broken one that _call explains
            pos = last = end
        self._check_gap(text, last, b if prose or pos < 0 else pos)
        return -1

    def _check_gap(self, text: str, a: int, b: int) -> None:
        for key in map(dumps, (self.spelling.name_key, *self.spelling.arg_keys)):  # (one may be the broken one)
            if (i := text.find(key, a, b)) >= 0:
                raise self.error(f"a broken call object (a {key} key in text that is not JSON)", i)

    # ---- lenient -----------------------------------------------------------------------------------------------

    def _add(self, out: Lenient, item: Any) -> None:
        sp = self.spelling
        if sp.keyed and type(item) is dict and len(item) == 1:
            (name, args), = item.items()
            if type(args) is dict and name.strip() and not markup_name(name):
                out.calls.append(ToolCall(str(name), {str(k): v for k, v in args.items()}))
                cut, outer = written_before_cut(args), open_at_cut(item)
                if cut is not None:  # the text stops inside the call (its arguments left open)
                    out.mark_cut(len(out.calls) - 1, name, *cut)
                elif outer is not None:
                    out.mark_cut(len(out.calls) - 1, name, args, outer[1].clean)
                return
        if sp.flat and type(item) is dict and len(item) == 1 and type(inner := next(iter(item.values()))) is dict:
            item = inner if sp.name_key in inner else item  # the call under its open key written wrong or alone
        if sp.flat and type(item) is dict and isinstance(name := item.get(sp.name_key), str) and name.strip():
            if name not in sp.text_names:
                out.calls.append(ToolCall(name, {str(k): v for k, v in item.items() if k != sp.name_key}))
                if (cut := written_before_cut(item)) is not None:  # the text stops inside the call
                    out.mark_cut(len(out.calls) - 1, cut[0].pop(sp.name_key, None), *cut)
            return
        labels = item.get(sp.outputs_key, []) if sp.outputs_key and isinstance(item, dict) else []
        if not isinstance(labels, list):
            out.note("bad_outputs", f"{sp.outputs_key!r} is not a list: {str(labels)[:80]!r}")
            labels = []
        add_call(out, item, outputs=tuple(str(r) for r in labels if isinstance(r, (str, int))))

    def recover(self, text: str, out: Lenient) -> None:
        sp = self.spelling
        if sp.close is not None:
            opener = self._opener(text)
            if sp.respell:  # tags written wrong
                text = respelt(out, text, respell_json_tags(text, reasoning_offset(text), self._speller, opener, sp.close))
            for chunk in lenient_blocks(text, opener, sp.close, out.problems, stop=sp.stop):
                if sp.in_prose:
                    self._recover_value(chunk, out)
                    continue
                items = block_values(brace_call_lines(chunk) if sp.payload in ("lines", "objects") else chunk)
                if not items:
                    out.note("unreadable", f"unrecoverable block: {chunk.strip()[:80]!r}")
                for item in items:
                    self._add(out, item)
            return
        body = text[reasoning_offset(text) :]
        if sp.payload == "joined":
            self._recover_joined(body, out)
            return
        if sp.once:
            self._recover_once(body, out)
            return
        find = TokenFinder(body, (sp.open, *sp.alt_opens)).first  # (an open tag inside a JSON string is text)
        i, tag = find(0)
        if tag is None:
            out.note("missing_tag", f"missing {sp.open.strip()}")
            self._recover_value(body, out)
        for _ in range(MAX_OBJECT_BLOCKS if sp.payload == "object" else MAX_BLOCKS):
            if tag is None:
                break
            j, nxt = find(i + len(tag))
            self._recover_value(body[i + len(tag) : j], out)
            i, tag = j, nxt

    def _recover_once(self, body: str, out: Lenient) -> None:
        """The calls of the one value after the open tag, further open tags outside its strings dropped."""
        tag = self.spelling.open
        i = body.find(tag)
        if i < 0:
            out.note("missing_tag", f"missing {tag}")
        else:
            body = body[i + len(tag) :]
            cuts = tokens_outside_strings(body, 0, tag)
            ends = [0] + [j + len(tag) for j in cuts]
            body = " ".join(body[a:b] for a, b in zip(ends, [*cuts, len(body)]))
        self._recover_value(body, out)

    def _recover_value(self, chunk: str, out: Lenient) -> None:
        """The calls of the first JSON value in ``chunk`` (prose around it skipped)."""
        value = lenient_json_in_prose(chunk)
        if self.spelling.payload == "list" and not isinstance(value, list):
            out.note("not_a_list", "calls are not a JSON list")
        for item in as_items(value):
            self._add(out, item)

    def _recover_joined(self, body: str, out: Lenient) -> None:
        """Every JSON object with a name or arguments key in the answer ``body`` is a call (a broken one repaired up to
        the next call); a built-in call after the tag is read leniently."""
        sp = self.spelling
        tag, brace = body.find(sp.open), body.find("{")
        if tag >= 0 and (brace < 0 or tag < brace):
            body = body[tag + len(sp.open) :]
            at = skip_ws(body, 0)
            if sp.builtins and _BUILTIN.match(body, at):
                try:
                    out.calls.append(self._builtin_call(body, at, strict=False)[0])
                except FormatError as e:
                    out.note("unreadable", f"a built-in tool call that could not be read: {e.message}")
                    if matching_paren(body, _BUILTIN.match(body, at).end() - 1, lenient_quotes=True) >= len(body):
                        out.mark_cut(None)
                return
        pos, found = 0, 0
        for n in range(MAX_OBJECTS + 1):
            pos = body.find("{", pos)
            if pos < 0:
                break
            if n == MAX_OBJECTS or budget_spent():
                out.note("gave_up", f"gave up after {n} objects")
                break
            if (head := json_head(body, pos)) is not None:
                value, end = head
            else:  # repaired up to where the next call starts, or to the end
                nxt = self._next_call_start(body, pos)  # (the separator before it is dropped; at the end of the
                end = len(body) if nxt < 0 else nxt  # text it may be inside a string the text was cut in)
                seg = body[pos:end].rstrip()
                value = lenient_json(seg if nxt < 0 else seg.removesuffix(sp.between.strip()))
            if isinstance(value, dict) and (sp.name_key in value or any(k in value for k in sp.arg_keys)):
                found += 1
                add_call(out, value)
            pos = max(end, pos + 1)
        if not found:
            out.note("unreadable", "no JSON call object found")

    def _next_call_start(self, body: str, pos: int) -> int:
        """The ``{`` after ``pos`` that starts a further call (after the separator or a line break, then the name
        key), among the next :data:`MAX_CANDIDATES` name keys; else -1."""
        key, sep = dumps(self.spelling.name_key), self.spelling.between.strip()
        i = pos
        for _ in range(MAX_CANDIDATES):
            i = body.find(key, i + 1)
            if i < 0:
                return -1
            j = _blanks_from(body, i, pos + 1) - 1
            if j > pos and body[j] == "{":
                k = _blanks_from(body, j, pos + 1)
                if "\n" in body[k:j] or body.startswith(sep, k - len(sep)):
                    return j
        return -1

    def region_start(self, body: str, at: int) -> int:
        """A row whose marker is inside its calls: the open tag before the marker at ``at``, else the brace of the
        object the marker is in (its open tag written wrong)."""
        sp = self.spelling
        j = body.rfind(sp.open, 0, at) if sp.marker else -1
        j = body.rfind("{", 0, at) if sp.marker and j < 0 else j
        return at if j < 0 else j

    @cached_property
    def _speller(self) -> Speller:
        return Speller((self.spelling.open, self.spelling.close or ""))

    def claims_value(self, value: Any) -> bool:
        sp = self.spelling
        if sp.outputs_key:  # (its name key is its own)
            items = value if isinstance(value, list) else [value]
            return any(isinstance(x, dict) and sp.name_key in x for x in items)
        if not isinstance(value, dict) or sp.name_key not in value:
            return False
        if sp.payload == "joined":  # (an untagged row: its call objects with their arguments under its own key)
            return sp.arg_keys[0] in value and not any(k in value for k in sp.arg_keys[1:])
        return sp.untagged and (sp.arg_keys[0] in value or "parameters" not in value)

    def sniff(self, body: str, at: int) -> bool:
        """Among the families sharing this one's opening tag: whether what follows the tag is this one's."""
        sp = self.spelling
        if sp.by_args:
            return self._by_args(body, at + len(sp.open))
        if sp.section is not None and body.startswith(sp.section[0], at):
            at = skip_ws(body, at + len(sp.section[0]))
            if not body.startswith(sp.open, at):
                return False
        return not sp.follows or body.startswith(sp.follows, skip_ws(body, at + len(sp.open)))

    def _by_args(self, body: str, start: int) -> bool:
        """A block whose first object holds ``arg_keys[0]`` or ``"arguments"``, not both, is this row's when it is
        ``arg_keys[0]``; undecoded: the key written first; with neither, several objects one per line."""
        key, end = self.spelling.arg_keys[0], body.find(self.spelling.close, start)
        block = body[start : start + DETECT_CHARS if end < 0 else min(end, start + DETECT_CHARS)]
        p = _earliest(block, key)
        if p >= 0 or "\\" in block:  # (else the key is in no object: not written, nor spelt with an escape)
            first = (json_head(block, skip_ws(block, 0)) or (None,))[0]
            if isinstance(first, dict) and (key in first) != ("arguments" in first):
                return key in first
        a = _earliest(block, "arguments")
        if p >= 0 or a >= 0:
            return p >= 0 and (a < 0 or p < a)
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()] if block.lstrip()[:1] == "{" else []
        return len(lines) > 1 and all(ln.startswith("{") for ln in lines)

    def render(self, calls: Sequence[ToolCall]) -> str:
        sp = self.spelling
        objs = [self._obj(c, i) for i, c in enumerate(calls)]
        if sp.payload in ("lines", "objects"):
            return sp.open + "\n" + "".join(dumps(o) + "\n" for o in objs) + sp.close
        if sp.payload == "object":
            blocks = sp.between.join(f"{sp.open}{sp.lead}{self._json(o)}{sp.trail}{sp.close or ''}" for o in objs)
            return blocks if sp.section is None else f"{sp.section[0]}{sp.between}{blocks}{sp.between}{sp.section[1]}"
        if sp.payload == "joined":
            if len(calls) == 1 and calls[0].name in sp.builtins:
                return sp.open + render_call(calls[0].name + ".call", dict(calls[0].arguments))
            return sp.between.join(dumps(o) for o in objs)
        return f"{sp.open}{sp.gap}{dumps(objs)}{sp.close or ''}"

    def _json(self, obj: dict[str, Any]) -> str:
        """A call object as the row writes it."""
        return dumps(obj)

    def _obj(self, c: ToolCall, i: int) -> dict[str, Any]:
        sp = self.spelling
        if sp.keyed:
            return {c.name: dict(c.arguments)}
        if sp.flat:
            return {sp.name_key: c.name, **c.arguments}
        head = {sp.id_key: str(i)} if sp.id_key else {}
        tail = {sp.outputs_key: list(c.outputs)} if sp.outputs_key else {}
        return {**head, sp.name_key: c.name, sp.arg_keys[0]: dict(c.arguments), **tail}


class QuotedJsonCalls(JsonCalls):
    """Rows whose strings may be written between two ``quote`` tokens, each read as the JSON string it stands for."""

    def _requoted(self, text: str) -> str:
        """``text``, each string between ``quote`` tokens as a JSON string (one left open: the rest after a ``"``)."""
        parts = str.split(text, self.spelling.quote)
        last = len(parts) - 1
        return "".join(p if i % 2 == 0 else '"' + dumps(p)[1:-1] if i == last else dumps(p) for i, p in enumerate(parts))

    def parse_strict(self, text: str) -> list[ToolCall]:
        return super().parse_strict(self._requoted(text))

    def parse_lenient(self, text: str, **kwargs: Any) -> Lenient:
        """Also reads the quote token with ``'`` or nothing for its ``"``; a text cut inside one stops before it."""
        q = self.spelling.quote
        if isinstance(text, str):
            for wrong in {q.replace('"', "'"), q.replace('"', "")} - {q}:
                text = str.replace(text, wrong, q)
            part = next((k for k in range(len(q) - 1, 0, -1) if text.endswith(q[:k])), 0)
            text = self._requoted(text[: len(text) - part])
        return super().parse_lenient(text, **kwargs)

    def _json(self, obj: dict[str, Any]) -> str:
        """A call object with the strings in its arguments written between two ``quote`` tokens."""
        q = self.spelling.quote
        try:
            return "{" + ", ".join(f"{dumps(k)}: {dumps(v) if isinstance(v, str) else write_quoted(v, q, q, dumps, True)}"
                                   for k, v in obj.items()) + "}"
        except ValueError as e:
            raise self.render_error(str(e)) from None
