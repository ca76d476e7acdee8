"""The skills pages in Chromium against a real `opencrab up`: switches, the editor, history."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

import httpx
from playwright.sync_api import Page, expect

from opencrab.core.skill_files import parse_skill_text
from opencrab.dashboard.pages.skills import NEW_SKILL
from opencrab.prompts import LANGUAGES
from tests.dashboard.conftest import CHAT, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion

SKILL = """---
name: 議事録の要約
description: 長い会議の議事録を、決定事項が先に来る短い要約にする
situation_pattern: 会議が終わって議事録が長くなった時
actions:
  - send_speech
---

# 議事録の要約

1. **決定事項**を最初に箇条書きにする。
2. 未決事項と担当者を分けて書く。
3. 全体を三行以内にまとめる。
"""


def skills_url(agent: dict[str, Any], tail: str = "") -> str:
    return f"/agents/{quote(agent['name'])}/skills{tail}"


def type_skill(page: Page, text: str) -> None:
    """Replace the editor's text as a user would: select all, then type (paste) the text."""
    editor = page.get_by_label("Skill file")
    editor.focus()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)


def test_the_editor_starts_from_a_valid_skill_file_in_every_language() -> None:
    assert set(NEW_SKILL) == set(LANGUAGES)
    for text in NEW_SKILL.values():
        doc = parse_skill_text(text, "")
        assert (doc.actions, doc.version) == ((), 1)
        assert doc.situation_pattern


def test_a_standard_skill_switched_off_in_the_page_is_off_over_rest(
    page: Watched, api: httpx.Client
) -> None:
    agent = make_agent(api, "ハナコ", language="ja", description="議事録係のエージェント")
    p = page.page
    p.goto(skills_url(agent))
    expect(p.get_by_role("heading", name="Standard skills")).to_be_visible()
    switch = p.get_by_role("switch", name="autonomous")
    expect(switch).to_be_checked()
    switch.click()
    expect(p.locator("#toast")).to_have_text("autonomous is off")
    expect(switch).not_to_be_checked()
    skill = api.get(f"/api/agents/{agent['id']}/skills/autonomous").json()
    assert skill["isActive"] is False
    p.reload()
    expect(p.get_by_role("switch", name="autonomous")).not_to_be_checked()
    # and on again, from the keyboard
    p.get_by_role("switch", name="autonomous").focus()
    p.keyboard.press("Space")
    expect(p.locator("#toast")).to_have_text("autonomous is on")
    assert api.get(f"/api/agents/{agent['id']}/skills/autonomous").json()["isActive"] is True
    api.post(f"/api/agents/{agent['id']}/skills", json={"markdown": SKILL})
    p.reload()
    expect(p.get_by_role("link", name="議事録の要約")).to_be_visible()
    shoot(p, "skills-list")


def test_a_skill_written_in_the_editor_is_listed_and_readable_over_rest(
    page: Watched, api: httpx.Client
) -> None:
    agent = make_agent(api, "タロウ", language="ja")
    p = page.page
    p.goto(skills_url(agent))
    p.get_by_role("link", name="New skill").click()
    expect(p.get_by_role("heading", name="New skill")).to_be_visible()
    expect(p.get_by_label("Skill file")).to_have_value(re.compile(r"^---\nname: 新しいスキル"))
    type_skill(p, SKILL)
    p.get_by_label("Where it comes from").select_option("research")
    p.get_by_label("Note").fill("社内の議事録ガイド")
    # the editor shows the text highlighted, line by line, under the textarea
    lines = p.locator("[data-editor] .line")
    expect(lines).to_have_count(SKILL.count("\n") + 1)
    expect(lines.nth(1).locator(".hljs-attr")).to_have_text("name:")
    expect(lines.nth(10).locator(".hljs-strong")).to_have_text("**決定事項**")
    shoot(p, "skills-editor")
    p.get_by_role("button", name="Create skill").click()
    expect(p.get_by_role("heading", name="議事録の要約", exact=True)).to_be_visible()
    listed = {s["name"]: s for s in api.get(f"/api/agents/{agent['id']}/skills").json()}
    skill = listed["議事録の要約"]
    assert p.url.endswith(skills_url(agent, f"/{skill['id']}"))
    assert (skill["source"], skill["sourceContext"], skill["version"]) == (
        "research",
        "社内の議事録ガイド",
        1,
    )
    assert skill["situationPattern"] == "会議が終わって議事録が長くなった時"
    assert skill["actions"] == ["send_speech"]
    read = api.get(f"/api/agents/{agent['id']}/skills/{skill['id']}").json()
    assert read["guidance"].startswith("# 議事録の要約\n\n1. **決定事項**")
    p.goto(skills_url(agent))
    row = p.locator("tr", has=p.get_by_role("link", name="議事録の要約"))
    expect(row.get_by_text("research")).to_be_visible()


def test_a_frontmatter_error_is_shown_at_its_line(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "ジロウ", language="ja")
    page.allow(f"/api/agents/{agent['id']}/skills")  # the 400s this test provokes
    p = page.page
    p.goto(skills_url(agent, "/new"))
    broken = SKILL.replace("situation_pattern:", "colour: 赤\nsituation_pattern:")
    type_skill(p, broken)
    p.get_by_role("button", name="Create skill").click()
    alert = p.locator(".editor-error")
    expect(alert).to_have_text(re.compile(r"Line 4: unknown frontmatter key 'colour'"))
    marked = p.locator("[data-editor] .line.marked")
    expect(marked).to_have_count(1)
    expect(marked).to_have_attribute("data-n", "4")
    expect(marked).to_have_text("colour: 赤")
    # the caret went to that line: what is selected is the line itself
    editor = p.get_by_label("Skill file")
    expect(editor).to_be_focused()
    selected = editor.evaluate("el => el.value.slice(el.selectionStart, el.selectionEnd)")
    assert selected == "colour: 赤"
    shoot(p, "skills-editor-error")

    # an unclosed quote is reported where it opens; an action the agent may not call, at its item
    unclosed = SKILL.replace("description: 長い", 'description: "長い')
    type_skill(p, unclosed)
    expect(marked).to_have_count(0)  # the marked line changed: the mark is gone
    p.get_by_role("button", name="Create skill").click()
    expect(alert).to_contain_text("Line 3: invalid YAML in the frontmatter: a quoted value")
    expect(marked).to_have_attribute("data-n", "3")
    rockets = SKILL.replace("  - send_speech", "  - send_speech\n  - launch_rockets")
    type_skill(p, rockets)
    p.get_by_role("button", name="Create skill").click()
    expect(alert).to_contain_text("launch_rockets (no such action)")
    expect(marked).to_have_attribute("data-n", "7")
    p.get_by_role("button", name="Go to line 7").click()
    selected = editor.evaluate("el => el.value.slice(el.selectionStart, el.selectionEnd)")
    assert selected == "  - launch_rockets"
    assert [
        s for s in api.get(f"/api/agents/{agent['id']}/skills").json() if s["source"] != "standard"
    ] == []
    type_skill(p, SKILL)
    p.get_by_role("button", name="Create skill").click()
    expect(p.get_by_role("heading", name="議事録の要約", exact=True)).to_be_visible()


def test_edit_and_delete(page: Watched, api: httpx.Client) -> None:
    agent = make_agent(api, "サブロウ", language="ja")
    base = f"/api/agents/{agent['id']}/skills"
    skill = api.post(base, json={"markdown": SKILL, "source": "peer"}).json()
    p = page.page
    p.goto(skills_url(agent, f"/{skill['id']}"))
    p.get_by_role("link", name="Edit").click()
    editor = p.get_by_label("Skill file")
    expect(editor).to_have_value(skill["markdown"])
    type_skill(p, skill["markdown"].replace("三行以内", "二行以内"))
    p.get_by_role("button", name="Save").click()
    expect(p.get_by_text("version 2", exact=True)).to_be_visible()
    after = api.get(f"{base}/{skill['id']}").json()
    assert after["version"] == 2
    assert after["guidance"].endswith("3. 全体を二行以内にまとめる。")
    history = p.locator(".version")
    expect(history).to_have_count(2)
    expect(history.nth(0)).to_contain_text("Version 2")
    expect(history.nth(0)).to_contain_text("edited")
    expect(history.nth(1)).to_contain_text("created")
    history.nth(1).get_by_text("Text of version 1").click()
    expect(history.nth(1).locator("pre")).to_contain_text("三行以内")

    p.once("dialog", lambda dialog: dialog.dismiss())
    p.get_by_role("button", name="Delete").click()
    assert api.get(f"{base}/{skill['id']}").status_code == 200  # dismissed: kept
    p.once("dialog", lambda dialog: dialog.accept())
    p.get_by_role("button", name="Delete").click()
    expect(p).to_have_url(re.compile(re.escape(skills_url(agent)) + "$"))
    expect(p.get_by_text("No acquired skills yet")).to_be_visible()
    assert api.get(f"{base}/{skill['id']}").status_code == 404


def test_a_standard_skill_has_no_editor_and_a_missing_skill_is_a_page(
    page: Watched, api: httpx.Client
) -> None:
    agent = make_agent(api, "シゲル", language="ja")
    p = page.page
    page.allow(skills_url(agent))  # the 409 and 404 pages this test asks for
    p.goto(skills_url(agent, "/autonomous"))
    expect(p.get_by_role("heading", name="autonomous", exact=True)).to_be_visible()
    expect(p.get_by_role("link", name="Edit")).to_have_count(0)
    expect(p.get_by_role("button", name="Delete")).to_have_count(0)
    refused = p.goto(skills_url(agent, "/autonomous/edit"))
    assert refused is not None
    assert refused.status == 409
    expect(p.get_by_text("is a standard skill: it is edited in its file")).to_be_visible()
    missing = p.goto(skills_url(agent, "/no-such-skill"))
    assert missing is not None
    assert missing.status == 404
    expect(p.get_by_text("no skill 'no-such-skill' for this agent")).to_be_visible()


def tool_call(name: str, arguments: dict[str, Any]) -> Reply:
    """The model calling one action, as OpenAI's API sends it."""
    call = {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }
    return Reply(json=completion({"content": None, "tool_calls": [call]}, finish="tool_calls"))


def said(text: str) -> Reply:
    return Reply(json=completion({"content": text}))


def test_an_acquired_skill_shows_its_history_use_and_effectiveness(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    agent = make_agent(api, "シロウ", language="ja")
    name = "議事録の整理"
    # learned from experience first, then written down by the agent with its actions
    # (a refinement replaces the skill's text, actions included: core/skills.py acquire)
    fake_llm_server.reply(
        CHAT,
        tool_call(
            "learn_from_experience",
            {
                "experience": "議事録が散らばっていた",
                "outcome": "success",
                "lesson": "議事録は日付のフォルダーに置くと探しやすい",
                "skill_name": name,
            },
        ),
        said("学びました。"),
        tool_call(
            "create_my_skill",
            {
                "name": name,
                "description": "議事録を日付のフォルダーに整理する",
                "guidance": "notes/ の一覧を見てから、notes/日付/ に置く。",
                "actions": ["ws_list", "ws_read"],
            },
        ),
        said("スキルを書きました。"),
        tool_call("ws_list", {"path": "."}),
        said("一覧を見ました。"),
        tool_call("ws_read", {"path": "notes/ない.md"}),
        said("そのファイルはありませんでした。"),
    )
    session = api.post("/api/sessions", json={"agentId": agent["id"]}).json()["id"]
    for text in ("経験から学んで", "スキルにして", "一覧を見て", "ない.md を読んで"):
        turn = api.post(f"/api/sessions/{session}/messages", json={"content": text})
        assert turn.status_code == 201, turn.text
        assert turn.json()["turn"]["error"] is None
    skill = api.get(f"/api/agents/{agent['id']}/skills/{quote(name)}").json()
    assert (skill["version"], skill["usageCount"], skill["effectiveness"]) == (
        2,
        1,
        0.5,
    )  # a failed run is no use

    p = page.page
    p.goto(skills_url(agent))
    row = p.locator("tr", has=p.get_by_role("link", name=name))
    expect(row.get_by_text("reflection")).to_be_visible()
    expect(row.get_by_text("50%")).to_be_visible()
    row.get_by_role("link", name=name).click()
    expect(p.get_by_role("heading", name=name, exact=True)).to_be_visible()
    facts = p.locator(".skill-facts")
    expect(facts.locator(".uses")).to_have_text("1")
    expect(facts.locator(".effectiveness")).to_contain_text("50%")
    expect(facts.locator(".effectiveness")).to_contain_text("over the last 2 turns that used it")
    expect(
        facts.get_by_role("img", name="Scores of those turns, oldest first: 100%, 0%")
    ).to_be_visible()
    expect(facts).to_contain_text("created by the agent (create_my_skill)")
    last_used = facts.locator("dd", has=p.locator("time"))
    expect(last_used.first.locator("time")).to_have_attribute("data-local", "1")
    history = p.locator(".version")
    expect(history).to_have_count(2)
    expect(history.nth(0)).to_contain_text("refined")
    expect(history.nth(0)).to_contain_text("reflection")
    expect(history.nth(0)).to_contain_text("議事録を日付のフォルダーに整理する")
    expect(history.nth(1)).to_contain_text("created")
    expect(history.nth(1)).to_contain_text("experience")
    expect(history.nth(1)).to_contain_text("[success] 議事録が散らばっていた")
    shoot(p, "skills-detail")
