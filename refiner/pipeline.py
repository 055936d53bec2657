"""The inference pipeline: request → read once → gate → tier-1 repair → model → never-worse guard → result.

    refiner = Refiner(engine=make_engine("vllm", model="path/to/refiner"), n=4)
    result = refiner.refine({"tools": [...], "query": "...", "upstream": "<tool_call>...</tool_call>"})
    result["refined"], result["stage"], result["diagnostics"]

A request is ``{"tools", "query": str | messages, "upstream": str}`` plus optional ``system``, ``format``,
``format_hint`` (replaces the sentence naming the answer format; "" leaves it out), ``value_style`` (``"typed"``, the
default, or ``"text"``: every value written as a string, as API-Bank's gold does) and ``finish_reason`` (why the
upstream stopped, as its API said). The result is the request plus ``refined`` (text in the request's ``format``, else
the refiner's ``fmt``, else the upstream's), ``calls``, ``changed``, ``stage`` (``unchanged`` | ``repaired`` |
``model`` | ``fallback`` | ``truncated``), ``reason``, ``format``, ``diagnostics`` (the gate on ``refined``),
``upstream_diagnostics`` and ``actions`` (tier-1 repairs), all JSON-serialisable; with
``refine_batch(..., errors="result")`` an unreadable request becomes ``stage: "error"`` with an ``error`` message.

Truncation is reported, never completed. A text is cut when its ``finish_reason`` is one of
:data:`CUT_FINISH_REASONS` or it stops inside a call mid-value (in a string, key, literal or number, or after ``,``
``:`` ``=`` or an opening bracket). Then the complete calls before the cut are kept and repaired, the cut call is left
out, the model is not run (it would invent the missing values), and the result carries ``cut``: ``{"index", "name",
"arguments", "clean", "finish_reason"}`` (position among the upstream's calls or ``null`` between calls, the name and
arguments written whole, whether the text stops right after a complete value). A text missing only closing brackets
or tags after a complete value, with no cut ``finish_reason``, is closed (stage ``repaired``).

A failing model step never fails a request or its batch: the batch is retried one request at a time, and a request
whose model step still fails gets the best result without the model, ``stage: "fallback"``, a ``reason`` and
``model_error`` (``"<ExceptionType>: <message>"``, present only then).

With ``engine=None`` only tier 1 and the guard run.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from refiner import formats
from refiner.calls import ToolCall, calls_equal
from refiner.formats import derive
from refiner.formats.reading import Detected, params_by_tool, read_upstream
from refiner.formats.reasoning import calls_text
from refiner.gate import VALUE_STYLES, Finding, GateReport, check_reading, check_text, lost_call
from refiner.prompt import build_messages, extract_answer, format_hint, split_reasoning
from refiner.repair import UNKNOWN_TOOLS, Tier1, repair_parsed
from refiner.specs import SpecError, ToolCatalog, load_tools, tool_catalog

# The finish reasons that mean the upstream hit its token limit (OpenAI-compatible APIs and vLLM: "length";
# Anthropic: "max_tokens").
CUT_FINISH_REASONS = ("length", "max_tokens")
_JSON_ITEMS = frozenset((dict, str))  # (a tool list of these is JSON as it is)
MAX_ERROR_CHARS = 300  # of an engine error's message kept in ``model_error`` and ``reason``

log = logging.getLogger(__name__)


class RequestError(ValueError):
    """A request the pipeline cannot read; the message names the field."""


# ----------------------------------------------------------------------------------------------------------------
# 1. Request: validate, load the tool list


def validate_request(request: Any) -> None:
    """Raises :class:`RequestError` naming the first field that is missing or has the wrong type."""
    if not isinstance(request, (dict, Mapping)):  # (a dict told first: the ABC check is slow)
        raise RequestError(f"a request must be a JSON object, got {type(request).__name__}")
    if "upstream" not in request:
        raise RequestError("field 'upstream' is missing")
    if not isinstance(request["upstream"], str):
        raise RequestError(f"field 'upstream' must be a string, got {type(request['upstream']).__name__}")
    query = request.get("query", "")
    if not isinstance(query, (str, list)):
        raise RequestError(f"field 'query' must be a string or a list of messages, got {type(query).__name__}")
    for key in ("system", "format", "format_hint", "finish_reason"):
        value = request.get(key)
        if value is not None and not isinstance(value, str):
            raise RequestError(f"field {key!r} must be a string, got {type(value).__name__}")
    if (fmt := request.get("format")) is not None and not formats.known(fmt):
        raise RequestError(f"field 'format': unknown wire format {fmt!r}; known: {formats.names()}")
    if request.get("value_style") is not None and request["value_style"] not in VALUE_STYLES:
        raise RequestError(f"field 'value_style' must be one of {list(VALUE_STYLES)}, got {request['value_style']!r}")


def reasoning_calls(request: Any, default: bool) -> Any:
    """With ``calls_in_reasoning`` on (the request's field, else ``default``), the request with its upstream's
    reasoning block unwrapped when the answer after it holds no call; else the request."""
    if not isinstance(request, (dict, Mapping)):
        return request
    on = request.get("calls_in_reasoning")
    if not (on if isinstance(on, bool) else default) or not isinstance(request.get("upstream"), str):
        return request
    text = calls_text(request["upstream"])
    return request if text is None else {**request, "upstream": text}


def load_request_tools(request: Mapping[str, Any]) -> ToolCatalog | None:
    """The request's tool specs by name (``None``: it has none): a tool list lazily, each spec when first asked for
    (:func:`refiner.specs.tool_catalog`); other shapes (a record, tools inside the system prompt) whole."""
    raw = request.get("tools")
    source = "tools"
    if raw is None and request.get("system"):
        raw, source = request["system"], "system"
    if raw is None or raw == [] or raw == "":
        return None
    try:
        catalog = tool_catalog(raw) if source == "tools" else None
        return catalog if catalog is not None else ToolCatalog(load_tools(raw))
    except Exception as e:
        if source == "system":
            return None  # a system prompt need not list tools
        raise RequestError(f"field 'tools' could not be read as tool specs: {e}") from e


# ----------------------------------------------------------------------------------------------------------------
# 2-3. Read once, gate, tier-1 repair


@dataclass
class Job:
    """Everything the pipeline knows about one request on its way through."""

    request: Mapping[str, Any]
    upstream_fmt: str
    out_fmt: str
    tools: ToolCatalog | None  # the request's tools, read once (load_request_tools)
    offered: Mapping[str, Any] | None  # their parameters, as the readers take them (params_by_tool)
    upstream: GateReport
    tier1: Tier1
    samples: list[Tier1] = field(default_factory=list)  # model answers, each read, gated and tier-1 repaired
    trust_spec: bool = False  # tier 1 treats every tool spec as exact
    text_values: bool = False  # the request's value_style is "text": every value is written as a string
    model_error: str | None = None  # "<ExceptionType>: <message>" when the model step failed for this request
    model_formats: Collection[str] | None = None  # the formats the model knows (Refiner's model_formats)
    cut_off: bool = False  # the request says the upstream stopped at its token limit (CUT_FINISH_REASONS)
    truncated: bool = False  # the upstream was cut off (its finish_reason, or a text that stops mid-value)
    unknown_tools: str = "keep"  # what tier 1 does with a call to a tool the request does not offer
    tools_apart: bool = False  # sent without its tools (sendable): they are read again before the model step

    @property
    def model_fmt(self) -> str:
        """The format the model reads and writes for this job: the output format when the model knows it
        (``model_formats``, by default the formats marked ``trained``), else the trained format that carries the same
        things (:func:`refiner.formats.model_view`). A request with its own ``format_hint`` keeps the output format."""
        out = formats.get(self.out_fmt)
        if self.request.get("format_hint") is not None:
            return out.name
        if self.model_formats is not None and out.name in self.model_formats:
            return out.name
        view = formats.model_view(out).name
        return view if self.model_formats is None or view in self.model_formats else out.name

    @property
    def best_without_model(self) -> tuple[str, Tier1]:
        """``("repaired", tier1)`` when tier 1 changed something without adding gate errors, else ``("unchanged",
        the upstream as a tier-1 outcome that repaired nothing)``."""
        tier1, upstream = self.tier1, self.upstream
        if not tier1.changed:
            return "unchanged", tier1
        if tier1.after.n_errors <= upstream.n_errors:
            return "repaired", tier1
        return "unchanged", Tier1(self.request["upstream"], upstream.calls, before=upstream, after=upstream)

    def sendable(self) -> Job:
        """A copy to send to a process that holds the request, without its ``tools`` and ``query`` (megabytes in an
        agent's request) and their catalog; :meth:`rejoined` puts them back."""
        request = {k: v for k, v in self.request.items() if k not in ("tools", "query")}
        return replace(self, request=request, tools=None, offered=None, tools_apart=True)

    def rejoined(self, request: Mapping[str, Any]) -> Job:
        """A :meth:`sendable` job with the fields it was sent without, from the ``request`` it was prepared from."""
        return replace(self, request={**request, **self.request})

    def with_tools(self) -> Job:
        """A job sent without its tools (:meth:`sendable`) with them read from its request."""
        tools = load_request_tools(self.request)
        return replace(self, tools=tools, offered=params_by_tool(tools), tools_apart=False)


def prepare(request: Mapping[str, Any], default_fmt: str | None, *, trust_spec: bool = False,
            model_formats: Collection[str] | None = None, unknown_tools: str = "keep",
            detected: Detected | None = None) -> Job:
    """Request → its tools and upstream read once (:func:`refiner.formats.reading.read_upstream`: the format
    chosen, the text read, salvage) → gate → tier-1 repair (``model_formats``, which :attr:`Job.model_fmt` is chosen
    by, and ``unknown_tools`` as for :class:`Refiner`). ``detected``: the caller's detection of the upstream: when it
    found a format, the upstream is read and written in that one (or the reading it carries), not the request's."""
    validate_request(request)
    text = request["upstream"]
    text_values = request.get("value_style") == "text"
    cut_off = request.get("finish_reason") in CUT_FINISH_REASONS
    try:
        tools = load_request_tools(request)
        offered = params_by_tool(tools)
        if detected is not None and detected.text != text:
            detected = None
        reading = (detected and detected.reading) or read_upstream(
            text, request.get("format") or default_fmt, tools, offered=offered, detected=detected)
        upstream = check_reading(reading, tools, text_values=text_values)
        tier1 = repair_parsed(upstream, text, reading.fmt, tools, out_fmt=reading.out_fmt, trust_spec=trust_spec,
                              text_values=text_values, cut_off=cut_off, offered=offered, unknown_tools=unknown_tools)
    except SpecError as e:  # a tool's spec, read when the calls first needed it, is not a spec
        raise RequestError(f"field 'tools' could not be read as tool specs: {e}") from e
    truncated = cut_off or (upstream.cut is not None and not upstream.cut.clean)
    return Job(request, reading.fmt, reading.out_fmt, tools, offered, upstream, tier1, trust_spec=trust_spec,
               text_values=text_values, model_formats=model_formats, cut_off=cut_off, truncated=truncated,
               unknown_tools=unknown_tools)


# ----------------------------------------------------------------------------------------------------------------
# 4. Model


def tools_text(request: Mapping[str, Any]) -> str:
    """The task's system prompt: the request's own ``system``, else its tool list as JSON."""
    if request.get("system"):
        return str(request["system"])
    tools = request.get("tools")
    body = tools if isinstance(tools, str) else json.dumps(tools, ensure_ascii=False, default=str)
    return f"You can call the following tools:\n{body}"


def shown_upstream(job: Job) -> str:
    """The upstream calls as the model is shown them: the upstream text itself, or, when the model answers in another
    (trained) format than the output's, the calls read from it rendered in that format (the raw text when none could
    be read or rendered, or a call block could not be read: :func:`~refiner.gate.lost_call`)."""
    text = job.request["upstream"]
    if job.model_fmt == job.out_fmt or not job.upstream.calls or lost_call(job.upstream.reading) is not None:
        return text
    try:
        return formats.get(job.model_fmt).render(job.upstream.calls)
    except formats.RenderError:
        return text


def model_messages(job: Job) -> list[dict[str, str]]:
    """The refiner prompt for one job; the upstream's reasoning, when it has some, goes in its own block; the format
    instruction is the request's ``format_hint`` when it has one, else the default sentence for the model's format."""
    reasoning, calls_text = split_reasoning(shown_upstream(job))
    if reasoning is None:
        reasoning, _ = split_reasoning(job.request["upstream"])
    hint = job.request.get("format_hint")
    return build_messages(
        tools_text(job.request),
        job.request.get("query", ""),
        calls_text,
        format_hint=format_hint(job.model_fmt) if hint is None else hint,
        upstream_reasoning=reasoning,
    )


def read_sample(job: Job, generation: str) -> Tier1:
    """One generation: the answer after the reasoning, parsed in the format the model answers in, gated and tier-1
    repaired, and written in the output format."""
    answer = extract_answer(generation)
    report = check_text(answer, job.model_fmt, job.tools, text_values=job.text_values, offered=job.offered)
    return repair_parsed(report, answer, job.model_fmt, job.tools, out_fmt=job.out_fmt, trust_spec=job.trust_spec,
                         text_values=job.text_values, offered=job.offered, unknown_tools=job.unknown_tools)


def choose_sample(samples: Sequence[Tier1], ordered: bool) -> Tier1:
    """Best of N (``samples``: at least one): among gate-passing samples the most frequent call list (earliest on
    ties); when none passes, the one with the fewest gate errors."""
    passing = [s for s in samples if s.after.passed and s.calls]
    if passing:
        keys = [tuple(k if ordered else sorted(k)) for k in ([c.key() for c in s.calls] for s in passing)]
        votes = Counter(keys)
        top = max(votes.values())
        return next(s for s, k in zip(passing, keys) if votes[k] == top)
    return min(samples, key=lambda s: s.after.n_errors + (0 if s.calls else 1_000))


# ----------------------------------------------------------------------------------------------------------------
# 5. Never-worse guard and the result


def guard(job: Job, model: Tier1 | None) -> tuple[str, str, list[ToolCall], GateReport, str]:
    """``(stage, refined text, calls, gate report, reason)``: the model's answer unless it fails the gate where the
    upstream or tier-1 text passes (or it has more gate errors than they do); then the better of those."""
    if job.truncated:
        return truncated_outcome(job)
    base_stage, base = job.best_without_model
    if base_stage == "unchanged" and job.out_fmt != job.upstream_fmt and job.upstream.calls:
        base_stage = "repaired"  # the format conversion alone is a change
    what = "tier-1 repair" if base_stage == "repaired" else "the upstream"
    if model is None and job.model_error is not None:
        return "fallback", base.text, base.calls, base.after, f"the model step failed ({job.model_error}); {what} kept"
    if model is None:
        verdict = "passes the gate" if base.after.passed else "still fails the gate (no model ran)"
        return base_stage, base.text, base.calls, base.after, f"{what} {verdict}"
    ordered = formats.get(job.out_fmt).order_sensitive
    if not model.calls:
        return "fallback", base.text, base.calls, base.after, "the model's answer holds no readable call"
    if model.after.passed or model.after.n_errors <= base.after.n_errors and not base.after.passed:
        if job.upstream.strict_ok and job.out_fmt == job.upstream_fmt and calls_equal(
            model.calls, job.upstream.calls, ordered=ordered
        ):
            return "unchanged", job.request["upstream"], job.upstream.calls, job.upstream, "the model kept the calls"
        why = "model answer passes the gate" if model.after.passed else "model answer has the fewest gate errors"
        return "model", model.text, model.calls, model.after, why
    codes = sorted({d.code for d in model.after.diagnostics if d.severity == "error"})
    return "fallback", base.text, base.calls, base.after, f"model answer fails the gate ({', '.join(codes)})"


def truncated_outcome(job: Job) -> tuple[str, str, list[ToolCall], GateReport, str]:
    """The guard's answer for an upstream that was cut off (see the module docstring): tier 1's text when it changed
    anything (the cut call is then left out of it), else the upstream as it came (tier 1's outcome then)."""
    t1 = job.tier1
    text, calls, report = t1.text, t1.calls, t1.after
    why = f"finish_reason {job.request['finish_reason']!r}" if job.cut_off else "the text stops mid-value"
    cut = job.upstream.cut
    if cut is not None and cut.index is not None and any(a.code == "drop_cut" for a in t1.actions):
        what = f"cut off inside call #{cut.index}" + (f" ({cut.name})" if cut.name else "")
        kept = f"{len(calls)} complete call(s) kept; the cut call is left out, not completed"
    elif cut is not None:
        what = "cut off after its last complete call"
        kept = f"its {len(calls)} complete call(s) kept"
    else:
        what = "cut off at its token limit"
        kept = f"its {len(calls)} call(s) are complete; any call after them is missing"
    return "truncated", text, calls, report, f"the upstream was {what} ({why}): {kept}"


def cut_field(job: Job) -> dict[str, Any]:
    """The result's ``cut`` field for a truncated job."""
    cut = job.upstream.cut
    found = {"index": None, "name": None, "arguments": {}, "clean": True} if cut is None else {
        "index": cut.index, "name": cut.name, "arguments": dict(cut.arguments), "clean": cut.clean}
    return {**found, "finish_reason": job.request.get("finish_reason")}


def _json_safe(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request's fields for the result; a tool list given as ToolSpec objects or a catalog is left out (not
    JSON)."""
    out = dict(request)
    tools = out.get("tools")
    if isinstance(tools, (list, tuple)):  # (told first: ToolCatalog is a Mapping, whose isinstance check is slow)
        drop = not set(map(type, tools)) <= _JSON_ITEMS and any(not isinstance(t, (dict, str)) for t in tools)
    else:
        drop = isinstance(tools, ToolCatalog)
    if drop:
        del out["tools"]
    return out


def make_result(job: Job, stage: str, text: str, calls: list[ToolCall], report: GateReport, reason: str) -> dict:
    """The JSON result of a job (see the module docstring); ``actions`` are listed whenever tier-1's text is
    returned, also as a fallback."""
    # (tier 1's text returned: its actions, when it has any, are listed)
    tier1_text = stage in ("repaired", "truncated") or stage == "fallback" and job.best_without_model[0] == "repaired"
    same = text == job.request["upstream"]  # (returned as it came: no change when valid or nothing could be done)
    changed = not (same and (job.upstream.strict_ok or stage in ("unchanged", "truncated")))
    found = [d.to_dict() for d in report.diagnostics]
    out = _json_safe(job.request)
    out.update(refined=text, calls=[c.to_dict() for c in calls], changed=changed, stage=stage, reason=reason,
               format=job.out_fmt, diagnostics=found, upstream_diagnostics=list(found) if report is job.upstream else [
                   d.to_dict() for d in job.upstream.diagnostics],
               actions=[a.to_dict() for a in job.tier1.actions] if tier1_text else [])
    if job.model_error is not None:
        out["model_error"] = job.model_error
    if stage == "truncated":
        out["cut"] = cut_field(job)
    return out


def error_result(request: Any, message: str, line: int | None = None) -> dict:
    """The result for a request that could not be read: passed through with an ``error`` field, never dropped."""
    out = _json_safe(request) if isinstance(request, Mapping) else {"input": request}
    upstream = out.get("upstream")
    out.update(refined=upstream if isinstance(upstream, str) else "", calls=[], changed=False, stage="error",
               reason=message, error=message, diagnostics=[Finding("request", message).to_dict()])
    if line is not None:
        out["line"] = line
    return out


# ----------------------------------------------------------------------------------------------------------------
# The refiner


class Refiner:
    """Refines upstream tool calls. ``engine``: anything with the engines' ``chat`` method, or None (tier 1 only).

    ``bypass`` (default True): skip the model when the gate passes after tier 1; ``n``: samples per request (best of
    N by gate and agreement); ``thinking``, ``temperature`` (default 0 for one sample, 0.7 for several), ``max_tokens``,
    ``seed``; ``trust_spec``: tier 1 treats every spec as exact (:mod:`refiner.repair`); ``model_formats``: the formats
    the model was trained on (default: those marked ``trained``): other output formats are shown to it in the closest
    one and its answer written back (:attr:`Job.model_fmt`); ``chat_template``: the upstream model's template
    (``.jinja``, ``tokenizer_config.json`` or model folder), whose derived dialect becomes the refiner's format (one
    log line and detection per request when none derives); ``unknown_tools``: ``"keep"`` or ``"drop"`` a call to a
    tool not offered (docs/formats.md, "What counts as no call"); ``calls_in_reasoning``: read calls written in the
    upstream's reasoning when its answer holds none.
    """

    def __init__(self, engine: Any = None, fmt: str | None = None, *, bypass: bool = True, n: int = 1,
                 thinking: bool | None = None, temperature: float | None = None, max_tokens: int = 1024,
                 seed: int | None = None, trust_spec: bool = False, model_formats: Collection[str] | None = None,
                 chat_template: str | Path | None = None, calls_in_reasoning: bool = False,
                 unknown_tools: str = "keep") -> None:
        self.chat_template = None if chat_template is None else str(chat_template)
        if chat_template is not None:
            if fmt is not None:
                raise ValueError("give fmt or chat_template, not both (the template's dialect is the format)")
            fmt = derive.dialect_for(self.chat_template)
        if fmt is not None:
            formats.get(fmt)  # unknown names fail here, not per request
        for name in model_formats or ():
            formats.get(name)
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        if unknown_tools not in UNKNOWN_TOOLS:
            raise ValueError(f"unknown_tools must be one of {list(UNKNOWN_TOOLS)}, got {unknown_tools!r}")
        self.unknown_tools = unknown_tools
        self.engine = engine
        self.fmt = fmt
        self.bypass = bypass
        self.n = n
        self.thinking = thinking
        self.temperature = temperature if temperature is not None else (0.0 if n == 1 else 0.7)
        self.max_tokens = max_tokens
        self.seed = seed
        self.trust_spec = trust_spec
        self.model_formats = None if model_formats is None else frozenset(model_formats)
        self.calls_in_reasoning = calls_in_reasoning

    def __setstate__(self, state: dict) -> None:
        """A refiner sent to another process (the proxy's tier-1 workers) derives its template's dialect there too:
        a derived row lives in the registry of the process that installed it."""
        self.__dict__.update(state)
        if self.__dict__.get("chat_template"):
            derive.dialect_for(self.chat_template)

    def refine(self, request: Mapping[str, Any]) -> dict:
        """One request → one result (raises :class:`RequestError` for a request it cannot read)."""
        try:
            job = self._prepare(reasoning_calls(request, self.calls_in_reasoning))
        except RequestError as e:
            raise RequestError(f"request 0: {e}") from e
        if self.engine is not None and self.needs_model(job):
            self.run_model([job])
        return self._result(job)

    def refine_batch(self, requests: Iterable[Mapping[str, Any] | Job], *, errors: str = "raise") -> list[dict]:
        """Results in request order; the model runs once for all requests that need it (if that call fails, once per
        request; a request whose model step fails falls back, see :meth:`run_model`). ``errors="result"`` turns an
        unreadable request into an error result (see :func:`error_result`) instead of raising. A :class:`Job` among
        ``requests`` (from :meth:`prepare_batch`, here or in another process) is not read or repaired again."""
        return self.finish(self.prepare_batch(requests, errors=errors), errors=errors)

    def prepare_batch(self, requests: Iterable[Mapping[str, Any] | Job], *, errors: str = "raise",
                      detected: Sequence[Detected | None] = ()) -> list[Job | dict]:
        """Each request read once, gated and tier-1 repaired (:func:`prepare`): its :class:`Job`, or with
        ``errors="result"`` its error result. A Job given is kept (its tools read again if sent without them).
        ``detected``: the caller's detection of each request's upstream, in order (None, or missing: none)."""
        jobs: list[Job | dict] = []
        for i, request in enumerate(requests):
            job = request if isinstance(request, Job) else None
            request = request if job is None else job.request
            try:
                if job is None:
                    request = reasoning_calls(request, self.calls_in_reasoning)
                    job = self._prepare(request, detected[i] if i < len(detected) else None)
                elif job.tools_apart:
                    job = job.with_tools()
                jobs.append(job)
            except RequestError as e:
                if errors != "result":
                    raise RequestError(f"request {i}: {e}") from e
                jobs.append(error_result(request, str(e)))
            except Exception as e:  # a bug: with errors="result" it stays this request's, as an error result
                if errors != "result":
                    raise
                log.exception("refiner failed on request %d", i)
                jobs.append(error_result(request, f"internal error: {describe_error(e)}"))
        return jobs

    def _prepare(self, request: Mapping[str, Any], detected: Detected | None = None) -> Job:
        """:func:`prepare` with this refiner's settings (``request``: its reasoning unwrapped, :func:`reasoning_calls`,
        when that is on)."""
        return prepare(request, self.fmt, trust_spec=self.trust_spec, model_formats=self.model_formats,
                       unknown_tools=self.unknown_tools, detected=detected)

    def finish(self, jobs: Sequence[Job | dict], *, errors: str = "raise") -> list[dict]:
        """The model for the jobs that need it (:meth:`needs_model`), then the guard: each job's result, in order."""
        todo = [j for j in jobs if isinstance(j, Job) and self.needs_model(j)] if self.engine is not None else ()
        if todo:
            self.run_model(todo)
        results = []
        for j in jobs:
            if isinstance(j, dict):
                results.append(j)
                continue
            try:
                results.append(self._result(j))
            except Exception as e:  # a bug: with errors="result" it stays this request's, as an error result
                if errors != "result":
                    raise
                log.exception("refiner failed on a request")
                results.append(error_result(j.request, f"internal error: {describe_error(e)}"))
        return results

    @staticmethod
    def _result(job: Job) -> dict:
        """The guard's choice for a prepared job (its best model sample, if any), as its result."""
        chosen = choose_sample(job.samples, formats.get(job.out_fmt).order_sensitive) if job.samples else None
        return make_result(job, *guard(job, chosen))

    def needs_model(self, job: Job) -> bool:
        """Whether ``job`` is for the model, given one: its upstream was not cut off (a cut call is reported, never
        completed by the model), and ``bypass`` is off or its best answer without the model fails the gate."""
        return not job.truncated and (not self.bypass or not job.best_without_model[1].after.passed)

    def run_model(self, jobs: Sequence[Job]) -> None:
        """Fills each job's ``samples``: one batched engine call for all ``jobs``; when it fails, one call per job,
        and a job whose own call fails gets ``model_error`` instead (never an exception)."""
        try:
            self._model_step(jobs)
            return
        except Exception as e:  # noqa: BLE001 - any engine failure; retried request by request below
            if len(jobs) == 1:
                self._model_failed(jobs[0], e)
                return
            log.warning("refiner model step failed for a batch of %d (%s); retrying one request at a time",
                        len(jobs), describe_error(e))
        for job in jobs:
            try:
                self._model_step([job])
            except Exception as e:  # noqa: BLE001 - this request falls back to its best result without the model
                self._model_failed(job, e)

    def _model_step(self, jobs: Sequence[Job]) -> None:
        """One engine call for ``jobs``; every job's answers are read before any is stored (all or nothing)."""
        conversations = [model_messages(j) for j in jobs]
        generations = self.engine.chat(conversations, n=self.n, temperature=self.temperature,
                                       max_tokens=self.max_tokens, enable_thinking=self.thinking, seed=self.seed)
        if len(generations) != len(jobs):
            raise RuntimeError(f"engine returned {len(generations)} results for {len(jobs)} conversations")
        samples = [[read_sample(job, t) for t in texts] for job, texts in zip(jobs, generations)]
        for job, got in zip(jobs, samples):
            job.samples = got

    @staticmethod
    def _model_failed(job: Job, error: Exception) -> None:
        job.samples = []
        job.model_error = describe_error(error)
        log.warning("refiner model step failed for one request: %s", job.model_error)


def describe_error(error: BaseException) -> str:
    """``"<ExceptionType>: <message>"``, the message cut to :data:`MAX_ERROR_CHARS` characters."""
    message = str(error)
    if len(message) > MAX_ERROR_CHARS:
        message = message[:MAX_ERROR_CHARS] + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
