"""The MCP page (/settings/mcp) in Chromium, against a served OpenCrab and the demo MCP
server (tests/fakes/mcp_demo_server.py, the official SDK's MCPServer) over streamable
HTTP in its own process.

A server added in the page starts without a restart and shows its tools with their
schemas and hints; its bearer token reaches the server and never the page, the API or
the database; enabling it for an agent grants the agent its tools; the call form calls
a tool and shows its text and structured content, and a bad argument's error; a server
that cannot start shows its error; removing a server stops it.

The server's config file names a stdio server too (`[mcp.servers.files]`, the same demo
server run in bubblewrap): it is shown read-only, its env value hidden, and its name
cannot be taken on the page.

`OPENCRAB_DOCS_SCREENSHOTS=1` also writes README's docs/screenshots/dashboard-mcp.png,
with the note the call reads at `OPENCRAB_DOCS_NOTE` when set (a file path such as
/home/aki/notes/メモ.txt, written by the test, so the picture shows a path a user would have
rather than the test's temporary folder).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import QUIET, make_agent
from tests.fakes.browser import ARTIFACTS, Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.mcp_demo import DEMO, demo_over_http
from tests.fakes.served import ServedOpenCrab

TOKEN = "mcp-token-typed-in-the-page-K7w2"
# read at import: each test's data_dir fixture clears the OPENCRAB_* variables
DOCS_SHOTS = bool(os.environ.get("OPENCRAB_DOCS_SCREENSHOTS"))
DOCS_NOTE = Path(os.environ["OPENCRAB_DOCS_NOTE"]) if os.environ.get("OPENCRAB_DOCS_NOTE") else None
DOCS = Path(__file__).parents[2] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, _llm_server_session: FakeLlmServer
) -> Iterator[ServedOpenCrab]:
    """`opencrab up` with a config file naming the demo server over stdio as `files`."""
    folder = tmp_path_factory.mktemp("served-mcp")
    readable = sorted({sys.prefix, sys.base_prefix, str(DEMO.parent)})
    config = folder / "opencrab.toml"
    config.write_text(
        "[mcp.servers.files]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(DEMO))}]\n"
        f"read_paths = {json.dumps(readable)}\n"
        'env = { FILES_KEY = "config-secret-value-1234" }\n',
        encoding="utf-8",
    )
    with ServedOpenCrab(
        folder / "data", llm=_llm_server_session, args=("--config", str(config))
    ) as server:
        yield server


@pytest.fixture(scope="module")
def demo_url() -> Iterator[str]:
    with demo_over_http() as url:
        yield url


def test_a_server_added_in_the_page_is_granted_and_called(
    page: Watched, api: httpx.Client, served: ServedOpenCrab, demo_url: str, tmp_path: Path
) -> None:
    make_agent(api, "aki", heartbeat=QUIET)
    sakura = make_agent(api, "さくら", heartbeat=QUIET)
    p = page.page
    page.allow("HTTP 400")
    page.allow("status of 400")
    p.goto("/settings/mcp")
    expect(p.get_by_role("heading", name="MCP servers")).to_be_visible()
    expect(p.locator('nav a[aria-current="page"]')).to_have_text("MCP")
    files = p.locator('li[data-server="files"]')
    expect(files.locator("[data-state]")).to_have_text("running")
    expect(files).to_contain_text("config file")
    expect(files.get_by_role("button", name="Remove")).to_have_count(0)
    expect(files.locator("details.edit")).to_have_count(0)
    expect(files.locator('tr[data-tool="mcp__files__add"]')).to_be_visible()
    assert "config-secret-value-1234" not in p.content()

    form = p.locator("form[data-mcp-form]").last
    page.allow("409")
    form.get_by_label("Name", exact=True).fill("files")
    form.get_by_label("Command", exact=True).fill("/bin/true")
    form.get_by_role("button", name="Add and start").click()
    expect(form.locator(".form-error")).to_contain_text("set in the config file")
    form.get_by_label("Command", exact=True).fill("")
    form.get_by_label("Name", exact=True).fill("tracker")
    form.get_by_label("Streamable HTTP (a URL)").check()
    form.get_by_label("URL", exact=True).fill(demo_url)
    form.get_by_label(re.compile("^Bearer token")).fill(TOKEN)
    form.get_by_label(re.compile("^Headers")).fill("X-Team: カニ班")
    form.get_by_role("button", name="Add and start").click()
    expect(form.locator('[data-error-for="headers"]')).to_contain_text("ASCII")
    form.get_by_label(re.compile("^Headers")).fill("X-Team: crabs")
    form.get_by_label(re.compile("^Allow a private address")).check()
    form.get_by_role("button", name="Add and start").click()

    server = p.locator('[data-server="tracker"]')
    expect(server.locator("[data-state]")).to_have_text("running", timeout=60_000)
    expect(server.locator(".target")).to_contain_text("token ••••K7w2")
    add = server.locator('tr[data-tool="mcp__tracker__add"]')
    expect(add.locator(".hints")).to_contain_text("read-only")
    expect(server.locator('tr[data-tool="mcp__tracker__wipe"] .hints')).to_contain_text(
        "destructive"
    )
    add.locator(".schema summary").click()
    expect(add.locator(".schema pre")).to_contain_text('"required"')
    assert TOKEN not in p.content()

    # enabling the server for an agent grants it the server's tools
    server.get_by_label("さくら").check()
    expect(p.locator(".toast")).to_contain_text("Granted tracker's tools")
    tools = {t["name"]: t for t in api.get(f"/api/agents/{sakura['id']}/tools").json()}
    assert tools["mcp__tracker__add"]["granted"]
    assert tools["mcp__tracker__wipe"]["granted"]
    grants = api.get("/api/mcp/servers/tracker").json()["agents"]
    assert [(g["agentName"], g["enabled"]) for g in grants] == [("aki", False), ("さくら", True)]
    config_grants = api.get("/api/mcp/servers/files").json()["agents"]
    assert not any(g["granted"] for g in config_grants)

    # the call form: text and structured content, a bad argument named
    add.get_by_role("button", name="Call…").click()
    call = p.locator("#call")
    expect(call.locator("[data-call-name]")).to_have_text("mcp__tracker__add")
    assert json.loads(call.get_by_label(re.compile("^Arguments")).input_value()) == {"a": 0, "b": 0}
    call.get_by_label(re.compile("^Arguments")).fill('{"a": 2, "b": 40}')
    call.get_by_role("button", name="Call", exact=True).click()
    expect(call.locator("[data-call-outcome]")).to_have_text("success")
    expect(call.locator("[data-call-text]")).to_have_text("42")
    assert json.loads(call.locator("[data-call-structured]").text_content() or "") == {"result": 42}
    call.get_by_label(re.compile("^Arguments")).fill('{"a": "two", "b": 40}')
    call.get_by_role("button", name="Call", exact=True).click()
    expect(call.locator('[data-error-for="arguments"]')).to_contain_text("invalid arguments")
    call.get_by_label(re.compile("^Arguments")).fill("{not json")
    call.get_by_role("button", name="Call", exact=True).click()
    expect(call.locator('[data-error-for="arguments"]')).to_contain_text("not valid JSON")

    # the token reached the server (its echo comes back redacted), Japanese text too
    note = DOCS_NOTE if DOCS_SHOTS and DOCS_NOTE else tmp_path / "メモ.txt"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("カニの会議は火曜日です。", encoding="utf-8")
    server.locator('tr[data-tool="mcp__tracker__read_path"]').get_by_role(
        "button", name="Call…"
    ).click()
    call.get_by_label(re.compile("^Arguments")).fill(
        json.dumps({"path": str(note)}, ensure_ascii=False)
    )
    call.get_by_role("button", name="Call", exact=True).click()
    expect(call.locator("[data-call-text]")).to_have_text("カニの会議は火曜日です。")
    answer = api.post("/api/mcp/servers/tracker/tools/authorization/call", json={})
    assert answer.json()["text"] == "Bearer <redacted>"

    p.set_viewport_size({"width": 1024, "height": 800})  # it fits a 1024 px window
    overflow = p.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"the MCP page is {overflow} px wider than a 1024 px window"
    p.set_viewport_size({"width": 1280, "height": 900})
    written = shoot(p, "mcp")
    if DOCS_SHOTS:  # the server's panel, its schema folded, the call's result in it
        add.locator(".schema summary").click()
        p.evaluate("window.scrollTo(0, 0)")
        top = p.evaluate(
            "() => document.querySelector('li[data-server=\"tracker\"]')"
            ".getBoundingClientRect().top + window.scrollY"
        )
        box = server.bounding_box()
        assert box is not None
        p.screenshot(
            path=str(DOCS / "dashboard-mcp.png"),
            full_page=True,
            clip={"x": 0, "y": top - 12, "width": 1280, "height": box["height"] + 24},
        )
    assert all(path.stat().st_size > 0 for path in written)

    for path in ("/api/mcp/servers", "/api/mcp/servers/tracker"):
        assert TOKEN not in api.get(path).text
    raw = b"".join(f.read_bytes() for f in served.data_dir.glob("opencrab.db*"))
    assert TOKEN.encode() not in raw
    assert TOKEN not in served.output()

    # an edit keeps the stored token; removing the server stops it and its tools go
    server.locator("details.edit summary").click()
    edit = server.locator("form[data-mcp-form]")
    expect(edit.get_by_label(re.compile("^Bearer token"))).to_have_value("")  # never filled
    edit.screenshot(path=str(ARTIFACTS / "screenshots" / "mcp-edit-form.png"))
    edit.get_by_label(re.compile("^Call timeout")).fill("20")
    with p.expect_navigation():  # the page reloads once the server restarted
        edit.get_by_role("button", name="Save and restart tracker").click()
    server = p.locator('[data-server="tracker"]')
    expect(server.locator("[data-state]")).to_have_text("running", timeout=60_000)
    assert api.get("/api/mcp/servers/tracker").json()["callTimeoutSecs"] == 20
    again = api.post("/api/mcp/servers/tracker/tools/authorization/call", json={})
    assert again.json()["text"] == "Bearer <redacted>"
    p.once("dialog", lambda dialog: dialog.accept())
    server.get_by_role("button", name="Remove").click()
    expect(p.locator('[data-server="tracker"]')).to_have_count(0)
    assert "mcp__tracker__add" not in {t["name"] for t in api.get("/api/tools").json()}


def test_a_failing_server_shows_its_error_and_bad_input_is_named(
    page: Watched, api: httpx.Client
) -> None:
    p = page.page
    page.allow("HTTP 400")
    page.allow("status of 400")
    p.goto("/settings/mcp")
    form = p.locator("form[data-mcp-form]").last
    form.get_by_label("Name", exact=True).fill("bad__name")
    form.get_by_label("Command", exact=True).fill("/bin/true")
    # the browser's own pattern check is bypassed to see the API's answer
    form.evaluate("f => f.noValidate = true")
    form.get_by_role("button", name="Add and start").click()
    expect(form.locator('[data-error-for="name"]')).to_contain_text("no server name")

    form.get_by_label("Name", exact=True).fill("broken")
    form.get_by_label("Command", exact=True).fill("/nonexistent/mcp-server")
    form.get_by_label(re.compile("^Environment")).fill("NO EQUALS SIGN")
    form.get_by_role("button", name="Add and start").click()
    expect(form.locator('[data-error-for="env"]')).to_contain_text("NAME=value")
    form.get_by_label(re.compile("^Environment")).fill("LANG=ja_JP.UTF-8")
    form.get_by_role("button", name="Add and start").click()

    server = p.locator('[data-server="broken"]')
    # a command missing now may appear later: the server is tried again, its error shown
    expect(server.locator("[data-state]")).to_have_text("restarting", timeout=60_000)
    expect(server.locator(".last-error")).to_contain_text("/nonexistent/mcp-server")
    expect(server.locator(".last-error")).to_be_visible()
    expect(server).to_contain_text("No tools offered now: the server is restarting")
    shoot(p, "mcp-failed")
    assert api.get("/api/mcp/servers/broken").json()["lastError"]
    p.once("dialog", lambda dialog: dialog.accept())
    server.get_by_role("button", name="Remove").click()
    expect(p.locator('[data-server="broken"]')).to_have_count(0)
