"""What runs inside an isolated worker process (see :mod:`refiner.proxy.isolation`): tier-1 refinement of a list of
items, each a pipeline request, optionally with its wire format detected first.

An item is ``{"request": {...}, "detect": bool, "allowed": [format names] | None}``. With ``detect`` the request's
upstream text is a chat answer's ``content``: its format is detected (:func:`refiner.formats.detect_format`), and
the item is refined only when a format is found (and is one of ``allowed`` when that is given). Each item's outcome
is ``{"format": name | None, "result": pipeline result | None}``. Nothing here raises for one bad item: the
pipeline's ``errors="result"`` turns an unreadable request into an error result, and a detection failure counts as
no format.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from refiner import formats
from refiner.pipeline import Refiner

log = logging.getLogger("refiner.proxy")


def detect(text: str) -> str | None:
    """The wire format of ``text``, or None (also when detection itself fails)."""
    try:
        return formats.detect_format(text)
    except Exception:  # noqa: BLE001 - a text the detector cannot classify holds no call we can read
        return None


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
        for i, result in zip(todo, refiner.refine_batch(requests, errors="result")):
            outcomes[i]["result"] = result
    return outcomes


TASKS = {"tier1": tier1}


def serve(conn: Connection, refiner: Refiner) -> None:
    """A worker's loop: receives ``(task name, payload)``, answers ``(True, value)`` or ``(False, "<Type>: message")``;
    stops on ``None`` or when the pipe closes. Interrupts are ignored: the proxy process decides when a worker ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        name, payload = message
        try:
            reply: tuple[bool, Any] = (True, TASKS[name](refiner, payload))
        except Exception as e:  # noqa: BLE001 - reported to the proxy, which answers without refinement
            reply = (False, f"{type(e).__name__}: {str(e)[:300]}")
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return
