"""The one interface every generation engine implements, and the checks, errors and batching they share."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

Conversation = Sequence[Mapping[str, Any]]


class EngineError(RuntimeError):
    """A generation request that failed for good (after retries, where the engine retries)."""


@runtime_checkable
class Engine(Protocol):
    """Generates ``n`` raw texts (reasoning included) for each chat conversation. The project's engines subclass it:
    :meth:`chat` checks every request (:func:`check_request`), then hands a non-empty one to ``_run(conversations,
    **sampling)`` (``sampling``: the keyword arguments of :meth:`chat`), which returns ``n`` texts per conversation."""

    def chat(self, conversations: Sequence[Conversation], *, n: int = 1, temperature: float = 0.0,
             max_tokens: int = 1024, enable_thinking: bool | None = None, seed: int | None = None) -> list[list[str]]:
        check_request(conversations, n, temperature, max_tokens)
        if not conversations:
            return []
        return self._run(conversations, n=n, temperature=temperature, max_tokens=max_tokens,  # type: ignore
                         enable_thinking=enable_thinking, seed=seed)


def check_request(conversations: Sequence[Conversation], n: int, temperature: float, max_tokens: int) -> None:
    """Raises ``ValueError`` naming the conversation, message and field when the request is malformed."""
    if isinstance(conversations, (str, bytes)) or not isinstance(conversations, Sequence):
        raise ValueError(f"conversations must be a list of message lists, got {type(conversations).__name__}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    for i, conv in enumerate(conversations):
        if isinstance(conv, (str, bytes, Mapping)) or not isinstance(conv, Sequence) or not conv:
            raise ValueError(f"conversation {i}: must be a non-empty list of messages")
        for j, m in enumerate(conv):
            if not isinstance(m, Mapping):
                raise ValueError(f"conversation {i}, message {j}: must be an object, got {type(m).__name__}")
            if not isinstance(m.get("role"), str):
                raise ValueError(f"conversation {i}, message {j}: field 'role' missing or not a string")
            if "content" not in m and not m.get("tool_calls"):
                raise ValueError(f"conversation {i}, message {j}: field 'content' missing")


def batches(items: Sequence[T], size: int, desc: str | None = None, *, progress: bool = True,
            **bar: Any) -> Iterator[Sequence[T]]:
    """``items`` ``size`` at a time (0: all at once), counted on a tqdm progress bar (``desc``; ``bar``: its other
    settings) unless ``progress`` is false."""
    from tqdm import tqdm

    size = size or max(1, len(items))
    with tqdm(total=len(items), desc=desc, disable=not progress, **bar) as counter:
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            yield chunk
            counter.update(len(chunk))


def template_kwargs(enable_thinking: bool | None) -> dict[str, Any]:
    """Chat-template variables: ``enable_thinking`` only when the caller chose (Qwen3 templates read it)."""
    return {} if enable_thinking is None else {"enable_thinking": bool(enable_thinking)}
