"""Glaive function calling v2: ``<functioncall> {"name": ..., "arguments": '{...}'} <|endoftext|>``, one block per call;
only the last call may lack the end marker (decoders skipping special tokens drop it). Raw Glaive writes ``arguments``
as a single-quoted JSON string; an object or a double-quoted JSON string is read too. Rendering writes the raw form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refiner.calls import ToolCall
from refiner.formats.base import Detection, FormatError, Lenient, WireFormat
from refiner.formats.jsonfix import ends_text, lenient_json
from refiner.formats.lenient import add_call, lenient_blocks
from refiner.formats.strict import decode_at, expect_object, first_tag, strict_fields, strict_json
from refiner.formats.text import dumps, skip_ws

OPEN, CLOSE = "<functioncall>", "<|endoftext|>"
TURN_BREAK = "\n\n\n"  # raw Glaive separates turns with it; a block without its end tag stops there


def _parse_object(fmt: WireFormat, text: str, pos: int) -> tuple[dict, int]:
    """One ``{...}`` whose values are JSON or a single-quoted JSON text (decoded); returns ``(obj, end)``."""
    pos = skip_ws(text, pos)
    if not text.startswith("{", pos):
        raise fmt.error("expected '{' after " + OPEN, pos)
    obj: dict[str, Any] = {}
    pos = skip_ws(text, pos + 1)
    if text.startswith("}", pos):
        return obj, pos + 1
    while True:
        key, pos = decode_at(fmt, text, pos)
        if not isinstance(key, str):
            raise fmt.error("object keys must be strings", pos)
        pos = skip_ws(text, pos)
        if not text.startswith(":", pos):
            raise fmt.error("expected ':'", pos)
        pos = skip_ws(text, pos + 1)
        if text.startswith("'", pos):
            value, pos = decode_at(fmt, text, pos + 1)
            value = expect_object(fmt, value, f"single-quoted {key!r}", pos)
            pos = skip_ws(text, pos)
            if not text.startswith("'", pos):
                raise fmt.error(f"expected the closing quote of {key!r}", pos)
            pos += 1
        else:
            value, pos = decode_at(fmt, text, pos)
        obj[key] = value
        pos = skip_ws(text, pos)
        if text.startswith("}", pos):
            return obj, pos + 1
        if not text.startswith(",", pos):
            raise fmt.error("expected ',' or '}'", pos)
        pos = skip_ws(text, pos + 1)


class Glaive(WireFormat):
    tags = (OPEN, CLOSE)
    detection = Detection(markers=(OPEN,), closers=(CLOSE,))

    def parse_strict(self, text: str) -> list[ToolCall]:
        calls = []
        i = first_tag(self, text, OPEN, f"missing {OPEN}")[1]
        while i >= 0:
            obj, end = _parse_object(self, text, i + len(OPEN))
            if isinstance(obj.get("arguments"), str):
                obj["arguments"] = strict_json(self, obj["arguments"], i)
            name, args, _ = strict_fields(self, obj, i, what="the call at", index=i)
            end = skip_ws(text, end)
            calls.append(ToolCall(name, args))
            if not text.startswith(CLOSE, end):
                if end == len(text):  # (dropped with the special tokens)
                    break
                raise self.error(f"missing {CLOSE} after the call", end)
            i = text.find(OPEN, end + len(CLOSE))
        return calls

    def recover(self, text: str, out: Lenient) -> None:
        for chunk in lenient_blocks(text, OPEN, CLOSE, out.problems, stop=TURN_BREAK):
            try:
                value = _parse_object(self, chunk, 0)[0]
            except (FormatError, RecursionError):
                at_end = ends_text(chunk)  # (unquoting changes the block's last characters)
                i = chunk.find("'{")
                if i >= 0:  # unquote a single-quoted arguments text so JSON repair sees an object
                    j = chunk.rfind("'")
                    if j > i + 1 and not chunk[j + 1 :].strip(" \t\r\n}"):
                        chunk = chunk[:i] + chunk[i + 1 : j] + chunk[j + 1 :]
                    else:
                        chunk = chunk[:i] + chunk[i + 1 :]
                elif at_end and chunk.rstrip().endswith("'"):  # cut right after the quote that opens the arguments
                    chunk = chunk.rstrip()[:-1]
                value = lenient_json(chunk, at_end=at_end)
            add_call(out, value)

    def render(self, calls: Sequence[ToolCall]) -> str:
        return "\n".join(
            f'{OPEN} {{"name": {dumps(c.name)}, "arguments": \'{dumps(dict(c.arguments))}\'}} {CLOSE}' for c in calls
        )
