"""Calls in markup no row knows, read by the literals the text itself repeats around the offered tools' names
(:func:`anchored_calls`): a tool name inside a JSON object whose other key holds its parameters (an object or JSON
text), every call under the same two keys; else a tool name followed, after the same markup for every call, by one JSON
object of its parameters, on the name's line or after lines that are blank or one markup token each (a label line; then
markup before the name on its line), with no two words in a row before or after the name; else the literals before each
tool name, before each of its parameter names, after each key and after each value (a value is JSON, a string between a
quote token and its closer, else text), except that keys inside a JSON object decoded where the markup opens it are that
object's, read as the call's arguments, and that a value holding a quoted string and the comma after it (the next key's
markup) is never read: the objects the keys are in are then read by a JSON repair where it reads them cleanly, else no
call is; else one call of one parameter whose markup closes it (:func:`_one_key`). Only markup is read: two keys or
more share the key literals, which hold a character other than a letter, digit or space, or are markup before each
key and a blank after it (``:key VALUE``: each value then JSON or one word); one key: its call's closer stands in for
them (after a sigil and a blank, that closer may mirror the opener's bracket); only the tool's own parameters are
read. Each call carries the literals learned (``how``)."""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections import namedtuple
from collections.abc import Mapping, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.jsonfix import lenient_json, repair_budget
from refiner.formats.strict import JSON_DECODER, JSON_STARTS, json_head
from refiner.formats.text import common_prefix, common_suffix
from refiner.formats.xmlvalues import read_value, retype_value

MAX_HITS = 256  # tool-name occurrences examined
MAX_NAMES = 256  # offered names looked for (the longest first)
MAX_PARAMS = 100
MAX_CANDIDATES = 512  # parameter-name occurrences examined
WINDOW = 4000  # how far after a tool name its arguments are looked for
CONTEXT = 48  # how far before a key (and after it) its literals are looked for
JSON_BUDGET = 400_000  # characters of JSON decoded in all
KIND = "anchored on the offered names"
Found = namedtuple("Found", "start end call how")  # a call read from text[start:end], how: the markup it was read by


def _markup(s: str) -> bool:
    """Whether ``s`` holds a character other than a letter, digit, space, ``_`` or an apostrophe inside a word."""
    return any(not (c.isalnum() or c.isspace() or c == "_") for c in _IN_WORD.sub("", s))


_IN_WORD = re.compile(r"(?<=[^\W\d_])['\u2019](?=[^\W\d_])")


def offered_names(text: str, offered: Mapping[str, Any]) -> tuple[str, ...]:
    """The offered names ``text`` holds, the longest first (at most :data:`MAX_NAMES`)."""
    names = (n for n in offered if isinstance(n, str) and n.strip() and n in text)
    return tuple(sorted(names, key=len, reverse=True))[:MAX_NAMES]


@functools.lru_cache(maxsize=64)
def names_pattern(names: tuple[str, ...]) -> re.Pattern:
    """The names, each whole: not written after a word character, a dot or a hyphen (checked behind each name, so
    that the pattern starts with the names and is searched for at C speed), nor followed by a word character, a
    hyphen, or a dot and a word character (``api.f.v2``)."""
    alts = "|".join(rf"{re.escape(n)}(?<![\w.\-]{re.escape(n)})" for n in names)
    return re.compile(rf"(?:{alts})(?![\w\-]|\.\w)")


def param_names(offered: Mapping[str, Sequence[str]], name: str) -> tuple[str, ...]:
    """The parameter names of tool ``name`` a reader looks for: non-blank strings, the first :data:`MAX_PARAMS`,
    longest first (an alternation of them then matches a name before a prefix of it)."""
    names = [p for p in offered.get(name) or () if isinstance(p, str) and p.strip()][:MAX_PARAMS]
    return tuple(sorted(names, key=len, reverse=True))


def anchored_calls(text: str, start: int, offered: Mapping[str, Sequence[str]],
                   taken: Sequence[tuple[int, int]] = ()) -> tuple[list[Found], list[str]]:
    """``(calls, notes)``: the calls of ``text`` after ``start``, outside the ``taken`` spans. Never raises."""
    notes: list[str] = []
    try:
        names = offered_names(text, offered)
        if not names:
            return [], []
        free = (m for m in names_pattern(names).finditer(text, start) if not any(a <= m.start() < b for a, b in taken))
        hits = [(m.start(), m.end(), m.group()) for m in itertools.islice(free, MAX_HITS)]
        found = (_json_calls(text, hits, offered, notes) or _markup_calls(text, hits, offered, notes)
                 or _closed_call(text, hits, offered, notes)) if hits else []
    except (RecursionError, MemoryError, ValueError, TypeError):
        return [], []
    return found, notes


# ---- a tool name inside a JSON object ------------------------------------------------------------------------------


def _json_calls(text: str, hits: list, offered: Mapping[str, Sequence[str]], notes: list[str]) -> list[Found]:
    budget = JSON_BUDGET
    out: list[tuple[int, int, ToolCall, str, str]] = []
    for s, e, name in hits:
        if out and s < out[-1][1] or text[s - 1: s] != '"' or text[e: e + 1] != '"':  # in the last call, or unquoted
            continue
        brace = s
        for _ in range(3):  # the object is opened by one of the three braces before the name
            brace = text.rfind("{", max(0, s - CONTEXT * 4), brace)
            if brace < 0 or budget <= 0:
                break
            head, read = _decoded(text, brace)
            value, end = head or (None, brace + 1)
            budget -= read
            got = _json_call(value, name, offered) if isinstance(value, dict) and end > e else None
            if got is not None:
                out.append((brace, end, *got))
                break
    if not out:
        return _named_json(text, hits, offered, notes)
    keys = {(k1, k2) for *_, k1, k2 in out}
    if len(keys) > 1:
        notes.append("tool names inside JSON objects with different keys: none read as calls")
        return []
    (name_key, args_key), = keys
    how = f"{KIND}: a JSON object per call, the name under {name_key!r}, the arguments under {args_key!r}"
    return [Found(a, b, call, how) for a, b, call, _, _ in out]


def _json_call(value: dict, name: str, offered: Mapping[str, Sequence[str]]) -> tuple[ToolCall, str, str] | None:
    """The call of a JSON object holding ``name`` under one key and its arguments (an object or JSON text of one)
    under another: ``(call, name key, arguments key)``, or None."""
    name_key = next((k for k, v in value.items() if v == name), None)
    params = set(offered.get(name) or ())
    for k, v in value.items() if name_key is not None else ():
        try:
            args = JSON_DECODER.decode(v) if k != name_key and isinstance(v, str) and v.strip().startswith("{") else v
        except ValueError:
            continue
        if k != name_key and isinstance(args, dict) and (args and set(args) <= params or not args and not params):
            return ToolCall(name, args), name_key, k
    return None


def _named_json(text: str, hits: list, offered: Mapping[str, Sequence[str]], notes: list[str]) -> list[Found]:
    """A tool name, then (after the same markup for every call) its arguments as one JSON object."""
    budget = JSON_BUDGET
    found: list[tuple[int, ToolCall, int]] = []  # (name start, call, end)
    gaps: list[str] = []  # between each name and its arguments
    for s, e, name in hits:
        brace = text.find("{", e, e + CONTEXT)
        if brace < 0 or budget <= 0:
            continue
        first, *more = text[e:brace].split("\n")  # on a later line: after a closing token and lines of markup only
        if more and not all(_MARKUP_LINE.fullmatch(line) for line in (first, *more)):
            continue
        head, read = _decoded(text, brace)
        value, end = head or (None, brace + CONTEXT)
        budget -= read if head else max(read, CONTEXT)
        if isinstance(value, dict) and value and set(value) <= set(offered.get(name) or ()):
            found.append((s, ToolCall(name, value), end))
            gaps.append(text[e:brace])
    if not found:
        return []
    opener = common_suffix(*(text[_line_start(text, s) : s] for s, *_ in found))
    gap, ids = _id_gap(gaps)
    if gap is None or not (_markup(opener) or _markup(gap)):
        return []
    if gap.split("\n")[0].strip() == "" and "\n" in gap and not _markup(opener):
        return []  # a name ending its line is a call's only after markup on it
    return _json_found(found, opener, gap, ids, notes)


def _json_found(found: list[tuple[int, ToolCall, int]], opener: str, gap: str, ids: bool,
                notes: list[str]) -> list[Found]:
    """The calls ``(name start, call, end)`` read as a tool name, then ``gap`` (its JSON arguments after it), each
    after ``opener`` on the name's line; none when ``opener`` or ``gap`` holds prose."""
    if _PROSE.search(opener + "\n" + gap):
        return []
    how = (f"{KIND}: literals learned from the text: before each name {opener.strip()!r}, between the name and its "
           f"JSON arguments {gap.strip()!r}" + (" around a call id" if ids else ""))
    notes.append(f"{len(found)} call(s) in markup no format knows, read by the structure the text repeats ({how})")
    return [Found(s - len(opener), end, call, how) for s, call, end in found]


_ID = re.compile(r"[\w.:\-]{1,64}")
_MARKUP_LINE = re.compile(r"\s*(?:[^\w\s]\S*\s*)?")  # blank, or one markup token (no space, no word character first)
_PROSE = re.compile(r"[^\W\d_]{2,}[ \t]+[^\W\d_]{2,}")  # two words in a row: prose, never a label


def _id_gap(gaps: Sequence[str]) -> tuple[str | None, bool]:
    """The text every call writes between its name and its arguments: ``(gap, False)``, or ``(prefix + "ID" + suffix,
    True)`` when the gaps differ only in a call id between markup; ``(None, False)`` otherwise."""
    if len(set(gaps)) == 1:
        return gaps[0], False
    head, tail = common_prefix(*gaps), common_suffix(*gaps)
    if any(len(head) + len(tail) > len(g) for g in gaps):
        return None, False
    head = re.sub(r"\w+\Z", "", head)  # the id's own start (c_ of c_1, c_2), kept with it
    middles = [g[len(head): len(g) - len(tail)] for g in gaps]
    if not all(_ID.fullmatch(m) for m in middles) or not (_markup(head) and _markup(tail)):
        return None, False
    return head + "ID" + tail, True


def quote_closers(q_open: str) -> tuple[str, ...]:
    """What may close a quote token ``q_open``: the same token, its mirror (``<<`` / ``>>``), its closing tag."""
    return tuple(dict.fromkeys((q_open, q_open[::-1].translate(_MIRROR), q_open[:1] + "/" + q_open[1:])))


_MIRROR = str.maketrans("<>[](){}«»‹›⟨⟩⟦⟧", "><][)(}{»«›‹⟩⟨⟧⟦")
_QUOTE_TOKEN = re.compile(r"[^\w\s]{0,16}")  # a quote token around a value: 16 symbols at most


def _unquote(raw: str) -> str | None:
    """The string between a quote token of two or more characters (``~"Paris"~``) and its closer, or ``None``."""
    return (_quoted(raw) or (None,))[0]


def _quoted(raw: str) -> tuple[str, int] | None:
    """:func:`_unquote`'s string and where its closer ends in ``raw``."""
    n = _QUOTE_TOKEN.match(raw).end()
    if n < 2 or raw[0] in "{[" or raw[:n] == '""':
        return None
    for q_open in (raw[:k] for k in range(n, 1, -1)):
        best = min(((j, c) for c in quote_closers(q_open) if (j := raw.find(c, len(q_open))) >= 0), default=None)
        if best is not None:
            return raw[len(q_open): best[0]], best[0] + len(best[1])
    return None


# ---- markup the text repeats ---------------------------------------------------------------------------------------


_Key = namedtuple("_Key", "call key start end")  # a parameter name of call ``call`` at ``text[start:end]``


def _line_start(text: str, pos: int) -> int:
    lo = max(0, pos - CONTEXT)
    return max(text.rfind("\n", lo, pos) + 1, lo)


def _markup_calls(text: str, hits: list, offered: Mapping[str, Sequence[str]], notes: list[str]) -> list[Found]:
    cands: list[_Key] = []
    calls: list[tuple[int, int, str, int]] = []  # (name start, name end, name, region end)
    for i, (s, e, name) in enumerate(hits):
        region_end = min(hits[i + 1][0] if i + 1 < len(hits) else len(text), e + WINDOW)
        params = param_names(offered, name)
        if not params:
            continue
        at = names_pattern(params).finditer(text, e, region_end)
        cands += [_Key(len(calls), m.group(), *m.span()) for m in itertools.islice(at, MAX_CANDIDATES - len(cands))]
        calls.append((s, e, name, region_end))
        if len(cands) >= MAX_CANDIDATES:
            break
    if len(cands) < 2:
        return []
    # the literals most keys share: what precedes them, what follows them up to where values differ
    befores = [text[max(calls[k.call][1], k.start - CONTEXT): k.start] for k in cands]
    afters = [text[k.end: min(calls[k.call][3], k.end + CONTEXT)] for k in cands]
    key_suffix = _shared(afters, key_suffix=True)
    key_prefix = _shared(befores)
    sigil = _markup(key_prefix) and bool(key_suffix) and not key_suffix.strip(" \t")  # (:key VALUE)
    if not (_markup(key_suffix) or sigil):
        return []
    firsts: dict[tuple[int, str], _Key] = {}  # each parameter's first key in its call after markup or at a line start
    for k, b, a in zip(cands, befores, afters):
        line = text[_line_start(text, k.start) : k.start]
        if b.endswith(key_prefix) and a.startswith(key_suffix) and (
                _markup(key_prefix) or _markup(line.rstrip()[-1:]) or not line.strip()):
            firsts.setdefault((k.call, k.key), k)
    keys = list(firsts.values())
    if len(keys) < 2:
        return []
    # the text from each name to its first key is the same for every call, and the text before each name is markup
    first = {k.call: k for k in reversed(keys)}  # each call's first key
    gaps = {c: text[calls[c][1]: k.start - len(key_prefix)] for c, k in sorted(first.items())}
    gap = max(gaps.values(), key=list(gaps.values()).count)  # (a tie: the first call's, whatever the hash seed)
    if len(gap) > CONTEXT:
        return []
    keep = {c for c, g in gaps.items() if g == gap}
    keys = [k for k in keys if k.call in keep]
    opener = common_suffix(*(text[_line_start(text, calls[c][0]) : calls[c][0]] for c in sorted(keep)))
    if len(keys) < 2 or not _markup(opener):
        return []
    if (brace := gap.rfind("{")) >= 0:  # keys inside an object: its arguments are that object, decoded, else read
        # by a clean JSON repair (:func:`_repaired`), else (keys a line each, no commas) by the literals below
        heads: dict[int, tuple[Any, int]] = {}
        budget = JSON_BUDGET
        for c in sorted(keep):
            if budget <= 0:
                break
            head, read = _decoded(text, calls[c][1] + brace)
            budget -= head[1] - calls[c][1] if head else max(read, WINDOW)
            if head and isinstance(head[0], dict) and head[1] > first[c].start:
                heads[c] = head
        objects = [(calls[c][0], ToolCall(calls[c][2], value), end) for c, (value, end) in heads.items()
                   if set(value) <= set(offered.get(calls[c][2]) or ())]
        if not heads:
            objects = _repaired(text, [(calls[c][0], calls[c][2], calls[c][1] + brace, calls[c][3],
                                        {k.key for k in keys if k.call == c}) for c in sorted(keep)])
        if objects or heads:
            return _json_found(objects, opener, gap[:brace], False, notes) if objects else []
    # the values: up to the end of their line or the next key's prefix, less what every value is followed by
    # values on a line of their own only when every key's line ends after its key suffix
    own_line = all(text[(q := _BLANK.match(text, k.end + len(key_suffix)).end()): q + 1] == "\n" for k in keys)
    extents: list[tuple[int, int]] = []
    lasts = [j + 1 == len(keys) or keys[j + 1].call != k.call for j, k in enumerate(keys)]
    inline: list[bool] = []  # the value ends where the next key starts, on the same line
    for j, (k, last) in enumerate(zip(keys, lasts)):
        limit = calls[k.call][3] if last else keys[j + 1].start
        v0 = k.end + len(key_suffix)
        v0 = (_BLANK_LINES if own_line else _BLANK).match(text, v0, max(v0, limit)).end()
        nl = text.find("\n", v0, limit)
        end = nl if nl >= 0 else (limit if last else limit - len(key_prefix))
        head = json_head(text[v0:limit]) if text[v0: v0 + 1] in ("{", "[", '"') else None
        if head is not None:  # a JSON value may run over lines, up to the limit (after a sigil: up to its end)
            nl = text.find("\n", v0 + head[1], limit)
            end = v0 + head[1] if sigil else nl if nl >= 0 else limit
        extents.append((v0, end))
        inline.append(not last and nl < 0)
    raws = [text[a:b] for a, b in extents]
    value_end = _trim_value_end(_shared(raws))
    if any(inline):  # what ends the values the next key follows on their line, when the last values hold it too
        held = _trim_value_end(_shared([r for r, i in zip(raws, inline) if i]))
        tails = [r for r, i in zip(raws, inline) if not i]
        while held and not all(held in r for r in tails):
            held = _trim_value_end(held[1:])
        value_end = held or value_end
    end_mark = value_end.strip()
    ended = [False] * len(raws)
    for j, raw in enumerate(raws if end_mark else ()):
        cut = (len(raw.rstrip()) - len(end_mark) if raw.rstrip().endswith(end_mark)
               else raw.find(end_mark) if any(inline) and not inline[j] else -1)
        if cut >= 0:
            raws[j], ended[j] = raw[:cut], True
        elif not lasts[j]:
            raws[j] = None  # a value not followed by what every other value is: not read
    value_start = _value_start([r.strip() for r in raws if r is not None], key_prefix + key_suffix + opener)
    by_call: dict[int, dict[str, Any]] = {}
    ends: dict[int, int] = {}
    quote_head = m.group() if (m := _LAST_SYMBOLS.search(key_suffix)) else ""  # a quote token values start with
    junk = False  # a value holds a quoted string and the comma after it: the next key's markup read into it
    for k, (_, b), raw, last, done in zip(keys, extents, raws, lasts, ended):
        if raw is None:
            continue
        raw = raw.strip()
        if value_start and (head := value_start[1].match(raw)):
            raw = raw[head.end():].strip()
        if (value := _unquote(raw)) is None and (value := _unquote(quote_head + raw)) is None:  # else a quoted string
            if not done and raw[:1] in "[{" and (head := _last_inline(raw)):
                raw = head  # a JSON value, then markup on the same line
            elif last and any(inline) and not done:
                raw = _last_inline(raw)  # the call's closer follows on the same line: the value is one token before it
            if not raw:
                continue  # a key written without a value: nothing is read for it
            junk = junk or _QUOTE_JUNK.match(raw) is not None or sigil and len(raw.split()) > 1 and not (
                (h := json_head(raw)) and h[1] == len(raw))  # (after a sigil, words not written as JSON: prose)
            value = _raw_value(raw, offered.get(calls[k.call][2]), k.key)
        by_call.setdefault(k.call, {})[k.key] = value
        ends[k.call] = b
    if junk:  # (an object around the keys was not read cleanly)
        return []
    how = (f"{KIND}: literals learned from the text: before each name {opener.strip()!r}, before each key "
           f"{key_prefix.strip()!r}, after each key " + ("a blank" if sigil else repr(key_suffix.strip()))
           + (f", before each value {value_start[0]}" if value_start else "")
           + (f", after each value {end_mark!r}" if end_mark else ", each value ends its line"))
    out = [Found(s - len(opener), ends[c], ToolCall(name, by_call[c]), how)
           for c, (s, _, name, _) in enumerate(calls) if c in by_call]
    if out:
        notes.append(f"{len(out)} call(s) in markup no format knows, read by the structure the text repeats ({how})")
    return out


def _raw_value(raw: str, params: Any, key: str) -> Any:
    """The value written ``raw``: the JSON value it is exactly (a quoted string too), else its text; unless written as
    a JSON string, settled by the key's declared type (``params``: the tool's offered parameters), which says whether
    94105 is a number."""
    head = json_head(raw)
    value = head[0] if head is not None and head[1] == len(raw) else read_value(raw)
    if isinstance(params, Mapping) and key in params and raw[:1] != '"':
        value = retype_value(params[key], value)
    return value


_QUOTE_JUNK = re.compile(r"""(["'])(?:(?!\1)[^\\]|\\.)*\1\s*,""")  # a quoted string, then a comma


# ---- one call of one parameter -------------------------------------------------------------------------------------

_LEAD = re.compile(r"[^\w\s]+")  # the symbols a markup token starts with
_KEY_SUFFIX = re.compile(r"[ \t]*[^\w\s]+[ \t]*")
_THREE_WORDS = re.compile(r"[^\W\d_]+[ \t]+[^\W\d_]+[ \t]+[^\W\d_]+")
_BRACKETS = re.compile(r"[<>\[\](){}]")


def _closed_call(text: str, hits: list, offered: Mapping[str, Sequence[str]], notes: list[str]) -> list[Found]:
    """The text's one call when it has one parameter (nothing repeats to learn the markup from), read only when one
    name alone gives it (:func:`_one_key`), no other name stands inside it and the text names tools 4 times at most."""
    found = [got for s, e, name in hits[:4] if (got := _one_key(text, s, e, name, offered)) is not None]
    if len(hits) > 4 or len(found) != 1 or sum(found[0].start <= s < found[0].end for s, _, _ in hits) != 1:
        return []
    notes.append(f"1 call in markup no format knows, read as one call of one parameter ({found[0].how})")
    return found


def _one_key(text: str, s: int, e: int, name: str, offered: Mapping[str, Sequence[str]]) -> Found | None:
    """The call of ``name`` (``text[s:e]``) with one parameter when markup closes it: the name's line opens with
    symbols (the lead: ``^^`` of ``^^call NAME``; not ``**NAME**``), a gap with a symbol and no three words in a row
    (or the name ending its line) leads to the only parameter of the tool's named after it, symbols (or, the key
    right after a symbol, a blank), its value (JSON, a string in a quote token, else at most two words and no bracket
    up to the lead, its mirror or the line's end), then a token that starts with the lead (after a key and a blank:
    or its mirror) and is neither the lead alone (but for three symbols or more alone on their line: a fence) nor the
    line's first token (``^^/call``, not a second ``|``); after it, only lines that start with a symbol."""
    lo = max(0, s - CONTEXT - 1)
    ls = text.rfind("\n", lo, s) + 1
    opener = text[ls:s].lstrip(" \t")
    lead = _LEAD.match(opener)
    params = param_names(offered, name)
    if lead is None or not ls and lo or _THREE_WORDS.search(opener) or not params:
        return None
    lead, mirror = lead.group(), lead.group()[::-1].translate(_MIRROR)
    region = min(len(text), e + WINDOW)
    emphasis = lead == mirror and text.startswith(lead, e)  # (the name between two of the same symbols)
    key = None if emphasis else names_pattern(params).search(text, e, region)
    others = tuple(p for p in params if key is not None and p != key.group())
    if key is None or others and names_pattern(others).search(text, e, region):
        return None
    gap, sfx = text[e: key.start()], _KEY_SUFFIX.match(text, key.end())
    symbols = _trim_value_start(sfx.group().strip()) if sfx else ""  # (less a quote or bracket a value starts with)
    ends_line = not gap.strip() and "\n" in gap  # (the name ends its line; the key starts another)
    sigil = not symbols and _markup(gap[-1:]) and text[key.end(): key.end() + 1] in (" ", "\t")  # (:key VALUE)
    if len(gap) > CONTEXT or not (_markup(gap) or ends_line) or _THREE_WORDS.search(gap) or not (symbols or sigil):
        return None
    v0 = _BLANK.match(text, text.index(symbols, key.end()) + len(symbols) if symbols else key.end()).end()
    line_end = nl if (nl := text.find("\n", v0, v0 + WINDOW)) >= 0 else min(len(text), v0 + WINDOW)
    if text[v0: v0 + 1] in ("{", "[", '"'):
        head = json_head(text[v0: v0 + WINDOW])
    elif (head := _quoted(text[v0:line_end])) is None:
        stop = min((i for m in {lead, mirror} if (i := text.find(m, v0, line_end)) >= 0), default=line_end)
        raw = text[v0:stop].strip()
        if not raw or len(raw.split()) > 2 or _BRACKETS.search(raw):
            return None  # (a bracket: the rest of a tag the key is in)
        head = _raw_value(raw, offered.get(name), key.group()), len(text[v0:stop].rstrip())
    if head is None:
        return None
    c = _BLANK_LINES.match(text, v0 + head[1]).end()
    closer = (text[c: c + CONTEXT].split(None, 1) or [""])[0]
    fence = closer == lead and len(lead) >= 3 and text[c - 1: c] == "\n"  # (a fence closed on its own line)
    if not (closer.startswith(lead) or sigil and mirror != lead and closer.startswith(mirror)) or closer in (
            lead, opener.split(None, 1)[0]) and not fence or any(
            ln.strip() and _LEAD.match(ln.strip()) is None for ln in text[c + len(closer): c + WINDOW].split("\n")):
        return None  # (words after the call: prose)
    return Found(s - len(opener), c + len(closer), ToolCall(name, {key.group(): head[0]}),
                 f"{KIND}: one call of one parameter, its line opened by {opener.strip()!r}, closed by {closer!r}")


def _repaired(text: str, found: list[tuple[int, str, int, int, set[str]]]) -> list[tuple[int, ToolCall, int]]:
    """The calls ``(name start, name, brace, end, keys)`` whose object, from ``brace`` to its last ``}`` before
    ``end``, a JSON repair reads cleanly: exactly the keys the markup shows, no string value starting with a quote.
    As ``(name start, call, end)``."""
    out = []
    with repair_budget():
        for s, name, brace, end, keys in found:
            close = text.rfind("}", brace, end)
            value = lenient_json(text[brace : close + 1], at_end=False) if close > brace else None
            if isinstance(value, dict) and set(value) == keys and not any(
                    isinstance(v, str) and v[:1] in ("'", '"') for v in value.values()):
                out.append((s, ToolCall(name, value), close + 1))
    return out


_CLOSERS = {">": "<", "]": "[", ")": "(", "}": "{"}


def _closes(literal: str, context: str) -> bool:
    """Whether ``literal`` ends with a closing bracket opened in it or in the markup around the keys."""
    opener = _CLOSERS.get(literal[-1:])
    return opener is not None and (opener in literal or opener in context)


def _value_start(middles: list[str], context: str) -> tuple[str, re.Pattern] | None:
    """What every value starts with and no value is, as ``(description, pattern)``: a shared literal (``<v>``), or a
    word between two literals (a per-value attribute: ``"int">``), ending with a bracket the markup opened; else None."""
    if len(middles) < 2 or all((head := json_head(m)) is not None and head[1] == len(m) for m in middles):
        return None
    start = _trim_value_start(common_prefix(*middles))
    if start.strip() and _closes(start.rstrip(), context) and all(len(m) > len(start) for m in middles):
        return repr(start), re.compile(re.escape(start))
    heads = [_ATTRIBUTE.match(m) for m in middles]
    if all(heads) and len({h.group(1) for h in heads}) == 1:
        before = heads[0].group(1)
        after = common_prefix(*(m[h.end():] for h, m in zip(heads, middles)))
        after = after[: max((after.rfind(c) for c in _CLOSERS), default=-1) + 1]
        if after and not any(c.isalnum() or c.isspace() for c in after) and _closes(after, before + context) \
                and all(len(m) > h.end() + len(after) for h, m in zip(heads, middles)):
            return (f"a word between {before!r} and {after!r}",
                    re.compile(rf"{re.escape(before)}(?![^\w\s])[\w.\-]+{re.escape(after)}"))
    return None


_ATTRIBUTE = re.compile(r"([^\w\s]*)([\w.\-]+)")


def _shared(texts: list[str], key_suffix: bool = False) -> str:
    """The suffix (``key_suffix``: the prefix, less what values start with) most of ``texts`` share, among the common
    affixes of consecutive texts."""
    common, trim, holds = ((common_prefix, _trim_value_start, str.startswith) if key_suffix
                           else (common_suffix, str, str.endswith))
    options = {trim(common(*pair)) for pair in itertools.pairwise(texts)} - {""}
    return max(options, key=lambda o: (sum(1 for t in texts if holds(t, o)), len(o)), default=trim(common(*texts)))


def _decoded(text: str, pos: int) -> tuple[tuple[Any, int] | None, int]:
    """``(head, read)``: the JSON value ``text`` holds at ``pos`` and where it ends (None when none starts there), and
    how many characters decoding it read: up to the value's end, or to where decoding failed (the rest of the text
    when it failed without saying where)."""
    if text[pos : pos + 1] not in JSON_STARTS:
        return None, 1
    try:
        value, end = JSON_DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        return None, max(exc.pos - pos, 1)
    except (ValueError, RecursionError):
        return None, len(text) - pos
    return (value, end), end - pos


def _last_inline(raw: str) -> str:
    """The last value of a call written on one line: a JSON value it starts with, else its first word when markup
    follows it (``3 #END``); else nothing."""
    head = json_head(raw)
    if head is not None and not _WORD_NEXT.match(raw, head[1]):
        return raw[: head[1]]
    first, _, rest = raw.partition(" ")
    return "" if _WORD_NEXT.match(rest) else first


_WORD_NEXT = re.compile(r"\s*\w")  # a word character next, after spaces
_LAST_SYMBOLS = re.compile(r"(?<!\S)[^\w\s]+\Z")  # the last word of a text when it is symbols only
_BLANK, _BLANK_LINES = re.compile(r"[ \t]*"), re.compile(r"[ \t\n]*")
_VALUE_HEAD = re.compile(r"[\w\"'{\[\-+.]*\Z")  # what values start with: letters, digits, quotes, brackets, signs
_VALUE_TAIL = re.compile(r"[\w\"'}\]. ]*")  # what values end with: letters, digits, quotes, closers, dots, spaces
_FIRST_LINE = re.compile(r"\s*[^\n]*")  # the spaces a text starts with and the rest of its first line


def _trim_value_start(s: str) -> str:
    """A key suffix less what values that happen to start alike share."""
    s = _FIRST_LINE.match(s).group()
    s = s[: _VALUE_HEAD.search(s).start()]
    close = max(s.rfind(c) for c in _CLOSERS) + 1
    if close and any(c.isalnum() for c in s[close:]):
        s = s[:close]  # markup closed, then the start of values that happen to start alike
    return s


def _trim_value_end(s: str) -> str:
    """A value end less what values that happen to end alike share."""
    return s[_VALUE_TAIL.match(s).end():]
