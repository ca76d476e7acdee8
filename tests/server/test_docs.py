"""The API's documentation pages work offline: every asset they load is served by us."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from opencrab.auth import TokenStore
from opencrab.config import Settings
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.server.local import LocalClient

PAGES = ("/docs", "/redoc")


class _Links(HTMLParser):
    """Every URL a page loads or links: src and href attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def _assets(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.urls


@pytest.mark.parametrize("auth", [False, True])
@pytest.mark.parametrize("page", PAGES)
def test_docs_pages_load_only_assets_we_serve(
    settings: Settings, db: Database, page: str, auth: bool
) -> None:
    if auth:
        TokenStore(db).create("someone")  # the docs stay open when tokens are required
    with LocalClient(create_app(settings, db, auth=auth)) as client:
        response = client.get(page)
        assert response.status_code == 200
        html = response.text
        assert "http://" not in html
        assert "https://" not in html
        urls = _assets(html)
        assert len(urls) >= 2  # a script and a favicon at least
        kinds = set()
        for url in urls:
            parts = urlsplit(url)
            assert not parts.scheme, url
            assert not parts.netloc, url
            asset = client.get(urljoin(page, url))
            assert asset.status_code == 200, url
            assert asset.content, url
            kinds.add(asset.headers["content-type"].split(";")[0])
        assert "text/javascript" in kinds
        assert "/openapi.json" in html
        assert client.get("/openapi.json").status_code == 200


def test_the_vendored_assets_carry_their_licences(settings: Settings, db: Database) -> None:
    with LocalClient(create_app(settings, db)) as client:
        scripts = [u for page in PAGES for u in _assets(client.get(page).text) if u.endswith(".js")]
        assert len(scripts) == 2
        for script in scripts:
            folder = script.rsplit("/", 1)[0]
            licence = client.get(f"{folder}/LICENSE")
            assert licence.status_code == 200
            assert "License" in licence.text or "LICENSE" in licence.text
