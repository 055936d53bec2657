"""The upstream's HTTP client, and the one mapping of its failures to :class:`UpstreamError` (an OpenAI-style error
body: a JSON response before a stream starts, a last SSE event once it has).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping

import httpx
from fastapi.responses import JSONResponse


class UpstreamError(Exception):
    """An upstream failure, with the HTTP status the proxy answers and an OpenAI-style error type."""

    def __init__(self, status: int, message: str, kind: str = "upstream_error", retry_after: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.retry_after = status, message, kind, retry_after

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


def parse_object(content: bytes | str, what: str = "upstream returned malformed JSON") -> dict:
    """The upstream's answer (or stream chunk), a JSON object; :class:`UpstreamError` (502, ``what``) otherwise."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise UpstreamError(502, what, "upstream_malformed")
    return data


def parse_completion(content: bytes) -> dict:
    """The upstream's chat completion; :class:`UpstreamError` (502) when it is not one."""
    data = parse_object(content)
    if not isinstance(data.get("choices"), list) or not all(isinstance(c, dict) for c in data["choices"]):
        raise UpstreamError(502, "upstream response has no 'choices' list", "upstream_malformed")
    return data


# Headers that describe one connection, not the request (RFC 9110 7.6.1), and the ones the proxy sets itself.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade"})
NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "accept-encoding", "authorization"}
NOT_RETURNED = HOP_BY_HOP | {"content-length", "content-encoding", "date", "server"}

RawHeaders = Iterable[tuple[bytes, bytes]]
CONNECT_TIMEOUT = 10.0
MAX_CONNECTIONS = 1024


def _end_to_end(headers: RawHeaders, dropped: frozenset[str]) -> list[tuple[str, str]]:
    """``headers`` (raw pairs) without ``dropped`` ones and those the ``Connection`` header names, in order."""
    pairs = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in headers]
    named = {t.strip().lower() for k, v in pairs if k == "connection" for t in v.split(",")}
    return [(k, v) for k, v in pairs if k not in dropped and k not in named]


def elapsed(resp: httpx.Response) -> float | None:
    """The upstream exchange's own time in seconds, to its answer read whole (None while it is still being read)."""
    return resp.elapsed.total_seconds() if resp.is_closed else None


def returned_headers(upstream: httpx.Headers, *, refined: bool = False) -> dict[str, str]:
    """The upstream response's end-to-end headers given back to the client; a ``refined`` answer's content type and
    ``x-tool-refiner`` headers are the proxy's own."""
    pairs = _end_to_end(upstream.raw, NOT_RETURNED)
    if refined:
        pairs = [(k, v) for k, v in pairs if k != "content-type" and not k.startswith("x-tool-refiner")]
    return dict(pairs)


class Upstream:
    """An HTTP client for one upstream base URL (``.../v1``), sending the client's headers (:meth:`headers`);
    :meth:`open` creates the connection pool, :meth:`close` closes it."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 120.0,
                 consume_auth: bool = False) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"upstream_base_url must be an http(s) URL, got {base_url!r}")
        self.base = base_url.rstrip("/")
        self.api_key = api_key
        self.consume_auth = consume_auth
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None

    def open(self) -> None:
        timeout = httpx.Timeout(self.timeout, connect=min(CONNECT_TIMEOUT, self.timeout))
        limits = httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS)
        self._client = httpx.AsyncClient(timeout=timeout, limits=limits)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("the upstream client is not open (the app's lifespan has not started)")
        return self._client

    def headers(self, client: RawHeaders, body: bytes | None = None) -> list[tuple[str, str]]:
        """The headers sent upstream: the client's end-to-end headers as it sent them, and ``Authorization``: the
        proxy's ``api_key`` when it has one, else the client's unless ``consume_auth`` (it authenticated to this
        proxy); a JSON content type for a ``body`` sent without one."""
        raw = list(client)
        out = _end_to_end(raw, NOT_FORWARDED)
        if self.api_key:
            out.append(("authorization", f"Bearer {self.api_key}"))
        elif not self.consume_auth:
            out.extend((k.decode("latin-1"), v.decode("latin-1")) for k, v in raw if k.lower() == b"authorization")
        if body is not None and not any(k == "content-type" for k, _ in out):
            out.append(("content-type", "application/json"))
        return out

    async def request(self, method: str, path: str, client: RawHeaders, body: bytes | None) -> httpx.Response:
        """The upstream's answer to ``body`` (JSON bytes); :class:`UpstreamError` for a transport failure or an error
        status."""
        try:
            resp = await self.client.request(method, f"{self.base}{path}", content=body,
                                             headers=self.headers(client, body))
        except httpx.HTTPError as e:
            raise transport_failure(e, self.timeout) from None
        check_status(resp.status_code, resp.content, resp.headers)
        return resp

    async def open_stream(self, path: str, client: RawHeaders, body: bytes, *, method: str = "POST",
                          passthrough: bool = False) -> httpx.Response:
        """A streaming response (the caller closes it) whose status is below 400 (500 with ``passthrough``: a client
        error is the client's to read); :class:`UpstreamError` otherwise."""
        req = self.client.build_request(method, f"{self.base}{path}", content=body or None,
                                        headers=self.headers(client, body if body else None))
        try:
            resp = await self.client.send(req, stream=True)
            if resp.status_code >= (500 if passthrough else 400):
                try:
                    content = await resp.aread()
                finally:
                    await resp.aclose()
                check_status(resp.status_code, content, resp.headers)
        except httpx.HTTPError as e:
            raise transport_failure(e, self.timeout) from None
        return resp

    @staticmethod
    async def body(resp: httpx.Response) -> AsyncIterator[bytes]:
        """A streaming response's body as it comes; closes the response. A break mid-way is raised."""
        try:
            async for piece in resp.aiter_bytes():
                yield piece
        finally:
            await resp.aclose()

    async def events(self, resp: httpx.Response) -> AsyncIterator[dict]:
        """The stream's chunks up to ``[DONE]`` or its end; closes the response; :class:`UpstreamError` when the
        stream breaks, stalls or sends a chunk that is not a JSON object."""
        try:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    return
                yield parse_object(payload, "upstream sent a malformed stream chunk")
        except httpx.HTTPError as e:
            raise transport_failure(e, self.timeout, streaming=True) from None
        finally:
            await resp.aclose()
