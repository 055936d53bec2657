"""Loading a model's chat template and rendering conversations through it as ``apply_chat_template`` does, in a
bounded sandbox; every failure is a :class:`TemplateFailure` naming the file."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import SandboxedEnvironment, modifies_known_mutable
from jinja2.sandbox import safe_range as _safe_range

MAX_TEMPLATE_CHARS = 1_000_000
SPECIAL_TOKENS = ("bos_token", "eos_token", "pad_token", "unk_token")
MAX_STEPS = 200_000  # calls, lookups, range items, operations and output chunks of one render
MAX_RENDER_CHARS = 200_000
# What llama.cpp's engine passes besides the messages and tools (one fixed day, so that renders compare equal).
ENGINE_CONTEXT = {"datetime": "Jan 01 2026", "date_string": "01 Jan 2026"}
# The in-place changes a template may make to its lists and dicts: each changes one item, so the budget bounds them.
ITEM_CHANGES = frozenset(("append", "insert", "pop", "remove", "clear", "setdefault", "update"))


class TemplateFailure(ValueError):
    """A chat template that cannot be read, compiled or rendered (the message names the file and why)."""


@dataclass(frozen=True)
class ChatTemplate:
    """A template's source and where it came from, with the special tokens its tokenizer config names."""

    source: str
    where: str
    tokens: dict[str, str] = field(default_factory=dict)


def _from_config(path: Path) -> ChatTemplate:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TemplateFailure(f"{path}: cannot read the tokenizer config: {e}") from None
    if not isinstance(config, dict):
        raise TemplateFailure(f"{path}: a tokenizer config is a JSON object")
    found = {k: t.get("content") if isinstance(t, dict) else t for k, t in config.items() if k in SPECIAL_TOKENS}
    tokens = {k: t for k, t in found.items() if isinstance(t, str)}  # (its text, or an object's "content")
    source = config.get("chat_template")
    if isinstance(source, list):
        named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
        source = named.get("tool_use") or named.get("default")
    if not isinstance(source, str):
        sibling = path.with_name("chat_template.jinja")
        if sibling.is_file():
            return ChatTemplate(_read_text(sibling), str(sibling), tokens)
        raise TemplateFailure(f"{path}: no chat_template in the tokenizer config")
    return ChatTemplate(source, str(path), tokens)


def _read_text(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TemplateFailure(f"{path}: cannot read the chat template: {e}") from None
    if len(text) > MAX_TEMPLATE_CHARS:
        raise TemplateFailure(f"{path}: {len(text)} characters is not a chat template (at most {MAX_TEMPLATE_CHARS})")
    return text


def load_template(path: str | Path) -> ChatTemplate:
    """The chat template at ``path``: a ``.jinja`` file, a ``tokenizer_config.json`` or a model folder."""
    path = Path(path)
    if path.is_dir():
        jinja_file, config = path / "chat_template.jinja", path / "tokenizer_config.json"
        if jinja_file.is_file():
            try:
                tokens = _from_config(config).tokens if config.is_file() else {}
            except TemplateFailure:
                tokens = {}
            return ChatTemplate(_read_text(jinja_file), str(jinja_file), tokens)
        if config.is_file():
            return _from_config(config)
        raise TemplateFailure(f"{path}: no chat_template.jinja or tokenizer_config.json in this folder")
    if not path.exists():
        raise TemplateFailure(f"{path}: no such file")
    return _from_config(path) if path.suffix == ".json" else ChatTemplate(_read_text(path), str(path))


class _Generation(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` (transformers' mark of the assistant's tokens): its body."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


def _raise_exception(message: Any) -> None:
    raise jinja2.exceptions.TemplateError(str(message))


def _listed(x: Any) -> list:
    """An iterable JSON has no type for (``map(...)``) as a list, as llama.cpp's template engine writes it."""
    if isinstance(x, Iterable) and not isinstance(x, (str, bytes, Mapping)):
        return list(x)
    raise TypeError(f"Object of type {type(x).__name__} is not JSON serializable")


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys,
                      default=_listed)


class _Budgeted(SandboxedEnvironment):
    """The sandbox, where every step of a render draws on a budget of :data:`MAX_STEPS`."""

    steps = 0
    intercepted_binops = frozenset(("*", "**", "+"))

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return super().is_safe_attribute(obj, attr, value) and (attr in ITEM_CHANGES
                                                                or not modifies_known_mutable(obj, attr))

    def _step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > MAX_STEPS:
            raise TemplateBudget(f"more than {MAX_STEPS} calls and lookups in one render")

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        self._step()
        return super().call(context, obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        self._step()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self._step()
        return super().getitem(obj, argument)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self._step()
        if operator == "**" and isinstance(right, (int, float)) and abs(right) > 64:
            raise TemplateBudget("an exponent above 64")
        if operator == "*":
            sized, times = (left, right) if isinstance(left, (str, list, tuple)) else (right, left)
            if isinstance(sized, (str, list, tuple)) and isinstance(times, int) and len(sized) * times > MAX_RENDER_CHARS:
                raise TemplateBudget(f"a repeated text or list longer than {MAX_RENDER_CHARS}")
        if operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            self._step(1 + (len(left) + len(right)) // 64)  # a concatenation copies both sides
        return super().call_binop(context, operator, left, right)

    def counted_range(self, *args: int) -> Any:
        """``range`` whose every item draws on the budget (so loops over it are counted)."""
        for i in _safe_range(*args):
            self._step()
            yield i


class TemplateBudget(RuntimeError):
    """A render that spent its budget of steps or characters."""


def compile_template(template: ChatTemplate) -> jinja2.Template:
    env = _Budgeted(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=lambda fmt: datetime.now().strftime(fmt),
                       range=env.counted_range)
    try:
        return env.from_string(template.source)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise TemplateFailure(f"{template.where}: the chat template does not parse (line {e.lineno}): {e.message}")


def render(compiled: jinja2.Template, template: ChatTemplate, messages: list[dict], tools: list[dict] | None,
           **extra: Any) -> str:
    """One render of ``messages`` as ``apply_chat_template(tokenize=False)`` gives it, or :class:`TemplateFailure`."""
    context = {"bos_token": "", "eos_token": "", "add_generation_prompt": False, **ENGINE_CONTEXT, **template.tokens,
               **extra}
    if tools and "functions" not in context:  # (firefunction-v2 reads the tools as indented JSON)
        context["functions"] = json.dumps(tools, ensure_ascii=False, indent=2)
    compiled.environment.steps = 0
    try:
        parts, size = [], 0
        for part in compiled.generate(messages=messages, tools=tools, documents=None, **context):
            size += len(part)
            if size > MAX_RENDER_CHARS:
                raise TemplateBudget(f"a render longer than {MAX_RENDER_CHARS} characters")
            compiled.environment._step()
            parts.append(part)
        return "".join(parts)
    except RecursionError:
        raise TemplateFailure(f"{template.where}: the chat template recursed too deeply") from None
    except Exception as e:  # noqa: BLE001 (jinja2's errors, and whatever the template's own code raises)
        raise TemplateFailure(f"{template.where}: the chat template failed to render: {type(e).__name__}: {e}") from None
