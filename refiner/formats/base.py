"""The wire-format contract and the registry (the shared reading helpers live in :mod:`~refiner.formats.text`,
:mod:`~refiner.formats.strict`, :mod:`~refiner.formats.lenient`, :mod:`~refiner.formats.jsonfix` and
:mod:`~refiner.formats.markers`). A wire format is a :class:`WireFormat` subclass (a row of a grammar,
:mod:`refiner.formats.family`) registered once by the catalog (:mod:`refiner.formats.catalog`); all the project knows of
a format is one of its attributes. It provides:

- ``parse_strict(text) -> list[ToolCall]``: raises only :class:`FormatError` (message + position), on any input, when
  a required tag is missing or anything inside is unresolvable; reasoning before and prose after the calls are allowed.
- ``parse_lenient(text) -> Lenient``: best effort, never raises: the calls recovered, the :class:`Problem` list (empty
  when the text was strictly valid) and where the text stops inside a call (:class:`Cut`); bounded by counts (jsonfix).
- Arguments nesting deeper than :data:`MAX_ARGUMENT_DEPTH`: ``parse_strict`` raises, ``parse_lenient`` drops them.
- ``render(calls) -> str``: the canonical text, ``parse_strict(render(calls)) == calls``; raises :class:`RenderError`,
  and only that, for calls the format cannot write."""

from __future__ import annotations

import contextvars
import functools
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from refiner.calls import ToolCall, value_depth
from refiner.formats import message, reasoning
from refiner.formats.jsonfix import MAX_RECOVERED_ITEMS, repair_budget
from refiner.formats.markers import MarkerTable, find_markers
from refiner.formats.text import reasoning_offset

log = logging.getLogger(__name__)

# Inputs longer than this are cut before lenient parsing, so a pathological string cannot cost unbounded time.
MAX_LENIENT_CHARS = 200_000
# How deep a call's arguments may nest lists and objects, so every later step stays far from Python's recursion limit.
MAX_ARGUMENT_DEPTH = 64
# Shared by the readers: a tool name in tagged dialects (SPACED: as plain text, GLM, DeepSeek), problems kept per text
# per kind of defect, characters decoded to classify a text, and characters read after a marker to tell rows apart.
NAME_PATTERN = r"[^\s<>{}\"']+"
SPACED_NAME_PATTERN = r"[^\s<>{}\"']+(?: [^\s<>{}\"']+)*"
MAX_NOTES = 8
DETECT_CHARS = 20_000
ROW_CHARS = 2_000


# offered_tools() while a lenient parse runs: parse_lenient(tools=...) sets it.
_OFFERED: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar("offered", default=None)


def offered_tools() -> Mapping[str, Any] | None:
    """The tools of the request the current :meth:`WireFormat.parse_lenient` reads for (tool name -> its parameters),
    or ``None``; a reader may use them only to choose among readings the text itself allows."""
    return _OFFERED.get()


class FormatError(ValueError):
    """Text that is not valid in a wire format. ``position`` is a character offset into the text, or -1."""

    def __init__(self, fmt: str, message: str, position: int = -1) -> None:
        self.fmt = fmt
        self.message = message
        self.position = position
        where = f" at position {position}" if position >= 0 else ""
        super().__init__(f"[{fmt}] {message}{where}")

    def __reduce__(self) -> tuple:
        return type(self), (self.fmt, self.message, self.position)


def kept(error: FormatError) -> FormatError:
    """``error`` without its traceback and those of the errors it was raised from (they keep their frames alive)."""
    e: BaseException | None = error
    while e is not None and e.__traceback__ is not None:  # (one already kept ends the walk: a chain can loop)
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return error


class RenderError(ValueError):
    """Calls that a wire format cannot write (the message says which call and why)."""

    def __init__(self, fmt: str, message: str) -> None:
        self.fmt = fmt
        self.message = message
        super().__init__(f"[{fmt}] cannot render: {message}")

    def __reduce__(self) -> tuple:
        return type(self), (self.fmt, self.message)


# What a lenient parse can meet, by code.
PROBLEM_CODES = (
    "strict",  # the text is not strictly valid (the message is the strict parser's error)
    "cut_input",  # only a prefix of a very long text was read
    "missing_tag",  # an opening or closing tag or sentinel is missing
    "not_a_list",  # a value that should hold a list of calls does not
    "not_a_call",  # an item that is not a call object
    "no_name",  # a call object without a usable tool name
    "unnamed_call",  # a call in the format's shape that names no tool (Kimi-K2's functions.invalid.0): dropped
    "bad_name",  # a tool name the format does not allow (the call kept)
    "markup_name",  # markup read as a tool name (markup_name): no call
    "bad_arguments",  # arguments that are not an object (dropped)
    "flat_arguments",  # arguments written beside the name instead of under an arguments key (read as the arguments)
    "bad_argument",  # one argument that could not be read (dropped, or kept as text: the message says)
    "bad_outputs",  # output labels or steps that could not be read
    "unreadable",  # a block or item nothing could be recovered from
    "unclosed",  # a bracket or call left open
    "mended",  # one lost or doubled character restored, and the whole text read with it (the message says which)
    "truncated",  # the text stops inside a call, mid-value (cut short: Lenient.cut says where)
    "gave_up",  # a counted bound stopped recovery (the rest of the text was not read)
    "internal",  # a parser bug
)


@dataclass(frozen=True)
class Problem:
    """One defect met by a lenient parse: a code from :data:`PROBLEM_CODES` and a message for people."""

    code: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Cut:
    """Where a text stops inside a call (cut short, or its closing brackets and tags lost). ``index``: the call of
    :attr:`Lenient.calls` it stops in (``None``: between calls, or in a call not read); ``name``: that call's name
    when written whole; ``arguments``: its arguments written whole before the cut; ``clean``: the text stops right
    after a value that cannot go on (only closers are missing), else mid-value (which only a cut explains)."""

    index: int | None
    name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    clean: bool = False

    def describe(self) -> str:
        if self.index is None:
            return "the text stops after its last complete call" if self.clean else "the text stops between calls"
        what = f"call #{self.index}" + (f" ({self.name})" if self.name else "")
        where = "after a complete value" if self.clean else "mid-value"
        return f"the text stops inside {what}, {where}; {len(self.arguments)} argument(s) written whole before it"


@dataclass
class Lenient:
    """A best-effort parse: what was recovered and what was not; a call the text stops in is kept, as ``cut`` says."""

    calls: list[ToolCall] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # why the strict parse failed (None when it succeeded, or was not tried: a text over MAX_LENIENT_CHARS)
    strict_error: FormatError | None = field(default=None, compare=False, repr=False)
    cut: Cut | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def note(self, code: str, message: str) -> None:
        self.problems.append(Problem(code, message))

    def mark_cut(self, index: int | None, name: str | None = None, arguments: dict[str, Any] | None = None,
                 clean: bool = False) -> None:
        """Records that the text stops inside call ``index`` of :attr:`calls` (see :class:`Cut`); a cut mid-value is
        also a ``truncated`` problem. A later mark replaces an earlier one (the text stops once)."""
        if index is not None and not 0 <= index < len(self.calls):
            index = None
        self.cut = Cut(index, name, dict(arguments or {}), clean)
        if not clean and not any(p.code == "truncated" for p in self.problems):
            self.note("truncated", self.cut.describe())


@dataclass(frozen=True)
class Detection:
    """How :func:`refiner.formats.detect_format` recognises a format (its rules are documented there). ``rank``: formats
    are tried in rank order (lower first), a built-in one's is its place in the catalog. ``markers``: strings (tags,
    sentinel tokens) whose presence after any reasoning points at this format (:meth:`WireFormat.sniff` tells apart the
    formats sharing one). ``closers``: weaker markers, used only when the text holds no marker. ``bare``: an untagged
    format (a JSON value or call list), claimed after every tagged format failed, or by :meth:`WireFormat.claims_value`
    / :meth:`WireFormat.claims_text`. ``also_read``: other spellings of a marker the strict reader accepts: a tagged
    format reads a text strictly only when it holds one of ``markers`` or ``also_read``; ``strict_needs``: strings one
    of which the strict reader needs (it reads no text holding none of them): a tagged format's marker that alone lets
    detection read it, an untagged format's keys or tags without which detection does not try it. ``claim_needs``:
    strings one of which a text must hold for :meth:`WireFormat.claims_text` to accept it (none: it accepts no text).
    ``by_name``: a shape no literal marks, never detected, read only when a request or a chat template names it."""

    rank: int = 0
    markers: tuple[str, ...] = ()
    closers: tuple[str, ...] = ()
    bare: bool = False
    also_read: tuple[str, ...] = ()
    strict_needs: tuple[str, ...] = ()
    claim_needs: tuple[str, ...] = ("",)
    by_name: bool = False


class WireFormat:
    """A wire format: subclass it, set the attributes below, implement ``parse_strict``, ``recover`` and
    ``render``, and add it to the catalog (:mod:`refiner.formats.catalog`)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    # The tags or sentinel tokens of the format, in the order they appear (docs, the corruptor's tag errors).
    tags: ClassVar[tuple[str, ...]] = ()
    detection: ClassVar[Detection]
    # A short valid text with two calls or more (docs, the CLI's example, tests).
    example: ClassVar[str]
    # Whether call order is part of correctness for this format (rewards use it as the default).
    order_sensitive: ClassVar[bool] = False
    # Calls carry a tool name only (no arguments): the gate and repair check names alone.
    names_only: ClassVar[bool] = False
    # Output labels a call carries: None, "one" (at most one label per call) or "list" (any number).
    outputs: ClassVar[str | None] = None
    # Calls carry a step number (calls in the same step may run in any order).
    steps: ClassVar[bool] = False
    # Tool names must match this pattern in full (pythonic formats: dotted identifiers); None: any non-blank text.
    name_pattern: ClassVar[str | None] = None
    # Calls are written as Python calls, ``name(key=value)`` (the model is shown them as pythonic calls too).
    pythonic: ClassVar[bool] = False
    # The refiner model was trained on this format; any other is shown to it in a trained one (:func:`model_view`).
    trained: ClassVar[bool] = False
    # The family's reasoning blocks, (open, close) pairs, read by the reasoning split.
    reasoning: ClassVar[tuple[tuple[str, str], ...]] = (("<think>", "</think>"),)
    # Content and reasoning sit in the format's own channels (harmony): answer_parts reads a text without calls too.
    channels: ClassVar[bool] = False
    # parse_strict itself refuses arguments nesting deeper than MAX_ARGUMENT_DEPTH (the wrapper does not measure).
    bounds_depth: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "parse_strict" in cls.__dict__:
            cls.parse_strict = _raises_only_format_errors(cls.__dict__["parse_strict"])
        if "render" in cls.__dict__:
            cls.render = _raises_only_render_errors(cls.__dict__["render"])

    # The row contract (refiner.formats.family): a grammar's tags and detection for one row's spelling.

    @classmethod
    def tags_for(cls, spelling: Any) -> tuple[str, ...]:
        return cls.tags

    @classmethod
    def detection_for(cls, spelling: Any, rank: int) -> Detection:
        return replace(cls.detection, rank=rank)

    def parse_strict(self, text: str) -> list[ToolCall]:  # pragma: no cover - interface
        raise NotImplementedError

    def parse_lenient(self, text: str, *, limit: int = MAX_LENIENT_CHARS, tools: Mapping[str, Any] | None = None,
                      strict_error: FormatError | None = None) -> Lenient:
        """A strictly valid text gives the strict calls and no problems; otherwise :meth:`recover` reads at most
        ``limit`` characters after the reasoning, and the strict error is reported when recovery met no problem. Texts
        longer than :data:`MAX_LENIENT_CHARS` count as not valid. ``tools``: see :func:`offered_tools`;
        ``strict_error``: the error this format's strict reading of ``text`` already raised."""
        out = Lenient()
        token = _OFFERED.set(tools)
        try:
            if not isinstance(text, str):
                out.note("internal", f"not a text: {type(text).__name__}")
                return out
            text = reasoning.read(text)  # (the strict reading and recovery take its reasoning split from it)
            if strict_error is not None:
                out.strict_error = strict_error
            elif len(text) <= MAX_LENIENT_CHARS:
                try:
                    out.calls = self.parse_strict(text)
                    return out
                except FormatError as e:
                    out.strict_error = kept(e)
            start = reasoning_offset(text)
            limit = min(limit, MAX_LENIENT_CHARS)
            if len(text) - start > limit:
                out.note("cut_input", f"only the first {limit} characters after the reasoning were read")
                text = reasoning.read(text[: start + limit])
            got = Lenient()  # (what recover reads, with the cut and the bounds reached)
            try:
                with repair_budget(text) as parse:
                    self.recover(text, got)
                    if parse.cuts and got.cut is None:  # a value closed at the end of the text, in no call read
                        got.mark_cut(None, clean=parse.cuts[-1].clean)
                    if parse.gave_up:
                        got.note("gave_up", f"stopped after {MAX_RECOVERED_ITEMS} blocks or items; the rest was not "
                                 "read")
                if _may_nest_deeply(text, len(got.calls)):
                    _drop_deep_arguments(got)
            except Exception as e:  # noqa: BLE001 - never raise: what was read so far stands
                got.note("internal", f"{type(e).__name__}: {e}"[:300])
            out.calls, out.cut = got.calls, got.cut
            out.problems.extend(got.problems)
            if not out.problems:
                out.note("strict", str(out.strict_error or f"longer than {MAX_LENIENT_CHARS} characters"))
        except Exception as e:  # noqa: BLE001 - never raise: anything unexpected becomes a problem
            out.note("internal", f"{type(e).__name__}: {e}"[:300])
        finally:
            _OFFERED.reset(token)
        return out

    def recover(self, text: str, out: Lenient) -> None:  # pragma: no cover - interface
        """Adds the calls recoverable from ``text`` to ``out.calls`` and every defect met to ``out.problems``."""
        raise NotImplementedError

    def render(self, calls: Sequence[ToolCall]) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def answer_parts(self, text: str) -> message.AnswerParts:
        """What an answer (after its reasoning block) says besides its calls: its content and any reasoning in the
        format's own channels (see :mod:`refiner.formats.message`). Never raises."""
        return message.outside_calls(self, text)

    def is_valid(self, text: str) -> bool:
        try:
            self.parse_strict(text)
        except FormatError:
            return False
        return True

    # Detection hooks (see Detection)

    def sniff(self, body: str, at: int) -> bool:
        """Whether ``body`` (after any reasoning), holding one of this format's markers at ``at``, is written in this
        format rather than in another one sharing the marker."""
        return True

    def claims_value(self, value: Any) -> bool:
        """Whether the first JSON value (repaired, maybe cut) of a text no format reads strictly is this format's."""
        return False

    def claims_text(self, body: str) -> bool:
        """Last resort (a text with no marker or readable JSON): whether its shape (pythonic calls) is this format's."""
        return False

    def region_start(self, body: str, at: int) -> int:
        """Where the calls of ``body`` that :func:`refiner.formats.salvage.salvage` found by this format's marker at
        ``at`` start: the marker itself, unless the format writes part of a call before it."""
        return at

    def read_untagged(
        self, text: str, start: int, offered: Mapping[str, Sequence[str]]
    ) -> tuple[int, int, list[ToolCall]] | None:
        """``(start, end, calls)`` of the calls after ``start`` written in the format's layout with its tags dropped
        (GLM's, by a decoder that skips special tokens), read by the ``offered`` tools alone (name -> parameter names)
        for :func:`refiner.formats.salvage.salvage`; ``None`` (the default) when there are none."""
        return None

    def answer_spans(self, text: str, start: int) -> list[tuple[int, int]]:
        """``(start, end)`` of the parts of ``text`` after ``start`` that the grammar marks as the answer for people
        (gpt-oss's ``final`` channel), where salvage reads no call; the default: none."""
        return []

    # Typing by the tool specs

    def retype(self, calls: Sequence[ToolCall], tools: Mapping[str, Any]) -> list[ToolCall]:
        """The calls with argument values settled by the declared parameter types of ``tools`` (specs by name), for a
        format that writes values as untyped text (XML values); the default keeps them as they are."""
        return list(calls)

    def error(self, message: str, position: int = -1) -> FormatError:
        return FormatError(self.name, message, position)

    def render_error(self, message: str) -> RenderError:
        return RenderError(self.name, message)

    def check_renderable(self, calls: Sequence[ToolCall]) -> None:
        """Raises :class:`RenderError` for a call whose name the format cannot write (``name_pattern``); ``render``
        calls it first. A format with further limits extends it."""
        if self.name_pattern is not None:
            for i, c in enumerate(calls):
                if re.fullmatch(self.name_pattern, c.name) is None:
                    raise self.render_error(f"call #{i}: tool name {c.name!r} is not allowed in this format")

    def __repr__(self) -> str:
        return f"<format {self.name}>"


def _raises_only_format_errors(parse: Any) -> Any:
    """Wraps ``parse_strict`` to raise only :class:`FormatError` and to check the arguments' depth."""

    @functools.wraps(parse)
    def parse_strict(self: WireFormat, text: str) -> list[ToolCall]:
        try:
            calls = parse(self, text)
            if not self.bounds_depth and _may_nest_deeply(text, len(calls)):
                deep = MAX_ARGUMENT_DEPTH + 1  # (all calls' arguments at once, in a list: one level more)
                if value_depth([c.arguments for c in calls if c.arguments], deep) > deep:
                    i = next(i for i, c in enumerate(calls) if value_depth(c.arguments, deep) >= deep)
                    raise self.error(f"the arguments of call #{i} nest deeper than {MAX_ARGUMENT_DEPTH} levels")
            return calls
        except FormatError:
            raise
        except RecursionError:
            raise self.error("nested too deeply") from None
        except MemoryError:
            raise self.error("too large to read") from None
        except Exception as e:  # noqa: BLE001 - the contract: only FormatError leaves parse_strict
            if not isinstance(text, str):
                raise self.error(f"not a text: {type(text).__name__}") from None
            log.warning("internal error in the %s strict parser: %r", self.name, e)
            raise self.error(f"internal error: {type(e).__name__}: {e}"[:300]) from e

    return parse_strict


def _may_nest_deeply(text: str, calls: int) -> bool:
    """Whether ``text`` holds enough brackets to nest arguments deeper than MAX_ARGUMENT_DEPTH (a pythonic call's
    own "(" opens no value: one "(" per call read is not counted)."""
    return len(text) > MAX_ARGUMENT_DEPTH and (
        text.count("[") + text.count("{") + max(text.count("(") - calls, 0) > MAX_ARGUMENT_DEPTH)


def _drop_deep_arguments(out: Lenient) -> None:
    for i, c in enumerate(out.calls):
        if not c.arguments or value_depth(c.arguments, MAX_ARGUMENT_DEPTH) <= MAX_ARGUMENT_DEPTH:
            continue
        keep = {k: v for k, v in c.arguments.items() if value_depth(v, MAX_ARGUMENT_DEPTH - 1) < MAX_ARGUMENT_DEPTH}
        for k in [k for k in c.arguments if k not in keep]:
            out.note("bad_argument", f"argument {k!r} of {c.name!r} nests deeper than {MAX_ARGUMENT_DEPTH} levels; "
                     "dropped")
        out.calls[i] = ToolCall(c.name, keep, c.outputs, c.step)
        if out.cut is not None and out.cut.index == i:
            out.cut = replace(out.cut, arguments={k: v for k, v in out.cut.arguments.items() if k in keep})


def _raises_only_render_errors(render: Any) -> Any:
    """Wraps a format's ``render`` so that calls it cannot write raise :class:`RenderError`."""

    @functools.wraps(render)
    def wrapped(self: WireFormat, calls: Sequence[ToolCall]) -> str:
        try:
            self.check_renderable(calls)
            return render(self, calls)
        except RenderError:
            raise
        except RecursionError:
            raise self.render_error("arguments nested too deeply") from None
        except (TypeError, ValueError) as e:
            raise self.render_error(str(e)) from None

    return wrapped


_REGISTRY: dict[str, WireFormat] = {}
_REQUIRED = ("name", "description", "detection", "example")


def register(fmt_cls: type[WireFormat]) -> WireFormat:
    """Registers one instance of the format under its ``name`` and returns it."""
    missing = [a for a in _REQUIRED if not getattr(fmt_cls, a, None)]
    if missing:
        raise TypeError(f"wire format {fmt_cls.__name__} lacks {', '.join(missing)}")
    inst = fmt_cls()
    if inst.name in _REGISTRY:
        raise ValueError(f"wire format {inst.name!r} registered twice")
    _REGISTRY[inst.name] = inst
    reasoning.learn(inst)
    return inst


def get(name: str) -> WireFormat:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown wire format {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    return list(_REGISTRY)


def known(name: str) -> bool:
    return name in _REGISTRY


def all_formats() -> list[WireFormat]:
    return list(_REGISTRY.values())


def by_rank() -> list[WireFormat]:
    """Every format in detection rank order."""
    return list(_ranked()[1])


def marker_table() -> MarkerTable:
    """The registered formats' :class:`~refiner.formats.markers.MarkerTable` (made again when the registry changes)."""
    return _ranked()[2]


def marker_positions(text: str) -> dict[str, int]:
    """Where each registered marker first occurs in ``text`` (:func:`~refiner.formats.markers.find_markers`)."""
    return find_markers(text, _ranked()[2])


# Characters of tags and sentinel tokens, braces, quotes and control characters: none is in a tool name.
_MARKUP = re.compile(r"[<>|｜{}\"'\x00-\x1f\x7f]")


def markup_name(name: str) -> bool:
    """Whether a name a reader took from a text is markup, not a tool name: apart from its surrounding whitespace, it
    holds a character of :data:`_MARKUP` or a registered format's marker (``starttoolcall``, ``to=functions.``)."""
    name = name.strip()
    return _MARKUP.search(name) is not None or marker_table().in_name(name)


def name_refused(name: str) -> str:
    """The message of a tool name a reader does not take (its pattern's or :func:`markup_name`'s)."""
    return f"tool name {name[:60]!r} is not allowed"


# (the registry's state, its formats in rank order, their marker table), made again when the registry changes
_RANKED: tuple[tuple, tuple[WireFormat, ...], MarkerTable] | None = None


def _ranked() -> tuple[tuple, tuple[WireFormat, ...], MarkerTable]:
    global _RANKED
    # the registry's state: its size, its last format and the dict itself (tests swap it; a dict of the same formats
    # ranks them the same)
    last = next(reversed(_REGISTRY.values()), None)
    registry, size, was_last = _RANKED[0] if _RANKED is not None else (None, -1, None)
    if size != len(_REGISTRY) or was_last is not last or not (registry is _REGISTRY or registry == _REGISTRY):
        fmts = tuple(sorted(_REGISTRY.values(), key=lambda f: (f.detection.rank, f.name)))
        _RANKED = ((_REGISTRY, len(_REGISTRY), last), fmts, MarkerTable(fmts, WireFormat))
    return _RANKED


def model_view(fmt: WireFormat) -> WireFormat:
    """The trained format a model is shown ``fmt``'s calls in: ``fmt`` itself, or one that carries the same things."""
    if fmt.trained:
        return fmt
    if fmt.steps or fmt.names_only:
        return get("order")
    if fmt.outputs:
        return get("nestools")
    if fmt.pythonic:
        return get("toolace")
    return get("xlam")
