"""Generation through any OpenAI-compatible ``/v1/chat/completions`` endpoint: concurrent requests, retried with
backoff on 408/409/429/5xx, timeouts and connection errors; the API key goes only into the ``Authorization`` header."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import random
from collections.abc import Sequence
from typing import Any

import httpx

from refiner.engines.base import Conversation, Engine, EngineError, template_kwargs

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def _raw_text(message: dict[str, Any]) -> str:
    """The generation as one raw text: a separately returned reasoning goes back inside ``<think>`` tags."""
    content = message.get("content") or ""
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip() and "</think>" not in content:
        return f"<think>\n{reasoning.strip()}\n</think>\n\n{content}"
    return content


def _error_detail(response: httpx.Response) -> str:
    try:
        body = response.json()
        err = body.get("error", body) if isinstance(body, dict) else body
        msg = err.get("message", err) if isinstance(err, dict) else err
        return str(msg)[:300]
    except ValueError:
        return response.text[:300]


class OpenAIEngine(Engine):
    """Chat completions from ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``); ``model`` defaults to the first the
    server lists; ``extra_body`` is merged into every request; ``enable_thinking`` goes as ``chat_template_kwargs``."""

    def __init__(self, base_url: str, model: str | None = None, *, api_key: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", concurrency: int = 16, timeout: float = 120.0,
                 connect_timeout: float = 10.0, max_retries: int = 4, backoff: float = 0.5, max_backoff: float = 20.0,
                 extra_body: dict[str, Any] | None = None, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key if api_key is not None else os.environ.get(api_key_env) or None
        self.concurrency = concurrency
        self.timeout = httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.extra_body = dict(extra_body or {})
        self._transport = transport

    def __repr__(self) -> str:  # the key stays out of reprs, and so out of logs and tracebacks
        return f"OpenAIEngine(base_url={self.base_url!r}, model={self.model!r})"

    def _run(self, conversations: Sequence[Conversation], **sampling: Any) -> list[list[str]]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._arun(conversations, **sampling))
        # Called from inside an event loop (e.g. a server handler): run on a private loop in a worker thread.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self._arun(conversations, **sampling)).result()

    async def _arun(self, conversations: Sequence[Conversation], *, n: int, temperature: float, max_tokens: int,
                    enable_thinking: bool | None, seed: int | None) -> list[list[str]]:
        sem = asyncio.Semaphore(self.concurrency)
        async with self._client() as client:
            model = self.model or await self._first_model(client)
            base = {"model": model, "temperature": temperature, "max_tokens": max_tokens, **self.extra_body}
            if seed is not None:
                base["seed"] = seed
            kw = template_kwargs(enable_thinking)
            if kw:
                base["chat_template_kwargs"] = {**base.get("chat_template_kwargs", {}), **kw}
            tasks = [self._generate(client, sem, base, [dict(m) for m in conv], n) for conv in conversations]
            return list(await asyncio.gather(*tasks))

    def _client(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=self.timeout, limits=limits,
                                 transport=self._transport)

    async def _first_model(self, client: httpx.AsyncClient) -> str:
        response = await self._send(client, "GET", "/models", None)
        data = response.json().get("data") or []
        if not data or not isinstance(data[0], dict) or "id" not in data[0]:
            raise EngineError(f"{self.base_url}/models lists no model; pass model=...")
        self.model = str(data[0]["id"])
        return self.model

    async def _generate(self, client: httpx.AsyncClient, sem: asyncio.Semaphore, base: dict, messages: list[dict],
                        n: int) -> list[str]:
        texts: list[str] = []
        # Servers that ignore ``n`` return fewer choices; ask again for the rest (at most n requests in all).
        for _ in range(n):
            async with sem:
                response = await self._send(client, "POST", "/chat/completions", {**base, "messages": messages,
                                                                                   "n": n - len(texts)})
            try:
                choices = sorted(response.json()["choices"], key=lambda c: c.get("index", 0))
                texts.extend(_raw_text(c["message"]) for c in choices)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise EngineError(f"{self.base_url}/chat/completions: malformed response ({e!r})") from None
            if len(texts) >= n:
                break
        if len(texts) < n:
            raise EngineError(f"{self.base_url}/chat/completions returned {len(texts)} of {n} choices")
        return texts[:n]

    async def _send(self, client: httpx.AsyncClient, method: str, path: str, body: dict | None) -> httpx.Response:
        url = f"{self.base_url}{path}"
        last = ""
        for attempt in range(self.max_retries + 1):
            retry_after: float | None = None
            try:
                response = await client.request(method, path, json=body)
            except httpx.TimeoutException:
                last = "timed out"
            except httpx.TransportError as e:
                last = f"connection error ({type(e).__name__})"
            else:
                if response.status_code < 400:
                    return response
                last = f"HTTP {response.status_code}: {_error_detail(response)}"
                if response.status_code not in RETRY_STATUS:
                    raise EngineError(f"{method} {url}: {last}")
                with contextlib.suppress(ValueError):
                    retry_after = float(response.headers.get("retry-after", ""))
            if attempt == self.max_retries:
                break
            delay = retry_after if retry_after is not None else self.backoff * 2**attempt * (0.5 + random.random())
            delay = min(delay, self.max_backoff)
            log.warning("%s %s: %s; retry %d/%d in %.2fs", method, url, last, attempt + 1, self.max_retries, delay)
            await asyncio.sleep(delay)
        raise EngineError(f"{method} {url}: {last} (after {self.max_retries + 1} attempts)")
