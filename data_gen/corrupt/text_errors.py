"""Text-level errors: the ``format`` classes, each a change to the rendered text that breaks the format.

An operation is ``op(text, fmt, calls, rng) -> (new text, detail) | None``: ``text`` is ``calls`` rendered in
``fmt``; ``None`` means the class does not apply (no special tag to drop or misspell, no other format that can write
these calls). Tags are the format's own (``WireFormat.tags``), never format names. :data:`TEXT_OPS` maps each class
to its operation.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from refiner import formats
from refiner.calls import ToolCall
from refiner.formats import WireFormat

TextOp = Callable[[str, WireFormat, list[ToolCall], random.Random], "tuple[str, str] | None"]


def _tag_spans(text: str, fmt: WireFormat) -> list[tuple[int, int]]:
    spans = []
    for tag in fmt.tags:
        start = 0
        while (i := text.find(tag, start)) >= 0:
            spans.append((i, i + len(tag)))
            start = i + len(tag)
    return spans


def broken_json(text, fmt, calls, rng):
    """A structural character dropped or doubled, a trailing comma, a separator dropped, or single quotes; never
    inside a special tag."""
    tags = _tag_spans(text, fmt)

    def free(i: int) -> bool:
        return not any(a <= i < b for a, b in tags)

    structural = [i for i, ch in enumerate(text) if ch in '{}[]()"' and free(i)]
    closers = [i for i, ch in enumerate(text) if ch in "}]" and free(i)]
    seps = [i for i, ch in enumerate(text) if ch in ":,=" and free(i)]
    ops = []
    if structural:
        ops.append("drop")
    if closers:
        ops += ["trailing_comma", "extra_closer"]
    if seps:
        ops.append("drop_sep")
    if '"' in text:
        ops.append("single_quotes")
    if not ops:
        return None
    op = rng.choice(ops)
    if op == "drop":
        i = rng.choice(structural)
        return text[:i] + text[i + 1 :], f"dropped {text[i]!r} at {i}"
    if op == "drop_sep":
        i = rng.choice(seps)
        return text[:i] + text[i + 1 :], f"dropped {text[i]!r} at {i}"
    if op == "trailing_comma":
        i = rng.choice(closers)
        return text[:i] + "," + text[i:], f"trailing comma before {text[i]!r} at {i}"
    if op == "extra_closer":
        i = rng.choice(closers)
        return text[: i + 1] + text[i] + text[i + 1 :], f"duplicated {text[i]!r} at {i}"
    body_start = min((b for a, b in tags), default=0) if tags else 0
    return text[:body_start] + text[body_start:].replace('"', "'"), "double quotes replaced by single quotes"


def missing_tag(text, fmt, calls, rng):
    """One special tag of ``fmt`` removed, or all of them."""
    present = [t for t in dict.fromkeys(fmt.tags) if t and t in text]
    if not present:
        return None
    choice = rng.choice(present + ["all"] if len(present) > 1 else present)
    if choice == "all":
        for t in present:
            text = text.replace(t, "")
        return text.strip(), "all special tags removed"
    return text.replace(choice, "", 1).strip(), f"tag {choice!r} removed"


def _tag_look_alike(tag: str, rng: random.Random, others: Sequence[str]) -> str | None:
    """A look-alike of the special tag ``tag`` (or one of ``others``), or ``None`` when ``tag`` has no letters to
    misspell (a bare bracket marker such as NESTFUL's ``[``: changing it is a JSON error, not a wrong tag)."""
    if not any(ch.isalpha() for ch in tag):
        return None
    options = []
    if tag.startswith("</"):
        options.append("<" + tag[2:])  # closing tag written as an opening one
    if "_" in tag:
        options.append(tag.replace("_", "", 1))
        options.append(tag.replace("_", "-", 1))
    else:
        inner = re.sub(r"[</>|]", "", tag)
        if len(inner) > 4:
            cut = len(inner) // 2
            options.append(tag.replace(inner, inner[:cut] + "_" + inner[cut:], 1))
    if tag.endswith(">"):
        options.append(tag[:-1])
    if tag.startswith("<"):
        options.append("[" + tag[1:-1] + "]" if tag.endswith(">") else "[" + tag[1:])
    options.append(tag.upper() if tag != tag.upper() else tag.lower())
    options += [o for o in others if o != tag]
    options = [o for o in dict.fromkeys(options) if o != tag and o]
    return rng.choice(options) if options else None


def wrong_tag(text, fmt, calls, rng):
    """One special tag of ``fmt`` misspelt or swapped for another format's; ``None`` (not applicable) when the text
    holds no tag that can be misspelt."""
    present = [t for t in dict.fromkeys(fmt.tags) if t and t in text]
    if not present:
        return None
    first = rng.choice(present)
    other_tags = [t for f in formats.all_formats() if f.name != fmt.name for t in f.tags if t not in fmt.tags]
    for tag in [first] + [t for t in present if t != first]:
        new = _tag_look_alike(tag, rng, other_tags if rng.random() < 0.3 else [])
        if new is not None:
            return text.replace(tag, new, 1), f"tag {tag!r} written as {new!r}"
    return None


_KEY_SWAPS = [('"arguments"', '"parameters"'), ('"parameters"', '"arguments"'), ('"api_name"', '"name"'),
              ('"name"', '"function"'), ('"tool_list"', '"tools"'), ('"step"', '"order"'), ('"responses"', '"outputs"')]


def wrong_format(text, fmt, calls, rng):
    """A key of another format's call objects, or the whole list written in another format."""
    if rng.random() < 0.35:
        swaps = [(a, b) for a, b in _KEY_SWAPS if a in text]
        if swaps:
            a, b = rng.choice(swaps)
            return text.replace(a, b), f"key {a} written as {b}"
    # (a names-only format cannot carry the arguments of ordinary calls: never a "wrong family" target)
    targets = [f for f in formats.all_formats() if f.name != fmt.name and not f.names_only]
    rng.shuffle(targets)
    for other in targets:
        try:
            rendered = other.render(calls)
        except Exception:  # a family that cannot express these calls is simply not a candidate
            continue
        if rendered.strip() and rendered != text:
            return rendered, f"written in the {other.name} format instead of {fmt.name}"
    return None


TEXT_OPS: dict[str, TextOp] = {
    "broken_json": broken_json,
    "missing_tag": missing_tag,
    "wrong_tag": wrong_tag,
    "wrong_format": wrong_format,
}
