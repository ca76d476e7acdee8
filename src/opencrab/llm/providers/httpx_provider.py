"""The base of providers that speak their vendor's HTTP API with plain httpx (no SDK).

It owns one `httpx.AsyncClient` per provider and turns everything that can go wrong on
the wire into the `LlmError` tree:

- an HTTP status ≥ 400 → `llm_error_for_status`, with the message taken from the
  vendor's error body (`{"error": {"message": …}}` or `{"error": "…"}`), else the text;
- `request.timeout` (else `timeout_secs`) bounds a whole non-streamed call and, for a
  stream, the wait for the response to start; it is also the per-read timeout, so a
  stream that goes silent that long fails too → ProviderTimeout;
- connection refused, DNS, reset before the reply → ProviderUnreachable;
- a streamed body that breaks off after it started → StreamInterrupted;
- a body or stream line that is not a JSON object → MalformedResponse;
- a reply over `[llm] max_reply_bytes` → ReplyTooLarge, while it is read (the client's
  hooks, `LlmProvider.http_hooks`; the SDK providers share them).

Nothing is retried here: the router is the one retry and fallback loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, ClassVar

import httpx

from opencrab.config.models import ProviderConfig
from opencrab.errors import (
    LlmError,
    MalformedResponse,
    ProviderNotConfigured,
    ProviderTimeout,
    ProviderUnreachable,
    StreamInterrupted,
    llm_error_for_status,
)
from opencrab.llm.base import LlmProvider

LineReader = Callable[[httpx.Response], AsyncIterator[str]]
"""Splits a streamed body into payloads (SSE `data:` values, NDJSON lines)."""


class HttpxProvider(LlmProvider):
    """An LlmProvider calling its vendor's HTTP API through one shared httpx client."""

    default_base_url: ClassVar[str]
    health_timeout_secs: ClassVar[float] = 5.0

    def __init__(self, config: ProviderConfig | None = None, *, name: str | None = None) -> None:
        super().__init__(config, name=name)
        self._http: httpx.AsyncClient | None = None

    # ---------------------------------------------------------------- hooks
    def base_url(self) -> str:
        """The server the client talks to: `base_url` from the config, else the vendor's."""
        return (self.config.base_url or self.default_base_url).rstrip("/")

    def headers(self) -> dict[str, str]:
        """Headers sent with every request (authentication goes here)."""
        return {}

    def error_for_status(self, status: int, message: str, model: str) -> LlmError:
        """The LlmError for an HTTP error status and the vendor's message."""
        return llm_error_for_status(status, message, provider=self.name, model=model)

    # ---------------------------------------------------------------- client
    def client(self) -> httpx.AsyncClient:
        """The shared client, built on first use."""
        if self._http is None:
            self._http = httpx.AsyncClient(
                base_url=self.base_url(),
                headers=self.headers(),
                timeout=httpx.Timeout(self.config.timeout_secs),
                event_hooks=self.http_hooks(),
            )
        return self._http

    async def aclose(self) -> None:
        """Close the client's connections."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # ---------------------------------------------------------------- calls
    async def get_json(
        self, path: str, *, model: str = "", params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """GET a JSON object, errors mapped."""
        return await self.send_json("GET", path, None, model=model, params=params)

    async def send_json(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        *,
        model: str,
        timeout: float | None = None,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Send a request and return its JSON object body, errors mapped."""
        seconds = timeout or self.config.timeout_secs
        try:
            async with asyncio.timeout(seconds):
                response = await self.client().request(
                    method, path, json=body, params=params, timeout=httpx.Timeout(seconds)
                )
        except TimeoutError as exc:
            raise self._timeout(seconds, model) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self.transport_error(exc, model) from exc
        if response.status_code >= 400:
            raise self.status_error(response, model)
        return self.decode(response.text, model)

    async def stream_payloads(
        self,
        path: str,
        body: dict[str, Any],
        *,
        model: str,
        timeout: float,
        reader: LineReader,
        params: dict[str, Any] | None = None,
    ) -> AsyncGenerator[str, None]:
        """POST and yield the streamed payloads `reader` finds in the body, errors mapped."""
        client = self.client()
        try:
            request = client.build_request(
                "POST", path, json=body, params=params, timeout=httpx.Timeout(timeout)
            )
            async with asyncio.timeout(timeout):
                response = await client.send(request, stream=True)
        except TimeoutError as exc:
            raise self._timeout(timeout, model) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise self.transport_error(exc, model) from exc
        try:
            if response.status_code >= 400:
                await response.aread()
                raise self.status_error(response, model)
            async for payload in reader(response):
                yield payload
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, model, streaming=True) from exc
        finally:
            await response.aclose()

    # ---------------------------------------------------------------- errors
    def decode(self, text: str, model: str) -> dict[str, Any]:
        """A JSON object from a body or stream payload, else MalformedResponse."""
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise MalformedResponse(
                f"expected a JSON object, got {text[:200]!r}", provider=self.name, model=model
            )
        return value

    def status_error(self, response: httpx.Response, model: str) -> LlmError:
        """The LlmError for an HTTP error response."""
        return self.error_for_status(response.status_code, error_message(response), model)

    def transport_error(
        self, exc: httpx.HTTPError | httpx.InvalidURL, model: str, *, streaming: bool = False
    ) -> LlmError:
        """The LlmError for an httpx exception; `streaming`: the body had started."""
        if isinstance(exc, httpx.TimeoutException):
            return ProviderTimeout(
                f"no answer in time ({type(exc).__name__})", provider=self.name, model=model
            )
        if isinstance(exc, httpx.InvalidURL | httpx.UnsupportedProtocol):
            return ProviderNotConfigured(
                f"invalid base_url {self.base_url()!r} ({exc}); "
                f"fix llm.providers.{self.name}.base_url",
                provider=self.name,
                model=model,
            )
        if streaming:
            return StreamInterrupted(
                f"the stream broke off: {describe(exc)}",
                provider=self.name,
                model=model,
            )
        return ProviderUnreachable(
            f"cannot reach {self.base_url()}: {describe(exc)}",
            provider=self.name,
            model=model,
        )

    def _timeout(self, seconds: float, model: str) -> ProviderTimeout:
        return ProviderTimeout(f"no answer within {seconds:g}s", provider=self.name, model=model)


def describe(exc: BaseException) -> str:
    """An exception's message, else its class name."""
    return str(exc) or type(exc).__name__


def error_message(response: httpx.Response) -> str:
    """The message of a vendor error body (`{"error": {"message"}}`, `{"error": "…"}`)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, str) and error:
            return error
        if isinstance(error, dict):
            message = error.get("message")
            if isinstance(message, str) and message:
                status = error.get("status")
                return f"{message} ({status})" if isinstance(status, str) else message
    text = response.text.strip()
    return text[:500] if text else response.reason_phrase or "no message"
