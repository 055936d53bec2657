"""The call literals of a family's record (:class:`~refiner.formats.derive.record.Record`), read from the section of two
calls its template wrote: JSON arguments after a name (:func:`read_json_args`), call objects (:func:`read_json_object`)
or an element per argument (:func:`read_pairs`), then the section and call literals around them (:func:`_frame`)."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

from refiner.formats.anchored import quote_closers
from refiner.formats.brace_kv import write_quoted
from refiner.formats.derive.record import ARGS, IDS, NAMES, Record
from refiner.formats.recorded import holds_quote
from refiner.formats.strict import json_head
from refiner.formats.text import common_prefix, next_bracket


def json_values(text: str) -> list[tuple[int, int, Any]]:
    """The outermost JSON objects and lists in ``text``: ``(start, end, value)``."""
    out, i = [], 0
    while (i := next_bracket(text, i)) >= 0:
        if (head := json_head(text, i)) is None:
            i += 1
            continue
        out.append((i, head[1], head[0]))
        i = head[1]
    return out


def find_value(text: str, start: int, value: Any, quote: tuple[str, str] = ("", "")) -> tuple[int, int, str] | None:
    """The earliest (then longest) spelling of ``value`` at or after ``start``: ``(start, end, style)``, style ``raw``,
    ``json``, ``python`` or ``quoted``."""
    spellings = [(json.dumps(value, ensure_ascii=False), "json")]
    if quote[0] and isinstance(value, (str, list, dict)) and not holds_quote(value, quote[1]):
        spellings.append((write_quoted(value, *quote), "quoted"))
    if isinstance(value, str):
        spellings += [(repr(value), "python"), (value, "raw")]
    else:
        spellings.append((json.dumps(value, ensure_ascii=False, separators=(",", ":")), "json"))
        if isinstance(value, (bool, list, dict)):
            spellings.append((repr(value), "python"))
    found = [(i, i + len(sp), style) for sp, style in spellings if (i := text.find(sp, start)) >= 0]
    return min(found, key=lambda f: (f[0], -f[1]), default=None)


def _edges(rec: Record, lead: str, tail: str) -> None:
    """The section's start and end: ``lead`` and ``tail`` less the turn's header and end at their outer edges (when
    more than that is left), the start also less an empty reasoning block written before the calls."""
    start, end = rec.turn_start.strip(), rec.turn_end.strip()
    if start and lead.strip() != start and lead.strip().startswith(start):
        lead = lead[lead.find(start) + len(start):]
    if end and tail.strip() != end and tail.strip().endswith(end):
        tail = tail[: tail.rfind(end)]
    empty = rec.reasoning_start.strip() + rec.reasoning_end.strip()
    core = lead.lstrip()
    if empty and empty != rec.reasoning_start.strip() and core.startswith(empty) and core[len(empty):].strip():
        lead = core[len(empty):]
    rec.section_start, rec.section_end = lead, tail


def _name_suffix(rec: Record, gaps: tuple[str, str], what: str) -> bool:
    """``name_suffix``: the text after each call's name (``gaps``, ``what`` it is), the same for both calls but for
    the call id written in it (then the part before the id; the part after it is ``id_suffix``); else why not."""
    before, _, after = gaps[0].partition(IDS[0])
    if gaps[0] == gaps[1]:
        rec.name_suffix = gaps[0]
    elif IDS[0] in gaps[0] and gaps[1] == before + IDS[1] + after and after.strip():
        rec.name_suffix, rec.id_position, rec.id_suffix = before, "after_name", after
        rec.derived_from.update(id_position="two: the given call id is written between the name and the arguments",
                                id_suffix="two: between each call's id and its arguments")
    else:
        n = len(common_prefix(*gaps))  # (differing only in the call's place in the turn: 0, then 1)
        numbered = gaps[0][n:n + 1] == "0" and gaps[1][n:n + 1] == "1" and gaps[0][n + 1:] == gaps[1][n + 1:]
        why = ": it numbers the calls (0, 1, ...), a counter no spelling holds" if numbered else ""
        rec.missing.append(f"name_suffix: {what} differs per call ({gaps[0]!r}, {gaps[1]!r}){why}")
        return False
    return True


def _call_keys(value: Any, i: int, wrapped: bool = False) -> dict[str, Any] | None:
    """The record's keys of call ``i`` written as one JSON object (``None``: it is not)."""
    if not isinstance(value, dict):
        return None
    if not wrapped and len(value) == 1 and value.get(NAMES[i]) == ARGS[i]:
        return {"keyed": True}
    # the key of the call's id: the id given, or the call's place in the turn
    id_key = next((k for k, v in value.items() if v == IDS[i] or type(v) in (int, str) and str(v) == str(i)), "")
    name_key = next((k for k, v in value.items() if v == NAMES[i]), None)
    if name_key is None:  # the call object under a key of this one (one level down)
        inner = None if wrapped else next(((k, c) for k, v in value.items() if (c := _call_keys(v, i, True))), None)
        if inner is None:
            return None
        key, keys = inner
        if id_key and not keys["id_key"]:
            keys.update(id_key=id_key, id_position="wrapper_key")
        return keys | {"wrapper": key, "wrapper_fields": {x: y for x, y in value.items() if x not in (key, id_key)}}
    out = {"name_key": name_key, "id_key": id_key, "id_position": "json_key" if id_key else "", "wrapper": "",
           "wrapper_fields": {}}
    for k, v in value.items():
        text = v.rstrip() if isinstance(v, str) else ""  # (the arguments as a JSON string: that object alone)
        if v == ARGS[i] or json_values(text) == [(0, len(text), ARGS[i])]:
            return out | {"args_key": k, "args_as_text": v != ARGS[i]}
    return None


def _set_keys(rec: Record, shape: str, keys: dict[str, Any], written: str) -> None:
    """The record's shape and JSON keys; ``written``: the first call's object (or the list) as the template wrote it."""
    rec.shape, rec.compact_json = shape, ", " not in written and ": " not in written
    for k, v in keys.items():
        setattr(rec, k, v)
    if rec.keyed:
        rec.derived_from["keyed"] = "two: each call object's one key is the name, its value the arguments"
        return
    rec.derived_from.update(name_key="two: the key holding tlq_alpha", args_key="two: the key holding the arguments")
    if rec.id_key:
        rec.derived_from["id_key"] = "two: the key holding the given call id (or the call's place in the turn)"
    if rec.wrapper:
        rec.derived_from.update(wrapper="two: the key of the outer object holding each call object",
                                wrapper_fields="two: the outer object's other members (the same in every call)")


def read_json_object(rec: Record, two: str) -> bool:
    values = json_values(two)
    for start, end, value in values:
        if isinstance(value, list) and len(value) == 2:
            k0, k1 = _call_keys(value[0], 0), _call_keys(value[1], 1)
            if k0 and k1 and k0 == k1:
                _set_keys(rec, "json_list", k0, two[start:end])
                _edges(rec, two[:start], two[end:])
                rec.derived_from.update(shape="two: both calls in one JSON list", section_start="two: before the list",
                                        section_end="two: after the list")
                return True
    objs = [(s, e, k) for s, e, v in values for i in (0, 1) if (k := _call_keys(v, i))]
    if len(objs) != 2:
        return False
    (s0, e0, k0), (s1, e1, k1) = objs
    if k0 != k1:
        rec.missing.append("calls: the two calls' JSON objects use different keys")
        return False
    _set_keys(rec, "json_object", k0, two[s0:e0])
    rec.derived_from["shape"] = "two: one JSON object per call" + (" (under a key of an outer object)"
                                                                   if rec.wrapper else "")
    return _frame(rec, two, [(s0, e0), (s1, e1)])


def read_json_args(rec: Record, two: str) -> bool:
    args = [(s, e) for s, e, v in json_values(two) if v in (ARGS[0], ARGS[1])]
    if len(args) != 2:
        return False
    n0, n1 = two.find(NAMES[0]), two.find(NAMES[1], args[0][1])
    if not (n0 < args[0][0] and 0 <= n1 < args[1][0]):
        return False
    gap0, mid1 = two[n0 + len(NAMES[0]): args[0][0]], two[n1 + len(NAMES[1]): args[1][0]]
    if not _name_suffix(rec, (gap0, mid1), "the text between the name and the arguments"):
        return False
    rec.shape = "json_args"
    rec.compact_json = ", " not in two[args[0][0]:args[0][1]]
    rec.derived_from.update(shape="two: each call's name, then its arguments as one JSON object",
                            name_suffix="two: between each name and its arguments" + (
                                " (its id)" if rec.id_suffix else ""))
    return _frame(rec, two, [(n0, args[0][1]), (n1, args[1][1])])


def _spans(text: str, start: int, args: dict, quote: tuple[str, str]) -> list[tuple[int, int, int, int, str]] | str:
    """Each argument's ``(key start, key end, value start, value end, style)`` in ``text`` from ``start``, in the
    order written; else why not."""
    at = {key: text.find(key, start) for key in args}
    out = []
    for key in sorted(args, key=at.get):
        k = at[key]
        if k < 0:
            return f": the key {key!r} is not written after the tool name"
        found = find_value(text, k + len(key), args[key], quote)
        if found is None:
            return (f": the value {args[key]!r} of {key!r} is written in none of the spellings read (as is, JSON, "
                    f"Python, between quote tokens): the template wrote {text[k: k + len(key) + 40]!r}")
        out.append((k, k + len(key), *found))
    return " (the values overlap the keys)" if any(a[3] > b[0] for a, b in pairwise(out)) else out


def _quote(rec: Record, two: str, start: int) -> tuple[str, str]:
    """The quote tokens around string values: what lies between a key and its string value beyond what lies between
    a key and its integer value, and what closes it; ``("", "")`` when strings are not written so."""
    ks, kc = two.find("kq_text", start), two.find("kq_count", start)
    vs, vc = two.find(ARGS[0]["kq_text"], ks), two.find(str(ARGS[0]["kq_count"]), kc)
    if min(ks, kc, vs, vc) < 0:
        return "", ""
    s_delim, c_delim = two[ks + len("kq_text"): vs], two[kc + len("kq_count"): vc]
    q_open = s_delim[len(c_delim):]
    if not s_delim.startswith(c_delim) or not q_open.strip() or q_open.strip() in ('"', "'"):
        return "", ""
    after = two[vs + len(ARGS[0]["kq_text"]):]
    for q_close in quote_closers(q_open):
        if after.startswith(q_close):
            rec.quote_open, rec.quote_close = q_open, q_close
            rec.derived_from.update(quote_open="one: between a key and a string value, beyond what lies between a "
                                    "key and an integer", quote_close="one: after a string value")
            return q_open, q_close
    rec.missing.append(f"quote_close: a string value follows {q_open!r} but is not closed by the same token, its "
                       f"mirror or its closing tag ({after[:20]!r} follows it)")
    return "", ""


def read_pairs(rec: Record, two: str) -> bool:
    n0 = two.find(NAMES[0])
    quote = _quote(rec, two, n0 + len(NAMES[0]))
    if rec.missing:
        return False
    a0 = _spans(two, n0 + len(NAMES[0]), ARGS[0], quote)
    n1 = two.find(NAMES[1], a0[-1][3]) if isinstance(a0, list) else -1
    a1 = _spans(two, n1 + len(NAMES[1]), ARGS[1], quote) if n1 >= 0 else " (the second name follows no argument)"
    if isinstance(why := a0 if isinstance(a0, str) else a1, str):
        rec.missing.append(f"arguments: neither one JSON value per call nor one element per argument{why}")
        return False
    delims = [two[ke:vs] for _, ke, vs, _, _ in a0] + [two[a1[0][1]: a1[0][2]]]
    vals0 = [ARGS[0][two[ks:ke]] for ks, ke, *_ in a0]  # (in the order written)
    by_kind: dict[bool, set[str]] = {True: set(), False: set()}  # the key suffixes before strings / other values
    for delim, value in zip(delims, (*vals0, *ARGS[1].values())):
        by_kind[isinstance(value, str)].add(delim)
    (suffix, *more), typed = sorted(by_kind[True]), by_kind[False] - by_kind[True]
    other = next(iter(typed), "")  # (a typing attribute: the two part after a shared start, not only spaces)
    n = len(common_prefix(suffix, other))
    if more or len(by_kind[False]) > 1 or typed and not (suffix[:n].strip() and n < len(suffix) and n < len(other)):
        rec.missing.append(f"key_suffix: the text between a key and its value differs by the value's type "
                           f"({sorted(set(delims))!r}), one spelling per type: the record holds one for strings "
                           "and one for every other value")
        return False
    rec.key_suffix = suffix
    if typed:  # a typing attribute: one spelling for strings, one for every other value
        rec.key_suffix_typed = typed.pop()
        rec.derived_from["key_suffix_typed"] = ("one, two: between a key and a value other than a string (the key's "
                                                "typing attribute)")
    styles = {type(v).__name__: st for (*_, st), v in zip(a0, vals0)}
    rec.strings, others = styles.pop("str"), set(styles.values())
    rec.literals = next((s for s in ("quoted", "python") if s in others), "json")
    items = next(two[vs:ve] for (ks, ke, vs, ve, _) in a0 if two[ks:ke] == "kq_items")
    rec.compact_json = rec.literals == "json" and ", " not in items
    trails = [two[a0[i][3]: a0[i + 1][0]] for i in range(len(a0) - 1)]
    header = NAMES[0] in two[n0 + len(NAMES[0]): a0[0][0]] and NAMES[1] in two[n1 + len(NAMES[1]): a1[0][0]]
    if header:  # each name written twice: a header names the call first
        n0, n1 = two.rfind(NAMES[0], 0, a0[0][0]), two.rfind(NAMES[1], 0, a1[0][0])
    lead0, lead1 = two[n0 + len(NAMES[0]): a0[0][0]], two[n1 + len(NAMES[1]): a1[0][0]]
    after = (two[a0[-1][3]: n1], two[a1[-1][3]:])
    vs = marker_prefix(*trails, *after)
    kp = marker_suffix(lead0, lead1, *(t[len(vs):] for t in trails))
    seps = {t[len(vs): len(t) - len(kp)] for t in trails}
    if len(seps) != 1 or any(len(vs) + len(kp) > len(t) for t in trails):
        rec.missing.append(f"arg_sep: the text between arguments varies ({sorted(set(trails))!r})")
        return False
    rec.value_suffix, rec.key_prefix, rec.arg_sep = vs, kp, seps.pop()
    gaps = (lead0[: len(lead0) - len(kp)], lead1[: len(lead1) - len(kp)])
    twice = "each call's name is written twice, the second time inside the call: " if header else ""
    if not _name_suffix(rec, gaps, f"{twice}the text after the name"):
        return False
    rec.shape = "pairs"
    rec.derived_from.update(
        shape="two: each call's name, then each argument's key and value",
        key_prefix="two: what precedes every key", key_suffix="two: between every key and its value",
        value_suffix="two: what follows every value", arg_sep="two: between consecutive arguments",
        name_suffix="two: after each name, before its first key", strings="one: how 'vq text one' is written",
        literals="one: how true, a list and an object are written")
    end = len(rec.value_suffix)
    return _frame(rec, two, [(n0, a0[-1][3] + end), (n1, a1[-1][3] + end)], header)


def marker_prefix(*texts: str, opens: str = "<[", closes: str = ">]") -> str:
    """The common prefix of ``texts``, cut before a marker it ends in (``</p>`` of ``</p><p>`` and ``</p></call>``)."""
    n, first = len(common_prefix(*texts)), texts[0]
    while n > 0 and first[n - 1] in opens and all(len(t) > n and not t[n].isspace() for t in texts):
        n -= 1
    if all(len(t) > n and not t[n].isspace() for t in texts):
        n = open_marker(first[:n], opens, closes)
    return first[:n]


def open_marker(text: str, opens: str = "<[", closes: str = ">]") -> int:
    """Where the marker ``text`` ends inside opens (``<`` of ``<invoke name="``); ``len(text)`` when none is open."""
    j = max(text.rfind(opens[0]), text.rfind(opens[1]))
    return j if j >= 0 and not any(c in text[j:] for c in closes) else len(text)


def marker_suffix(*texts: str) -> str:
    """:func:`marker_prefix` mirrored."""
    return marker_prefix(*(t[::-1] for t in texts), opens=">]", closes="<[")[::-1]


def _frame(rec: Record, two: str, spans: list[tuple[int, int]], header: bool = False) -> bool:
    """Section and call literals from the two calls' cores ``spans`` in ``two``; with ``header``, each call follows
    a header that names it (``to=NAME<|message|>``), no part of the call."""
    (s0, e0), (s1, e1) = spans
    lead, between, tail = two[:s0], two[e0:s1], two[e1:]
    closer = marker_prefix(between, tail)
    if header:
        h0, h1 = lead.find(NAMES[0]), between.find(NAMES[1], len(closer))
        opener = marker_suffix(lead[h0 + len(NAMES[0]):], between[h1 + len(NAMES[1]):])
        k = next((k for k in range(len(opener), 0, -1) if rec.turn_start.endswith(opener[:k])), 0)
        opener = opener[k:]  # the header's end, spelt as the turn header's (``to=user<|message|>``)
        lead, between = lead[:h0] + opener, between[:h1] + opener
        rec.call_header = True
        rec.derived_from["call_header"] = ("two: each call's name is written twice, first in a header ending as the "
                                           "turn's header ends; the call opens after it")
    else:
        opener = marker_suffix(lead, between[len(closer):])
    _edges(rec, lead[: len(lead) - len(opener)], tail[len(closer):])
    rec.call_sep = between[len(closer): len(between) - len(opener)]
    cut = len(opener) if rec.shape == "json_object" else max(opener.rfind(c) for c in " \n\t") + 1
    rec.call_start, rec.name_prefix = opener[:cut], opener[cut:]
    rec.call_end = closer
    rec.derived_from.update(
        section_start="two: before the first call, less what also precedes the second",
        section_end="two: after the last call, less what also follows the first",
        call_start="two: what precedes both calls (split from name_prefix at its last space)",
        name_prefix="two: the end of what precedes both calls, after its last space",
        call_end="two: what follows both calls", call_sep="two: between the calls, less what follows and precedes each")
    if not (opener.strip() or rec.section_start.strip()):
        rec.missing.append("call_start: nothing but spaces precedes the calls (an untagged format): no literal tells a "
                           "call from prose")
        return False
    return True
