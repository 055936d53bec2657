"""The strict parsers listed in FAST_PATHS read well-formed text through a fast path that checks types without
building messages, and falls back to its checked reader at the first doubt. The two must agree: on renderings and on
mutated copies of them, ``parse_strict`` with the fast path gives the same calls (or the same rejection) as with it
switched off."""

from __future__ import annotations

import os
import re
from contextlib import ExitStack
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refiner import formats
from refiner.formats import FormatError
from test_formats_roundtrip import calls_for

# format -> the fast readers its parse_strict tries first ("module.attribute" under refiner.formats)
FAST_PATHS = {
    "toolace": ["pythonic.fast_call_list"],  # through pythonic.strict_call_list
}

# Edits that keep JSON well formed but change what a call object holds: renamed, added, retyped and emptied fields
# (plain text to replace, or a compiled pattern).
EDITS = [
    (re.compile(r'"name": "[^"]*"'), '"name": ""'),
    (re.compile(r'"name": "[^"]*"'), '"name": " "'),
    (re.compile(r'"id": "[^"]*"'), '"id": 1'),
    (re.compile(r'"id": "[^"]*"'), '"id": null'),
    (re.compile(r'"label": "[^"]*"'), '"label": 2'),
    (re.compile(r'"type": "[^"]*"'), '"type": 1'),
    (re.compile(r'"input": \{[^{}]*\}'), '"input": []'),
    (re.compile(r'"arguments": "[^"]*"'), '"arguments": "[]"'),
    (re.compile(r'"arguments": "[^"]*"'), '"arguments": {}'),
    ('"name"', '"Name"'),
    ('"name": "', '"name": " '),
    ('"name": "', '"name": 7, "x": "'),
    ('"arguments"', '"parameters"'),
    ('"parameters"', '"arguments"'),
    ('"arguments": ', '"arguments": null, "a": '),
    ('"parameters": {', '"parameters": [{'),
    ("{", '{"extra": 1, '),
    ("{}", "[]"),
    ('"responses": [', '"responses": [3, '),
    ('"responses"', '"label"'),
    ('"label": "', '"label": ["'),
    ('"tool_use"', '"text"'),
    ('"tool_use"', '"tool"'),
    ('"type": "function"', '"type": "code"'),
    ('"function": {', '"function": {"x": 1, '),
    ('"id": "', '"id": 1, "i": "'),
    ("'{", "'["),
    (", ", ", z=1, "),
    ("(", "(1, "),
    ("=", "=="),
    ("True", "true"),
]


def _starts(text: str, part: str) -> list[int]:
    return [i for i in range(len(text)) if text.startswith(part, i)]


def outcome(fmt: formats.WireFormat, text: str) -> object:
    try:
        return [c.key() for c in fmt.parse_strict(text)]  # keys compare JSON types exactly (1 != 1.0 != True)
    except FormatError:
        return "rejected"


def checked_outcome(fmt: formats.WireFormat, text: str) -> object:
    with ExitStack() as stack:
        for path in FAST_PATHS[fmt.name]:
            module, attr = path.split(".")
            stack.enter_context(mock.patch(f"refiner.formats.{module}.{attr}", lambda *a, **k: None))
        return outcome(fmt, text)


def test_every_format_with_a_fast_path_is_listed():
    for name, paths in FAST_PATHS.items():
        for path in paths:
            module, attr = path.split(".")
            assert callable(getattr(getattr(formats, module), attr)), (name, path)


@pytest.mark.parametrize("name", sorted(FAST_PATHS))
@settings(
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_fast_path_agrees_with_the_checked_reader(name, data):
    fmt = formats.get(name)
    calls = data.draw(calls_for(name))
    text = fmt.render(calls)
    assert outcome(fmt, text) == checked_outcome(fmt, text) != "rejected"
    for _ in range(4):
        spans = [(m.span(), b) for a, b in EDITS for m in (a.finditer(text) if isinstance(a, re.Pattern) else [])]
        spans += [((i, i + len(a)), b) for a, b in EDITS if isinstance(a, str) for i in _starts(text, a)]
        if not spans or data.draw(st.booleans()):  # a random character edit
            i = data.draw(st.integers(0, len(text) - 1))
            ch = data.draw(st.sampled_from(["", " ", "'", '"', "{", "}", "[", "]", ",", ":", "\\", "x", "1"]))
            mutated = text[:i] + ch + text[i + 1 :]
        else:
            (i, j), b = data.draw(st.sampled_from(spans))
            mutated = text[:i] + b + text[j:]
        assert outcome(fmt, mutated) == checked_outcome(fmt, mutated), mutated
