"""Which origin (scheme, host and port) an API key belongs to.

A key is sent only to the origin it was given for. A key stored through the dashboard
records the origin of the base URL in effect when it was entered (the row's
`api_key_origin`); a key from the config file or the environment belongs to the origin
of the config's base URL, or of the vendor's API when the config names none (the
provider class's `vendor_url`). opencrab.llm.live_settings applies the rule: a base URL
on another origin clears a stored key unless the key is given again with it, is refused
for a key from the config, and a key whose origin no longer matches is not sent.

Example:
    origin_of("https://OpenRouter.ai:443/api/v1")  # -> "https://openrouter.ai"
    origin_of("http://127.0.0.1:8080/v1")          # -> "http://127.0.0.1:8080"
"""

from __future__ import annotations

from urllib.parse import urlsplit

from opencrab.config.hosts import host_name, url_text
from opencrab.llm.registry import provider_classes

DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str | None) -> str | None:
    """`scheme://host[:port]` of an http(s) URL in one form (lower case, the default
    port left out); None for no URL or one that names no origin."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = host_name(parts.hostname or "") if scheme in DEFAULT_PORTS else None
    if host is None:
        return None
    shown = f"{scheme}://{url_text(host)}"
    return shown if port in (None, DEFAULT_PORTS[scheme]) else f"{shown}:{port}"


def vendor_url(provider: str) -> str | None:
    """The API a provider talks to when no base URL is configured (its class's
    `vendor_url`), or None when it has none."""
    cls = provider_classes().get(provider)
    url = getattr(cls, "vendor_url", None)
    return url if isinstance(url, str) else None


def origin_in_effect(provider: str, base_url: str | None) -> str | None:
    """The origin calls go to with `base_url` (None: the vendor's API)."""
    return origin_of(base_url or vendor_url(provider))
