"""Host names as the server compares them: lower case, no trailing dot, IPs in one form.

`host_name("LocalHost.")` is `localhost`, `host_name("[0:0::1]")` is `::1`; text that is no
host name (a scheme, a path, a port, spaces) gives None. `split_host` takes a Host
header or a URL's authority apart into (name, port).
"""

from __future__ import annotations

import ipaddress
import re

_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


def host_name(text: str) -> str | None:
    """The normal form of a host name or IP address (IPv6 with or without brackets)."""
    name = text.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
        try:
            return str(ipaddress.IPv6Address(name))
        except ValueError:
            return None
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    name = name.removesuffix(".")
    if len(name) > 253 or not _NAME.fullmatch(name):
        return None
    return name


def split_host(authority: str) -> tuple[str | None, int | None]:
    """(normal name, port) of `name`, `name:port`, `[v6]` or `[v6]:port`; None for nonsense."""
    text = authority.strip()
    port: int | None = None
    if text.startswith("["):
        close = text.find("]")
        rest = text[close + 1 :] if close > 0 else "?"
        text = text[: close + 1] if close > 0 else text
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                return None, None
            port = int(rest[1:])
    elif text.count(":") == 1:
        text, _, digits = text.partition(":")
        if not digits.isdigit():
            return None, None
        port = int(digits)
    if port is not None and not 0 < port < 65536:
        return None, None
    return host_name(text), port


def url_text(name: str) -> str:
    """A normal host name as a URL writes it (IPv6 in brackets)."""
    return f"[{name}]" if ":" in name else name
