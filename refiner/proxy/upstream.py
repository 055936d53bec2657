"""The upstream chat-completions server: the HTTP client, and the one mapping from upstream failures to the
proxy's answers.

- the upstream timed out → 504 ``upstream_timeout``;
- unreachable, or the connection broke → 502 ``upstream_unreachable``;
- it answered something that is not a chat completion (or a stream chunk that is not JSON) → 502 ``upstream_malformed``;
- it answered 5xx → 502 ``upstream_error``; 4xx keeps its status (``upstream_client_error``, with ``retry-after``).

Every failure is an :class:`UpstreamError`; it becomes an OpenAI-style ``{"error": {...}}`` body, as a JSON response
before a stream starts and as a last SSE event once it has.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping

import httpx
from fastapi.responses import JSONResponse


class UpstreamError(Exception):
    """An upstream failure, with the HTTP status the proxy answers and an OpenAI-style error type."""

    def __init__(self, status: int, message: str, kind: str = "upstream_error", retry_after: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.retry_after = retry_after

    def body(self) -> dict:
        return error_body(self.status, self.message, self.kind)

    def response(self) -> JSONResponse:
        resp = error_response(self.status, self.message, self.kind)
        if self.retry_after:
            resp.headers["retry-after"] = self.retry_after
        return resp


def error_body(status: int, message: str, kind: str, code: int | str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": status if code is None else code}}


def error_response(status: int, message: str, kind: str, code: int | str | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, kind, code), status)


def transport_failure(error: httpx.HTTPError, timeout: float, *, streaming: bool = False) -> UpstreamError:
    """The :class:`UpstreamError` for an exception raised while talking to the upstream."""
    if isinstance(error, httpx.TimeoutException):
        return UpstreamError(504, f"upstream timed out after {timeout:g}s", "upstream_timeout")
    what = "stream broke" if streaming else "unreachable"
    return UpstreamError(502, f"upstream {what} ({type(error).__name__})", "upstream_unreachable")


def check_status(status: int, content: bytes, headers: Mapping[str, str]) -> None:
    """Raises :class:`UpstreamError` for an upstream error status: 4xx keeps its status, 5xx becomes 502."""
    if status < 400:
        return
    try:
        err = json.loads(content).get("error")
        detail = err.get("message") if isinstance(err, dict) else str(err)
    except (ValueError, AttributeError):
        detail = content[:200].decode("utf-8", "replace")
    if status < 500:
        retry_after = {k.lower(): v for k, v in headers.items()}.get("retry-after")
        raise UpstreamError(status, f"upstream: {detail}", "upstream_client_error", retry_after)
    raise UpstreamError(502, f"upstream answered HTTP {status}: {detail}", "upstream_error")


def parse_completion(content: bytes) -> dict:
    """The upstream's chat completion; :class:`UpstreamError` (502) when it is not one."""
    try:
        data = json.loads(content)
    except ValueError:
        raise UpstreamError(502, "upstream returned malformed JSON", "upstream_malformed") from None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not all(
        isinstance(c, dict) for c in data["choices"]
    ):
        raise UpstreamError(502, "upstream response has no 'choices' list", "upstream_malformed")
    return data


def parse_chunk(payload: str) -> dict:
    """One SSE ``data:`` payload of the upstream's stream; :class:`UpstreamError` (502) when it is not a JSON
    object."""
    try:
        chunk = json.loads(payload)
    except ValueError:
        chunk = None
    if not isinstance(chunk, dict):
        raise UpstreamError(502, "upstream sent a malformed stream chunk", "upstream_malformed")
    return chunk


class Upstream:
    """An HTTP client for one upstream base URL (``.../v1``). ``api_key`` is sent as the bearer token; without it the
    client's own ``Authorization`` header is forwarded. :meth:`open` creates the connection pool, :meth:`close`
    closes it."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_connections: int = 1024,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"upstream_base_url must be an http(s) URL, got {base_url!r}")
        self.base = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self._http_timeout = httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
        self._limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    def open(self) -> None:
        self._client = httpx.AsyncClient(timeout=self._http_timeout, limits=self._limits, transport=self._transport)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("the upstream client is not open (the app's lifespan has not started)")
        return self._client

    def headers(self, authorization: str | None, body: bytes | None = None) -> dict[str, str]:
        out = {"content-type": "application/json"} if body is not None else {}
        if self.api_key:
            out["authorization"] = f"Bearer {self.api_key}"
        elif authorization:
            out["authorization"] = authorization
        return out

    async def request(self, method: str, path: str, authorization: str | None, body: bytes | None) -> httpx.Response:
        """The upstream's answer to ``body`` (JSON bytes); :class:`UpstreamError` for a transport failure or an error
        status."""
        try:
            resp = await self.client.request(method, f"{self.base}{path}", content=body,
                                             headers=self.headers(authorization, body))
        except httpx.HTTPError as e:
            raise transport_failure(e, self.timeout) from None
        check_status(resp.status_code, resp.content, resp.headers)
        return resp

    async def open_stream(self, path: str, authorization: str | None, body: bytes) -> httpx.Response:
        """A streaming response whose status is below 400 (the caller closes it); :class:`UpstreamError` otherwise."""
        req = self.client.build_request("POST", f"{self.base}{path}", content=body,
                                        headers=self.headers(authorization, body))
        try:
            resp = await self.client.send(req, stream=True)
        except httpx.HTTPError as e:
            raise transport_failure(e, self.timeout) from None
        if resp.status_code >= 400:
            try:
                content = await resp.aread()
            except httpx.HTTPError as e:
                raise transport_failure(e, self.timeout) from None
            finally:
                await resp.aclose()
            check_status(resp.status_code, content, resp.headers)
        return resp

    async def events(self, resp: httpx.Response) -> AsyncIterator[dict]:
        """The stream's chunks up to ``[DONE]`` (or its end); closes the response. Raises :class:`UpstreamError`
        when the stream breaks, stalls past the timeout or sends a chunk that is not JSON."""
        try:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    return
                yield parse_chunk(payload)
        except httpx.HTTPError as e:
            raise transport_failure(e, self.timeout, streaming=True) from None
        finally:
            await resp.aclose()
