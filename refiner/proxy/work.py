"""What runs inside an isolated worker process (see :mod:`refiner.proxy.isolation`): ``tier1``, the tier-1
refinement of a list of items, each a pipeline request, optionally with its wire format detected first; ``ask``, a
content split's question (:func:`answer`); and ``split``, the content split of a long answer (:func:`split`).

An item is ``{"request": {...}, "detect": bool, "allowed": [format names] | None, "model": bool}``. With ``detect``
the request's upstream text is a chat answer's ``content``: its format is detected
(:func:`refiner.formats.detect_format`), and the item is refined only when a format is found (and is one of
``allowed`` when that is given). ``model``: the proxy has a refiner model. Each item's outcome is ``{"format": name |
None, "result": pipeline result | None}`` (the result's :data:`RESULT_KEYS` only), and ``"job"``, the prepared
:class:`~refiner.pipeline.Job` (:meth:`~refiner.pipeline.Job.sendable`), when ``model`` is set and the job is for the
model (:meth:`~refiner.pipeline.Refiner.needs_model`): the model step takes it as it is, without tier 1 again.
Nothing here raises for one bad item: the pipeline's ``errors="result"`` turns an unreadable request into an error
result, and a detection failure counts as no format.
"""

from __future__ import annotations

import collections
import io
import logging
import pickle
import signal
import socket
from collections.abc import Sequence
from typing import Any

from refiner import formats
from refiner.formats.reading import read_upstream
from refiner.pipeline import Job, Refiner, load_request_tools
from refiner.proxy.content import ContentSplit, Openers, complete_calls, run_sync, split_whole
from refiner.proxy.metrics import repair_classes
from refiner.repair import TOOL_CUTOFF, snap
from refiner.specs.catalog import MAX_CACHED_CHARS, MAX_CACHED_LISTS

log = logging.getLogger("refiner.proxy")


def detect(text: str) -> str | None:
    """The wire format of ``text``, or None (also when detection itself fails)."""
    try:
        return formats.detect_format(text)
    except Exception:  # noqa: BLE001 - a text the detector cannot classify holds no call we can read
        return None


# What the proxy reads of a pipeline result; the rest (the request echoed, the refined text) stays in the worker.
RESULT_KEYS = frozenset({"calls", "changed", "stage", "reason", "format", "diagnostics", "error", "model_error",
                         "cut"})


def read_result(result: Any) -> Any:
    """What the proxy reads of a pipeline result: its :data:`RESULT_KEYS`, and ``repairs``, its repairs counted by
    class (:func:`~refiner.proxy.metrics.repair_classes`; the actions and findings themselves can be many)."""
    if not isinstance(result, dict):
        return result
    out = {k: v for k, v in result.items() if k in RESULT_KEYS}
    out["repairs"] = repair_classes(result)
    return out


def content_item(text: str, tools: Any, allowed: Sequence[str] | None) -> dict:
    """The item for calls that may be in a text of an answer: its format detected, one of ``allowed`` (None: any)."""
    return {"request": {"tools": tools, "upstream": text, "format": None}, "detect": True, "allowed": allowed}


def tier1(refiner: Refiner, items: Sequence[dict]) -> list[dict]:
    """The outcome of every item (see the module docstring), in order; one ``refine_batch`` call for all of them."""
    outcomes: list[dict] = [{"format": None, "result": None} for _ in items]
    todo: list[int] = []
    requests: list[dict] = []
    for i, item in enumerate(items):
        request = dict(item["request"])
        if item.get("detect"):
            found = detect(request["upstream"])
            allowed = item.get("allowed")
            if found is None or (allowed is not None and found not in allowed):
                continue
            request["format"] = found
        outcomes[i]["format"] = request.get("format")
        todo.append(i)
        requests.append(request)
    if requests:
        jobs = refiner.prepare_batch(requests, errors="result")
        for i, job, result in zip(todo, jobs, refiner.finish(jobs, errors="result")):
            outcomes[i]["result"] = read_result(result)
            if items[i].get("model") and isinstance(job, Job) and refiner.needs_model(job):
                outcomes[i]["job"] = job.sendable()
    return outcomes


def answer(refiner: Refiner, payload: dict) -> Any:
    """The answer to one question of a content split (:class:`refiner.proxy.content.Ask`), for the proxy, its workers
    and the vLLM plugin alike. ``payload``: the question's ``kind`` and ``text``, the request's ``tools``, ``names``
    and ``allowed`` formats, and ``model`` (whether the proxy has a refiner model).

    ``region``: whether an untagged region holds calls: its format detected, the calls read in it (no repair), at
    least one, each naming an offered tool or one its name snaps to. ``calls``: the complete calls of held text up to
    a call's closing tag, when they can be sent before the answer ends: tier 1 reads them
    (:func:`refiner.proxy.content.complete_calls`), the detected format's strict reader reads the text as that many
    calls (the text ends after a call, not inside a value that holds the closing tag), and they would not go to the
    model; else None."""
    text, names = payload["text"], payload["names"]
    if payload["kind"] == "region":
        fmt = detect(text)
        if fmt is None or (payload["allowed"] is not None and fmt not in payload["allowed"]):
            return False
        try:
            calls = read_upstream(text, fmt, load_request_tools({"tools": payload["tools"]})).calls
        except Exception:  # noqa: BLE001 - a region that cannot be read holds no call
            return False
        return bool(calls) and all(c.name in names or snap(c.name, names, TOOL_CUTOFF) for c in calls)
    item = {**content_item(text, payload["tools"], payload["allowed"]), "model": bool(payload.get("model"))}
    outcome = tier1(refiner, [item])[0]
    calls = complete_calls(outcome["result"], set(names))
    if calls is None or "job" in outcome:
        return None
    try:
        strict = formats.get(outcome["format"]).parse_strict(text)
    except Exception:  # noqa: BLE001 - not strictly calls: read at the end
        return None
    return calls if strict is not None and len(strict) == len(calls) else None


def split(refiner: Refiner, payload: dict) -> dict:
    """A long answer's content split into released and held text (:func:`refiner.proxy.content.split_whole`), its
    questions answered here (:func:`answer`); ``payload``: ``text``, ``markers`` and :func:`answer`'s fields. Run
    here rather than in the proxy's event loop, which it would hold for about 0.1 s per megabyte."""
    cut = ContentSplit(Openers(set(payload["names"]), payload["markers"]))
    run_sync(split_whole(cut, payload["text"]), lambda ask: answer(refiner, {**payload, "kind": ask.kind,
                                                                             "text": ask.text}))
    return {"released": cut.released_text, "held": cut.held}


# ----------------------------------------------------------------------------------------------------------------
# Tool lists sent once: a task's payload names each request's tool list (a ToolList) by the proxy's number for its
# text, and carries the text only to a worker the proxy has not sent it to (refiner.proxy.isolation.TextNumbers).

TOOLS_REF = "tools"  # the persistent id of a tool list in a payload: (TOOLS_REF, number)


class TextStore:
    """The tool-list texts a worker has been sent, by number, least recently used out within the tool-list cache's
    bounds (:data:`~refiner.specs.catalog.MAX_CACHED_LISTS` lists, :data:`~refiner.specs.catalog.MAX_CACHED_CHARS`
    characters): the same texts the worker's catalog cache keeps (the same string objects, so the cache confirms
    them by identity)."""

    def __init__(self, max_lists: int = MAX_CACHED_LISTS, max_chars: int = MAX_CACHED_CHARS) -> None:
        self.max_lists, self.max_chars = max_lists, max_chars
        self.texts: collections.OrderedDict[int, str] = collections.OrderedDict()
        self.chars = 0

    def get(self, number: int) -> str | None:
        text = self.texts.get(number)
        if text is not None:
            self.texts.move_to_end(number)
        return text

    def put(self, number: int, text: str) -> None:
        if number in self.texts or len(text) > self.max_chars:
            return
        self.texts[number] = text
        self.chars += len(text)
        while len(self.texts) > self.max_lists or self.chars > self.max_chars:
            _, old = self.texts.popitem(last=False)
            self.chars -= len(old)

    def clear(self) -> None:
        self.texts.clear()
        self.chars = 0


TEXTS = TextStore()


class Missing(Exception):
    """A payload names tool lists this worker does not hold (``numbers``): the proxy sends them again."""

    def __init__(self, numbers: list[int]) -> None:
        super().__init__(numbers)
        self.numbers = numbers


def load_payload(blob: bytes, texts: dict[int, str], store: TextStore) -> Any:
    """The payload pickled in ``blob``, each tool list it names read from ``texts`` (sent with it, then kept in
    ``store``) or from ``store``; raises :class:`Missing` when one is in neither."""
    for number, text in texts.items():
        store.put(number, text)
    missing: list[int] = []

    class Loader(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> Any:
            kind, number = pid
            if kind != TOOLS_REF:
                raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")
            text = texts.get(number) or store.get(number)
            if text is None:
                missing.append(number)
                return ""
            return text

    value = Loader(io.BytesIO(blob)).load()
    if missing:
        raise Missing(missing)
    return value


def forget(refiner: Refiner, payload: Any) -> None:
    """Drops the tool-list texts this worker holds (as an eviction would)."""
    TEXTS.clear()


TASKS = {"tier1": tier1, "split": split, "ask": answer, "forget": forget}
READY = "ready"
HEADER = 8  # bytes of a frame's length (little-endian), followed by that many bytes of pickle


def frame(data: bytes) -> bytes:
    return len(data).to_bytes(HEADER, "little") + data


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(min(size - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


# One small answer to repair before a new worker says it is ready: its first real request then does not pay for
# the pages a fresh fork copies on first use.
WARMUP = [{"request": {"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}],
    "upstream": '[{"id": "c", "type": "function", "function": {"name": "get_wether", "arguments": "{\'city\': \'Paris\', '
                '\'days\': \'3\',"}}]', "format": "openai"}},
    {"request": {"tools": None, "upstream": 'Sure.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'},
     "detect": True}]


def serve(sock: socket.socket, refiner: Refiner) -> None:
    """A worker's loop over its socket: warms up, sends ``(True, READY)``, then receives ``(task name, payload)``
    frames (the payload pickled apart, with the tool-list texts sent along: :func:`load_payload`) and answers ``(True,
    value)``, ``(False, "<Type>: message")``, or ``(None, [numbers])`` when the payload names tool lists it does not
    hold; returns when the socket closes.
    Interrupts are ignored: the proxy process decides when a worker ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock.setblocking(True)
    try:
        tier1(refiner, WARMUP)
    except Exception as e:  # noqa: BLE001 - a warm-up failure is not fatal; the first request will tell
        log.warning("tier-1 worker warm-up failed: %r", e)
    try:
        sock.sendall(frame(pickle.dumps((True, READY))))
    except OSError:
        return
    while True:
        try:
            name, blob, texts = pickle.loads(_read_exactly(sock, int.from_bytes(_read_exactly(sock, HEADER), "little")))
        except (EOFError, OSError):
            return
        try:
            reply: tuple[bool | None, Any] = (True, TASKS[name](refiner, load_payload(blob, texts, TEXTS)))
        except Missing as e:
            reply = (None, e.numbers)
        except Exception as e:  # noqa: BLE001 - reported to the proxy, which answers without refinement
            reply = (False, f"{type(e).__name__}: {str(e)[:300]}")
        try:
            sock.sendall(frame(pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)))
        except OSError:
            return
