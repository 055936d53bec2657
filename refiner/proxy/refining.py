"""Refining one chat completion: which choices go to the refiner, where each step runs, and what comes back.

Per response, within one deadline (``timeout`` seconds from when the upstream answered):

1. **Which choices.** A choice with ``tool_calls`` is refined; when it ended with ``finish_reason: "length"`` and
   its last call's arguments are not a complete JSON object, that call was cut by the token limit: it is left out of
   ``tool_calls`` (a client would run it with values the model never finished; it is never completed with invented
   closing values either), the finish reason stays ``length`` and the response reports it, with its name and
   arguments as written (:func:`truncated_call`). A choice without ``tool_calls`` whose content may hold calls
   (:mod:`refiner.proxy.content`) is read for them; content longer than :data:`MAX_SPLIT_HERE` characters is split
   in a worker, not in the event loop.
2. **Tier 1, isolated.** With a :class:`refiner.pipeline.Refiner`, tier-1 repair (and the content's format
   detection) runs in a worker process (:mod:`refiner.proxy.isolation`): a slow request is demoted and, at the
   deadline, stopped; it never holds up the others.
3. **The model, batched.** Choices whose tier-1 result still fails the gate
   (:meth:`~refiner.pipeline.Refiner.needs_model`) go to the refiner model, all requests' together, through one
   :class:`~refiner.proxy.batching.RefineBatcher` (the engine sees batches, from one thread), each as the job its
   worker prepared (:class:`~refiner.pipeline.Job`): tier 1 runs once per choice. A choice whose tier 1 took more
   than :data:`MODEL_SKIP_CPU` seconds of CPU does not go to the model (its text is hostile or huge; the batch is not
   made to wait for it). Any other refiner (an object with ``refine_batch``) gets every choice through the batcher.
4. **The result.** Past the deadline, or when the refiner fails, a choice is returned as the upstream sent it, with
   stage ``timeout`` or ``error``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from refiner import formats
from refiner.formats.base import WireFormat
from refiner.formats.message import only_tags
from refiner.pipeline import Job, Refiner
from refiner.proxy.batching import RefineBatcher
from refiner.proxy.content import (
    Ask,
    ContentCalls,
    ContentSplit,
    Openers,
    holds_calls,
    markers,
    split_whole,
    tool_names,
)
from refiner.proxy.convert import apply_result, rebuild_tool_calls, refine_request
from refiner.proxy.history import HistoryReport, apply_repairs, find_broken, left_entries, limit, repair_items
from refiner.proxy.isolation import IsolationError, WorkTimeout
from refiner.proxy.metrics import Metrics
from refiner.proxy.reasoning import Reasoning, trim_edges, upstream_reasoning
from refiner.proxy.thinking import PromptReasoning
from refiner.proxy.work import content_item, read_result

log = logging.getLogger("refiner.proxy")

MODEL_SKIP_CPU = 0.25  # seconds of tier-1 CPU past which a choice is not sent to the model
MAX_SPLIT_HERE = 16_000  # characters of content split in the event loop; longer content is split in a worker


@dataclass
class SplitText:
    """A content split made in a worker: the text released and the text held (see :class:`ContentSplit`)."""

    released_text: str
    held: str

Choice = tuple[dict, str | None]  # (message, finish_reason)


@dataclass
class ChoiceResult:
    """One choice after refinement. ``stage``: ``none`` (nothing to refine), the pipeline's stage (``truncated``
    whenever a cut call was left out), ``timeout`` or ``error``. ``truncated``: the call cut by the token limit (``{"call": index, "id": ...}``). ``content_format``:
    the format of calls moved out of the content. ``content_tail`` / ``reasoning_tail``: held-back content and
    reasoning read from it (a channel format's), to release at the end of a stream. ``separated``: reasoning or
    calls were taken out of the content (content left blank is then no content)."""

    message: dict
    finish_reason: str | None
    stage: str = "none"
    truncated: dict | None = None
    content_format: str | None = None
    content_tail: str = ""
    reasoning_tail: str = ""
    separated: bool = False
    reasoning: str | None = None  # the reasoning block taken out of the content (read for calls when switched on)
    repairs: dict[str, int] = field(default_factory=dict)  # the repairs by class (metrics.repair_classes)
    model: bool = False  # sent to the refiner model


@dataclass
class _Job:
    choice: int
    kind: str  # "calls" | "content"
    request: dict  # the pipeline request (with the conversation)
    calls: list = field(default_factory=list)  # kind "calls": the tool calls refined
    split: ContentSplit | SplitText | None = None  # kind "content"
    outcome: dict | None = None  # {"format", "result"}
    prepared: Job | None = None  # the worker's job, when it is for the model (refiner.proxy.work.tier1)
    slow: bool = False
    status: str | None = None  # "timeout" | "error": no result
    model: bool = False  # sent to the refiner model


def cut_off(tool_call: Any) -> bool:
    """Whether a call's arguments stop before the end of a JSON object (the call was cut)."""
    fn = tool_call.get("function") if isinstance(tool_call, dict) else None
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if isinstance(args, dict):
        return False
    if not isinstance(args, str):
        return True
    try:
        return not isinstance(json.loads(args), dict)
    except (ValueError, RecursionError):
        return True


def truncated_call(tool_call: Any, index: int) -> dict:
    """The report of a call cut by the token limit: its position, id, name and arguments as the upstream wrote them
    (the call itself is not returned as a tool call: a client would run it with values the model never finished)."""
    fn = tool_call.get("function") if isinstance(tool_call, dict) else None
    fn = fn if isinstance(fn, dict) else {}
    args = fn.get("arguments")
    return {"call": index, "id": tool_call.get("id") if isinstance(tool_call, dict) else None,
            "name": fn.get("name") if isinstance(fn.get("name"), str) else None,
            "arguments": args if isinstance(args, str) else None}


def without_calls(message: dict, calls: list) -> dict:
    """``message`` with only ``calls`` as its tool calls (the key dropped when none is left)."""
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    if calls:
        out["tool_calls"] = calls
    return out


def tier1_request(request: dict) -> dict:
    """The request as sent to a tier-1 worker: tier 1 reads the tools and the upstream text, not the conversation
    (which can be large), so the conversation stays here."""
    return {k: v for k, v in request.items() if k != "query"}


@functools.lru_cache(maxsize=64)
def _openers(names: frozenset[str], known_markers: tuple[str, ...]) -> Openers:
    return Openers(names, known_markers)


class Refinement:
    """Refines the choices of completions and heals incoming histories (see the module docstring). ``runner`` is a
    :class:`~refiner.proxy.isolation.WorkerPool` (or :class:`~refiner.proxy.isolation.ThreadRunner`) whose workers
    hold a tier-1 refiner; ``batcher`` runs ``ref`` (the model, or any other refiner)."""

    def __init__(self, ref: Any, *, runner: Any, batcher: RefineBatcher, fmt: str, content: ContentCalls,
                 timeout: float, metrics: Metrics | None = None, prompts: PromptReasoning | None = None) -> None:
        self.ref = ref
        self.prompts = prompts if prompts is not None else PromptReasoning()
        self.metrics = metrics
        self.runner = runner
        self.batcher = batcher
        self.fmt = fmt
        self.content = content
        self.timeout = timeout
        self.tier1_first = isinstance(ref, Refiner)
        self.has_model = self.tier1_first and ref.engine is not None

    def deadline(self) -> float:
        return asyncio.get_running_loop().time() + self.timeout

    @staticmethod
    def remaining(deadline: float) -> float:
        return max(0.0, deadline - asyncio.get_running_loop().time())

    async def in_worker(self, task: str, payload: Any, timeout: float, what: str,
                        level: int = logging.WARNING) -> tuple[Any, float, str | None]:
        """``(value, cpu seconds, None)`` of a worker task, or ``(None, 0.0, "timeout" | "error")`` when it gave
        none (logged, naming ``what``)."""
        try:
            value, cpu = await self.runner.run(task, payload, timeout)
        except IsolationError as e:
            log.log(level, "%s gave no answer (%s: %s)", what, type(e).__name__, e)
            return None, 0.0, "timeout" if isinstance(e, WorkTimeout) else "error"
        return value, cpu, None

    # -- content

    def splitter(self, body: dict) -> ContentSplit | None:
        """A content split for one answer of this request, or None when its answers are not read for calls."""
        if not self.content.applies(body):
            return None
        return ContentSplit(_openers(frozenset(tool_names(body)), markers()))

    async def run(self, gen: Generator[Ask, Any, Any], body: dict, split: ContentSplit,
                  deadline: float | None = None) -> Any:
        """Runs a :class:`~refiner.proxy.content.CallDriver` step, its questions answered in a worker (:meth:`ask`).
        All questions of one answer share one deadline (``deadline``, else one refine timeout from its first
        question); past it, regions are released and no call is read early."""
        try:
            ask = next(gen)
            while True:
                if deadline is None:
                    if split.deadline is None:
                        split.deadline = self.deadline()
                    deadline = split.deadline
                ask = gen.send(await self.ask(body, ask, deadline) if self.remaining(deadline) > 0 else None)
        except StopIteration as stop:
            return stop.value

    def asking(self, body: dict) -> dict:
        """What a split's questions for this request are answered with (:func:`refiner.proxy.work.answer`)."""
        return {"tools": body.get("tools") or None, "names": sorted(tool_names(body)), "allowed": self.content.allowed,
                "model": self.has_model}

    async def ask(self, body: dict, ask: Ask, deadline: float) -> Any:
        """The answer to a split's question, from a worker; when none comes, a region is not calls and no call is
        read early."""
        value, _, failed = await self.in_worker("ask", {**self.asking(body), "kind": ask.kind, "text": ask.text},
                                                self.remaining(deadline), "a content question", logging.INFO)
        return (False if ask.kind == "region" else None) if failed else value

    async def early_tool_calls(self, body: dict, calls: list[dict], deadline: float) -> list[dict] | None:
        """The upstream's complete tool calls of a streamed answer (``calls``: OpenAI tool calls, the first ones of
        the answer) refined by tier 1 in a worker, to send before the answer ends; None when they must wait for the
        end: a refiner model is configured (it reads the whole answer), tier 1 gave no clean answer (not read or
        repaired, or past the deadline), or its answer does not keep one call per call."""
        if not self.tier1_first or self.has_model:
            return None
        job = _Job(0, "calls", refine_request(body, calls, self.fmt), calls=calls)
        await self._tier1([job], deadline)
        result = (job.outcome or {}).get("result")
        if job.status is not None or not result or result.get("stage") not in ("unchanged", "repaired"):
            return None
        refined, _ = apply_result({"role": "assistant", "content": None, "tool_calls": calls}, None, result)
        out = refined.get("tool_calls") or []
        return out if len(out) == len(calls) else None

    async def split_content(self, body: dict, text: str, deadline: float) -> ContentSplit | SplitText | None:
        """The content of a whole (non-streamed) answer, split; a long one is split in a worker (within the
        deadline; past it, or when that fails, the content is all released)."""
        split = self.splitter(body)
        if split is None:
            return None
        if len(text) > MAX_SPLIT_HERE:
            payload = {**self.asking(body), "text": text, "markers": list(split.openers.markers)}
            value, _, failed = await self.in_worker("split", payload, self.remaining(deadline), "a content split",
                                                    logging.INFO)
            return SplitText(text, "") if failed else SplitText(value["released"], value["held"])
        await self.run(split_whole(split, text), body, split, deadline)
        return split

    # -- choices

    async def choices(self, body: dict, items: list[Choice], splits: dict[int, ContentSplit] | None = None,
                      reasonings: dict[int, str] | None = None) -> list[ChoiceResult]:
        """The refined choices, in order. ``splits`` (streaming) are the content splits already made per choice, and
        ``reasonings`` the reasoning blocks already sent."""
        deadline = self.deadline()
        opened = self.prompts.opened(body, whole=True) if splits is None else None
        lean = splits is None and opened is None and self.prompts.leans(body)
        results = [ChoiceResult(m, f) for m, f in items]
        for i, text in (reasonings or {}).items():
            if 0 <= i < len(results):
                results[i].reasoning = text
        jobs: list[_Job] = []
        for i, (message, reason) in enumerate(items):
            if splits is None:
                if upstream_reasoning(message) is None:
                    self.prompts.learn(body, message.get("content"), reason)
                message = self.take_reasoning(body, message, results[i], opened, lean, reason == "length")
                results[i].message = message
            tool_calls = message.get("tool_calls")
            split = (splits or {}).get(i)
            if isinstance(tool_calls, list) and tool_calls:
                calls = list(tool_calls)
                if reason == "length" and cut_off(calls[-1]):
                    results[i].truncated = truncated_call(calls[-1], len(calls) - 1)
                    calls = calls[:-1]
                    results[i].message = without_calls(message, calls)
                if calls:
                    jobs.append(_Job(i, "calls", refine_request(body, calls, self.fmt), calls=calls))
                if split is not None:
                    results[i].content_tail = split.held
                continue
            content = message.get("content")
            if splits is None and isinstance(content, str):
                split = await self.split_content(body, content, deadline)
            if split is None:
                continue
            if not split.held.strip():
                results[i].content_tail = split.held
                continue
            request = {**refine_request(body, [], self.fmt), "upstream": split.held, "format": None}
            if reason == "length":
                request["finish_reason"] = reason  # the complete calls before the cut are returned, the cut one is not
            jobs.append(_Job(i, "content", request, split=split))
        if jobs:
            await self._tier1(jobs, deadline)
            await self._model(jobs, deadline)
        for job in jobs:
            self._apply(job, items[job.choice], results[job.choice], body)
        if getattr(self.ref, "calls_in_reasoning", False):
            await self._reasoning_calls(body, results, deadline)
        for r in results:
            if r.truncated and r.stage not in ("timeout", "error"):
                r.stage = "truncated"  # a cut call was left out: the answer is not the upstream's, nor just repaired
        if self.metrics is not None:
            self.metrics.choices(results)
        if splits is None:
            for r in results:
                if r.separated and isinstance(r.message.get("content"), str):
                    text = trim_edges(r.message["content"], r.reasoning is not None, True)
                    r.message = {**r.message, "content": content_or_none(text, True)}
        return results

    async def _reasoning_calls(self, body: dict, results: list[ChoiceResult], deadline: float) -> None:
        """Calls written inside reasoning, for the choices whose answer holds none (``calls_in_reasoning`` switched
        on; off by default: see :mod:`refiner.formats.reasoning`). The reasoning stays as it is."""
        todo = [r for r in results if r.reasoning and r.reasoning.strip() and not r.message.get("tool_calls")
                and self.content.applies(body)]
        if not todo:
            return
        work = [content_item(r.reasoning, body.get("tools") or None, self.content.allowed) for r in todo]
        outcomes, _, failed = await self.in_worker("tier1", work, self.remaining(deadline), "reading calls in reasoning",
                                                   logging.INFO)
        if failed:
            return
        for r, outcome in zip(todo, outcomes):
            result = outcome.get("result")
            if holds_calls(result, tool_names(body)):
                r.message = {**r.message, "tool_calls": took_calls(r, result, outcome.get("format"))}

    async def _tier1(self, jobs: list[_Job], deadline: float) -> None:
        todo = [j for j in jobs if j.kind == "content" or self.tier1_first]
        if not todo:
            return
        work = [{"request": tier1_request(j.request), "detect": j.kind == "content", "allowed": self.content.allowed,
                 "model": self.has_model} for j in todo]
        outcomes, cpu, failed = await self.in_worker("tier1", work, self.remaining(deadline),
                                                     "tier-1 refinement (the upstream answer is returned)")
        if failed:
            for j in todo:
                j.status = failed
            return
        for j, outcome in zip(todo, outcomes):
            j.prepared = outcome.pop("job", None)
            j.outcome, j.slow = outcome, cpu > MODEL_SKIP_CPU
            if j.kind == "content" and outcome.get("format"):
                j.request["format"] = outcome["format"]

    async def _model(self, jobs: list[_Job], deadline: float) -> None:
        todo = []
        for j in jobs:
            if j.status is not None or (j.kind == "content" and not (j.outcome or {}).get("format")):
                continue
            if not self.tier1_first or (j.prepared is not None and not j.slow):
                todo.append(j)
        if not todo:
            return
        for j in todo:
            j.model = True
        try:
            sent = [j.request if j.prepared is None else j.prepared.rejoined(j.request) for j in todo]
            results = await asyncio.wait_for(self.batcher.refine(sent), self.remaining(deadline))
        except asyncio.TimeoutError:
            log.warning("refiner model answer not back by the deadline; returning the upstream answer")
            for j in todo:
                j.status = "timeout"
            return
        except Exception as e:  # noqa: BLE001 - the proxy never fails a request because the refiner did
            log.warning("refiner failed (%s: %s); returning the upstream calls", type(e).__name__, e)
            for j in todo:
                j.status = "error"
            return
        for j, result in zip(todo, results):
            j.outcome = {"format": j.request.get("format"), "result": read_result(result)}

    def take_reasoning(self, body: dict, message: dict, out: ChoiceResult, opened: bool | None = None,
                       lean: bool = False, cut: bool = False) -> dict:
        """A whole answer's message with its content's reasoning block moved to ``reasoning_content`` (after any
        reasoning the upstream separated itself, which is kept as it came); ``opened``: whether the prompt opened the
        block (:meth:`~refiner.proxy.thinking.PromptReasoning.opened`); ``lean``: when not known, the model's family
        opens it by default (:meth:`~refiner.proxy.thinking.PromptReasoning.leans`); ``cut``: the answer ended on the
        token limit."""
        content = message.get("content")
        if not isinstance(content, str) or not content:
            return message
        given = upstream_reasoning(message)
        reasoning, answer = Reasoning(False if given is not None else opened, lean and given is None).read(content, cut)
        if reasoning is None:
            return message
        out.separated, out.reasoning = True, reasoning
        return with_reasoning({**message, "content": answer}, reasoning)

    def _apply(self, job: _Job, item: Choice, out: ChoiceResult, body: dict) -> None:
        message, reason = out.message, item[1]
        result = (job.outcome or {}).get("result")
        out.model = job.model
        if job.kind == "content":
            fmt_name = (job.outcome or {}).get("format")
            fmt = formats.get(fmt_name) if fmt_name in formats.names() else None
            held = job.split.held
            parts = fmt.answer_parts(held) if fmt is not None else None
            a, b = parts.calls if parts is not None else (0, 0)
            calls = job.status is None and holds_calls(result, tool_names(body))
            # gpt-oss: its channels are read even without a call; an empty call section is markup
            if calls or (parts is not None and (has_channels(fmt) or (b > a and only_tags(fmt, held[a:b])))):
                tail, reasoning = (parts.content, parts.reasoning) if parts is not None else ("", None)
                new = {**message, "content": content_or_none(job.split.released_text + tail, True)}
                if calls:
                    new["tool_calls"] = took_calls(out, result, fmt_name)
                out.message = with_reasoning(new, reasoning)
                out.content_tail, out.reasoning_tail, out.separated = tail, reasoning or "", True
            else:
                out.content_tail = held
            if not calls:
                out.stage = job.status or "none"
            elif result.get("stage") == "truncated":  # the call the text stops in is left out, and reported
                cut = result.get("cut") if isinstance(result.get("cut"), dict) else {}
                out.truncated = {"call": len(result["calls"]), "id": None, "from": "content",
                                 **({"name": cut["name"]} if cut.get("name") else {})}
            return
        if job.status is not None or result is None:
            out.stage = job.status or "error"
            return
        refined, reason = apply_result({**message, "tool_calls": job.calls}, reason, result)
        out.message, out.finish_reason = refined, reason
        out.stage = str(result.get("stage", "unchanged"))
        out.repairs = result.get("repairs") or {}

    # -- history

    async def heal_history(self, body: dict) -> tuple[dict, HistoryReport]:
        """The request with the broken tool calls of its history repaired, and the report (see
        :mod:`refiner.proxy.history`); on a timeout or failure the request is forwarded as sent."""
        broken = find_broken(body)
        if not broken:
            return body, HistoryReport()
        healed, left = limit(broken)
        outcomes, _, failed = await self.in_worker("tier1", repair_items(body, healed), self.timeout,
                                                   "history repair (the history is forwarded as sent)")
        if failed:
            return body, HistoryReport(status=failed)
        out, report = apply_repairs(body, healed, outcomes)
        report.entries += left_entries(left, f"over the limit of calls repaired per request ({len(healed)})")
        return out, report


def took_calls(out: ChoiceResult, result: dict, fmt: str | None) -> list[dict]:
    """The tool calls of the calls ``result`` read from a choice's text (in format ``fmt``), ``out`` marked as
    answering with them."""
    out.finish_reason = "tool_calls" if out.finish_reason in (None, "stop", "tool_calls") else out.finish_reason
    out.stage, out.repairs, out.content_format = str(result.get("stage", "unchanged")), result.get("repairs") or {}, fmt
    return rebuild_tool_calls([], result["calls"])


def has_channels(fmt: WireFormat) -> bool:
    """Whether a format reads an answer's content and reasoning from channels of its own (gpt-oss harmony): it
    overrides :meth:`WireFormat.answer_parts`."""
    return type(fmt).answer_parts is not WireFormat.answer_parts


def content_or_none(text: str, separated: bool) -> str | None:
    """A message's ``content``: None when empty, or blank once reasoning or calls were taken out of it."""
    if not text or (separated and not text.strip()):
        return None
    return text


def with_reasoning(message: dict, reasoning: str | None) -> dict:
    """``message`` with ``reasoning`` added to its ``reasoning_content`` (after what is there)."""
    if not reasoning:
        return message
    given = upstream_reasoning(message)
    return {**message, "reasoning_content": (given or "") + reasoning}


def report(results: list[ChoiceResult], history: HistoryReport | None) -> tuple[dict[str, str], dict]:
    """The response headers and the ``tool_refiner`` field (empty when there is nothing beyond the stages)."""
    headers = {"x-tool-refiner": ",".join(r.stage for r in results)}
    extra: dict[str, Any] = {}
    truncated = [{"choice": i, **r.truncated} for i, r in enumerate(results) if r.truncated]
    if truncated:
        headers["x-tool-refiner-truncated"] = ",".join(str(t["choice"]) for t in truncated)
        extra["truncated"] = truncated
    moved = [{"choice": i, "format": r.content_format} for i, r in enumerate(results) if r.content_format]
    if moved:
        headers["x-tool-refiner-content-calls"] = ",".join(f"{m['choice']}:{m['format']}" for m in moved)
        extra["content_calls"] = moved
    if history is not None and history.header() is not None:
        headers["x-tool-refiner-history"] = history.header()
        extra["history"] = history.entries
    return headers, extra
