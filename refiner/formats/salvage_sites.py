"""Reading one site of :mod:`refiner.formats.salvage`'s grammar into calls (:class:`SiteReader`), and tool names
resolved against the offered ones (:func:`resolve`)."""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Mapping
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import FormatError, Problem, WireFormat, marker_table, markup_name
from refiner.formats.jsonfix import budget_spent, lenient_json
from refiner.formats.lenient import ARG_KEYS, coerce_call
from refiner.formats.pythonic import CONSTANTS, Literals, parse_expr, parse_quietly, place_positional
from refiner.formats.pythonic_scan import STRICT_STRING, matching_paren
from refiner.formats.strict import json_head
from refiner.formats.text import dumps, skip_ws

MAX_CALL_CHARS = 4096  # a call's or object's text, brackets matched within this window
MAX_OBJECT_CHARS = 32_768  # a JSON object decoded strictly at one position
AST_BUDGET = 32_768  # characters given to Python's parser in all
PREFIX_CHARS = 160  # how much of a call's line before it is looked at


class _Reader(WireFormat):
    """Names the errors of the pythonic helpers (never registered)."""

    name = "salvage"


_READER = _Reader()
_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_SPELLING = re.compile(r"[\w.\- ]{1,256}")  # what another spelling of a tool name may hold
# A call: a dotted identifier (markdown-escaped underscores allowed) not inside a longer name, then "(".
CALL = re.compile(r"(?<![\w.\\])([^\W\d](?:\w|\\_)*(?:\.[^\W\d](?:\w|\\_)*)*)[ \t]*\(")
_TRAILER = " \t;,.)]}'\"`*"  # what may follow a call on its line without making it part of a sentence
_SPACED_HEAD = re.compile(r"[\[,][ \t]*((?:[^\W\d]\w*[ \t]+){1,6})\Z")  # a list item's tool name written with spaces
_PAIR_HEAD = re.compile(r"[\[(][ \t]*(['\"])([^'\"\n]{1,256})\1[ \t]*,[ \t\n]*\Z")
_PAIR_TAIL = re.compile(r"[ \t\n]*[\])]")
_NAMESPACE = ("functions", "function", "tools", "tool", "default_api", "api")
_NAME_CHARS = re.compile(r"[\w.:\-]*")  # what a name before an object may hold
_NAMED_HEAD = re.compile(r"(?:functions\.)?([^\W\d][\w.\-]*?)(?::\d+)?")  # NAME, or Kimi-K2's functions.NAME:0


def _pythonic_format() -> str | None:
    """The first registered format (by rank) that claims untagged pythonic calls."""
    return next((f.name for f in marker_table().claiming_texts if f.claims_text("[f(a=1)]")), None)


def normalise(name: str) -> str:
    """A tool name for comparison: lower case, separators dropped (``getWeather`` == ``get_weather``)."""
    return _NON_ALNUM.sub("", name.lower())


def is_offered(name: str, offered: Mapping[str, Any] | None) -> bool:
    """Whether ``name`` is one of the offered tools, up to case and separators (always False without tools)."""
    return offered is not None and resolve(name, offered)[1] is not None


def resolve(name: str, offered: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(name to emit, offered name or None)``: exact, then equal up to case and separators, then without a
    namespace prefix (``functions.get_weather``)."""
    if name in offered:
        return name, name
    if not _SPELLING.fullmatch(name):
        return name, None  # text around a name ("``` [get_weather") is not another spelling of it
    key = normalise(name)
    hits = [n for n in offered if normalise(n) == key]
    if len(hits) == 1:
        return name, hits[0]
    head, dot, rest = name.partition(".")
    if dot and head.lower() in _NAMESPACE:
        inner, hit = resolve(rest, offered)
        if hit is not None:
            return inner, hit
    return name, None


class SiteReader:
    """The site readers of salvage's scan (``salvage._Scan``), which keeps the state and the budgets they charge:
    ``text``, ``at`` (where the answer starts), ``offered``, the counters ``scanned``, ``parsed`` (at most
    :data:`AST_BUDGET`), ``unreadable``, ``notes``, ``sites``, and ``context``, ``add``, ``match_paren``,
    ``in_fence``, ``placed``. Each reader returns where scanning goes on."""

    def call_site(self, m: re.Match) -> int:
        """Reads the call whose name ``m`` matched; returns where scanning goes on."""
        start, paren = m.start(1), m.end() - 1
        written = m.group(1).replace("\\_", "_")
        if keyword.iskeyword(written.split(".")[0]):
            return m.end()
        structured, where, listed = self.context(start)
        if not structured:  # a raw ToolACE name with spaces as a list item: "[Get Stock Price(symbol='AAPL')"
            head = _SPACED_HEAD.search(self.text, max(self.at, start - PREFIX_CHARS), start)
            if head is not None and "\n" not in head.group(0):
                written = " ".join(head.group(1).split() + [written])
                start, (structured, where, listed) = head.start(1), (True, "in a list", True)
        name, hit = (written, None) if self.offered is None else resolve(written, self.offered)
        if (not structured and hit is None) or (self.offered is not None and hit is None and not listed):
            return m.end()  # prose, or a name that is not offered outside a list (code, a sentence)
        if start > self.at and self.text[start - 1] in ("'", '"') and (
                got := self.quoted_call(start - 1, written, name, hit, structured, where, listed)) is not None:
            return got
        close, closed = self.match_paren(paren)
        if not closed and close < len(self.text):
            return m.end()  # not closed within the window: not a call
        end = close + 1 if closed else len(self.text)
        if structured and not listed and where != "in a code fence" and self.sentence_follows(end):
            structured, where = False, "in prose"  # "get_weather() needs a city": a call inside a sentence
            if hit is None:
                return m.end()
        if not closed:  # the text ends inside the call: it is not presented as a complete call (nothing is invented)
            self.notes.append(f"a call to {name} cut off by the end of the text is left out")
            return m.end()
        call = self.read_call(name, hit, self.text[paren + 1 : close], structured, listed)
        if call is None:
            return m.end()
        self.add(start, end, [call], "pythonic call", _pythonic_format(), where, structured)
        return end

    def sentence_follows(self, end: int) -> bool:
        """Whether prose follows a call ending at ``end`` on its line (not other calls, separators or closers)."""
        line_end = self.text.find("\n", end, end + PREFIX_CHARS)
        rest = self.text[end : line_end if line_end >= 0 else end + PREFIX_CHARS].lstrip(_TRAILER)
        return bool(rest) and CALL.match(rest) is None

    def quoted_call(
        self, q: int, written: str, name: str, hit: str | None, structured: bool, where: str, listed: bool
    ) -> int | None:
        """A call written inside a string literal starting at ``q`` (``['f(a=1)']``): read from the string's value."""
        m = STRICT_STRING[self.text[q]].match(self.text, q, q + MAX_CALL_CHARS)
        if m is None:
            return None
        self.scanned += m.end() - 1 - q
        self.parsed += m.end() - q
        try:
            node = parse_quietly(m.group())
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            return None
        inner = node.value.strip()
        c = CALL.match(inner)
        if (c is None or c.group(1).replace("\\_", "_") != written or not inner.endswith(")")
                or matching_paren(inner, c.end() - 1) != len(inner) - 1):
            return None
        call = self.read_call(name, hit, inner[c.end() : -1], structured, listed)
        if call is None:
            return None
        self.add(q, m.end(), [call], "pythonic call quoted as a string", _pythonic_format(), where, structured)
        return m.end()

    def read_call(self, name: str, hit: str | None, args_src: str, structured: bool, listed: bool) -> ToolCall | None:
        """The call ``name(args_src)``, or None when its arguments are not a call's (see salvage's module docstring)."""
        for src_args in [args_src] + ([args_src.replace("\\_", "_")] if "\\_" in args_src else []):
            src = f"f({src_args})"
            if len(src) > MAX_CALL_CHARS + 3 or self.parsed + len(src) > AST_BUDGET:
                return None
            self.parsed += len(src)
            try:
                node = parse_expr(_READER, src, 0)
            except FormatError:
                continue
            if isinstance(node, ast.Call):
                break
        else:
            if structured:  # a call where calls go that Python cannot read: a format's own reading there is not prose
                self.unreadable += 1
                self.notes.append(f"a call to {name} that could not be read")
            return None
        if any(isinstance(a, ast.Starred) or _kind(a) != "literal" for a in node.args):
            return None  # a signature (get_weather(city)) or an expression: not a call to read
        lit = Literals(_READER, src, 0, strict=False)
        try:
            positional = [lit.value(a) for a in node.args]
        except FormatError:
            return None  # 1e999: no JSON value
        kinds = [_kind(kw.value) for kw in node.keywords]
        if "placeholder" in kinds or (not structured and "expression" in kinds):
            return None
        problems: list[Problem] = []
        try:
            args = lit.arguments(ast.Call(func=node.func, args=[], keywords=node.keywords), problems)
        except (FormatError, RecursionError):
            return None
        if positional:
            params = list(self.offered.get(hit, ()) or ()) if self.offered is not None and hit else None
            if not place_positional(positional, args, params, problems) and not listed:
                return None  # values that cannot be placed, outside a list: code (print("x")) or prose
        self.notes.extend(f"{name}: {p.message}" for p in problems)
        return ToolCall(name, args) if structured or args else None

    def object_site(self, at: int) -> int:
        """Reads the object starting at ``at`` when it is a call (or a message holding calls); returns where scanning
        goes on. What its Python literal was read as otherwise than written (bytes as text) is noted with its calls."""
        problems: list[Problem] = []
        value, end = self._object_value(at, problems)
        sites = len(self.sites)
        pos = self._object_calls(at, end, value)
        if len(self.sites) > sites:
            self.notes.extend(p.message for p in problems)
        return pos

    def _object_calls(self, at: int, end: int, value: Any) -> int:
        if not isinstance(value, dict):
            return at + 1
        if (got := self.named_object(at, end, value) or self.pair_object(at, end, value)) is not None:
            return got  # (each returns where scanning goes on, after the object, or None)
        structured, where, _ = self.context(at)
        if where == "in prose":
            where = "after prose"
        params = next((value[k] for k in ARG_KEYS if k in value), None)
        if "description" in value or (isinstance(params, dict) and isinstance(params.get("properties"), dict)
                                      and isinstance(params.get("type"), str)):
            return at + 1  # a tool's description quoted (whichever format's shape it has), not a call
        table = marker_table()
        for fmt in table.bare:
            if fmt.claims_value(value):
                try:
                    calls = [self.unescape_params(c) for c in fmt.parse_lenient(dumps(value)).calls
                             if usable_name(c.name)]
                except (TypeError, ValueError):
                    calls = []
                if calls:
                    self.add(at, end, calls, f"JSON message ({fmt.name})", fmt.name, where)
                    return end
        label = value.get("label")
        call = coerce_call(value, [], outputs=(label,) if isinstance(label, str) else ())
        if call is None:
            return self.keyed_object(at, end, value, where)
        flat = not any(k in value for k in ARG_KEYS) and not isinstance(value.get("function"), dict)
        if not usable_name(call.name) or flat and not (is_offered(call.name, self.offered)
                                                       or self.offered is None and structured):
            return at + 1  # ({"name": "Paris", ...} in a sentence, or naming no offered tool: a value, not a call)
        name = call.name.replace("\\_", "_")  # (a markdown-escaped name)
        if self.offered is not None and (got := resolve(name, self.offered))[1] is not None:
            name = got[0]
        call = self.unescape_params(ToolCall(name, call.arguments, call.outputs))
        fmt_name = next((f.name for f in table.claiming_values if f.claims_value(value)), None)
        self.add(at, end, [call], "JSON call object", fmt_name, where)
        return end

    def keyed_object(self, at: int, end: int, value: dict, where: str) -> int:
        """``{"NAME": {...}}`` (BFCL's answer shape): a call per key when every key names an offered tool."""
        if (not value or len(value) > 16 or self.offered is None or not all(isinstance(v, dict) for v in value.values())
                or None in (hits := [resolve(n, self.offered)[1] for n in value])):
            return at + 1
        calls = [self.args_call(h, v) for h, v in zip(hits, value.values())]
        self.add(at, end, calls, "tool name keyed object", None, where)
        return end

    def pair_object(self, at: int, end: int, value: dict) -> int | None:
        """``("NAME", {...})`` / ``["NAME", {...}]`` with NAME offered: where scanning goes on, or ``None`` when the
        object is not the second item of such a pair."""
        lo = max(self.at, at - 300)
        if self.offered is None or self.text.rfind(",", lo, at) < 0:
            return None
        m = _PAIR_HEAD.search(self.text, lo, at)
        tail = _PAIR_TAIL.match(self.text, end) if m is not None else None
        name = resolve(m.group(2).replace("\\_", "_"), self.offered)[1] if tail is not None else None
        if name is None:
            return None
        structured, where, _ = self.context(m.start())
        self.add(m.start(), tail.end(), [self.args_call(name, value)], "name and arguments pair", None,
                 where if structured else "in a list")
        return tail.end()

    def args_call(self, name: str, args: dict) -> ToolCall:
        return self.unescape_params(ToolCall(name, {str(k): v for k, v in args.items()}))

    def unescape_params(self, call: ToolCall) -> ToolCall:
        """``call`` with markdown-escaped parameter names (``detail\\_level``) read as the tool declares them."""
        if self.offered is None or not any("\\_" in k for k in call.arguments):
            return call
        declared = self.offered.get(call.name) or ()
        plain = {k: p for k in call.arguments if (p := k.replace("\\_", "_")) != k and k not in declared
                 and p in declared and p not in call.arguments}
        if not plain:
            return call
        self.notes.append(f"{call.name}: markdown-escaped parameter names read as the declared ones")
        return ToolCall(call.name, {plain.get(k, k): v for k, v in call.arguments.items()}, call.outputs, call.step)

    def named_object(self, at: int, end: int, value: dict) -> int | None:
        """The object at ``at`` as the arguments of the tool named right before it (``NAME{...}``, a format's token
        between them, Kimi-K2's ``functions.NAME:0``), or on the line before the code fence it is alone in (DeepSeek
        V3, its type word ``function`` glued before the name). Where scanning goes on, or ``None``."""
        text, lo = self.text, max(self.at, at - PREFIX_CHARS)
        name_end = at
        before = text[at - 1] if at > lo else ""  # (a token between the name and the object ends with it)
        if before and not (before.isalnum() or before in "_.-:"):
            tokens = marker_table().tokens_by_last.get(before, ())
            name_end = next((at - len(t) for t in tokens if text.endswith(t, lo, at)), at)
            if name_end == at and before in " \t" and at - 1 > lo and text[at - 2] not in " \t":
                name_end -= 1  # NAME {...}: one blank between them (CWM writes it)
        start = name_end - _NAME_CHARS.match(text[lo:name_end][::-1]).end()
        fenced = start == at
        if fenced:  # NAME \n ```json \n {...}
            line = text.rfind("\n", lo, at)
            if line < 0 or text[line + 1 : at].strip() or not self.in_fence(at):
                return None
            fence = text.rfind("\n", lo, line)
            if fence < 0 or not text[fence + 1 : line].strip().startswith("```"):
                return None
            k = text.rfind("\n", lo, fence)
            if k < 0 and lo > self.at:
                return None
            start = skip_ws(text, k + 1 if k >= 0 else self.at)
            written = text[start:fence].rstrip()
        else:
            written = text[start:name_end]
        m = _NAMED_HEAD.fullmatch(written)
        if m is None:
            return None
        written = m.group(1)
        if markup_name(written):  # a name holding a format's word (Rubra's starttoolcall) names no tool
            return None
        structured, where, _ = self.context(start)
        if not structured:
            return None
        name, hit = (written, None) if self.offered is None else resolve(written, self.offered)
        if hit is None and fenced and written.startswith("function") and self.offered is not None:
            name, hit = resolve(written[len("function") :], self.offered)  # DeepSeek V3's type word before the name
        if self.offered is not None and hit is None:
            return None
        self.add(start, end, [self.args_call(hit or name, value)], "named JSON arguments", None, where)
        return end

    def _object_value(self, at: int, problems: list[Problem]) -> tuple[Any, int]:
        """The value of the object at ``at`` and its end: strict JSON, else a Python literal, else repaired."""
        if (head := json_head(self.text[at : at + MAX_OBJECT_CHARS])) is not None:
            return head[0], at + head[1]
        close, closed = self.match_paren(at)
        if not closed and close < len(self.text):
            return None, at + 1
        span = self.text[at : close + 1]
        if closed and self.parsed + len(span) <= AST_BUDGET:
            self.parsed += len(span)
            try:
                node = parse_quietly(span)
                if isinstance(node, ast.Dict) and _kind(node) != "placeholder":
                    return Literals(_READER, span, 0, strict=False, problems=problems).value(node), close + 1
            except (SyntaxError, ValueError, RecursionError, MemoryError, FormatError):
                pass
        if budget_spent() or not any(k in span for k in ("name", "function", "tool")):
            return None, at + 1
        return lenient_json(span), close + 1 if closed else len(self.text)


def _kind(node: ast.AST, depth: int = 0) -> str:
    """``"literal"`` (a JSON value, true/false/null too), ``"placeholder"`` (a bare name or ``...``: a signature) or
    ``"expression"`` (anything else: ``math.pi``, ``1/3``)."""
    if depth > 32:
        return "expression"
    if isinstance(node, ast.Constant):
        literal = node.value is None or isinstance(node.value, (str, bool, int, float))
        return "placeholder" if node.value is Ellipsis else "literal" if literal else "expression"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        numeric = isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)
        return "literal" if numeric else "expression"
    if isinstance(node, ast.Name):
        return "literal" if node.id in CONSTANTS else "placeholder"
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_kind(e, depth + 1) for e in node.elts]
    elif isinstance(node, ast.Dict) and None not in node.keys:
        items = [_kind(e, depth + 1) for e in (*node.keys, *node.values)]
    else:
        return "expression"
    return next((k for k in ("placeholder", "expression") if k in items), "literal")


def usable_name(name: str) -> bool:
    return bool(name.strip()) and len(name) <= 256 and "\n" not in name
