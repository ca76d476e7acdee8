"""The agent page's Tools tab in Chromium: a tool granted, switched on and held for a
person's approval from the page, as the REST API then reads it."""

from __future__ import annotations

import time
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.dashboard.conftest import QUIET, make_agent
from tests.fakes.browser import Watched, shoot


def tools_of(api: httpx.Client, agent: str) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in api.get(f"/api/agents/{agent}/tools").json()}


def test_a_tool_is_granted_switched_on_and_held_from_the_tools_tab(
    page: Watched, api: httpx.Client
) -> None:
    agent = make_agent(api, "道具係", language="ja", heartbeat=QUIET, prompt="道具を使います。")
    page.page.goto(f"/agents/{agent['name']}")
    page.page.get_by_role("link", name="Tools", exact=True).click()
    expect(page.page).to_have_url(f"{page.base_url}/agents/%E9%81%93%E5%85%B7%E4%BF%82/tools")
    row = page.page.locator("[data-tool=execute_command]")
    row.get_by_label("Grant execute_command").check()
    row.get_by_label("Switch on execute_command").check()
    row.get_by_label("Approval policy of execute_command").select_option("always")
    row.get_by_role("button", name="Save execute_command").click()
    deadline = time.monotonic() + 30
    while not (tool := tools_of(api, agent["id"])["execute_command"])["granted"]:
        assert time.monotonic() < deadline, tool
        time.sleep(0.2)
    assert (tool["enabled"], tool["approval"]) == (True, "always")
    assert tools_of(api, agent["id"])["read_file"]["granted"] is False

    page.page.reload()
    row = page.page.locator("[data-tool=execute_command]")
    expect(row.get_by_label("Grant execute_command")).to_be_checked()
    expect(row.get_by_label("Approval policy of execute_command")).to_have_value("always")
    expect(page.page.locator("[data-tool=read_file] input[name=enabled]")).to_have_count(0)
    shoot(page.page, "agent-tools")
