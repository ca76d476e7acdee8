"""The HTTP client of http_request and fetch_webpage: guarded, capped, redirects counted.

Every connection goes through opencrab.actions.net_guard (addresses checked, connected
to as checked), redirects are followed by hand up to `[tools] http_max_redirects` (each
new host checked the same way; credentials dropped when the origin changes), the whole
exchange is bounded by `[tools] http_timeout_secs` and a body is read up to
`[tools] http_max_bytes` (the rest is not read; `truncated` says so). No proxy from the
environment is used: it would connect on the tools' behalf, unchecked.

Example:
    reply = await fetch(settings.tools, "GET", "https://example.org/")
    reply.status, reply.text()[:100], reply.truncated
"""

from __future__ import annotations

import ssl
from asyncio import timeout as asyncio_timeout
from dataclasses import dataclass, field

import httpcore
import httpx

from opencrab.actions.net_guard import GuardedBackend, allowed_networks
from opencrab.config.models import ToolsSection
from opencrab.errors import ValidationError

REDIRECTS = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "OpenCrab-agent (+https://github.com/opencrab)"
_CREDENTIALS = frozenset({"authorization", "cookie", "proxy-authorization"})


@dataclass
class Reply:
    """What came back: the last response of the redirect chain, its body capped."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    truncated: bool
    redirects: list[str] = field(default_factory=list)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    @property
    def charset(self) -> str:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                return value.strip().strip('"')
        return "utf-8"

    def text(self) -> str:
        """The body as text (its declared charset, else UTF-8; bad bytes replaced)."""
        try:
            return self.body.decode(self.charset, errors="replace")
        except LookupError:  # an unknown charset name
            return self.body.decode("utf-8", errors="replace")


def parse_url(url: str) -> httpx.URL:
    """`url` as an http(s) URL with a host, or ValidationError saying what is wrong."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ValidationError(f"url {url[:200]!r} is not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise ValidationError(f"url {url[:200]!r}: only http and https URLs are fetched")
    if not parsed.host:
        raise ValidationError(f"url {url[:200]!r} has no host")
    return parsed


async def fetch(
    limits: ToolsSection,
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> Reply:
    """One request with redirects, as the module docstring says."""
    target = parse_url(url)
    sent = {"user-agent": USER_AGENT, "accept-encoding": "identity"}
    sent.update({k.lower(): v for k, v in (headers or {}).items()})
    backend = GuardedBackend(allowed_networks(limits.http_allow_networks))
    timeouts = {"connect": limits.http_timeout_secs, "read": limits.http_timeout_secs}
    timeouts |= {"write": limits.http_timeout_secs, "pool": limits.http_timeout_secs}
    redirects: list[str] = []
    try:
        async with (
            asyncio_timeout(limits.http_timeout_secs),
            httpcore.AsyncConnectionPool(
                ssl_context=ssl.create_default_context(),
                network_backend=backend,
                max_connections=2,
                retries=0,
            ) as pool,
        ):
            while True:
                async with pool.stream(
                    method,
                    str(target),
                    headers=list(sent.items()),
                    content=body,
                    extensions={"timeout": timeouts},
                ) as response:
                    location = _header(response.headers, "location")
                    if response.status in REDIRECTS and location:
                        if len(redirects) >= limits.http_max_redirects:
                            raise ValidationError(
                                f"more than {limits.http_max_redirects} redirects (last to "
                                f"{location[:200]!r}); [tools] http_max_redirects is the limit"
                            )
                        following = parse_url(str(target.join(location)))
                        if _origin(following) != _origin(target):
                            sent = {k: v for k, v in sent.items() if k not in _CREDENTIALS}
                        if response.status == 303 or (
                            response.status in (301, 302) and method not in ("GET", "HEAD")
                        ):
                            method, body = "GET", None
                            sent.pop("content-type", None)
                        redirects.append(str(following))
                        target = following
                        continue
                    data, cut = await _read_capped(response, limits.http_max_bytes)
                    return Reply(
                        url=str(target),
                        status=response.status,
                        headers={
                            k.decode("latin-1").lower(): v.decode("latin-1")
                            for k, v in response.headers
                        },
                        body=data,
                        truncated=cut,
                        redirects=redirects,
                    )
    except TimeoutError:
        raise ValidationError(
            f"{url[:200]} did not answer within {limits.http_timeout_secs:g} s "
            "([tools] http_timeout_secs)"
        ) from None
    except httpcore.TimeoutException:
        raise ValidationError(
            f"{str(target)[:200]} timed out ([tools] http_timeout_secs)"
        ) from None
    except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
        raise ValidationError(
            f"request to {str(target)[:200]} failed: {exc or type(exc).__name__}"
        ) from None
    except httpcore.UnsupportedProtocol as exc:
        raise ValidationError(f"url {str(target)[:200]!r}: {exc}") from None


def _header(headers: list[tuple[bytes, bytes]], name: str) -> str | None:
    wanted = name.encode("ascii")
    for key, value in headers:
        if key.lower() == wanted:
            return value.decode("latin-1")
    return None


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


async def _read_capped(response: httpcore.Response, cap: int) -> tuple[bytes, bool]:
    kept = bytearray()
    async for chunk in response.aiter_stream():
        room = cap - len(kept)
        if len(chunk) > room:
            kept += chunk[:room]
            return bytes(kept), True
        kept += chunk
    return bytes(kept), False
