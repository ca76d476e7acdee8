"""The inbox's webhook: a JSON body signed with HMAC-SHA256, POSTed with a timeout.

A request carries two headers:

- `X-OpenCrab-Timestamp`: the time it was signed, in whole seconds since the epoch;
- `X-OpenCrab-Signature`: `sha256=` and the hex HMAC-SHA256, keyed with the shared
  secret, of the timestamp, a full stop and the body's exact bytes (`f"{ts}.{body}"`).

A receiver verifies it by computing the same HMAC over the raw body it got, comparing
with `hmac.compare_digest`, and refusing a timestamp more than a few minutes old (a
replayed request). The body never holds the secret, an approval's arguments or a
question's whole text: items' summaries cut short, and links into the inbox.

Example:
    body, headers = signed(b'{"event": "inbox.items"}', "s3cret", now=1767225600)
    verify(body, headers, "s3cret", now=1767225610)   # True
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from collections.abc import Mapping

import httpx

TIMESTAMP_HEADER = "X-OpenCrab-Timestamp"
SIGNATURE_HEADER = "X-OpenCrab-Signature"
MAX_AGE_SECS = 300


def signature(body: bytes, secret: str, timestamp: int) -> str:
    """`sha256=<hex>`: HMAC-SHA256 keyed with `secret` over `<timestamp>.<body>`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def signed(body: bytes, secret: str, now: float | None = None) -> tuple[bytes, dict[str, str]]:
    """The body and the headers that sign it."""
    timestamp = int(time.time() if now is None else now)
    return body, {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(body, secret, timestamp),
    }


def verify(body: bytes, headers: Mapping[str, str], secret: str, now: float | None = None) -> bool:
    """Whether a request was signed with `secret` no more than MAX_AGE_SECS ago (what a
    receiver checks; header names are matched without regard to case)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
    given = lowered.get(SIGNATURE_HEADER.lower(), "")
    if not stamp.isdigit():
        return False
    if abs((time.time() if now is None else now) - int(stamp)) > MAX_AGE_SECS:
        return False
    return hmac.compare_digest(given, signature(body, secret, int(stamp)))


async def post(url: str, body: bytes, secret: str, timeout: float) -> str | None:
    """POST the signed body; None when the receiver answered 2xx, else why not (the
    error's kind or the status: never the URL, which may hold a token). The whole
    exchange is bounded by `timeout` twice over, however slowly the receiver talks."""
    content, headers = signed(body, secret)
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            async with asyncio.timeout(timeout * 2):
                response = await client.post(url, content=content, headers=headers)
    except TimeoutError:
        return "webhook: timed out"
    except httpx.HTTPError as exc:
        return f"webhook: {type(exc).__name__}"
    if not 200 <= response.status_code < 300:
        return f"webhook: HTTP {response.status_code}"
    return None
