"""Seeded look-alikes of names and values: what a call-level error writes in place of the right one.

Names: :func:`typo` (a misspelling), :func:`near_miss_name` (a plausible other tool name: verb synonyms, suffixes,
case style), :func:`param_synonym` (another name for a parameter). Values: :func:`drift` (the same content as another
JSON type), :func:`wrong_value` (another value of the same type), :func:`plausible_value` (a value for a parameter the
call did not set, by its declared type). Every function draws only from the ``rng`` it is given.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any

from refiner.specs import ToolSpec

# ---------------------------------------------------------------------------------------------------------------
# Names

_LETTERS = "qwertyuiopasdfghjklzxcvbnm"


def typo(word: str, rng: random.Random) -> str:
    """A look-alike misspelling of ``word`` (never ``word`` itself)."""
    for _ in range(20):
        ops = ["swap", "drop", "double", "replace", "underscore", "case"]
        op = rng.choice(ops)
        w = word
        n = len(w)
        if op == "swap" and n >= 2:
            i = rng.randrange(n - 1)
            w = w[:i] + w[i + 1] + w[i] + w[i + 2 :]
        elif op == "drop" and n >= 3:
            i = rng.randrange(n)
            w = w[:i] + w[i + 1 :]
        elif op == "double" and n >= 1:
            i = rng.randrange(n)
            w = w[:i] + w[i] + w[i:]
        elif op == "replace" and n >= 1:
            letters = [i for i, ch in enumerate(w) if ch.isalpha()]
            if letters:
                i = rng.choice(letters)
                w = w[:i] + rng.choice(_LETTERS) + w[i + 1 :]
        elif op == "underscore" and "_" in w:
            w = w.replace("_", rng.choice(["", "-", "__"]), 1)
        elif op == "case" and any(ch.isalpha() for ch in w):
            w = camel(w) if "_" in w else w.capitalize() if w[0].islower() else w.lower()
        if w and w != word:
            return w
    return word + "_"


def camel(name: str) -> str:
    parts = [p for p in re.split(r"[_\s\-]+", name) if p]
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:]) if parts else name


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


_VERBS = [
    ("get", "fetch"), ("get", "retrieve"), ("search", "find"), ("find", "lookup"), ("create", "make"),
    ("create", "add"), ("calculate", "compute"), ("calculate", "calc"), ("send", "post"), ("update", "set"),
    ("delete", "remove"), ("check", "verify"), ("list", "get_all"), ("generate", "create"), ("convert", "transform"),
]

_PARAM_SYNONYMS: dict[str, list[str]] = {
    "location": ["city", "place", "loc"], "city": ["location", "town"], "query": ["q", "search_query", "keyword"],
    "keyword": ["query", "term"], "date": ["day", "on_date"], "start_date": ["from_date", "begin_date"],
    "end_date": ["to_date", "until"], "name": ["title", "full_name"], "title": ["name", "heading"],
    "amount": ["value", "sum"], "from_currency": ["source_currency", "from"], "to_currency": ["target_currency", "to"],
    "limit": ["max_results", "count"], "language": ["lang", "locale"], "text": ["content", "message"],
    "message": ["text", "body"], "email": ["email_address", "mail"], "id": ["identifier", "uid"],
    "length": ["size", "len"], "number": ["num", "n"], "symbol": ["ticker", "stock_symbol"],
    "price": ["cost", "amount"], "weight": ["mass", "weight_kg"], "height": ["height_m", "tall"],
    "category": ["type", "genre"], "type": ["kind", "category"], "url": ["link", "website"],
    "recipient": ["to", "receiver"], "subject": ["topic", "title"], "description": ["desc", "details"],
}


def param_synonym(key: str, rng: random.Random) -> str:
    """Another plausible name for parameter ``key`` (a synonym, its camelCase, a suffix, a plural...)."""
    options = list(_PARAM_SYNONYMS.get(key, []))
    options += [camel(key)] if "_" in key else []
    options += [key + "_value", key + "_name", key.rstrip("s") if key.endswith("s") else key + "s"]
    if "_" in key:
        options.append(key.split("_")[-1])
        options.append(key.split("_")[0])
    options = [o for o in dict.fromkeys(options) if o and o != key]
    return rng.choice(options)


def near_miss_name(name: str, rng: random.Random) -> str:
    """A tool name one could mistake for ``name`` (a verb synonym, a suffix, the other case style)."""
    options = []
    low = name.lower()
    for a, b in _VERBS:
        for x, y in ((a, b), (b, a)):
            if low.startswith(x + "_") or low.startswith(x) and len(low) > len(x) and name[len(x)].isupper():
                options.append(y + name[len(x) :])
    options += [name + "_info", name + "_data", name + "s" if not name.endswith("s") else name[:-1]]
    options += [camel(name)] if "_" in name else [snake(name)] if snake(name) != name else []
    options = [o for o in dict.fromkeys(options) if o != name]
    return rng.choice(options)


# ---------------------------------------------------------------------------------------------------------------
# Values

_PLACEHOLDER = re.compile(r"^(API_call_)(\d+)$")  # a NesTools output placeholder


def drift(value: Any, rng: random.Random) -> Any:
    """Same content, another JSON type (``12`` -> ``"12"``, ``"true"`` -> ``true``, ``[a]`` -> ``"[a]"``)."""
    if isinstance(value, bool):
        return rng.choice(["true", "True", str(value).lower()]) if value else rng.choice(["false", "False"])
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"-?\d+", s):
            return int(s)
        if re.fullmatch(r"-?\d+\.\d+", s):
            return float(s)
        if s.lower() in ("true", "false"):
            return s.lower() == "true"
        return [value]
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "None"
    return str(value)


def wrong_value(value: Any, rng: random.Random, enum: Sequence | None = None, placeholders: Sequence[str] = ()) -> Any:
    """Another value of the same JSON type that the request did not ask for (another ``enum`` member when there is
    one; another of ``placeholders`` for an output placeholder)."""
    if enum:
        others = [e for e in enum if e != value]
        if others:
            return rng.choice(others)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, -1, 10, 2 * value + 1 if value else 5, -value if value else 3])
    if isinstance(value, float):
        return round(value * rng.choice([0.5, 2.0, 1.1, 10.0]) + rng.choice([0.0, 1.0]), 4) or value + 1.5
    if isinstance(value, str):
        m = _PLACEHOLDER.match(value)
        if m:
            others = [p for p in placeholders if p != value]
            return rng.choice(others) if others else f"API_call_{int(m.group(2)) + 1}"
        return wrong_string(value, rng)
    if isinstance(value, list):
        if not value:
            return ["unknown"]
        i = rng.randrange(len(value))
        if len(value) > 1 and rng.random() < 0.5:
            return value[:i] + value[i + 1 :]
        return value[:i] + [wrong_value(value[i], rng)] + value[i + 1 :]
    if isinstance(value, dict):
        if not value:
            return {"value": "unknown"}
        k = rng.choice(list(value))
        return {**value, k: wrong_value(value[k], rng)}
    return "unknown"


def wrong_string(value: str, rng: random.Random) -> str:
    """A string close to ``value`` but not it: a digit changed, a word dropped, a typo, the case flipped, a suffix."""
    digits = [i for i, ch in enumerate(value) if ch.isdigit()]
    options = []
    if digits:
        i = rng.choice(digits)
        options.append(value[:i] + str((int(value[i]) + rng.randint(1, 8)) % 10) + value[i + 1 :])
    words = value.split()
    if len(words) > 1:
        j = rng.randrange(len(words))
        options.append(" ".join(words[:j] + words[j + 1 :]))
    if value:
        options.append(typo(value, rng))
        options.append(value.upper() if value != value.upper() else value.lower())
    options.append(value + rng.choice([" extra", " 2", "s"]) if value else "unknown")
    options = [o for o in options if o != value]
    return rng.choice(options) if options else value + "x"


def plausible_value(spec: ToolSpec | None, key: str, rng: random.Random) -> Any:
    """A value for parameter ``key`` of ``spec`` that a model might write: an enum member, else one of a few
    ordinary values of the declared type (a short word when the type is unknown)."""
    param = spec.params.get(key) if spec else None
    t = str((param.type if param else None) or "").lower()
    if param is not None and param.enum:
        return rng.choice(param.enum)
    if t.startswith(("int", "integer")):
        return rng.choice([1, 5, 10, 100])
    if t.startswith(("float", "number")):
        return rng.choice([0.5, 1.0, 2.5])
    if t.startswith("bool"):
        return rng.choice([True, False])
    if t.startswith(("list", "array")):
        return []
    if t.startswith(("dict", "object")):
        return {}
    return rng.choice(["default", "all", "en", "auto", "latest"])


# Parameters an upstream model adds unasked, with a typical value.
EXTRA_PARAMS = [("verbose", True), ("limit", 10), ("language", "en"), ("format", "json"), ("timeout", 30),
                ("include_details", True), ("sort_by", "relevance"), ("units", "metric")]


# ---------------------------------------------------------------------------------------------------------------
# Another case convention, and values the request states

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def name_words(name: str) -> list[str]:
    """The words of an identifier in any convention (``sort_by``, ``sortBy``, ``SortBy``, ``sort-by``: sort, by)."""
    return [w.lower() for w in _WORDS.findall(name)]


def other_case(name: str, rng: random.Random) -> str | None:
    """``name`` in another case convention with the same words (snake_case, camelCase, PascalCase, kebab-case,
    lower run-together); None for a one-word name, which has no other convention."""
    words = name_words(name)
    if len(words) < 2:
        return None
    styles = {
        "_".join(words),
        words[0] + "".join(w.capitalize() for w in words[1:]),
        "".join(w.capitalize() for w in words),
        "-".join(words),
        "".join(words),
    }
    options = sorted(s for s in styles if s != name)
    return rng.choice(options) if options else None


def request_text(query: Any) -> str:
    """The user's words of a request: the text itself, or the user turns of a chat list joined by newlines."""
    if isinstance(query, str):
        return query
    if isinstance(query, (list, tuple)):
        return "\n".join(str(m.get("content") or "") for m in query if isinstance(m, dict) and m.get("role") == "user")
    return ""


def _number_pattern(value: float) -> re.Pattern[str]:
    text = repr(value) if isinstance(value, float) and not value.is_integer() else str(int(value))
    return re.compile(r"(?<![\d.])" + re.escape(text) + r"(?![\d]|\.\d)")


def stated_in(value: Any, request: str) -> bool:
    """True when ``value`` is written in ``request``: a number as a number (``25`` in "25 km", not in "125"), a
    string of at least 3 characters in any case. Booleans, containers and None are never "stated"."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return bool(_number_pattern(value).search(request))
    if isinstance(value, str):
        v = value.strip()
        return len(v) >= 3 and v.lower() in request.lower()
    return False


def altered(value: Any, request: str, rng: random.Random) -> Any:
    """``value`` copied wrongly from the request: a number changed (another value of the same type), a string with
    one word swapped for another word of the request (or one digit changed, or a typo when neither applies). Never
    ``value`` itself."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return wrong_value(value, rng)
    if not isinstance(value, str):
        return wrong_value(value, rng)
    words = value.split()
    mine = {w.lower().strip(".,;:!?\"'") for w in words}
    pool = sorted({w.strip(".,;:!?\"'()") for w in request.split()} - {""})
    pool = [w for w in pool if len(w) >= 3 and w.lower() not in mine and w.isalpha()]
    if words and pool and rng.random() < 0.7:
        j = rng.randrange(len(words))
        new = " ".join(words[:j] + [rng.choice(pool)] + words[j + 1 :])
        if new != value:
            return new
    digits = [i for i, ch in enumerate(value) if ch.isdigit()]
    if digits:
        i = rng.choice(digits)
        return value[:i] + str((int(value[i]) + rng.randint(1, 9)) % 10) + value[i + 1 :]
    return typo(value, rng)
