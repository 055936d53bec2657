"""The generic reader and writer of tool calls built from a derived :class:`~refiner.formats.derive.record.Record`
(:func:`record_format`). A literal is matched by its text without surrounding blanks (its *core*), after any blanks::

    answer    := prose* [SECTION_START] call (CALL_SEP? call)* [SECTION_END] prose*
    call      := OPENER NAME NAME_SUFFIX [ID ID_SUFFIX] arguments CALL_END     (json_args, pairs)
               | OPENER object CALL_END                                       (json_object; json_list: one list)
    object    := {NAME_KEY: NAME, ARGS_KEY: {...}} | {WRAPPER: {...}, ...}
    arguments := {...} | (KEY_PREFIX KEY KEY_SUFFIX VALUE VALUE_SUFFIX ARG_SEP?)*

A value is JSON, one with bare keys and strings between quote tokens (:func:`read_quoted`), or raw text up to its
terminator (:func:`~refiner.formats.xmlvalues.read_value`, settled by the specs in :meth:`RecordFormat.retype`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from refiner.calls import ToolCall
from refiner.formats import base
from refiner.formats.brace_kv import write_quoted
from refiner.formats.family import EXAMPLE_CALLS
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS
from refiner.formats.reasoning import skip_blanks
from refiner.formats.strict import JSON_DECODER
from refiner.formats.text import common_prefix, skip_ws
from refiner.formats.xmlvalues import Finder, read_value, retype_calls, write_value

Record = Any  # refiner.formats.derive.record.Record (its package imports this module): only its fields are read

MAX_NAME_CHARS = 256  # a tool name (or a call id) longer than this is not one
MAX_KEY_CHARS = 256  # a key longer than this is not one
DERIVED_RANK = 1000  # after every built-in format: detection tries it last


class _Stop(Exception):
    """Reading one call failed: ``message`` at ``position``; ``cut``: the text ended inside it, after ``partial``."""

    def __init__(self, message: str, position: int, cut: bool = False, partial: ToolCall | None = None) -> None:
        super().__init__(message)
        self.message, self.position, self.cut, self.partial = message, position, cut, partial


_WORD = re.compile(r"\S*")


def _token_end(text: str, pos: int, suffix: str, find: Finder, limit: int) -> int:
    """Where the token at ``pos`` ends: at the next ``suffix`` (-1: none follows), else where the text that is not
    blank ends (looked for within ``limit + 1`` characters)."""
    return find.next(suffix, pos) if suffix else _WORD.match(text, pos, pos + limit + 1).end()


class RecordFormat(base.WireFormat):
    """The reader and writer of one record (a subclass per record: :func:`record_format`)."""

    record: ClassVar[Record]

    def _start(self, text: str) -> int:
        """Where the answer starts: after the family's reasoning block (or its closer alone)."""
        r = self.record
        close, opener = r.reasoning_end.strip(), r.reasoning_start.strip()
        k = text.find(close) if close else -1
        if k < 0:
            return 0
        opened = opener and text.startswith(opener, skip_blanks(text, 0))
        return k + len(close) if r.prompt_opens_reasoning or opened or opener not in text[:k] else 0

    def parse_strict(self, text: str) -> list[ToolCall]:
        calls: list[ToolCall] = []
        self._read(text, calls, None)
        if not calls:
            raise self.error("no call: the section or call opener is missing", 0)
        return calls

    def recover(self, text: str, out: base.Lenient) -> None:
        self._read(text, out.calls, out)

    def _read(self, text: str, calls: list[ToolCall], out: base.Lenient | None) -> None:
        """Reads the calls into ``calls``: leniently when given a :class:`~refiner.formats.base.Lenient` to note what
        it recovers from (and where the text stops), else strictly, raising at the first departure."""
        c = self._c
        find = Finder(text)
        first = c["section_start"] or c["opener"]
        at = find.next(first, self._start(text)) if first else -1
        if at < 0:
            if out is None:
                raise self.error("the section or call opener is missing", 0)
            out.note("missing_tag", f"no {first!r}: no call")
            return
        pos = at + len(c["section_start"])
        shape = self.record.shape
        failed = 0
        for _ in range(MAX_RECOVERED_ITEMS):
            try:
                if shape == "json_list":  # (one list: its calls read whole or not at all)
                    value, pos = self._json(text, q := skip_blanks(text, pos), "the calls")
                    if not isinstance(value, list):
                        raise _Stop("the calls are not a JSON list", q)
                    calls.extend([self._call_of(v, q) for v in value])
                    break
                call, pos = self._call(text, pos, find)
                calls.append(call)
            except _Stop as e:
                if out is None:
                    raise self.error(e.message, e.position) from None
                if e.cut and e.partial is None:
                    out.mark_cut(None)
                    return
                if e.cut:
                    calls.append(e.partial)
                    out.mark_cut(len(calls) - 1, e.partial.name, e.partial.arguments)
                    return
                failed += 1
                if failed <= base.MAX_NOTES:
                    out.note("unreadable", f"a call could not be read: {e.message} at position {e.position}")
                nxt = find.next(c["opener"], max(pos + 1, e.position)) if c["opener"] else -1
                if nxt < 0 or (c["section_end"] and 0 <= find.next(c["section_end"], pos) < nxt):
                    break
                pos = nxt
                continue
            p = skip_blanks(text, pos)
            if c["call_sep"] and text.startswith(c["call_sep"], p):
                pos = p + len(c["call_sep"])
            elif not (text.startswith(c["opener"], p) if c["opener"]
                      else shape == "json_object" and text.startswith("{", p)):
                break
        else:
            if out is not None:
                out.note("gave_up", f"stopped after {MAX_RECOVERED_ITEMS} calls read or tried; the rest was not read")
        if failed > base.MAX_NOTES:
            out.note("unreadable", f"{failed} calls could not be read in all")
        if c["section_end"] and not text.startswith(c["section_end"], p := skip_blanks(text, pos)):
            if out is None:
                raise self.error(f"{c['section_end']!r} expected after the calls", p)
            if calls:
                out.note("missing_tag", f"{c['section_end']!r} missing after the calls")

    def _expect(self, text: str, pos: int, lit: str, what: str, partial: ToolCall | None = None) -> int:
        if not lit:
            return pos
        p = skip_blanks(text, pos)
        if text.startswith(lit, p):
            return p + len(lit)
        raise _Stop(f"{lit!r} expected {what}", p, _cut_inside(text, p, lit), partial)

    def _call(self, text: str, pos: int, find: Finder) -> tuple[ToolCall, int]:
        c, r = self._c, self.record
        pos = self._expect(text, pos, c["opener"], "to open a call")
        if r.shape == "json_object":
            obj, pos = self._json(text, skip_blanks(text, pos), "the call")
            call = self._call_of(obj, pos)
        else:
            pos = pos if r.name_prefix and not r.name_prefix[-1:].isspace() else skip_ws(text, pos)
            name, pos = self._token(text, pos, find, c["name_suffix"], "tool name")
            if r.id_position == "after_name":
                pos = self._token(text, skip_ws(text, pos), find, c["id_suffix"], f"call id of {name}")[1]
            if r.shape == "json_args":
                args, pos = self._json(text, skip_blanks(text, pos), f"the arguments of {name}")
                if not isinstance(args, dict):
                    raise _Stop(f"the arguments of {name} are not an object", pos)
            else:
                args, pos = self._pairs(text, pos, find, name)
            call = ToolCall(name, args)
        return call, self._expect(text, pos, c["call_end"], f"to close the call to {call.name}", call)

    def _token(self, text: str, pos: int, find: Finder, suffix: str, what: str) -> tuple[str, int]:
        """The tool name or call id at ``pos``, up to ``suffix`` (none: to a blank), and where what follows starts."""
        end = _token_end(text, pos, suffix, find, MAX_NAME_CHARS)
        if end < 0 or end - pos > MAX_NAME_CHARS:  # (the position: as far as it was looked for)
            raise _Stop(f"the {what} is not closed", len(text) if end < 0 else pos + MAX_NAME_CHARS, end < 0)
        token = text[pos:end].strip()
        if not token or "\n" in token:
            raise _Stop(f"no {what}", pos, end >= len(text))
        return token, end + len(suffix)

    def _json(self, text: str, pos: int, what: str) -> tuple[Any, int]:
        try:
            return JSON_DECODER.raw_decode(text, pos)
        except RecursionError:
            raise _Stop(f"{what} nest too deeply", pos) from None
        except ValueError as e:
            at, msg = getattr(e, "pos", pos), str(getattr(e, "msg", e))
            cut = msg.startswith("Unterminated string") or at >= len(text.rstrip()) - 1
            raise _Stop(f"{what} are not JSON: {msg}", max(at, pos), cut) from None

    def _call_of(self, obj: Any, pos: int) -> ToolCall:
        r = self.record
        if r.wrapper:
            if not isinstance(obj, dict) or not isinstance(obj.get(r.wrapper), dict):
                raise _Stop(f"a call is not an object under {r.wrapper!r}", pos)
            obj = obj[r.wrapper]
        if not isinstance(obj, dict):
            raise _Stop("a call is not a JSON object", pos)
        name = obj.get(r.name_key)
        if not isinstance(name, str) or not name.strip():
            raise _Stop(f"a call without a name under {r.name_key!r}", pos)
        args = obj.get(r.args_key, {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                raise _Stop(f"the arguments of {name} are a text that is not JSON", pos) from None
        if not isinstance(args, dict):
            raise _Stop(f"the arguments of {name} are not an object", pos)
        return ToolCall(name, args)

    def _pairs(self, text: str, pos: int, find: Finder, name: str) -> tuple[dict[str, Any], int]:
        c = self._c
        args: dict[str, Any] = {}
        while True:
            p = skip_blanks(text, pos)
            if p >= len(text):
                raise _Stop(f"the text stops inside the call to {name}", p, True, ToolCall(name, args))
            if c["call_end"] and text.startswith(c["call_end"], p):
                return args, p
            if c["key_prefix"]:
                if not text.startswith(c["key_prefix"], p):
                    if not c["call_end"]:
                        return args, pos
                    raise _Stop(f"{c['key_prefix']!r} or {c['call_end']!r} expected in the call to {name}", p,
                                _cut_inside(text, p, c["key_prefix"]) or _cut_inside(text, p, c["call_end"]))
                p += len(c["key_prefix"])
            elif not c["call_end"] and (c["opener"] and text.startswith(c["opener"], p)
                                        or c["section_end"] and text.startswith(c["section_end"], p)):
                return args, pos
            key, p, typed = self._key(text, p, find, name)
            try:
                value, p = self._value(text, p, find, name, key, typed)
            except _Stop as e:
                if e.cut:
                    e.partial = ToolCall(name, args)
                raise
            args[key] = value
            pos = p
            if c["arg_sep"] and text.startswith(c["arg_sep"], q := skip_blanks(text, p)):
                pos = q + len(c["arg_sep"])

    def _key(self, text: str, p: int, find: Finder, name: str) -> tuple[str, int, bool]:
        """The key at ``p``, where its value starts, and whether a typing attribute says it is not a string."""
        c = self._c
        typed = False
        if c["typing"]:  # a typing attribute: the key ends where the two suffixes part, and the rest says which
            head, as_text, as_typed = c["typing"]
            end = find.next(head, p)
            after = end + len(head)
            if end >= 0 and text.startswith(as_typed, after):
                typed, after = True, after + len(as_typed)
            elif end >= 0 and text.startswith(as_text, after):
                after += len(as_text)
            elif end >= 0:
                raise _Stop(f"the typing of an argument of {name} is neither {as_text!r} nor {as_typed!r}", after,
                            _cut_inside(text, after, as_text) or _cut_inside(text, after, as_typed))
        else:
            end = _token_end(text, p, c["key_suffix"], find, MAX_KEY_CHARS)
            after = end + len(c["key_suffix"])
        if end < 0 or end - p > MAX_KEY_CHARS or "\n" in text[p:end].strip():
            raise _Stop(f"an argument key of {name} is not closed", len(text) if end < 0 else
                        min(end, p + MAX_KEY_CHARS), end < 0)
        key = text[p:end].strip()
        if not key:
            raise _Stop(f"an argument of {name} has no key", p)
        return key, after, typed

    def _value(self, text: str, p: int, find: Finder, name: str, key: str, typed: bool) -> tuple[Any, int]:
        c, r = self._c, self.record
        q = skip_blanks(text, p)
        if r.strings == "json" or r.strings == "quoted" and text.startswith(("{", "["), q) and r.literals == "json":
            value, q = self._json(text, q, f"the value of {key}")
        elif r.strings == "quoted" and (text.startswith(r.quote_open, q) or text.startswith(("{", "["), q)):
            try:
                value, q = read_quoted(text, q, r.quote_open, r.quote_close, find)
            except ValueError as e:
                raise _Stop(f"the value of {key}: {e}", q, q >= len(text) or "not closed" in str(e)) from None
        else:  # raw text up to the value's terminator; a string as written when the typing attribute says so
            end = find.next(c["value_suffix"], p) if c["value_suffix"] else self._raw_end(text, p, find)
            if end < 0:
                raise _Stop(f"the value of {key} is not closed", p, True)
            raw, after = text[p:end].strip(), end + len(c["value_suffix"])
            return (raw if c["typing"] and not typed else read_value(raw, r.literals == "python")), after
        return value, self._expect(text, q, c["value_suffix"], f"after the value of {key}")

    def _raw_end(self, text: str, p: int, find: Finder) -> int:
        """Where a raw value with no value suffix ends: at the first of :func:`_raw_ends` (one starting with a line
        break matches a line break, any spaces, then its core); -1 when none follows."""
        best = -1
        for lit in self._raw_ends:
            if not lit.startswith("\n"):
                hit = find.next(lit, p)
            else:
                core, hit = lit[1:], find.next("\n", p)
                while hit >= 0 and core:
                    after = skip_blanks(text, hit)
                    if text.startswith(core, after):
                        break
                    hit = text.find("\n", after, best if best >= 0 else len(text))
            if hit >= 0 and (best < 0 or hit < best):
                best = hit
        return best

    def render(self, calls: Sequence[ToolCall]) -> str:
        r = self.record
        if r.shape == "json_list":
            return r.section_start + self._dumps([self._obj(c, i) for i, c in enumerate(calls)]) + r.section_end
        parts = []
        for i, call in enumerate(calls):
            if not call.name or any(ch.isspace() for ch in call.name.strip("_")) and not self._c["name_suffix"]:
                raise self.render_error(f"call #{i}: tool name {call.name!r} cannot be written")
            if self._c["name_suffix"] and self._c["name_suffix"] in call.name:
                raise self.render_error(f"call #{i}: tool name {call.name!r} holds {self._c['name_suffix']!r}")
            if r.shape == "json_object":
                body = self._dumps(self._obj(call, i))
            else:
                head = r.name_prefix + call.name + r.name_suffix
                if r.id_position == "after_name":
                    head += f"call_{i}" + r.id_suffix
                body = head + (self._dumps(dict(call.arguments)) if r.shape == "json_args" else r.arg_sep.join(
                    self._pair(i, k, v) for k, v in call.arguments.items()))
            parts.append((r.call_start if r.shape != "json_object" else r.opener) + body + r.call_end)
        return r.section_start + r.call_sep.join(parts) + r.section_end

    def _dumps(self, value: Any) -> str:
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False,
                              separators=(",", ":") if self.record.compact_json else None)
        except (TypeError, ValueError) as e:
            raise self.render_error(f"a value JSON cannot hold: {e}") from None

    def _obj(self, call: ToolCall, i: int) -> dict[str, Any]:
        r = self.record
        args = dict(call.arguments)
        obj = {r.name_key: call.name, r.args_key: self._dumps(args) if r.args_as_text else args}
        if r.id_position == "json_key":
            obj[r.id_key] = f"call_{i}"
        if not r.wrapper:
            return obj
        outer = {r.id_key: f"call_{i}"} if r.id_position == "wrapper_key" else {}
        return outer | dict(r.wrapper_fields) | {r.wrapper: obj}

    def _pair(self, i: int, key: str, value: Any) -> str:
        r, c = self.record, self._c
        if c["key_suffix"] and c["key_suffix"] in key or not key.strip() or "\n" in key:
            raise self.render_error(f"call #{i}: argument key {key!r} cannot be written")
        if r.strings == "json":
            text = self._dumps(value)
        elif r.strings == "quoted":
            if holds_quote(value, r.quote_close):
                raise self.render_error(f"call #{i}: the value of {key} holds the closing quote {r.quote_close!r}")
            text = write_quoted(value, r.quote_open, r.quote_close) if isinstance(value, str) or \
                r.literals == "quoted" else self._dumps(value)
        else:
            try:
                text = write_value(value, self.tags, r.literals == "python")
            except (TypeError, ValueError) as e:
                raise self.render_error(f"call #{i}: {key}: {e}") from None
            if r.key_suffix_typed and isinstance(value, str):
                text = value
            stops = (c["value_suffix"],) if c["value_suffix"] else self._raw_ends
            if isinstance(value, str) and any(e in text for e in stops):
                raise self.render_error(f"call #{i}: the value of {key} holds the text that ends a value")
        typed = r.key_suffix_typed and not isinstance(value, str)
        if typed:
            text = self._dumps(value)
        return r.key_prefix + key + (r.key_suffix_typed if typed else r.key_suffix) + text + r.value_suffix

    def retype(self, calls: Sequence[ToolCall], tools: Mapping[str, Any]) -> list[ToolCall]:
        if self.record.strings in ("json", "quoted"):  # the family says which values are strings
            return list(calls)
        return retype_calls(calls, tools, python_literals=self.record.literals == "python")


def _cut_inside(text: str, p: int, lit: str) -> bool:
    """Whether the text ends at ``p`` inside ``lit`` (what is left of it is the start of ``lit``)."""
    return len(text) - p < len(lit) and lit.startswith(text[p:])


def _cores(r: Record) -> dict[str, Any]:
    """The record's literals without surrounding blanks; ``typing``: the key suffixes' common head, then the rest of
    each (string, typed), when a key attribute types values."""
    names = ("section_start", "section_end", "call_end", "call_sep", "name_suffix", "key_prefix", "key_suffix",
             "value_suffix", "arg_sep", "id_suffix", "opener")
    cores: dict[str, Any] = {k: getattr(r, k).strip() for k in names}
    a, b = r.key_suffix.strip(), r.key_suffix_typed.strip()
    n = len(common_prefix(a, b))
    cores["typing"] = (a[:n], a[n:], b[n:]) if r.key_suffix_typed else ()
    return cores


def _raw_ends(record: Record) -> tuple[str, ...]:
    """What ends a raw value when the record has no value suffix: the next argument's opening or the call's closing
    (each with its leading line break)."""
    out = []
    for lit in (record.value_suffix + record.arg_sep + record.key_prefix, record.value_suffix + record.call_end):
        core = lit.strip()
        head = lit[: len(lit) - len(lit.lstrip())]
        if "\n" in head:
            out.append("\n" + core if core else "\n")
        elif core:
            out.append(core)
    return tuple(dict.fromkeys(out)) or ("\n",)


def holds_quote(value: Any, q_close: str) -> bool:
    """Whether ``q_close`` occurs in a string or key of ``value`` (it could not be written between the quotes)."""
    if isinstance(value, str):
        return q_close in value
    if isinstance(value, dict):
        return any(q_close in str(k) or holds_quote(v, q_close) for k, v in value.items())
    return isinstance(value, (list, tuple)) and any(holds_quote(v, q_close) for v in value)


_SCALAR = re.compile(r"[^\s,:{}\[\]]+")
_CLOSES = {"{": "}", "[": "]"}


def read_quoted(text: str, pos: int, q_open: str, q_close: str, find: Finder) -> tuple[Any, int]:
    """``(value, end)`` of the value at ``pos`` written with bare keys and quote tokens (a bare scalar in a container: a
    JSON literal): its tokens rewritten as JSON, decoded once. Raises ``ValueError`` (``not closed``: the text ends)."""
    out: list[str] = []
    stack: list[str] = []
    i = pos
    while True:
        i = skip_blanks(text, i)
        if i >= len(text):
            raise ValueError("a value not closed")
        if stack and stack[-1] == "{" and (out[-1] == "," or out[-1] == "{" and text[i] != "}"):  # a key, to its ':'
            j = text.find(":", i, i + MAX_KEY_CHARS)
            key = text[i:j].strip() if j >= 0 else ""
            if q_open and key.startswith(q_open) and key.endswith(q_close) and len(key) >= len(q_open + q_close):
                key = key[len(q_open): len(key) - len(q_close)]
            if not key:
                raise ValueError("a key with no ':' after it" + (" (not closed)" if j < 0 else ""))
            out += (json.dumps(key), ":")
            i = j + 1
            continue
        if q_open and text.startswith(q_open, i):
            j = find.next(q_close, i + len(q_open))
            if j < 0:
                raise ValueError("a string not closed")
            out.append(json.dumps(text[i + len(q_open): j], ensure_ascii=False))
            i = j + len(q_close)
        elif text[i] in "{[":
            if len(stack) >= base.MAX_ARGUMENT_DEPTH:
                raise ValueError(f"more than {base.MAX_ARGUMENT_DEPTH} nested containers")
            stack.append(text[i])
            out.append(text[i])
            i += 1
            continue
        elif stack and text[i] in ",}]" and out[-1] not in (",", ":") and (text[i] != "," or out[-1] not in ("{", "[")):
            if text[i] != "," and _CLOSES[stack.pop()] != text[i]:
                raise ValueError(f"{text[i]!r} closes no {text[i]!r}")
            out.append(text[i])
            i += 1
            if text[i - 1] == ",":
                continue
        elif m := _SCALAR.match(text, i):
            out.append(m.group())
            i = m.end()
        else:
            raise ValueError(f"no value at {text[i]!r}")
        if stack and (i := skip_blanks(text, i)) < len(text) and text[i] not in ",}]":
            raise ValueError(f"{text[i]!r} where ',' or a closing bracket was expected")
        if not stack:
            try:
                return JSON_DECODER.decode(" ".join(out)), i
            except (ValueError, RecursionError) as e:
                raise ValueError(f"not a value: {e}") from None


def record_format(record: Record, name: str, source: str = "") -> RecordFormat:
    """The format reading and writing a complete ``record`` (not registered); ``source``: where it comes from."""
    reasoning = (record.reasoning_start.strip(), record.reasoning_end.strip())
    first = record.section_start.strip() or record.opener.strip()
    parts = (record.section_start, record.opener, record.name_suffix, record.key_prefix, record.key_suffix,
             record.value_suffix, record.call_end, record.section_end)
    attrs = {
        "name": name, "record": record,
        "description": f"tool calls as the chat template {source or '(given)'} writes them (a derived record)",
        "tags": tuple(dict.fromkeys(p.strip() for p in parts if p.strip())),
        "detection": base.Detection(rank=DERIVED_RANK, markers=(first,) if first else ()),
        "reasoning": (reasoning,) if all(reasoning) else (("<think>", "</think>"),),
        "example": "(rendered below)", "_c": _cores(record), "_raw_ends": _raw_ends(record)}
    cls = type(f"RecordFormat_{name}", (RecordFormat,), attrs)
    cls.example = cls().render(list(EXAMPLE_CALLS))
    return cls()
