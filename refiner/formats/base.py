"""The wire-format contract and the registry. Nothing else: the reading helpers formats share live in
:mod:`refiner.formats.text`, :mod:`refiner.formats.strict`, :mod:`refiner.formats.lenient` and
:mod:`refiner.formats.jsonfix`, the search for markers in :mod:`refiner.formats.markers`.

A wire format is a :class:`WireFormat` subclass (a family's row of a grammar, :mod:`refiner.formats.family`); the
catalog (:mod:`refiner.formats.catalog`) registers one instance of each, with :func:`register`, in its order.
Everything the rest of the project needs to know about a format is one of its attributes (detection, the gate, tier-1
repair, the corruptor, the round-trip tests and the docs table read them; nothing tests a format's name). It
provides:

- ``parse_strict(text) -> list[ToolCall]``: raises :class:`FormatError` (message + character position), and only
  that, whatever the input (deep nesting, a parser bug and a non-string input included), when a required tag is
  missing or anything inside is not resolvable in that format, checked recursively. Reasoning before the calls
  (``<think>...</think>`` or plain prose) and prose after them are allowed.
- ``parse_lenient(text) -> Lenient``: best effort, never raises, on any string: the calls it recovered and the
  :class:`Problem` list of what it met (empty when the text was strictly valid), and where the text stops inside a
  call (:class:`Cut`; a reader that does not go through :mod:`~refiner.formats.jsonfix` marks it with
  :meth:`Lenient.mark_cut`). Its work is bounded by counts (repair units, items read: see jsonfix).
- Arguments nest at most :data:`MAX_ARGUMENT_DEPTH` levels: ``parse_strict`` raises on deeper ones (the base class
  checks, after the format's parser) and ``parse_lenient`` drops them with a problem.
- ``render(calls) -> str``: the canonical text, with ``parse_strict(render(calls)) == calls``; raises
  :class:`RenderError`, and only that, for calls the format cannot write (a name that is not an identifier in a
  pythonic format, a number JSON cannot hold, a value that is not JSON).

This is the only place a format's text is parsed: rewards, data generation, inference and evaluation all go through
the registry (``refiner.formats.get(name)``).
"""

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
# A call's arguments (an object) nest lists and objects at most this many levels deep: deeper calls are not valid
# (parse_strict raises) and lenient parsing drops the arguments that nest deeper. No real tool takes such values;
# nesting bombs do, and every later step (the gate, repair, the reward, JSON results) then stays far from Python's
# recursion limit.
MAX_ARGUMENT_DEPTH = 64
# Constants the readers share (one definition each; a reader that needs another value says why beside its own):
# a tool name in the tagged dialects (no whitespace, no tag or JSON delimiters), the problems a reader reports per text
# for one kind of defect, how much of a text is decoded to classify it, and how much text after a marker is read to
# tell one row from others sharing that marker. SPACED_NAME_PATTERN: a name written as plain text (GLM, DeepSeek).
NAME_PATTERN = r"[^\s<>{}\"']+"
SPACED_NAME_PATTERN = r"[^\s<>{}\"']+(?: [^\s<>{}\"']+)*"
MAX_NOTES = 8
DETECT_CHARS = 20_000
ROW_CHARS = 2_000


# The request's tools while a lenient parse runs (tool name -> its parameters; None: not known), for readers that
# settle an ambiguous repair by them: parse_lenient(tools=...) sets it, offered_tools() reads it.
_OFFERED: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar("offered", default=None)


def offered_tools() -> Mapping[str, Any] | None:
    """The tools of the request whose text the current :meth:`WireFormat.parse_lenient` reads: tool name -> its
    parameters (parameter name -> :class:`refiner.specs.Param`, or a list of parameter names), or ``None`` when they
    are not known. A reader may use them only to choose among readings the text itself allows (never to add a
    value)."""
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
    """``error`` kept as a value (a strict reading's answer): without the tracebacks of it and of the errors it was
    raised from, which would keep alive every frame they passed through and, from those, the caller's frames."""
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


# What a lenient parse can meet, by code. ``strict`` carries the strict parser's error when recovery itself met
# nothing worse; ``internal`` is a parser bug (never raised, reported so that it can be logged and fixed).
PROBLEM_CODES = (
    "strict",  # the text is not strictly valid (the message is the strict parser's error)
    "cut_input",  # only a prefix of a very long text was read
    "missing_tag",  # an opening or closing tag or sentinel is missing
    "not_a_list",  # a value that should hold a list of calls does not
    "not_a_call",  # an item that is not a call object
    "no_name",  # a call object without a usable tool name
    "unnamed_call",  # a call the model wrote in the format's own shape but named no tool in (Kimi-K2's
    # functions.invalid.0): no call, and salvage does not read the same text as one
    "bad_name",  # a tool name the format does not allow (kept)
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
    """Where a text stops inside a call: the upstream was cut short (typically at its token limit), or lost its
    closing brackets and tags. ``index``: the call of :attr:`Lenient.calls` the text stops in (``None``: it stops
    between calls, or in a call that could not be read); ``name``: that call's name when it was written whole;
    ``arguments``: its arguments written whole before the cut (a value the cut fell in, or a number the text ends
    with, is left out: nothing is invented); ``clean``: the text stops right after a value that cannot go on (a
    closed string, a literal, a closed bracket: only closing brackets or tags are missing), which also reads as a lost
    ending; otherwise it stops mid-value (inside a string, a key, a literal or a number, or after ``,`` ``:`` ``=``
    or an opening bracket), which only a cut explains."""

    index: int | None
    name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    clean: bool = False

    def describe(self, calls: Sequence[ToolCall] = ()) -> str:
        if self.index is None:
            return "the text stops after its last complete call" if self.clean else "the text stops between calls"
        what = f"call #{self.index}" + (f" ({self.name})" if self.name else "")
        where = "after a complete value" if self.clean else "mid-value"
        return f"the text stops inside {what}, {where}; {len(self.arguments)} argument(s) written whole before it"


@dataclass
class Lenient:
    """Result of a best-effort parse: what was recovered, and what could not be. A text that stops inside a call
    keeps that call in ``calls`` as read (its open string and brackets closed) and says so in ``cut``."""

    calls: list[ToolCall] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # why the strict parse failed (None when it succeeded, or was not tried: a text over MAX_LENIENT_CHARS)
    strict_error: FormatError | None = field(default=None, compare=False, repr=False)
    # where the text stops inside a call (None: it does not)
    cut: Cut | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def note(self, code: str, message: str) -> None:
        self.problems.append(Problem(code, message))

    def mark_cut(
        self, index: int | None, name: str | None = None, arguments: dict[str, Any] | None = None, clean: bool = False
    ) -> None:
        """Records that the text stops inside call ``index`` of :attr:`calls` (see :class:`Cut`); a cut mid-value is
        also a ``truncated`` problem. A later mark replaces an earlier one (the text stops once)."""
        if index is not None and not 0 <= index < len(self.calls):
            index = None
        self.cut = Cut(index, name, dict(arguments or {}), clean)
        if not clean and not any(p.code == "truncated" for p in self.problems):
            self.note("truncated", self.cut.describe(self.calls))


@dataclass(frozen=True)
class Detection:
    """How :func:`refiner.formats.detect_format` recognises a format (its rules are documented there).

    ``rank``: formats are tried in rank order (lower first) at every step, so a more specific format ranks before a more
    general one sharing its markers; a built-in format's rank is its place in the catalog
    (:mod:`refiner.formats.catalog`), set when it is registered. ``markers``: strings (tags, sentinel tokens) whose
    presence after any reasoning points at this format; the marker found earliest in the text wins, and among the
    formats sharing it the first (by rank) whose :meth:`WireFormat.sniff` accepts the text. ``closers``: weaker markers
    (closing tags) used only when the text holds no marker at all. ``bare``: an untagged format (a JSON value or call
    list with no marker of its own): strictly valid texts are only claimed after every tagged format failed, and broken
    ones by :meth:`WireFormat.claims_value` / :meth:`WireFormat.claims_text`. ``also_read``: other spellings of a marker
    the strict reader accepts (Granite 3.1's ``<tool_call>``): a tagged format reads a text strictly only when it holds
    one of ``markers`` or ``also_read`` (a registry test holds every tagged format to it), so detection skips the
    others' strict readings; ``strict_needs``: the one of ``markers`` without which the strict reader reads no text
    (an XML grammar row's first tag): detection tries that reading only where it occurs. ``by_name``: a shape no
    literal marks (vLLM's ``granite_pythonic`` call lines): detection
    never names it; it is read when a request or a chat template names it.
    """

    rank: int = 0
    markers: tuple[str, ...] = ()
    closers: tuple[str, ...] = ()
    bare: bool = False
    also_read: tuple[str, ...] = ()
    strict_needs: str = ""
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
    # Whether the refiner model was trained to read and write this format (the paper's training formats, Qwen3's
    # native one and the benchmarks' own). For any other format the pipeline shows the model the upstream in a
    # trained format (:func:`model_view`) and renders its answer back (refiner.pipeline).
    trained: ClassVar[bool] = False
    # The family's reasoning blocks, (open, close) pairs: ``<think>...</think>`` unless the family writes another
    # (``[THINK]...[/THINK]``, Gemma 4's thought channel). Read by the reasoning split.
    reasoning: ClassVar[tuple[tuple[str, str], ...]] = (("<think>", "</think>"),)
    # The answer's content and reasoning sit in channels of the format's own (gpt-oss harmony): its text is read by
    # answer_parts even when it holds no call.
    channels: ClassVar[bool] = False
    # parse_strict itself refuses arguments nesting deeper than MAX_ARGUMENT_DEPTH (the wrapper does not measure).
    bounds_depth: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "parse_strict" in cls.__dict__:
            cls.parse_strict = _raises_only_format_errors(cls.__dict__["parse_strict"])
        if "render" in cls.__dict__:
            cls.render = _raises_only_render_errors(cls.__dict__["render"])

    # The row contract (refiner.formats.family): a grammar's tags and detection for one row's spelling. A grammar
    # that one family alone writes has no spelling: its own ``tags`` and ``detection``.

    @classmethod
    def tags_for(cls, spelling: Any) -> tuple[str, ...]:
        return cls.tags

    @classmethod
    def detection_for(cls, spelling: Any, rank: int) -> Detection:
        return replace(cls.detection, rank=rank)

    def parse_strict(self, text: str) -> list[ToolCall]:  # pragma: no cover - interface
        raise NotImplementedError

    def parse_lenient(
        self,
        text: str,
        *,
        limit: int = MAX_LENIENT_CHARS,
        tools: Mapping[str, Any] | None = None,
        strict_error: FormatError | None = None,
    ) -> Lenient:
        """Best effort, never raises. A strictly valid text gives the strict calls and no problems (so ``ok`` tells
        whether the strict parse succeeded); otherwise :meth:`recover` collects what it can from the reasoning and at
        most ``limit`` characters after it, and the strict error is reported when recovery itself met no problem.
        Texts longer than :data:`MAX_LENIENT_CHARS` are not parsed strictly (they count as not valid). ``tools``: the
        request's tools (see :func:`offered_tools`), which recovery may use to choose among the readings a broken text
        allows (:func:`offered_tools`). ``strict_error``: the error this format's strict reading of ``text`` already
        raised (it is not read strictly again)."""
        token = _OFFERED.set(tools)
        try:
            return self._parse_lenient(text, limit, strict_error)
        finally:
            _OFFERED.reset(token)

    def _parse_lenient(self, text: str, limit: int, strict_error: FormatError | None = None) -> Lenient:
        out = Lenient()
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
            got = self._recovered(text)
            out.calls, out.cut = got.calls, got.cut
            out.problems.extend(got.problems)
            if not out.problems:
                out.note("strict", str(out.strict_error or self._strict_error(text)))
        except Exception as e:  # noqa: BLE001 - never raise: anything unexpected becomes a problem
            out.note("internal", f"{type(e).__name__}: {e}"[:300])
        return out

    def _recovered(self, text: str) -> Lenient:
        """What :meth:`recover` reads in ``text`` (already cut to the limit), with the cut and the bounds reached; an
        unexpected error keeps what was read before it (see :meth:`_parse_lenient`)."""
        out = Lenient()
        try:
            with repair_budget(text) as parse:
                self.recover(text, out)
                if parse.cuts and out.cut is None:  # a value closed at the end of the text, in no call read
                    out.mark_cut(None, clean=parse.cuts[-1].clean)
                if parse.gave_up:
                    out.note("gave_up", f"stopped after {MAX_RECOVERED_ITEMS} blocks or items; the rest was not read")
            if _may_nest_deeply(text):
                _drop_deep_arguments(out)
        except Exception as e:  # noqa: BLE001 - never raise: what was read so far stands
            out.note("internal", f"{type(e).__name__}: {e}"[:300])
        return out

    def _strict_error(self, text: str) -> FormatError | str:
        try:
            self.parse_strict(text)
        except FormatError as e:
            return kept(e)
        return "input was cut"

    def recover(self, text: str, out: Lenient) -> None:  # pragma: no cover - interface
        """Adds the calls recoverable from ``text`` to ``out.calls`` and every defect met to ``out.problems``."""
        raise NotImplementedError

    def render(self, calls: Sequence[ToolCall]) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def answer_parts(self, text: str) -> message.AnswerParts:
        """What an answer holding calls in this format says besides them: its content (the text before and after
        the calls, verbatim) and any reasoning written in the format's own channels (see
        :mod:`refiner.formats.message`). ``text`` is the answer after its reasoning block. Never raises."""
        return message.outside_calls(self, text)

    def is_valid(self, text: str) -> bool:
        try:
            self.parse_strict(text)
        except FormatError:
            return False
        return True

    # Detection hooks (see Detection)

    def sniff(self, body: str, at: int) -> bool:
        """Whether ``body`` (the text after any reasoning), which holds one of this format's markers at ``at``, is
        written in this format rather than in another one sharing the marker. Called for formats in rank order."""
        return True

    def claims_value(self, value: Any) -> bool:
        """Whether the first JSON value of a text that no format reads strictly (repaired, may be partial) has this
        format's shape."""
        return False

    def claims_text(self, body: str) -> bool:
        """Last resort for a text that holds no marker and no recognisable JSON: whether its shape (e.g. pythonic
        calls) is this format's."""
        return False

    def region_start(self, body: str, at: int) -> int:
        """Where the calls of ``body`` that :func:`refiner.formats.salvage.salvage` found by this format's marker at
        ``at`` start: the marker itself, unless the format writes part of a call before it."""
        return at

    def read_untagged(
        self, text: str, start: int, offered: Mapping[str, Sequence[str]]
    ) -> tuple[int, int, list[ToolCall]] | None:
        """For a text after ``start`` that holds none of the format's tags: ``(start, end, calls)`` of the calls
        written in the format's layout with its tags dropped (a decoder that skips special tokens drops GLM's), read by
        the ``offered`` tools alone (tool name -> its parameter names), as :func:`refiner.formats.salvage.salvage`
        asks; ``None`` when the text is not such a text (the default: a format whose layout means nothing without its
        tags)."""
        return None

    def answer_spans(self, text: str, start: int) -> list[tuple[int, int]]:
        """``(start, end)`` of the parts of ``text`` after ``start`` that the format's grammar marks as the answer
        meant for people, never calls (gpt-oss's ``final`` channel): :func:`refiner.formats.salvage.salvage` reads no
        call there. The default: none (a format without such a mark)."""
        return []

    # Typing by the tool specs

    def retype(self, calls: Sequence[ToolCall], tools: Mapping[str, Any]) -> list[ToolCall]:
        """The calls with argument values settled by the declared parameter types of ``tools`` (specs by name), for
        a format that writes values as untyped text (XML parameter values: ``94105`` may be a number or the string
        ``"94105"``, which only the spec tells). The gate calls it whenever the tools are known, before checking the
        calls. The default, for formats whose values carry their JSON type, keeps the calls as they are."""
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
    """Wraps a format's ``parse_strict`` so that it raises :class:`FormatError` and nothing else: nesting deeper than
    Python's recursion limit, a value Python cannot hold, a non-string input or a bug in the parser all become one."""

    @functools.wraps(parse)
    def parse_strict(self: WireFormat, text: str) -> list[ToolCall]:
        try:
            calls = parse(self, text)
            if not self.bounds_depth and _may_nest_deeply(text):
                deep = MAX_ARGUMENT_DEPTH + 1  # (all calls' arguments measured at once, in a list: one level more;
                # an empty one cannot reach it)
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


def _may_nest_deeply(text: str) -> bool:
    """Whether ``text`` holds enough brackets to nest arguments deeper than MAX_ARGUMENT_DEPTH (three C-speed
    counts; the depth itself is only measured when this holds)."""
    return (
        len(text) > MAX_ARGUMENT_DEPTH
        and text.count("[") + text.count("{") + text.count("(") > MAX_ARGUMENT_DEPTH
    )


def _drop_deep_arguments(out: Lenient) -> None:
    for i, c in enumerate(out.calls):
        if not c.arguments or value_depth(c.arguments, MAX_ARGUMENT_DEPTH) <= MAX_ARGUMENT_DEPTH:
            continue
        keep = {}
        for k, v in c.arguments.items():
            if value_depth(v, MAX_ARGUMENT_DEPTH - 1) < MAX_ARGUMENT_DEPTH:
                keep[k] = v
            else:
                what = f"argument {k!r} of {c.name!r} nests deeper than {MAX_ARGUMENT_DEPTH} levels; dropped"
                out.note("bad_argument", what)
        out.calls[i] = ToolCall(c.name, keep, c.outputs, c.step)
        if out.cut is not None and out.cut.index == i:
            shallow = {k: v for k, v in out.cut.arguments.items() if k in keep}
            out.cut = Cut(i, out.cut.name, shallow, out.cut.clean)


def _raises_only_render_errors(render: Any) -> Any:
    """Wraps a format's ``render`` so that calls it cannot write raise :class:`RenderError` (a value that is not JSON
    or a number JSON cannot hold raise ``TypeError`` / ``ValueError`` in the encoder)."""

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
    """Registers one instance of the format under its ``name`` and returns it; a format that lacks one of the
    required attributes (name, description, detection, example) fails here."""
    missing = [a for a in _REQUIRED if not getattr(fmt_cls, a, None)]
    if missing:
        raise TypeError(f"wire format {fmt_cls.__name__} lacks {', '.join(missing)}")
    if fmt_cls.outputs not in (None, "one", "list"):
        raise TypeError(f"wire format {fmt_cls.__name__}: outputs must be None, 'one' or 'list'")
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


def all_formats() -> list[WireFormat]:
    return list(_REGISTRY.values())


def by_rank() -> list[WireFormat]:
    """Every format in detection rank order."""
    return list(_ranked()[1])


def marker_table() -> MarkerTable:
    """The registered formats' :class:`~refiner.formats.markers.MarkerTable`, the same object until the registry
    changes."""
    global _RANKED
    now, fmts, table = _ranked()
    if table is None:
        table = MarkerTable(fmts, WireFormat)
        _RANKED = (now, fmts, table)
    return table


def marker_positions(text: str) -> dict[str, int]:
    """Where each registered marker first occurs in ``text`` (:func:`~refiner.formats.markers.find_markers`)."""
    return find_markers(text, marker_table())


# (the registry's state, its formats in rank order, their marker table), made again when the registry changes
_RANKED: tuple[tuple, tuple[WireFormat, ...], MarkerTable | None] = ((), (), None)


def _ranked() -> tuple[tuple, tuple[WireFormat, ...], MarkerTable | None]:
    global _RANKED
    # the registry's state: the dict itself (tests swap it), its size and its last format (a format is only ever
    # added, or taken out again by a test)
    old = _RANKED[0]
    if old and old[0] is _REGISTRY and old[1] == len(_REGISTRY) and old[2] is next(reversed(_REGISTRY.values()), None):
        return _RANKED
    now = (_REGISTRY, len(_REGISTRY), next(reversed(_REGISTRY.values()), None))
    _RANKED = (now, tuple(sorted(_REGISTRY.values(), key=lambda f: (f.detection.rank, f.name))), None)
    return _RANKED


def model_view(fmt: WireFormat) -> WireFormat:
    """The trained format a model is shown ``fmt``'s calls in: ``fmt`` itself when it is trained, else the trained
    format that carries the same things (pythonic calls: ``toolace``; names only with steps: ``order``; output labels:
    ``nestools``; plain calls: ``xlam``)."""
    if fmt.trained:
        return fmt
    if fmt.steps or fmt.names_only:
        return get("order")
    if fmt.outputs:
        return get("nestools")
    if fmt.pythonic:
        return get("toolace")
    return get("xlam")
