"""Tool lists read as far as a request needs them: :class:`ToolCatalog` knows every tool's name at once and reads a
tool's spec (:func:`~refiner.specs.dialects.spec_from_dict`) when first asked for; :func:`tool_catalog` keeps the
catalogs of tool lists given as JSON text (least recently used out, within :data:`MAX_CACHED_LISTS` lists and
:data:`MAX_CACHED_CHARS` characters), keyed by the whole text. :class:`ToolList` is a request's tool list that keeps
its JSON text and is pickled as that text.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from refiner.specs.dialects import spec_from_dict
from refiner.specs.model import SpecError, ToolSpec
from refiner.specs.text import _DECODER

MAX_CACHED_LISTS = 64
MAX_CACHED_CHARS = 32 * 1024 * 1024

_WS = re.compile(r"[ \t\n\r]*")


def tool_name(item: Any, dialect: str | None = None) -> str | None:
    """The name of a tool dict as :func:`spec_from_dict` will read it, without reading the rest (a
    :class:`ToolSpec`'s name); None when it has no usable name."""
    if type(item) is not dict:
        if isinstance(item, ToolSpec):
            return item.name
        if not isinstance(item, Mapping):  # (the ABC check is the slow one)
            return None
    fn = item.get("function")
    if fn is not None and "name" not in item and (type(fn) is dict or isinstance(fn, Mapping)):
        name = fn.get("name")
    elif "api_name" in item and dialect in (None, "nestools"):
        name = item.get("api_name")
    else:
        name = item.get("name")
    return name if isinstance(name, str) and name else None


class _ByName(Mapping[str, Any]):
    """A mapping over the names in ``_where``, each value computed by ``__getitem__``."""

    _where: Mapping[str, Any]

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


class ToolCatalog(_ByName):
    """Tool specs by name, each read when first asked for (see the module docstring). ``items``: tool dicts (or
    :class:`ToolSpec` objects, or ``(start, end)`` spans of ``text`` holding a tool's JSON); ``dialect``: the dialect
    forced on every tool (else detected per tool)."""

    def __init__(self, items: list[Any], *, dialect: str | None = None, text: str | None = None,
                 names: list[str | None] | None = None) -> None:
        self._items = items
        self._dialect = dialect
        self._text = text
        self._read: dict[str, ToolSpec] = {}
        self._where: dict[str, int] = {}
        for i, item in enumerate(items):
            name = tool_name(item, dialect) if names is None else names[i]
            if name is None:  # no name to file it under: read it now
                spec = self._load(i)
                name = spec.name
                self._read[name] = spec
            elif self._read:  # (a spec read for a nameless tool earlier in the list gives way to this one)
                self._read.pop(name, None)
            self._where[name] = i

    def _load(self, i: int) -> ToolSpec:
        item = self._items[i]
        if type(item) is not dict:
            if isinstance(item, ToolSpec):
                return item
            if isinstance(item, tuple) and self._text is not None:  # (a span of the text, read where it stands)
                item = _DECODER.scan_once(self._text, item[0])[0]
        return spec_from_dict(item, self._dialect, i)

    def __getitem__(self, name: str) -> ToolSpec:
        spec = self._read.get(name)
        return spec if spec is not None else self._read.setdefault(name, self._load(self._where[name]))

    def get(self, name: str, default: Any = None) -> Any:  # (Mapping's raises and catches KeyError for a miss)
        spec = self._read.get(name)
        if spec is None and (i := self._where.get(name)) is not None:
            spec = self._read.setdefault(name, self._load(i))  # (as __getitem__: a spec read once, whichever thread)
        return default if spec is None else spec

    @property
    def read(self) -> int:
        """How many tools' specs have been read so far."""
        return len(self._read)


class CatalogParams(_ByName):
    """``{name: catalog[name].params}``: each tool's parameters (its spec's own dict, read-only) by tool name."""

    def __init__(self, catalog: ToolCatalog) -> None:
        self._catalog = catalog
        self._where = catalog._where

    def __getitem__(self, name: str) -> dict[str, Any]:
        return self._catalog[name].params

    def get(self, name: str, default: Any = None) -> Any:
        spec = self._catalog.get(name)
        return default if spec is None else spec.params


class ToolList(list):
    """A request's tool list (the parsed items) with the JSON text it was read from (``text``). Pickled, it is that
    text: the receiving process reads it through :func:`tool_catalog`."""

    __slots__ = ("text",)

    def __init__(self, items: list, text: str) -> None:
        super().__init__(items)
        self.text = text

    def __reduce__(self) -> tuple:
        return str, (self.text,)


MAX_PARSED_LISTS = 8
MIN_PARSED_CHARS = 64 * 1024  # shorter lists are parsed again


def loads_keeping_tools(text: str) -> Any:
    """``json.loads(text)``, where a top-level object's ``tools`` list becomes a :class:`ToolList` that keeps its
    text; a long list seen before (:data:`PARSED`) is not parsed again, its items shared read-only."""
    decoder = json.JSONDecoder()
    at = _WS.match(text, 0).end()
    if not text.startswith("{", at):
        return json.loads(text)
    out: dict[str, Any] = {}
    at = _WS.match(text, at + 1).end()
    if text.startswith("}", at):
        return json.loads(text)
    scan = decoder.scan_once
    while True:
        if not text.startswith('"', at):
            return json.loads(text)  # (raises with json's own message)
        key, at = json.decoder.scanstring(text, at + 1)
        at = _WS.match(text, at).end()
        if not text.startswith(":", at):
            return json.loads(text)
        start = _WS.match(text, at + 1).end()
        known = PARSED.find(text, start) if key == "tools" and text.startswith("[", start) else None
        if known is not None:  # a tool list read before: its text is here whole (an array ends at its own bracket)
            out[key] = ToolList(known[0], known[1])
            at = start + len(known[1])
        else:
            try:
                value, at = scan(text, start)
            except StopIteration:
                return json.loads(text)
            if key == "tools" and isinstance(value, list):
                value = ToolList(value, text[start:at])
                PARSED.put(value.text, value)
            out[key] = value
        at = _WS.match(text, at).end()
        if text.startswith(",", at):
            at = _WS.match(text, at + 1).end()
            continue
        if text.startswith("}", at) and not text[at + 1:].strip(" \t\n\r"):
            return out
        return json.loads(text)


def text_catalog(text: str) -> ToolCatalog | None:
    """The catalog of a JSON array of tool objects (None when ``text`` is not one)."""
    at = _WS.match(text, 0).end()
    if not text.startswith("[", at):
        return None
    spans: list[Any] = []
    names: list[str | None] = []
    at = _WS.match(text, at + 1).end()
    if text.startswith("]", at):
        return None
    scan = _DECODER.scan_once
    while True:
        try:
            value, end = scan(text, at)
        except (StopIteration, ValueError, RecursionError):
            return None
        if not isinstance(value, dict):
            return None
        spans.append((at, end))
        names.append(tool_name(value))
        at = _WS.match(text, end).end()
        if text.startswith(",", at):
            at = _WS.match(text, at + 1).end()
            continue
        if text.startswith("]", at) and not text[at + 1:].strip(" \t\n\r"):
            break
        return None
    items = [span if name is not None else _DECODER.decode(text[span[0]:span[1]])
             for span, name in zip(spans, names)]
    return ToolCatalog(items, text=text, names=names)


class _Text:
    """A cache key: a text, hashed by its length and its ends, equal only to the same text."""

    __slots__ = ("_hash", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._hash = hash((len(text), text[:_ENDS], text[-_ENDS:]))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Text) and self.text == other.text


_ENDS = 256  # characters at each end of a text that its cache key hashes


class KeptTexts:
    """Values kept for texts, least recently used out, within ``max_lists`` texts and ``max_chars`` characters in all
    (a text shorter than ``min_chars`` or longer than ``max_chars`` is not kept)."""

    def __init__(self, max_lists: int, max_chars: int, min_chars: int = 0) -> None:
        self.max_lists, self.max_chars, self.min_chars = max_lists, max_chars, min_chars
        self.entries: dict[_Text, Any] = {}
        self.chars = 0
        self.lock = threading.Lock()
        self.hits = 0

    def get(self, text: str) -> Any:
        key = _Text(text)
        with self.lock:
            found = self.entries.pop(key, None)  # (put back under the new key: no second comparison)
            if found is not None:
                self.entries[key] = found
                self.hits += 1
            return found

    def find(self, text: str, start: int) -> tuple[Any, str] | None:
        """``(value, kept text)`` of a kept text that ``text`` holds at ``start`` (the most recently used first)."""
        with self.lock:
            for key in reversed(self.entries):  # (different texts of one kind differ early, usually)
                if text.startswith(key.text, start):
                    found = self.entries.pop(key)
                    self.entries[key] = found
                    return found, key.text
        return None

    def put(self, text: str, value: Any) -> None:
        if not self.min_chars <= len(text) <= self.max_chars:
            return
        key = _Text(text)
        with self.lock:
            if key in self.entries:
                self.entries[key] = value  # (a kept text's new value: a worker's tool list sent under a new number)
                return
            self.entries[key] = value
            self.chars += len(text)
            while len(self.entries) > 1 and (len(self.entries) > self.max_lists or self.chars > self.max_chars):
                old = next(iter(self.entries))
                del self.entries[old]
                self.chars -= len(old.text)

    def text_of(self, value: Any) -> str | None:
        """The kept text whose value is ``value`` (used now, as by :meth:`get`), or None."""
        with self.lock:
            for key in reversed(self.entries):
                if self.entries[key] == value:
                    self.entries[key] = self.entries.pop(key)
                    return key.text
        return None

    def texts(self) -> list[str]:
        """The texts kept, least recently used first."""
        with self.lock:
            return [k.text for k in self.entries]

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.chars = self.hits = 0


CACHE = KeptTexts(MAX_CACHED_LISTS, MAX_CACHED_CHARS)
PARSED = KeptTexts(MAX_PARSED_LISTS, MAX_CACHED_CHARS, MIN_PARSED_CHARS)  # loads_keeping_tools's parsed lists


def tool_catalog(tools: Any) -> ToolCatalog | None:
    """The catalog of a list of tool dicts / :class:`ToolSpec` objects or of its JSON text (kept in :data:`CACHE`);
    None for any other shape (read those with :func:`~refiner.specs.loader.load_tools`)."""
    if type(tools) is not list:  # (a list told first: the checks below are slower, the ABC check most)
        if isinstance(tools, ToolCatalog):
            return tools
        if isinstance(tools, ToolList):
            tools = tools.text
        if isinstance(tools, str):
            found = CACHE.get(tools)
            if found is None:
                found = text_catalog(tools)
                if found is not None:
                    CACHE.put(tools, found)
            return found
        if not isinstance(tools, (list, tuple)):
            return None
    try:
        return ToolCatalog(list(tools))
    except SpecError:  # (a tool with no name was read, and could not be)
        if all(type(t) is dict or isinstance(t, (Mapping, ToolSpec)) for t in tools):
            raise
        return None  # (an item that is no tool object: load_tools says which)
