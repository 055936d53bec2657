"""Hydra's override grammar: rendering values, an ordered override map (a key set twice keeps its first prefix and
its last value, so a user override keeps the ``+`` an undeclared key needs), reading a value back from a list."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from refiner.train.errors import TrainConfigError

_PLAIN = re.compile(r"^[A-Za-z0-9_.\-/:]+$")
_OVERRIDE = re.compile(r"^(?P<prefix>\+\+|\+|~)?(?P<key>[A-Za-z_][\w.@/\-]*)(?:=(?P<value>.*))?$", re.DOTALL)


def render_value(value: Any) -> str:
    """A Python/YAML value in Hydra's override grammar (lists, bools, null, quoted strings when needed)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{render_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if _PLAIN.match(text) and text not in ("true", "false", "null"):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class Overrides:
    """An ordered map ``key -> (prefix, rendered value)``; a key set twice keeps its first prefix, last value."""

    items: dict[str, tuple[str, str | None]] = field(default_factory=dict)

    def set(self, key: str, value: Any, prefix: str = "", *, rendered: bool = False) -> None:
        if key.startswith("+"):
            prefix, key = "+", key.lstrip("+")
        text = value if rendered else render_value(value)
        old = self.items.get(key)
        self.items[key] = ((old[0] if old and old[0] != "~" else prefix), text)

    def apply(self, text: str) -> None:
        """One user override: ``key=value``, ``+key=value``, ``++key=value`` or ``~key``."""
        m = _OVERRIDE.match(text.strip())
        if not m or (m.group("prefix") != "~" and m.group("value") is None):
            raise TrainConfigError(f"override {text!r} is not of the form key=value, +key=value or ~key")
        prefix, key, value = m.group("prefix") or "", m.group("key"), m.group("value")
        if prefix == "~":
            self.items[key] = ("~", None)
        else:
            self.set(key, value, prefix, rendered=True)

    def to_list(self) -> list[str]:
        return [f"~{k}" if p == "~" else f"{p}{k}={v}" for k, (p, v) in self.items.items()]


def override_value(overrides: Sequence[str], key: str) -> str | None:
    """The (raw, unquoted) value a key gets from an override list, or None."""
    value = None
    for text in overrides:
        m = _OVERRIDE.match(text)
        if m and m.group("key") == key and m.group("value") is not None:
            value = m.group("value")
    if value is not None and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value
