"""An answer's parts besides its calls: the content the user should see and reasoning in the format's own channels.
:func:`outside_calls` (:meth:`WireFormat.answer_parts`'s default): the calls are one region, from the format's first tag
to its last closing tag, or to the end of the JSON value or calls the last tag opens (a call the text stops in runs to
the end); an untagged answer's region is its first bracketed value or the bare calls it starts with. A row whose open
and close literals are no markup (a label and a JSON code fence) is read by its own literals instead
(:func:`~refiner.formats.reasoning.fenced_calls`): its region runs from its first open literal that a JSON value follows
to the close after its last call. The text before and after is content, verbatim (as vLLM's and SGLang's parsers give
it), less the end-of-turn tokens at its end (:data:`END_OF_TURN`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from refiner.formats.markers import trie
from refiner.formats.reasoning import (
    BARE_CALL,
    fenced_calls,
    fenced_tags,
    format_tags,
    is_closing_tag,
    is_markup,
    line_labels,
    skip_blanks,
    values_end,
)

# Tokens that end a turn: a decoder that keeps special tokens leaves them after the answer; never content.
END_OF_TURN = ("<|eom_id|>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<｜end▁of▁sentence｜>", "</s>", "<|eot|>",
               "<|eom|>", "<|end_of_text|>", "<|return|>", "<|end|>", "<|python_end|>")
MAX_TAGS = 4096  # format tags read per answer; past that the rest of the text is taken as calls


@dataclass(frozen=True)
class AnswerParts:
    """The content outside the calls, reasoning in the format's own channels (None: none), the calls' span."""

    content: str
    reasoning: str | None = None
    calls: tuple[int, int] = (0, 0)


def tag_pattern(fmt: object) -> tuple[re.Pattern | None, frozenset[str]]:
    """The format's tags as one pattern (its markup anywhere, its line labels at a line start:
    :func:`~refiner.formats.reasoning.line_labels`), and which of them close a call or a section."""
    tags, labels = {t for t in format_tags(fmt) if is_markup(t)}, line_labels(fmt)
    if not tags and not labels:
        return None, frozenset()
    alts = [*map(re.escape, sorted(tags, key=len, reverse=True)), *([r"(?m:^)" + trie(labels)] if labels else [])]
    pattern = re.compile("|".join(alts))
    return pattern, frozenset(t for t in tags if is_closing_tag(t))


def trim_turn_end(text: str) -> str:
    """``text`` without the end-of-turn tokens (and the blanks around them) it ends with."""
    while (stripped := text.rstrip()).endswith(END_OF_TURN):
        text = stripped[: -len(next(token for token in END_OF_TURN if stripped.endswith(token)))]
    return text


def calls_region(fmt: object, text: str) -> tuple[int, int] | None:
    """``(start, end)`` of the calls' region in ``text`` (see the module docstring), or None."""
    j = len(text) - len(text.lstrip())
    if (fenced := fenced_tags(fmt)) is not None:  # (a code fence of other text, or a label before no value: content)
        spans = fenced_calls(text, {o.strip(): fenced[1] for o in fenced[0]})
        head = tail = next(spans, None)
        if j < len(text) and text[j] in "[{" and (head is None or j < head[0]):
            return j, values_end(text, j)  # an untagged call
        for tail in spans:
            pass
        return None if head is None else (head[0], tail[1])
    pattern, closers = tag_pattern(fmt)
    first = last = None
    if pattern is not None:
        for k, m in enumerate(pattern.finditer(text)):
            first, last = first or m, m
            if k >= MAX_TAGS:
                return first.start(), len(text)
    if j < len(text) and (text[j] in "[{" or BARE_CALL.match(text, j)) and (first is None or j < first.start()):
        return j, values_end(text, j)  # an untagged call (its tags, if any, are text in its values)
    if first is None:
        return None
    if last.group() in closers:
        return first.start(), last.end()
    j = last.end() - 1 if last.group()[-1] in "[{" else last.end()  # a tag may end with its list's bracket
    j = skip_blanks(text, j)
    calls_follow = j < len(text) and (text[j] in "[{" or BARE_CALL.match(text, j))
    return first.start(), (values_end(text, j) if calls_follow else len(text))


def only_tags(fmt: object, text: str) -> bool:
    """Whether ``text`` holds nothing but the format's tags and blanks (an empty call section)."""
    pattern, _ = tag_pattern(fmt)
    return pattern is not None and not pattern.sub("", text).strip()


def outside_calls(fmt: object, text: str) -> AnswerParts:
    """The default :meth:`WireFormat.answer_parts`: the text before and after the calls' region is content."""
    region = calls_region(fmt, text)
    if region is None:
        return AnswerParts(trim_turn_end(text), None, (len(text), len(text)))
    a, b = region
    return AnswerParts(text[:a] + trim_turn_end(text[b:]), None, region)
