"""Refining one chat completion's choices within one deadline: tier 1 in an isolated worker, then the choices that
still need the model batched to it; past the deadline or on a refiner failure, a choice is returned as sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from refiner import formats
from refiner.formats.message import only_tags
from refiner.pipeline import Job, Refiner
from refiner.proxy.batching import RefineBatcher
from refiner.proxy.content import (
    SENT_STAGES,
    Ask,
    ContentCalls,
    ContentSplit,
    EarlyRead,
    RegionRead,
    content_split,
    holds_calls,
    split_whole,
)
from refiner.proxy.convert import apply_result, argument_problem, rebuild_tool_calls, refine_request
from refiner.proxy.history import MAX_HEALED_CALLS, HistoryReport, apply_repairs, find_broken, repair_items
from refiner.proxy.isolation import IsolationError, WorkTimeout
from refiner.proxy.metrics import Metrics
from refiner.proxy.reasoning import Reasoning, trim_edges
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
    """One choice after refinement. ``stage``: ``none``, the pipeline's stage (``truncated`` whenever a cut call was
    left out), ``timeout`` or ``error``. ``content_tail`` / ``reasoning_tail``: held-back content, and reasoning read
    from it, to release at the end of a stream. ``separated``: reasoning or calls were taken out of the content."""

    message: dict
    finish_reason: str | None
    stage: str = "none"
    truncated: dict | None = None  # the call cut by the token limit ({"call": index, "id": ...})
    content_format: str | None = None  # the format of calls moved out of the content
    content_tail: str = ""
    reasoning_tail: str = ""
    separated: bool = False
    reasoning: str | None = None  # the reasoning block taken out of the content
    repairs: dict[str, int] = field(default_factory=dict)  # the repairs by class
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


def truncated_call(tool_call: Any, index: int) -> dict | None:
    """The report of a call cut by the token limit (its arguments stop before the end of a JSON object): its position,
    id, name and arguments as the upstream wrote them; None when the call is whole."""
    fn = tool_call.get("function") if isinstance(tool_call, dict) else None
    fn = fn if isinstance(fn, dict) else {}
    args = fn.get("arguments")
    if argument_problem(args) is None:
        return None
    return {"call": index, "id": tool_call.get("id") if isinstance(tool_call, dict) else None,
            "name": fn.get("name") if isinstance(fn.get("name"), str) else None,
            "arguments": args if isinstance(args, str) else None}


class Refinement:
    """Refines the choices of completions and heals incoming histories. ``runner``: the tier-1 workers
    (:mod:`refiner.proxy.isolation`); ``batcher`` runs ``ref`` (the model, or any other refiner)."""

    def __init__(self, ref: Any, *, runner: Any, batcher: RefineBatcher, content: ContentCalls, timeout: float,
                 metrics: Metrics, prompts: PromptReasoning) -> None:
        self.ref, self.runner, self.batcher, self.content = ref, runner, batcher, content
        self.timeout, self.metrics, self.prompts = timeout, metrics, prompts
        self.tier1_first = isinstance(ref, Refiner)
        self.has_model = self.tier1_first and ref.engine is not None

    def deadline(self) -> float:
        return asyncio.get_running_loop().time() + self.timeout

    @staticmethod
    def remaining(deadline: float) -> float:
        return max(0.0, deadline - asyncio.get_running_loop().time())

    async def in_worker(self, task: str, payload: Any, deadline: float, what: str,
                        level: int = logging.WARNING) -> tuple[Any, float, str | None]:
        """``(value, cpu seconds, None)`` of a worker task by ``deadline``, or ``(None, 0.0, "timeout" | "error")``."""
        try:
            value, cpu = await self.runner.run(task, payload, self.remaining(deadline))
        except IsolationError as e:
            log.log(level, "%s gave no answer (%s: %s)", what, type(e).__name__, e)
            return None, 0.0, "timeout" if isinstance(e, WorkTimeout) else "error"
        return value, cpu, None

    async def run(self, gen: Generator[Ask, Any, Any], body: dict, split: ContentSplit,
                  deadline: float | None = None) -> Any:
        """Runs a :class:`~refiner.proxy.content.CallDriver` step, its questions answered in a worker (:meth:`ask`)
        within one deadline per answer (``deadline``, else one refine timeout from its first question)."""
        try:
            ask = next(gen)
            while True:
                if deadline is None:
                    deadline = split.deadline = split.deadline or self.deadline()
                ask = gen.send(await self.ask(body, split, ask, deadline) if self.remaining(deadline) > 0 else None)
        except StopIteration as stop:
            return stop.value

    def asking(self, body: dict, split: ContentSplit) -> dict:
        """What a split's questions are answered with (:func:`refiner.proxy.work.answer`)."""
        return {"tools": body.get("tools") or None, "names": split.openers.names, "allowed": self.content.allowed,
                "model": self.has_model}

    async def ask(self, body: dict, split: ContentSplit, ask: Ask, deadline: float) -> Any:
        """The answer to a split's question, from a worker; none: a region is not calls, no call is read early."""
        payload = {**self.asking(body, split), "kind": ask.kind, "text": ask.text}
        value, cpu, failed = await self.in_worker("ask", payload, deadline, "a content question", logging.INFO)
        if isinstance(value, EarlyRead):
            value.slow = cpu > MODEL_SKIP_CPU
        return (RegionRead(ask.text, False) if ask.kind == "region" else None) if failed else value

    async def early_tool_calls(self, body: dict, calls: list[dict], deadline: float) -> EarlyRead | None:
        """Tier 1's read of a streamed answer's first complete tool calls (None: there is a refiner model, or no
        tier 1 first), its ``calls`` the refined calls to send before the answer ends; None when they must wait: tier 1
        did not read or repair them, or it changed their number."""
        if not self.tier1_first or self.has_model:
            return None
        job = _Job(0, "calls", refine_request(body, calls), calls=calls)
        await self._tier1([job], deadline)
        read = EarlyRead(job.request["upstream"], None, job.outcome if job.status is None else None, job.slow)
        result = (read.outcome or {}).get("result")
        if not result or result.get("stage") not in SENT_STAGES:
            return read
        refined, _ = apply_result({"role": "assistant", "content": None, "tool_calls": calls}, None, result)
        out = refined.get("tool_calls") or []
        read.calls = out if len(out) == len(calls) else None
        return read

    async def split_content(self, body: dict, names: frozenset[str], text: str,
                            deadline: float) -> ContentSplit | SplitText | None:
        """A whole answer's content, split; a long one in a worker (when that fails, the content is all released)."""
        if not names:  # (its answers are not read for calls: ContentCalls.applies)
            return None
        split = content_split(names)
        if len(text) > MAX_SPLIT_HERE:
            payload = {**self.asking(body, split), "text": text, "markers": list(split.openers.markers)}
            value, _, failed = await self.in_worker("split", payload, deadline, "a content split", logging.INFO)
            return SplitText(text, "") if failed else SplitText(value["released"], value["held"])
        await self.run(split_whole(split, text), body, split, deadline)
        return split

    async def choices(self, body: dict, items: list[Choice], splits: dict[int, ContentSplit] | None = None,
                      reasonings: dict[int, str] | None = None,
                      early: dict[int, EarlyRead] | None = None) -> list[ChoiceResult]:
        """The refined choices, in order; a stream gives the ``splits`` made, the ``reasonings`` sent and the last
        ``early`` read of tier 1 per choice (taken as the choice's when it read the text the choice ends with)."""
        deadline = self.deadline()
        names = self.content.applies(body)
        opened = self.prompts.opened(body, whole=True) if splits is None else None
        lean = splits is None and opened is None and self.prompts.leans(body)
        results = [ChoiceResult(m, f) for m, f in items]
        for i, text in (reasonings or {}).items():
            if 0 <= i < len(results):
                results[i].reasoning = text
        jobs: list[_Job] = []
        for i, (message, reason) in enumerate(items):
            content = message.get("content")
            if splits is None and isinstance(content, str) and content:  # its reasoning block to reasoning_content
                given = upstream_reasoning(message)  # (after what the upstream separated)
                if given is None:
                    self.prompts.learn(body, content, reason)
                reasoning, answer = Reasoning(False if given is not None else opened, lean and given is None).read(
                    content, reason == "length")
                if reasoning is not None:
                    results[i].separated, results[i].reasoning = True, reasoning
                    message = results[i].message = with_reasoning({**message, "content": answer}, reasoning)
            tool_calls = message.get("tool_calls")
            split = (splits or {}).get(i)
            if isinstance(tool_calls, list) and tool_calls:
                calls = list(tool_calls)
                if reason == "length" and (cut := truncated_call(calls[-1], len(calls) - 1)) is not None:
                    results[i].truncated, calls = cut, calls[:-1]
                    results[i].message = {k: v for k, v in message.items() if k != "tool_calls"}
                    if calls:
                        results[i].message["tool_calls"] = calls
                if calls:
                    jobs.append(_Job(i, "calls", refine_request(body, calls), calls=calls))
                if split is not None:
                    results[i].content_tail = split.held
                continue
            content = message.get("content")
            if splits is None and isinstance(content, str):
                split = await self.split_content(body, names, content, deadline)
            if split is None:
                continue
            if not split.held.strip():
                results[i].content_tail = split.held
                continue
            request = {**refine_request(body, []), "upstream": split.held, "format": None}
            if reason == "length":
                request["finish_reason"] = reason  # the complete calls before the cut are returned, the cut one is not
            jobs.append(_Job(i, "content", request, split=split))
        for job in jobs:
            read = (early or {}).get(job.choice)
            if read is not None and read.covers(job.request["upstream"]) and "finish_reason" not in job.request:
                self._took(job, dict(read.outcome), read.slow)
        await self._tier1(jobs, deadline)
        await self._model(jobs, deadline)
        for job in jobs:
            self._apply(job, results[job.choice], names)
        if getattr(self.ref, "calls_in_reasoning", False):
            await self._reasoning_calls(body, names, results, deadline)
        for r in results:
            if r.truncated and r.stage not in ("timeout", "error"):
                r.stage = "truncated"  # a cut call was left out: the answer is not the upstream's, nor just repaired
        self.metrics.choices(results)
        if splits is None:
            for r in results:
                if r.separated and isinstance(r.message.get("content"), str):
                    text = trim_edges(r.message["content"], r.reasoning is not None, True)
                    r.message = {**r.message, "content": content_or_none(text)}
        return results

    async def _reasoning_calls(self, body: dict, names: frozenset[str], results: list[ChoiceResult],
                               deadline: float) -> None:
        """Calls written inside reasoning, for the choices whose answer holds none (``calls_in_reasoning``)."""
        todo = [r for r in results if r.reasoning and r.reasoning.strip() and not r.message.get("tool_calls")]
        if not todo or not names:
            return
        work = [content_item(r.reasoning, body.get("tools") or None, self.content.allowed) for r in todo]
        outcomes, _, failed = await self.in_worker("tier1", work, deadline, "reading calls in reasoning", logging.INFO)
        if failed:
            return
        for r, outcome in zip(todo, outcomes):
            result = outcome.get("result")
            if holds_calls(result, names):
                r.message = {**r.message, "tool_calls": took_calls(r, result, outcome.get("format"))}

    async def _tier1(self, jobs: list[_Job], deadline: float) -> None:
        todo = [j for j in jobs if (j.kind == "content" or self.tier1_first) and j.outcome is None]
        if not todo:
            return
        # (the conversation, which can be large, stays here: tier 1 reads the tools and the upstream text)
        work = [{"request": {k: v for k, v in j.request.items() if k != "query"}, "detect": j.kind == "content",
                 "allowed": self.content.allowed, "model": self.has_model,
                 "detected": j.split.detection() if isinstance(j.split, ContentSplit) else None} for j in todo]
        outcomes, cpu, failed = await self.in_worker("tier1", work, deadline,
                                                     "tier-1 refinement (the upstream answer is returned)")
        if failed:
            for j in todo:
                j.status = failed
            return
        for j, outcome in zip(todo, outcomes):
            self._took(j, outcome, cpu > MODEL_SKIP_CPU)

    @staticmethod
    def _took(job: _Job, outcome: dict, slow: bool) -> None:
        """``job`` given tier 1's ``outcome`` (:func:`refiner.proxy.work.tier1`)."""
        job.prepared = outcome.pop("job", None)
        job.outcome, job.slow = outcome, slow
        if job.kind == "content" and outcome.get("format"):
            job.request["format"] = outcome["format"]

    async def _model(self, jobs: list[_Job], deadline: float) -> None:
        todo = [j for j in jobs if j.status is None and (j.kind == "calls" or (j.outcome or {}).get("format"))
                and (not self.tier1_first or (j.prepared is not None and not j.slow))]
        if not todo:
            return
        for j in todo:
            j.model = True
        try:
            sent = [j.request if j.prepared is None else j.prepared.rejoined(j.request) for j in todo]
            results = await asyncio.wait_for(self.batcher.refine(sent), self.remaining(deadline))
        except Exception as e:  # noqa: BLE001 - the proxy never fails a request because the refiner did
            status = "timeout" if isinstance(e, asyncio.TimeoutError) else "error"
            log.warning("refiner model gave no answer (%s: %s); returning the upstream answer", status, repr(e))
            for j in todo:
                j.status = status
            return
        for j, result in zip(todo, results):
            j.outcome = {"format": j.request.get("format"), "result": read_result(result)}

    def _apply(self, job: _Job, out: ChoiceResult, names: frozenset[str]) -> None:
        message, reason = out.message, out.finish_reason
        result = (job.outcome or {}).get("result")
        out.model = job.model
        if job.kind == "content":
            fmt_name = (job.outcome or {}).get("format")
            fmt = formats.get(fmt_name) if formats.known(fmt_name) else None
            held = job.split.held
            parts = fmt.answer_parts(held) if fmt is not None else None
            a, b = parts.calls if parts is not None else (0, 0)
            calls = job.status is None and holds_calls(result, names)
            # a format with channels of its own (gpt-oss) is read even without a call; an empty call section is markup
            if calls or (parts is not None and (fmt.channels or (b > a and only_tags(fmt, held[a:b])))):
                tail, reasoning = (parts.content, parts.reasoning) if parts is not None else ("", None)
                new = {**message, "content": content_or_none(job.split.released_text + tail)}
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
        out.message, out.finish_reason = apply_result({**message, "tool_calls": job.calls}, reason, result)
        out.stage, out.repairs = str(result.get("stage", "unchanged")), result.get("repairs") or {}

    async def heal_history(self, body: dict) -> tuple[dict, HistoryReport]:
        """The request with its history's broken tool calls repaired (:mod:`refiner.proxy.history`), and the report."""
        broken = find_broken(body)
        if not broken:
            return body, HistoryReport()
        healed, left = broken[:MAX_HEALED_CALLS], broken[MAX_HEALED_CALLS:]
        outcomes, _, failed = await self.in_worker("tier1", repair_items(body, healed), self.deadline(),
                                                   "history repair (the history is forwarded as sent)")
        if failed:
            return body, HistoryReport(status=failed)
        out, report = apply_repairs(body, healed, outcomes)
        report.entries += [b.entry(f"over the limit of calls repaired per request ({len(healed)})") for b in left]
        return out, report


def took_calls(out: ChoiceResult, result: dict, fmt: str | None) -> list[dict]:
    """The tool calls ``result`` read from a choice's text in format ``fmt``, ``out`` marked as answering with them."""
    out.finish_reason = "tool_calls" if out.finish_reason in (None, "stop", "tool_calls") else out.finish_reason
    out.stage, out.repairs, out.content_format = str(result.get("stage", "unchanged")), result.get("repairs") or {}, fmt
    return rebuild_tool_calls([], result["calls"])


def content_or_none(text: str) -> str | None:
    """The ``content`` of a message that reasoning or calls were taken out of: None when blank."""
    return text if text.strip() else None


def upstream_reasoning(message: dict) -> str | None:
    """The reasoning an upstream already separated (``reasoning_content``, or vLLM's newer ``reasoning``)."""
    return next((message[k] for k in ("reasoning_content", "reasoning") if isinstance(message.get(k), str) and message[k]),
                None)


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
