"""Driving Debian's Chromium through Playwright's Python package, for the dashboard tests.

`launch(playwright)` starts `/usr/bin/chromium` (never a downloaded browser).
`Watched` wraps a page and records every problem a user would notice or a reviewer
would refuse: a console error, an uncaught exception, a failed request, a response of
400 or more, anything loaded from another host. A test ends with `watched.check()`
(the `page` fixture does it), after `watched.allow(...)` for what it provoked itself.
`shoot(page, name)` writes a screenshot under the test run's artifacts
(`build/test-artifacts/screenshots/`, or `$TEST_ARTIFACTS/screenshots/`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, Request, Response

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(
    os.environ.get("TEST_ARTIFACTS") or Path(__file__).parents[2] / "build" / "test-artifacts"
)


def chromium_path() -> str:
    """Debian's chromium; `make test` installs it (apt-get) when it is missing."""
    found = shutil.which("chromium")
    if found is None:
        raise RuntimeError(
            "the browser tests need Debian's chromium: run `make test` as root (it installs "
            "it) or `sudo apt-get install chromium fonts-noto-cjk`"
        )
    return found


def launch(playwright: Playwright) -> Browser:
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)


@dataclass
class Watched:
    """A page and the problems seen on it (see the module docstring)."""

    page: Page
    base_url: str
    problems: list[str] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        self.page.on("requestfailed", self._failed)
        self.page.on("response", self._response)
        self.page.on("request", self._request)

    def allow(self, text: str) -> None:
        """A problem whose text contains `text` is expected (a test provoking an error)."""
        self.allowed.append(text)

    def check(self) -> None:
        """Fail with every problem not allowed."""
        left = [p for p in self.problems if not any(a in p for a in self.allowed)]
        assert not left, "problems on the page:\n" + "\n".join(left)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "assert"):
            self.problems.append(f"console {message.type}: {message.text} ({message.location})")

    def _failed(self, request: Request) -> None:
        failure = request.failure or ""
        if "ERR_ABORTED" in failure:
            return  # the browser cancelled it (a navigation, a download, a closed page)
        self.problems.append(f"request failed: {request.method} {request.url}: {failure}")

    def _response(self, response: Response) -> None:
        if response.status >= 400:
            request = response.request
            self.problems.append(f"HTTP {response.status}: {request.method} {response.url}")

    def _request(self, request: Request) -> None:
        parts = urlsplit(request.url)
        if parts.scheme in ("data", "blob", "about"):
            return
        if parts.netloc != urlsplit(self.base_url).netloc:
            self.problems.append(f"loaded from another host: {request.url}")


def shoot(page: Page, name: str) -> list[Path]:
    """Screenshots of the page as it is, in light and in dark theme."""
    folder = ARTIFACTS / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        path = folder / f"{name}-{scheme}.png"
        page.screenshot(path=str(path), full_page=True)
        written.append(path)
    page.emulate_media(color_scheme="light")
    return written
