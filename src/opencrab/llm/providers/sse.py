"""Server-sent events: the `data:` payloads of an httpx streaming response.

Follows the WHATWG event-stream rules that matter to LLM APIs: lines end in LF, CRLF or
CR; a blank line ends an event; several `data:` lines of one event are joined with a
newline, and an event whose data is empty is skipped; lines starting with `:` are
comments (keep-alives); one space after the colon is dropped; other fields (`event:`,
`id:`, `retry:`) are ignored, since every vendor repeats the event type inside its
JSON. An event left unfinished when the body ends is discarded, as the specification
says, so a stream cut mid-event never yields half a payload.

Example:
    async with client.stream("POST", url, json=body) as response:
        async for data in iter_sse_data(response):
            event = json.loads(data)
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


async def iter_sse_data(response: httpx.Response) -> AsyncIterator[str]:
    """Yield the data of each complete event of a text/event-stream response."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data and data != [""]:
                yield "\n".join(data)
            data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
