"""web_search: off until configured, then SearXNG's JSON API through the address guard.

The SearXNG instance is the fake site (tests/fakes/http_site.py) on 127.0.0.1: the
guard refuses it until `[tools] http_allow_networks` lets loopback through.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from opencrab.actions.base import ActionContext
from opencrab.config.loader import load_settings
from tests.actions.conftest import Call
from tests.fakes.http_site import http_site


@pytest.fixture
def site() -> Iterator[tuple[str, Any]]:
    with http_site() as served:
        yield served


async def test_web_search_is_off_until_a_backend_is_configured(
    call: Call, site: tuple[str, Any]
) -> None:
    _base, server = site
    result = await call("web_search", query="crabs")
    assert not result.success
    assert 'sets [tools] web_search = "searxng" and web_search_url' in (result.error or "")
    assert server.requests == []
    assert load_settings().tools.web_search == "off"  # the packaged default


async def test_web_search_asks_searxng_through_the_address_guard(
    call: Call, ctx: ActionContext, site: tuple[str, Any]
) -> None:
    base, server = site
    ctx.settings.tools.web_search = "searxng"
    ctx.settings.tools.web_search_url = f"{base}/searx/"
    refused = await call("web_search", query="crabs")
    assert not refused.success
    assert "a loopback address" in (refused.error or "")  # the SSRF guard, as http_request
    assert server.requests == []

    ctx.settings.tools.http_allow_networks = ["127.0.0.1/32"]
    found = await call("web_search", query="カニ & crabs", max_results=2)
    assert found.success, found.error
    assert found.data["results"] == [
        {
            "title": "カニ & crabs #1",
            "url": "https://example.org/1",
            "snippet": "About カニ & crabs & more <1>",
        },
        {
            "title": "カニ & crabs #2",
            "url": "https://example.org/2",
            "snippet": "About カニ & crabs & more <2>",
        },
    ]
    [(method, path, _headers)] = server.requests
    assert method == "GET"
    assert path.startswith("/searx/search?q=%E3%82%AB%E3%83%8B+%26+crabs&format=json")

    ctx.settings.tools.web_search_url = f"{base}/page"  # not a SearXNG instance
    wrong = await call("web_search", query="crabs")
    assert not wrong.success
    assert "HTTP 404" in (wrong.error or "")
