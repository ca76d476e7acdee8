"""The dashboard's shell: served at /, its error pages, theme, login, and its switches."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from opencrab.auth import TokenStore
from opencrab.config import load_settings
from opencrab.store import Database
from tests.dashboard.conftest import make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.ports import free_port
from tests.fakes.served import ServedOpenCrab


def test_home_is_a_page_not_json(page: Watched, api: httpx.Client) -> None:
    make_agent(api, "ハナコ", description="日本語の説明文がここに入ります。")
    response = page.page.goto("/")
    assert response is not None
    assert response.status == 200
    assert "text/html" in response.headers["content-type"]
    expect(page.page.get_by_role("heading", name="Agents", exact=True)).to_be_visible()
    expect(page.page.get_by_role("link", name="ハナコ", exact=True)).to_be_visible()
    shoot(page.page, "shell-home")


def test_a_missing_page_is_a_page_with_a_way_back(page: Watched, api: httpx.Client) -> None:
    page.allow("/no/such/page")  # the 404 it asks for
    response = page.page.goto("/no/such/page")
    assert response is not None
    assert response.status == 404
    expect(page.page.get_by_text("There is no page at /no/such/page.")).to_be_visible()
    page.page.get_by_role("link", name="Back to the agents").click()
    expect(page.page).to_have_url(re.compile(r"/$"))
    shoot(page.page, "shell-404")
    missing = api.get("/api/no/such/route")  # the API keeps answering JSON
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"


def test_pages_carry_a_content_security_policy_and_refuse_frames(api: httpx.Client) -> None:
    response = api.get("/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    assert not re.search(r"""(src|href)=["']https?://""", response.text)  # nothing from outside


def test_the_theme_button_switches_and_remembers(page: Watched) -> None:
    page.page.goto("/")
    html = page.page.locator("html")
    button = page.page.get_by_role("button", name="Switch between light and dark theme")
    button.focus()
    page.page.keyboard.press("Enter")
    expect(html).to_have_attribute("data-theme", "dark")
    page.page.reload()
    expect(html).to_have_attribute("data-theme", "dark")
    background = page.page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background != "rgb(246, 247, 249)"  # the light background


@pytest.fixture
def guarded(tmp_path: Path, _llm_server_session: FakeLlmServer) -> tuple[ServedOpenCrab, str]:
    data = tmp_path / "guarded"
    settings = load_settings(env={"OPENCRAB_HOME": str(data)})
    db = Database(settings.database_url)
    db.upgrade()
    _, secret = TokenStore(db).create("browser")
    db.close()
    server = ServedOpenCrab(
        data, llm=_llm_server_session, env={"OPENCRAB_GATEWAY__REST__REQUIRE_TOKEN": "true"}
    )
    return server, secret


def test_with_tokens_required_a_browser_signs_in_and_out(
    browser: Browser, guarded: tuple[ServedOpenCrab, str]
) -> None:
    server, secret = guarded
    with server:
        context = browser.new_context(base_url=server.url)
        watched = Watched(context.new_page(), server.url)
        watched.allow("/login")  # the wrong token: 401
        page = watched.page
        page.goto("/")
        expect(page).to_have_url(re.compile(r"/login\?next="))
        page.get_by_label("Token").fill("ocb_wrong")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("not valid")
        page.get_by_label("Token").fill(secret)
        page.get_by_role("button", name="Sign in").click()
        expect(page).to_have_url(server.url + "/")
        page.wait_for_load_state()  # the URL changes before the page's scripts have run
        cookie = next(c for c in context.cookies() if c["name"] == "opencrab_session")
        assert cookie["httpOnly"] is True
        assert cookie["sameSite"] == "Strict"
        assert cookie["value"] != secret  # a sign-in's id, not the token
        assert secret not in cookie["value"]
        # the page's own API calls carry the cookie
        listed = page.evaluate("OpenCrab.api('GET', '/api/agents')")
        assert listed == []
        shoot(page, "shell-signed-in")
        page.get_by_role("button", name="Sign out").click()
        expect(page).to_have_url(re.compile(r"/login"))
        assert not [c for c in context.cookies() if c["name"] == "opencrab_session"]
        api = httpx.get(server.url + "/api/agents", timeout=60)
        assert api.status_code == 401  # the API still answers JSON without a token
        old = {"Cookie": f"opencrab_session={cookie['value']}"}  # a copy kept of the cookie
        assert httpx.get(server.url + "/api/agents", headers=old, timeout=60).status_code == 401
        home = httpx.get(server.url + "/", headers=old, timeout=60)
        assert home.status_code == 303  # to the sign-in form
        shoot(page, "shell-login")
        watched.check()
        context.close()
        cross = httpx.post(
            server.url + "/login",
            data={"token": secret},
            headers={"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
            timeout=60,
        )
        assert cross.status_code == 403


def test_dashboard_off_serves_the_api_alone(tmp_path: Path, fake_llm_server: FakeLlmServer) -> None:
    env = {"OPENCRAB_DASHBOARD__ENABLED": "false"}
    with ServedOpenCrab(tmp_path / "d", llm=fake_llm_server, env=env) as server:
        home = httpx.get(server.url + "/", headers=server.headers, timeout=60)
        assert home.status_code == 404
        assert home.json()["error"] == "not_found"
        assert (
            httpx.get(server.url + "/api/agents", headers=server.headers, timeout=60).json() == []
        )
        assert "Dashboard:" not in server.output()


def test_a_second_dashboard_port_serves_the_same_pages(
    tmp_path: Path, fake_llm_server: FakeLlmServer
) -> None:
    extra = free_port()
    env = {"OPENCRAB_DASHBOARD__PORT": str(extra)}
    with ServedOpenCrab(tmp_path / "d", llm=fake_llm_server, env=env) as server:
        first = httpx.get(server.url + "/", headers=server.headers, timeout=60)
        second = httpx.get(f"http://127.0.0.1:{extra}/", headers=server.headers, timeout=60)
        assert first.status_code == second.status_code == 200
        assert "<title>Agents · OpenCrab</title>" in second.text
        output = server.output()
        assert f"Dashboard: http://127.0.0.1:{server.port}/" in output
        assert f"Dashboard also on http://127.0.0.1:{extra}/" in output


def test_a_taken_dashboard_port_is_a_note_not_a_failure(
    tmp_path: Path, fake_llm_server: FakeLlmServer
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"OPENCRAB_DASHBOARD__PORT": str(port)}
        with ServedOpenCrab(tmp_path / "d", llm=fake_llm_server, env=env) as server:
            assert (
                httpx.get(server.url + "/", headers=server.headers, timeout=60).status_code == 200
            )
            assert f"not also on port {port}" in server.output()
