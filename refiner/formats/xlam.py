"""xLAM: a JSON list of ``{"name": ..., "arguments": {...}}`` objects inside ``<func_call>...</func_call>`` (raw xLAM
writes the bare list; the tags are the refiner's, Tool-Use Refiner Appendix B.3).
"""

from __future__ import annotations

from collections.abc import Sequence

from refiner.calls import ToolCall
from refiner.formats.base import Detection, Lenient, WireFormat
from refiner.formats.lenient import add_call, lenient_list
from refiner.formats.strict import plain_calls, strict_fields, tagged_list
from refiner.formats.text import dumps

OPEN, CLOSE = "<func_call>", "</func_call>"


class XLam(WireFormat):
    tags = (OPEN, CLOSE)
    detection = Detection(markers=(OPEN,), closers=(CLOSE,))

    def parse_strict(self, text: str) -> list[ToolCall]:
        value, pos = tagged_list(self, text, OPEN, CLOSE)
        fast = plain_calls(value)
        if fast is not None:
            return fast
        return [ToolCall.trusted(*strict_fields(self, item, pos, what="call", index=i)[:2])
                for i, item in enumerate(value)]

    def recover(self, text: str, out: Lenient) -> None:
        for item in lenient_list(text, OPEN, CLOSE, out.problems, "calls"):
            add_call(out, item)

    def render(self, calls: Sequence[ToolCall]) -> str:
        return f"{OPEN}{dumps([{'name': c.name, 'arguments': dict(c.arguments)} for c in calls])}{CLOSE}"
