"""Lenient reading helpers: regions between tags that may be missing, broken JSON, call objects with any of the
usual key spellings. None raises; each defect met is a :class:`~refiner.formats.base.Problem`."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Lenient, Problem, markup_name, name_refused, offered_tools
from refiner.formats.jsonfix import (CUT_ESCAPE, budget_spent, finite, give_up, lenient_json, open_at_cut,
                                     ran_off_the_end, take_items, written_whole)
from refiner.formats.strict import JSON_DECODER, json_head
from refiner.formats.text import next_bracket, skip_ws, strip_reasoning
from refiner.formats.xmlvalues import Finder


def lenient_region(text: str, open_tag: str, close_tag: str, problems: list[Problem]) -> str:
    """What lies between the tags after any reasoning, either tag may be missing (reported)."""
    body = strip_reasoning(text)
    i = body.find(open_tag)
    if i < 0:
        problems.append(Problem("missing_tag", f"missing {open_tag}"))
    else:
        body = body[i + len(open_tag) :]
    j, tag = TokenFinder(body, (close_tag,)).first(0)
    if tag is None:
        problems.append(Problem("missing_tag", f"missing {close_tag}"))
    else:
        body = body[:j]
    return body


def lenient_list(text: str, open_tag: str, close_tag: str, problems: list[Problem], what: str) -> list[Any]:
    """The items of the JSON list between the tags; a value that is not a list is one item (reported)."""
    value = lenient_json_in_prose(lenient_region(text, open_tag, close_tag, problems))
    if not isinstance(value, list):
        problems.append(Problem("not_a_list", f"{what} are not a JSON list"))
    return as_items(value)


_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'  # a JSON string
_ESCAPE = r'\\[\\"]'  # outside strings too, a backslash takes the backslash or quote after it
_QUOTED = re.compile(rf'{_ESCAPE}|{_STRING}|"', re.DOTALL)  # a lone quote: a string left open


@functools.lru_cache(maxsize=64)
def _outside_strings(tokens: tuple[str, ...]) -> re.Pattern:
    """One of ``tokens`` (group 1), a run of other text with its JSON strings, or a lone ``"`` (a string left open)."""
    alts = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))
    firsts = "".join(sorted({re.escape(t[0]) for t in tokens}))
    run = rf'(?:[^"\\{firsts}]+|{_ESCAPE}|\\|{_STRING}|(?!{alts})[{firsts}])+'
    return re.compile(rf'({alts})|{run}|"', re.DOTALL)


# Tells whether JSON values run to the end of the text valid as far as they go (lenient: raw line breaks in strings).
_CUT_DECODER = json.JSONDecoder(strict=False)
MAX_CUT_VALUES = 64  # JSON values before the one a text was cut in (a block of one call per line)


def _cut_inside(text: str, start: int, quote: int) -> bool:
    """Whether the JSON values from ``start`` (one after another) are valid up to the string opened at ``quote``,
    which the end of the text leaves open: a text cut inside that string, not a quote lost in the middle."""
    pos = start
    for _ in range(MAX_CUT_VALUES):
        try:
            _, end = _CUT_DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            if e.msg.startswith("Unterminated string"):
                return e.pos == quote
            cut_escape = e.msg.startswith("Invalid \\uXXXX") and CUT_ESCAPE.fullmatch(text, e.pos) is not None
            return cut_escape and e.pos > quote
        except (ValueError, RecursionError):
            return False
        pos = skip_ws(text, end)
        if pos >= quote or text[pos : pos + 1] not in ("{", "["):
            return False
    return False


class TokenFinder:
    """The first of some tokens from a position on, outside JSON strings, in linear time. A string the text ends in was
    cut (:func:`_cut_inside`: no token after its quote is one) or lost its quote (tokens searched plainly from it)."""

    def __init__(self, text: str, tokens: Sequence[str]) -> None:
        self.text = text
        self.tokens = tuple(dict.fromkeys(t for t in tokens if t))
        self.pattern = _outside_strings(self.tokens)
        # (no tag starts with a quote; without tokens there is nothing to skip strings for)
        self.plain = not self.tokens or any(t.startswith('"') for t in self.tokens)
        self.end = len(text)  # tokens are looked for before this: the quote of the string the text was cut in
        self._next = Finder(text).next  # (a token's next occurrence from a position, each searched once)

    def first(self, pos: int) -> tuple[int, str | None]:
        """``(position, token)`` of the earliest token at or after ``pos``, or ``(len(text), None)``; strings are
        skipped only where a JSON value starts at ``pos``."""
        text, end = self.text, self.end
        start = skip_ws(text, pos)
        if not self.plain and text[start : start + 1] in ("{", "["):
            for m in self.pattern.finditer(text, pos, end):
                if m.group(1) is not None:
                    return m.start(), m.group(1)
                if m.group() == '"':
                    if end < len(text) or _cut_inside(text, start, m.start()):  # (decoded once at most)
                        self.end = m.start()
                        return len(text), None
                    self.plain, pos = True, m.start()  # a quote lost: the rest is read plainly
                    break
            else:
                return len(text), None
        best, which = len(text), None
        for t in self.tokens:  # (each token's next occurrence is searched for once while pos goes forward)
            i = self._next(t, pos)
            if 0 <= i < best and i + len(t) <= end:
                best, which = i, t
        return best, which


def tokens_outside_strings(text: str, start: int, token: str, starts_call: re.Pattern | None = None) -> list[int]:
    """Positions of the ``token`` occurrences after ``start`` (``token`` holds no quote or backslash) that lie outside
    JSON strings (a string left open runs to the end); with ``starts_call`` (a token that starts a call), only the
    first, or an earlier one inside a string where ``starts_call`` matches (the string lost its closing quote).
    Linear: the text before each token is searched once for strings."""
    found: list[int] = []
    pos, b, quote = start, text.find(token, start), text.find('"', start)
    while b >= 0:
        quote = text.find('"', pos) if 0 <= quote < pos else quote  # (the next quote: where a string may start)
        m = _QUOTED.search(text, pos) if 0 <= quote < b else None  # (the first string, escape or lone quote)
        if m is None:  # no string before the token
            found.append(b)
            if starts_call is not None:
                return found
            pos = b + len(token)
            b = text.find(token, pos)
            continue
        pos, lone = m.end(), m.group() == '"'  # (lone: the rest of the text is inside a string)
        if starts_call is not None and (lone or pos > b):
            call = starts_call.search(text, b, len(text) if lone else pos + 300)
            if call is not None and (lone or call.start() < pos):
                return [call.start()]
        if lone:
            return found
        b = text.find(token, pos) if pos > b else b
    return found


def past_strings(finder: TokenFinder, pos: int, end: int, tag: str | None) -> tuple[int, str | None]:
    """``(end, tag)`` of a call found plainly to end at ``end``, once the JSON value it holds is read past."""
    brace = finder.text.find("{", pos, end)
    if brace < 0:
        return end, tag
    return finder.first(brace)


def object_ends_before(text: str, start: int, at: int) -> bool:
    """Whether the JSON object after ``start`` closes right before ``at`` (a ``}``, then blanks) and does not decode
    across it: a token at ``at`` that skipping strings read past ends it (a quote lost in it made a string run on),
    unless the object is valid up to the end of the text (a text cut after the token, which is then a value's)."""
    if not text[start:at].rstrip().endswith("}"):
        return False
    if not 0 <= (brace := next_bracket(text, start)) < at:  # (the value the block holds: an object or a list)
        return True
    try:
        return JSON_DECODER.raw_decode(text, brace)[1] <= at
    except json.JSONDecodeError as e:
        return not ran_off_the_end(text, e)
    except (ValueError, RecursionError):
        return True


def lenient_blocks(
    text: str, open_tag: str, close_tag: str, problems: list[Problem], stop: str | None = None
) -> Iterator[str]:
    """The bodies of the tag blocks after any reasoning, missing tags reported: without ``open_tag`` the text is one
    block; an unclosed block runs to the next ``open_tag`` (or ``stop``), a block that a string ran on past its
    close (:func:`object_ends_before`) to that close."""
    body = strip_reasoning(text)
    find, plain = TokenFinder(body, (open_tag, close_tag)).first, Finder(body).first
    i = body.find(open_tag)
    if i < 0:
        problems.append(Problem("missing_tag", f"missing {open_tag}"))
    while take_items(1):
        a = 0 if i < 0 else i + len(open_tag)
        end, tag = find(a)
        if (k := plain((close_tag,), a))[0] < end and object_ends_before(body, a, k[0]):
            end, tag = k
        if tag == close_tag:
            yield body[a:end]
            i = i if i < 0 else body.find(open_tag, end + len(close_tag))  # (text between blocks: prose, read plainly)
        else:
            problems.append(Problem("missing_tag", f"missing {close_tag}"))
            yield body[a:end] if stop is None else body[a:end].split(stop, 1)[0]
            i = end if tag is not None and i >= 0 else -1
        if i < 0:
            return


LENIENT_CANDIDATES = 8


def _holds_objects(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value))


def lenient_json_in_prose(text: str, accept: Any = _holds_objects) -> Any:
    """The first JSON value recovered at one of the first :data:`LENIENT_CANDIDATES` brackets of ``text`` that
    ``accept`` takes (default: an object, or a list holding one); else the first recovered, or ``None``."""
    first = None
    pos = 0
    for _ in range(LENIENT_CANDIDATES):
        pos = next_bracket(text, pos)
        if pos < 0 or budget_spent():
            break
        # a valid value no bracket follows is whole (repairing could not add to it)
        value, end = json_head(text, pos) or (None, -1)
        if end < 0 or next_bracket(text, end) >= 0:
            value = lenient_json(text[pos:])
        if value is not None and accept(value):
            return value
        if first is None:
            first = value
        pos += 1
    return first


NAME_KEYS = ("name", "api_name", "tool_name", "function_name", "tool")

ARG_KEYS = ("arguments", "parameters", "input", "args", "params")
CALL_METADATA_KEYS = frozenset({"id", "type", "index", "function", "label", "responses", "step", "call_id",
                                "tool_call_id"})


def coerce_call(item: Any, problems: list[Problem], *, outputs: tuple[str, ...] = ()) -> ToolCall | None:
    """A call from a loosely shaped dict (the usual name and argument keys, ``function`` nesting, arguments as
    JSON text); ``None``, with a problem, when it names none."""
    if not isinstance(item, dict):
        problems.append(Problem("not_a_call", f"not a call object: {str(item)[:80]!r}"))
        return None
    fn = item.get("function")
    if isinstance(fn, dict):
        item = {**item, **fn}
    name = next((item[k] for k in NAME_KEYS if isinstance(item.get(k), str) and item[k].strip()), None)
    if name is None and isinstance(fn, str) and fn.strip():
        name = fn
    if name is None:
        problems.append(Problem("no_name", f"call without a name: {str(item)[:80]!r}"))
        return None
    arg_key = next((k for k in ARG_KEYS if k in item), None)
    if arg_key is None:
        flat = {k: v for k, v in item.items() if k not in NAME_KEYS and k not in CALL_METADATA_KEYS}
        if flat:  # {"name": "f", "city": "Paris"}: the arguments written beside the name; kept, and reported
            problems.append(Problem("flat_arguments", f"arguments of {name!r} written beside its name: {sorted(flat)}"))
        raw: Any = flat
    else:
        raw = item[arg_key]
    if isinstance(raw, str):
        raw = lenient_json(raw) if raw.strip() else {}
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append(Problem("bad_arguments", f"arguments of {name!r} are not an object: {str(raw)[:80]!r}"))
        raw = {}
    return ToolCall(name, {str(k): v for k, v in raw.items()}, outputs=outputs)


def as_items(value: Any) -> list[Any]:
    """A JSON value as a list of items (a list as it is, None as none), as many as may still be read."""
    if value is None:
        return []
    if not isinstance(value, list):
        return [value] if take_items(1) else []
    k = take_items(len(value))
    return value if k == len(value) else value[:k]


def add_call(out: Lenient, item: Any, *, outputs: tuple[str, ...] = ()) -> None:
    """Adds the call :func:`coerce_call` makes of ``item``, marked as cut when the text stops inside it; a call whose
    name is markup (:func:`~refiner.formats.base.markup_name`) is none, reported as ``markup_name``."""
    call = coerce_call(item, out.problems, outputs=outputs)
    if call is not None and markup_name(call.name):
        out.problems.append(Problem("markup_name", name_refused(call.name)))
        call = None
    if call is not None:
        out.calls.append(call)
    if type(item) is dict:
        cut = cut_call(item, call)
        if cut is not None:
            out.mark_cut(len(out.calls) - 1 if call is not None else None, *cut)


def cut_call(item: dict, call: ToolCall | None) -> tuple[str | None, dict[str, Any], bool] | None:
    """``(name written whole, arguments written whole, clean)`` for a call object a cut left open, else ``None``."""
    fn = item.get("function")
    holders = [item, fn] if type(fn) is dict else [item]
    states = [(h, open_at_cut(h)) for h in holders]
    opened = [s for _, s in states if s is not None]
    if not opened:
        return None
    clean = opened[0][1].clean
    name, args = (call.name, dict(call.arguments)) if call is not None else (None, {})
    for holder, state in states:
        if state is None or not holder:
            continue
        key = next(reversed(holder))
        last = state[0]
        value = holder[key]
        if key in NAME_KEYS and value == name:
            if last != "complete":
                name = None
        elif key in ARG_KEYS:
            inner = open_at_cut(value) if type(value) is dict else None
            if inner is not None:
                if inner[0] != "complete" and value:
                    args.pop(str(next(reversed(value))), None)
            elif last != "complete":  # arguments written as a JSON text, cut inside it
                args = written_whole(value) if type(value) is str else {}
        elif key not in CALL_METADATA_KEYS and last != "complete":
            args.pop(str(key), None)  # an argument written beside the name
    return name, args, clean


def run_together(name: str) -> int:
    """The length of the offered tool's name that ``name`` starts with when the rest is one of that tool's parameters
    (what stood between them lost: ``NAMEkey``); else 0."""
    tools = offered_tools()
    if not tools or name in tools:
        return 0
    return next((len(t) for t in tools if name.startswith(t) and name[len(t):] in (tools[t] or ())), 0)


def written_before_cut(args: dict) -> tuple[dict[str, Any], bool] | None:
    """``(members written whole, clean)`` for arguments a cut left open, else ``None``."""
    state = open_at_cut(args)
    if state is None:
        return None
    whole = {str(k): v for k, v in args.items()}
    if state[0] != "complete" and whole:
        whole.pop(next(reversed(whole)))
    return whole, state[1].clean


def add_arguments_call(out: Lenient, name: str, body: str, *, at_end: bool) -> None:
    """Adds the call ``name`` whose arguments are the JSON object text ``body``; ``at_end``: the text ends inside
    the call, which is marked as cut unless its arguments were closed."""
    body = body.strip()
    head = json_head(body)
    if head is None or type(head[0]) is not dict:
        args = lenient_json(body, at_end=at_end) if body else {}
    else:  # the object whole: text after it read with it when that gives an object (a '}' written early), else dropped
        rest = body[head[1]:].strip()  # (another object after it: repaired together, the two would merge)
        args = lenient_json(body, at_end=at_end) if rest and "{" not in rest else None
        if not isinstance(args, dict):
            if rest:  # (another object: maybe a call lost; other text: the call's closer written wrong)
                out.note("unreadable" if "{" in rest else "missing_tag",
                         f"text after the arguments of {name[:60]!r} dropped: {rest[:60]!r}")
            args = finite(head[0])
    if not isinstance(args, dict):
        out.note("bad_arguments", f"arguments of {name[:60]!r} are not an object: {body[:60]!r}")
        args = None
    out.calls.append(ToolCall(name, {str(k): v for k, v in (args or {}).items()}))
    if not at_end:
        return
    cut = written_before_cut(args) if args is not None else None
    if cut is not None:
        out.mark_cut(len(out.calls) - 1, name, *cut)
    elif not body or args is None:
        out.mark_cut(len(out.calls) - 1, name)


MAX_BLOCK_LINES = 256  # lines of one tag block repaired one by one


def block_values(chunk: str) -> list[Any]:
    """The items of the JSON values a tag block holds, decoded in turn while valid; the rest repaired line by line
    when every line starts an object, else as one value. Lists give their items."""
    values: list[Any] = []
    pos = skip_ws(chunk, 0)
    while pos < len(chunk) and take_items(1) and (head := json_head(chunk, pos)) is not None:
        values.append(head[0])
        pos = skip_ws(chunk, head[1])
    items = [x for value in values for x in as_items(value)]
    rest = chunk[pos:]
    if not rest.strip() or budget_spent():
        return items
    parts = rest.split("\n", MAX_BLOCK_LINES)
    if len(parts) > MAX_BLOCK_LINES:
        give_up()
        parts.pop()
    lines = [ln for ln in parts if ln.strip()]
    if not (len(lines) > 1 and all(ln.lstrip().startswith("{") for ln in lines)):
        lines = [rest]
    return items + [x for ln in lines[: take_items(len(lines))] for x in as_items(lenient_json(ln))]
