"""What runs inside a worker process (:mod:`refiner.proxy.isolation`): the tasks in :data:`TASKS`. A ``tier1`` item is
``{"request", "detect", "allowed", "model", "detected"}``: with ``detect`` the upstream text is content, detected once
(or ``detected`` already, :class:`refiner.formats.reading.Detected`) and refined only in an allowed detected format.
Its outcome is ``{"format", "result", "strict"}`` (``strict``: how many calls the format's strict reader read, None
when the text is not valid there), plus the prepared ``"job"`` when ``model`` is set and it needs the model. One bad
item never raises.
"""

from __future__ import annotations

import io
import logging
import pickle
import signal
import socket
from collections.abc import Sequence
from typing import Any

from refiner.formats.base import get
from refiner.formats.detect import strict_reading
from refiner.formats.reading import Detected, detect_upstream, read_upstream
from refiner.pipeline import Job, Refiner, describe_error, load_request_tools
from refiner.proxy.content import ContentSplit, EarlyRead, Openers, RegionRead, complete_calls, run_sync, split_whole
from refiner.proxy.metrics import repair_classes
from refiner.repair import TOOL_CUTOFF, snap
from refiner.specs.catalog import MAX_CACHED_CHARS, MAX_CACHED_LISTS, KeptTexts

log = logging.getLogger("refiner.proxy")


def told(allowed: Sequence[str] | None, fmt: str | None) -> str | None:
    """The format the proxy was told that detection never names (``Detection.by_name``): the first such of
    ``allowed``, else the refiner's ``fmt`` when it is one; None: none."""
    return next((name for name in (*(allowed or ()), fmt) if name is not None and get(name).detection.by_name), None)


def detect(text: str, allowed: Sequence[str] | None, fmt: str | None = None) -> Detected | None:
    """The detection of ``text`` when it found a format and that is one of ``allowed`` (None: any); else None (also
    when detection fails). A format detection never names, when told (:func:`told`; ``fmt``: the refiner's), is the
    text's when its strict reader reads the text, or when detection found no format ``allowed``."""
    try:
        found = detect_upstream(text)
        name = told(allowed, fmt)
        if name is not None:
            calls = strict_reading(get(name), found.text, found.tried)
            if calls is not None or found.fmt is None or (allowed is not None and found.fmt not in allowed):
                found.fmt, found.calls = name, calls
    except Exception:  # noqa: BLE001 - a text the detector cannot classify holds no call we can read
        return None
    return found if found.fmt is not None and (allowed is None or found.fmt in allowed) else None


def loaded(tools: Any) -> Any:
    """A request's tools read into their catalog once, for every read of its answer (a catalog passes through);
    as given when they cannot be read (each read then says so as before)."""
    try:
        return load_request_tools({"tools": tools})
    except Exception:  # noqa: BLE001
        return tools


RESULT_KEYS = frozenset({"calls", "changed", "stage", "reason", "format", "diagnostics", "error", "model_error",
                         "cut"})


def read_result(result: Any) -> Any:
    """What the proxy reads of a pipeline result: its :data:`RESULT_KEYS`, and its repairs counted by class."""
    if not isinstance(result, dict):
        return result
    return {**{k: v for k, v in result.items() if k in RESULT_KEYS}, "repairs": repair_classes(result)}


def content_item(text: str, tools: Any, allowed: Sequence[str] | None, detected: Detected | None = None) -> dict:
    """The item for calls that may be in a text of an answer: its format detected, one of ``allowed`` (None: any);
    ``detected``: the text's detection when it was made already (:class:`refiner.proxy.content.RegionRead`)."""
    return {"request": {"tools": tools, "upstream": text, "format": None}, "detect": True, "allowed": allowed,
            "detected": detected}


def tier1(refiner: Refiner, items: Sequence[dict]) -> list[dict]:
    """The outcome of every item (see the module docstring), in order; one ``refine_batch`` call for all of them."""
    outcomes: list[dict] = [{"format": None, "result": None} for _ in items]
    todo: list[tuple[int, dict, Detected | None]] = []
    for i, item in enumerate(items):
        request, found = dict(item["request"]), None
        if item.get("detect"):
            found = item.get("detected") or detect(request["upstream"], item.get("allowed"), refiner.fmt)
            if found is None:
                continue
            request["format"] = found.fmt
        outcomes[i]["format"] = request.get("format")
        todo.append((i, request, found))
    jobs = refiner.prepare_batch([r for _, r, _ in todo], errors="result", detected=[f for _, _, f in todo])
    for (i, _, _), job, result in zip(todo, jobs, refiner.finish(jobs, errors="result")):
        outcomes[i]["result"] = read_result(result)
        outcomes[i]["strict"] = len(job.upstream.calls) if isinstance(job, Job) and job.upstream.strict_ok else None
        if items[i].get("model") and isinstance(job, Job) and refiner.needs_model(job):
            outcomes[i]["job"] = job.sendable()
    return outcomes


def answer(refiner: Refiner, payload: dict) -> Any:
    """The answer to a content split's question (:class:`refiner.proxy.content.Ask`): for ``region``, a
    :class:`RegionRead` saying whether the region's calls all name an offered tool or snap to one; for ``calls``, tier
    1's :class:`EarlyRead` of the text, its ``calls`` those tier 1 read when the format's strict reader reads as many
    and none would go to the model (else None). ``payload["tools"]`` may be their catalog (:func:`loaded`)."""
    text, names = payload["text"], payload["names"]
    if payload["kind"] == "calls":
        item = {**content_item(text, payload["tools"], payload["allowed"]), "model": bool(payload.get("model"))}
        outcome = tier1(refiner, [item])[0]
        calls = complete_calls(outcome["result"], set(names))
        sendable = calls is not None and "job" not in outcome and outcome.get("strict") == len(calls)
        return EarlyRead(text, calls if sendable else None, outcome)
    found = detect(text, payload["allowed"], refiner.fmt)
    try:  # (a strictly valid region's calls are detection's: only a broken one is read, on from detection)
        if found is not None and found.calls is None:
            found.reading = read_upstream(found.text, None, load_request_tools({"tools": payload["tools"]}),
                                          detected=found)
        calls = [] if found is None else found.calls if found.calls is not None else found.reading.calls
    except Exception:  # noqa: BLE001 - a region that cannot be read holds no call
        calls = []
    held = bool(calls) and all(c.name in names or snap(c.name, names, TOOL_CUTOFF) for c in calls)
    return RegionRead(text, held, found if held else None)


def split(refiner: Refiner, payload: dict) -> dict:
    """A long answer's content split into released and held text (``payload``: ``text``, ``markers``, ``names``...)."""
    cut = ContentSplit(Openers(set(payload["names"]), payload["markers"]))
    asked = {**payload, "tools": loaded(payload["tools"])}
    run_sync(split_whole(cut, payload["text"]), lambda ask: answer(refiner, {**asked, "kind": ask.kind,
                                                                           "text": ask.text}))
    return {"released": cut.released_text, "held": cut.held}


TOOLS_REF = "tools"  # a tool list in a payload is pickled as (TOOLS_REF, number): isolation.TextNumbers
TEXTS = KeptTexts(MAX_CACHED_LISTS, MAX_CACHED_CHARS)  # the tool-list texts this worker was sent, kept by number


def load_payload(blob: bytes, texts: dict[int, str], store: KeptTexts) -> tuple[Any, list[int]]:
    """``(payload, [])``: the payload pickled in ``blob``, each tool list it names read from ``texts`` (sent with it,
    then kept in ``store``) or from ``store``; ``(None, numbers)`` of the tool lists in neither."""
    for number, text in texts.items():
        store.put(text, number)
    missing: list[int] = []

    class Loader(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> Any:
            kind, number = pid
            if kind != TOOLS_REF:
                raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")
            text = texts.get(number) or store.text_of(number)
            if text is None:
                missing.append(number)
            return text or ""

    value = Loader(io.BytesIO(blob)).load()
    return (None, missing) if missing else (value, [])


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


# Repaired before a new worker says it is ready, so that its first request does not pay for a fresh fork's pages.
WARMUP = [{"request": {"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}],
    "upstream": '[{"id": "c", "type": "function", "function": {"name": "get_wether", "arguments": "{\'city\': \'Paris\', '
                '\'days\': \'3\',"}}]', "format": "openai"}},
    {"request": {"tools": None, "upstream": 'Sure.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'},
     "detect": True}]


def serve(sock: socket.socket, refiner: Refiner) -> None:
    """A worker's loop over its socket, until it closes: warms up, sends ``(True, READY)``, then answers each ``(task
    name, payload, tool-list texts)`` frame with ``(True, value)``, ``(False, "<Type>: message")`` or ``(None,
    [numbers])`` for tool lists it does not hold. Interrupts are ignored: the proxy decides when a worker ends."""
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
            payload, missing = load_payload(blob, texts, TEXTS)
            reply: tuple[bool | None, Any] = (None, missing) if missing else (True, TASKS[name](refiner, payload))
        except Exception as e:  # noqa: BLE001 - reported to the proxy, which answers without refinement
            reply = (False, describe_error(e))
        try:
            sock.sendall(frame(pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)))
        except OSError:
            return
