"""How much of one provider reply is read (`[llm] max_reply_bytes`).

A hostile or broken provider can answer with hundreds of megabytes (or a small gzip that
expands to that). Every HTTP client a provider builds carries this response hook
(`LlmProvider.http_hooks`): a declared `Content-Length` over the limit is refused before
the body is read, and the body's decoded bytes are counted as the SDK or httpx reads
them (whole bodies, SSE and NDJSON streams alike), so reading stops as soon as the count
passes the limit. Either way the call fails with ReplyTooLarge, a provider error the
router handles like any other.

Example:
    hook = reply_cap_hook("openai", lambda: 32 * 1024 * 1024)
    httpx.AsyncClient(event_hooks={"response": [hook]})
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from opencrab.errors import ReplyTooLarge

DEFAULT_MAX_REPLY_BYTES = 32 * 1024 * 1024


def too_large(provider: str, limit: int, what: str) -> ReplyTooLarge:
    """The error for a reply over `limit` bytes."""
    return ReplyTooLarge(
        f"the reply is {what} over the limit of {limit} bytes; refused "
        "(raise [llm] max_reply_bytes if the provider is trusted)",
        provider=provider,
    )


def reply_cap_hook(
    provider: str, limit: Callable[[], int]
) -> Callable[[httpx.Response], Awaitable[None]]:
    """An httpx response hook that stops reading a body at `limit()` decoded bytes."""

    async def cap(response: httpx.Response) -> None:
        most = limit()
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > most:
            raise too_large(provider, most, f"{int(declared)} bytes long,")
        read = response.aiter_bytes

        async def counted(chunk_size: int | None = None) -> AsyncIterator[bytes]:
            total = 0
            async for chunk in read(chunk_size):
                total += len(chunk)
                if total > most:
                    raise too_large(provider, most, "still arriving and already")
                yield chunk

        response.aiter_bytes = counted  # type: ignore[method-assign]

    return cap
