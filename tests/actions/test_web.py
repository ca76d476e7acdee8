"""http_request and fetch_webpage: off by default, only public addresses, capped.

The only server is tests/fakes/http_site.py on 127.0.0.1, allow-listed explicitly where
a test needs to reach it; refusals happen before any connection. Names resolve through
socket.getaddrinfo, replaced here (the system boundary) to play DNS.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from opencrab.actions.base import ActionContext
from opencrab.actions.net_guard import refusal
from tests.actions.conftest import Call
from tests.fakes.http_site import http_site


@pytest.fixture
def site() -> Iterator[tuple[str, Any]]:
    with http_site() as served:
        yield served


@pytest.fixture
def allow_loopback(ctx: ActionContext, enable: Callable[..., None]) -> None:
    enable(http_request=True, fetch_webpage=True)
    ctx.settings.tools.http_allow_networks = ["127.0.0.1/32"]


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names the tests resolve: name -> addresses; `lookups` counts each name asked."""
    table: dict[str, list[str]] = {}
    lookups: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in table:
            lookups.append(host)
            return [
                (
                    socket.AF_INET6 if ":" in ip else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (ip, int(port)),
                )
                for ip in table[host]
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    table["__lookups__"] = lookups
    return table


async def test_both_are_off_until_switched_on(call: Call, site: tuple[str, Any]) -> None:
    base, server = site
    for name in ("http_request", "fetch_webpage"):
        result = await call(name, url=f"{base}/page")
        assert not result.success
        assert f"{name} is switched off for this agent" in (result.error or "")
    assert server.requests == []


async def test_http_request_reaches_an_allow_listed_server(
    call: Call, site: tuple[str, Any], allow_loopback: None
) -> None:
    base, _server = site
    result = await call(
        "http_request", url=f"{base}/echo", method="post", body="crab", headers={"X-A": "1"}
    )
    assert result.success, result.error
    assert result.data["status"] == 200
    assert result.data["headers"]["content-type"] == "application/json"
    assert '"method": "POST"' in result.data["body"]
    assert '"body": "crab"' in result.data["body"]
    image = await call("http_request", url=f"{base}/image")
    assert image.data["body"] is None
    assert image.data["body_omitted"] == "binary content (image/png)"


async def test_fetch_webpage_returns_readable_text(
    call: Call, site: tuple[str, Any], allow_loopback: None
) -> None:
    base, _server = site
    result = await call("fetch_webpage", url=f"{base}/page")
    assert result.success, result.error
    assert result.data["title"] == "Crab facts"
    text = result.data["text"]
    assert text.startswith("# Crabs\n\nCrabs walk sideways. See more (/more).")
    assert "- ten legs\n- hard shell" in text
    assert "  indented\n    code" in text
    assert "tracking" not in text
    assert "color" not in text
    image = await call("fetch_webpage", url=f"{base}/image")
    assert "is image/png, not a web page" in (image.error or "")
    missing = await call("fetch_webpage", url=f"{base}/nothing")
    assert "answered HTTP 404" in (missing.error or "")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:9/", "a loopback address"),
        ("http://[::1]:9/", "a loopback address"),
        ("http://10.1.2.3/", "a private address"),
        ("http://192.168.0.1/", "a private address"),
        ("http://172.16.5.4/", "a private address"),
        ("http://[fd12::1]/", "a private address"),
        ("http://169.254.10.10/", "a link-local address"),
        ("http://[fe80::1]/", "a link-local address"),
        ("http://100.64.0.1/", "a CGNAT (shared) address"),
        ("http://224.0.0.1/", "a multicast address"),
        ("http://[ff02::1]/", "a multicast address"),
        ("http://0.0.0.0/", "the unspecified address"),
        ("http://[::]/", "the unspecified address"),
        ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
        ("http://[fd00:ec2::254]/", "a cloud metadata address"),
        ("http://[::ffff:127.0.0.1]/", "a loopback address (inside the IPv6 address"),
        ("http://[64:ff9b::a9fe:a9fe]/", "a cloud metadata address (inside"),
        ("http://2130706433/", "a loopback address"),  # 127.0.0.1 as one number
    ],
)
async def test_each_address_class_is_refused(
    call: Call, enable: Callable[..., None], url: str, why: str
) -> None:
    enable(http_request=True, fetch_webpage=True)
    for name in ("http_request", "fetch_webpage"):
        result = await call(name, url=url)
        assert not result.success
        assert "refused to connect" in (result.error or "")
        assert why in (result.error or "")


def test_public_addresses_pass() -> None:
    for ip in ("93.184.215.14", "2606:4700::6810:84e5", "1.1.1.1"):
        assert refusal(ipaddress.ip_address(ip)) is None


async def test_a_name_resolving_to_loopback_is_refused(
    call: Call, enable: Callable[..., None], dns: dict[str, Any], site: tuple[str, Any]
) -> None:
    base, server = site
    port = base.rsplit(":", 1)[1]
    enable(http_request=True)
    dns["sneaky.example"] = ["127.0.0.1"]
    dns["mixed.example"] = ["93.184.215.14", "10.0.0.7"]  # one bad answer is enough
    result = await call("http_request", url=f"http://sneaky.example:{port}/echo")
    assert "refused to connect to sneaky.example (127.0.0.1): a loopback address" in (
        result.error or ""
    )
    mixed = await call("http_request", url="http://mixed.example/")
    assert "mixed.example (10.0.0.7): a private address" in (mixed.error or "")
    assert server.requests == []


async def test_it_connects_to_the_address_it_checked(
    call: Call, site: tuple[str, Any], allow_loopback: None, dns: dict[str, Any]
) -> None:
    """The name is resolved once per connection and the checked address is the one used."""
    base, server = site
    port = base.rsplit(":", 1)[1]
    dns["crabs.test"] = ["127.0.0.1"]
    result = await call("http_request", url=f"http://crabs.test:{port}/echo")
    assert result.success, result.error
    assert f'"host": "crabs.test:{port}"' in result.data["body"]
    assert dns["__lookups__"] == ["crabs.test"]
    assert [path for _m, path, _h in server.requests] == ["/echo"]


async def test_a_redirect_to_a_private_address_is_refused(
    call: Call, site: tuple[str, Any], allow_loopback: None, dns: dict[str, Any]
) -> None:
    base, server = site
    dns["inside.example"] = ["192.168.1.1"]
    for target in (
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://inside.example/admin",
    ):
        result = await call("http_request", url=f"{base}/to?url={target}")
        assert not result.success
        assert "refused to connect" in (result.error or "")
    page = await call("fetch_webpage", url=f"{base}/to?url=http://10.0.0.1/")
    assert "a private address" in (page.error or "")
    assert [path for _m, path, _h in server.requests if path.startswith("/to")] == [
        "/to?url=http://169.254.169.254/latest/meta-data/",
        "/to?url=http://[::1]/",
        "/to?url=http://inside.example/admin",
        "/to?url=http://10.0.0.1/",
    ]


async def test_redirects_are_followed_up_to_the_limit(
    call: Call, ctx: ActionContext, site: tuple[str, Any], allow_loopback: None
) -> None:
    base, _server = site
    followed = await call("fetch_webpage", url=f"{base}/to?url=/page")
    assert followed.data["title"] == "Crab facts"
    assert followed.data["redirects"] == [f"{base}/page"]
    ctx.settings.tools.http_max_redirects = 3
    looping = await call("http_request", url=f"{base}/loop")
    assert "more than 3 redirects" in (looping.error or "")


async def test_credentials_are_not_sent_to_another_origin(
    call: Call, site: tuple[str, Any], allow_loopback: None, dns: dict[str, Any]
) -> None:
    base, _server = site
    port = base.rsplit(":", 1)[1]
    dns["other.test"] = ["127.0.0.1"]
    same = await call("http_request", url=f"{base}/to?url=/echo", headers={"Authorization": "k"})
    assert '"authorization": "k"' in same.data["body"]
    other = await call(
        "http_request",
        url=f"{base}/to?url=http://other.test:{port}/echo",
        headers={"Authorization": "k"},
    )
    assert '"authorization": null' in other.data["body"]


async def test_an_oversize_body_is_cut_at_the_cap(
    call: Call, ctx: ActionContext, site: tuple[str, Any], allow_loopback: None
) -> None:
    base, _server = site
    ctx.settings.tools.http_max_bytes = 4096
    result = await call("http_request", url=f"{base}/big?n=500000")
    assert result.success, result.error
    assert result.data["bytes"] == 4096
    assert result.data["body"] == "x" * 4096
    assert result.data["truncated"] is True
    small = await call("http_request", url=f"{base}/big?n=10")
    assert small.data["truncated"] is False


async def test_bad_urls_and_methods_get_clear_errors(
    call: Call, enable: Callable[..., None]
) -> None:
    enable(http_request=True, fetch_webpage=True)
    cases = {
        "ftp://example.org/x": "only http and https URLs are fetched",
        "http:///nohost": "has no host",
        "file:///etc/passwd": "only http and https",
    }
    for url, words in cases.items():
        result = await call("fetch_webpage", url=url)
        assert words in (result.error or ""), (url, result.error)
    method = await call("http_request", url="http://example.org/", method="BREW")
    assert "method 'BREW' is not one of GET" in (method.error or "")
    missing = await call("http_request")
    assert "'url' is a required property" in (missing.error or "")
