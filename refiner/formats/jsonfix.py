"""Best-effort JSON for lenient parsing: strict first, then closing a text that was cut short, then json_repair.

Every step is bounded by counts, not by time, so the same text always gets the same result whatever the machine
load (rewards depend on it):

- **Cut short** (the commonest broken output: a generation stopped at its token limit, or a closing tag and the
  brackets before it lost): when the decoder ran off the end of the text, :func:`complete_cut` closes the open string
  and brackets in one linear pass, dropping a member left half-written. It never invents a value.
- **Anything else** goes to ``json_repair``, which is pure Python, costs microseconds per character and is
  super-linear on some inputs (runs of ``{]``, ``{"`` or ``{``: the number of objects opened times the length). It
  only ever sees a bounded region: cut at :data:`REPAIR_REGION_CHARS` characters and before the
  :data:`REPAIR_REGION_OPENS`-th ``{`` (real calls are under 2 KB with a few objects each). The repairs and
  completions within one ``parse_lenient`` share a budget of :data:`REPAIR_TOTAL_COST`; once it is spent nothing more
  is repaired.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

REPAIR_REGION_CHARS = 4096
REPAIR_REGION_OPENS = 24
REPAIR_TOTAL_COST = 32_768
# A json_repair call costs its length plus this, plus REPAIR_OPEN_COST per '{'.
REPAIR_CALL_COST = 512
REPAIR_OPEN_COST = 256
# A completion costs one unit per COMPLETE_CHARS_PER_COST characters plus COMPLETE_CALL_COST (it runs at C speed
# except for one step per bracket, comma or string).
COMPLETE_CHARS_PER_COST = 16
COMPLETE_CALL_COST = 32

_budget = threading.local()


class repair_budget:
    """Context manager: one ``parse_lenient``'s shared repair budget (nesting keeps the outer one)."""

    def __enter__(self) -> None:
        self.outer = getattr(_budget, "used", None)
        if self.outer is None:
            _budget.used = 0

    def __exit__(self, *exc: object) -> None:
        if self.outer is None:
            _budget.used = None


def budget_spent() -> bool:
    """Whether the current ``parse_lenient`` has spent its repair budget (recovery loops stop early then)."""
    used = getattr(_budget, "used", None)
    return used is not None and used >= REPAIR_TOTAL_COST


def _charge(cost: int) -> bool:
    """Charges ``cost`` to the current budget; False (nothing charged) when it is already spent. Outside a
    ``parse_lenient`` nothing is counted (a direct call repairs one bounded region)."""
    used = getattr(_budget, "used", None)
    if used is None:
        return True
    if used >= REPAIR_TOTAL_COST:
        return False
    _budget.used = used + cost
    return True


def repair_region(text: str) -> str:
    """The bounded prefix of ``text`` that :func:`lenient_json` hands to json_repair (see REPAIR_REGION_CHARS)."""
    text = text[:REPAIR_REGION_CHARS]
    i = -1
    for _ in range(REPAIR_REGION_OPENS):
        i = text.find("{", i + 1)
        if i < 0:
            return text
    return text[:i]


def repair_cost(region: str) -> int:
    """What repairing ``region`` with json_repair costs against REPAIR_TOTAL_COST."""
    return len(region) + REPAIR_CALL_COST + REPAIR_OPEN_COST * region.count("{")


def complete_cost(text: str) -> int:
    """What :func:`complete_cut` on ``text`` costs against REPAIR_TOTAL_COST."""
    return len(text) // COMPLETE_CHARS_PER_COST + COMPLETE_CALL_COST


def lenient_json(text: str) -> Any:
    """Best-effort JSON: strict first; a text cut short is closed (:func:`complete_cut`); anything else goes to
    ``json_repair`` on a bounded prefix (:func:`repair_region`). Returns ``None`` when nothing could be recovered.
    Never raises."""
    try:
        return finite(json.loads(text))
    except json.JSONDecodeError as e:
        if _ran_off_the_end(text, e) and _charge(complete_cost(text)):
            value = complete_cut(text)
            if value is not None:
                return finite(value)
    except (ValueError, RecursionError):
        pass
    region = repair_region(text)
    if not region.strip() or not _charge(repair_cost(region)):
        return None
    try:
        import json_repair

        value = json_repair.loads(region)
    except Exception:  # noqa: BLE001 - json_repair is best effort itself; any failure means nothing recovered
        return None
    if value == "" or value is None:
        return None
    return finite(value)


_NON_FINITE_TEXT = {float("inf"): "Infinity", float("-inf"): "-Infinity"}
FINITE_MAX_NODES = 100_000  # values visited by finite(); deeper or larger values are returned as they are


def finite(value: Any) -> Any:
    """``value`` with every float JSON cannot hold (``1e999``, ``NaN``, which Python's decoders accept) replaced
    by its text (``"Infinity"``, ``"NaN"``): a lenient read keeps what was written, as text, and never hands back a
    number no JSON can carry. Returns the same object when there is nothing to replace. Iterative, at most
    :data:`FINITE_MAX_NODES` nodes."""
    stack, seen, found = [value], 0, False
    while stack and seen < FINITE_MAX_NODES:
        v = stack.pop()
        seen += 1
        if type(v) is float:
            if v != v or v in _NON_FINITE_TEXT:
                found = True
                break
        elif type(v) is dict:
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
    return _replace_non_finite(value) if found else value


def _replace_non_finite(value: Any, depth: int = 0) -> Any:
    if type(value) is float and (value != value or value in _NON_FINITE_TEXT):
        return "NaN" if value != value else _NON_FINITE_TEXT[value]
    if depth > 64:
        return value
    if type(value) is dict:
        return {k: _replace_non_finite(v, depth + 1) for k, v in value.items()}
    if type(value) is list:
        return [_replace_non_finite(v, depth + 1) for v in value]
    return value


_TRAILING_WS = re.compile(r"[ \t\n\r]*\Z")


def _ran_off_the_end(text: str, e: json.JSONDecodeError) -> bool:
    """Whether the decoder failed because the text ended: everything before was a valid start of a JSON value."""
    if e.msg.startswith("Unterminated string"):
        return True
    if not e.msg.startswith("Expecting"):
        return False
    rest = text[e.pos : _TRAILING_WS.search(text).start()]
    return not rest or rest in _CUT_VALUE_STARTS or _CUT_NUMBER_TAIL.fullmatch(rest) is not None


# Where the decoder stops in a value cut short: inside a literal or before a number's first digit ("tru", "nu",
# "-"), or after a number's digits when its fraction or exponent was cut ("1." stops at ".", "1e+" at "e+").
_CUT_VALUE_STARTS = frozenset(w[:i] for w in ("true", "false", "null", "-") for i in range(1, len(w) + 1))
_CUT_NUMBER_TAIL = re.compile(r"\.|[eE][+-]?")


# Strings (closed or running to the end: group 1 is the closing quote) and the structural characters.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(")?|[\[\]{},:]')
_CLOSER = {"[": "]", "{": "}"}


def complete_cut(text: str) -> Any:
    """The value of a JSON text that was cut short (``text`` must be a valid start of a JSON value, as when
    ``json.loads`` ran off its end): the open string and brackets are closed; when that does not decode (the cut fell
    in a key, after a ``:`` or ``,``, or inside a literal), the last member is dropped, back to the last ``,`` or
    opening bracket. A string cut short is kept as the prefix it is, and a number at the end as written (most texts
    that end there lost only their closing brackets). ``None`` when nothing decodes. Linear time; never raises."""
    stack: list[str] = []
    last_cut = -1  # position just before the last ',' or just after the last '[' / '{' (outside strings)
    cut_depth = 0  # brackets open at last_cut
    open_string = False
    for m in _TOKENS.finditer(text):
        c = text[m.start()]
        if c == '"':
            open_string = m.group(1) is None
        elif c == "{" or c == "[":
            stack.append(_CLOSER[c])
            last_cut, cut_depth = m.end(), len(stack)
        elif c == "}" or c == "]":
            if not stack or stack.pop() != c:
                return None
        elif c == ",":
            last_cut, cut_depth = m.start(), len(stack)
    closers = "".join(reversed(stack))
    candidates = [text + ('"' if open_string else "") + closers]
    if last_cut >= 0:
        candidates.append(text[:last_cut] + "".join(reversed(stack[:cut_depth])))
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            continue
    return None
