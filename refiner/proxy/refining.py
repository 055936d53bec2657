"""Refining the choices of one chat completion: which choices go to the refiner, and what comes back."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from refiner.pipeline import Refiner
from refiner.proxy.batching import RefineBatcher
from refiner.proxy.convert import apply_result, calls_from_content, content_call_format, refine_request

log = logging.getLogger("refiner.proxy")

Choice = tuple[dict, str | None]  # (message, finish_reason)


class Refinement:
    """Sends the tool calls of a completion's choices to the refiner (through ``batcher``) and applies the results.
    ``content_formats`` names the wire formats whose calls are also taken from an answer's content."""

    def __init__(self, batcher: RefineBatcher, *, fmt: str, content_formats: Sequence[str] = ()) -> None:
        self.batcher = batcher
        self.fmt = fmt
        self.content_formats = tuple(content_formats)

    async def choices(self, body: dict, items: list[Choice]) -> list[tuple[dict, str | None, str]]:
        """``(message, finish_reason)`` pairs → refined pairs with the stage; a refiner failure keeps them."""
        todo = [i for i, (m, _) in enumerate(items) if m.get("tool_calls")]
        requests = [refine_request(body, items[i][0]["tool_calls"], self.fmt) for i in todo]
        in_content: dict[int, str] = {}  # choice -> format of the calls found in its content
        if self.content_formats and body.get("tools"):
            for i, (m, _) in enumerate(items):
                found = None if i in todo else content_call_format(m.get("content"), self.content_formats)
                if found:
                    in_content[i] = found
                    todo.append(i)
                    requests.append({**refine_request(body, [], self.fmt), "upstream": m["content"]})
        out: list[tuple[dict, str | None, str]] = [(m, f, "none") for m, f in items]
        if not todo:
            return out
        try:
            results = await self.batcher.refine(requests)
        except Exception as e:  # noqa: BLE001 - the proxy never fails a request because the refiner did
            log.warning("refiner failed (%s: %s); returning the upstream calls", type(e).__name__, e)
            return [(m, f, "error" if i in todo else s) for i, (m, f, s) in enumerate(out)]
        for i, result in zip(todo, results):
            if i in in_content:
                message, reason = calls_from_content(items[i][0], items[i][1], result, in_content[i])
            else:
                message, reason = apply_result(items[i][0], items[i][1], result)
            out[i] = (message, reason, str(result.get("stage", "unchanged")))
        return out


def default_refiner() -> Any:
    return Refiner(engine=None)
