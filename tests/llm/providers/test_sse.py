"""iter_sse_data over real httpx responses whose bodies arrive in awkward pieces."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from opencrab.llm.providers.sse import iter_sse_data


async def payloads(*pieces: bytes) -> list[str]:
    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    response = httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})
    return [data async for data in iter_sse_data(response)]


async def test_events_split_across_reads() -> None:
    assert await payloads(b'data: {"a": 1}\n', b"\n", b'data: {"b"', b": 2}\n\n") == [
        '{"a": 1}',
        '{"b": 2}',
    ]


async def test_multi_line_data_comments_and_other_fields() -> None:
    body = (
        b": keep-alive\n\n"
        b"event: message\nid: 7\nretry: 100\ndata: first\ndata:second\n\n"
        b"data:  two spaces\r\n\r\n"
    )

    assert await payloads(body) == ["first\nsecond", " two spaces"]


async def test_unfinished_last_event_is_dropped() -> None:
    assert await payloads(b"data: whole\n\ndata: half") == ["whole"]


async def test_empty_data_is_skipped() -> None:
    assert await payloads(b"data:\n\n", b"data:\ndata:\n\n", b"data: [DONE]\n\n") == [
        "\n",
        "[DONE]",
    ]
