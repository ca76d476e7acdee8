"""The persona editor in Chromium: sliders by keyboard, every field saved and read back
over REST, the API's refusals next to their fields, and the preview's sample reply."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import httpx
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import CHAT, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion

PERSONA: dict[str, Any] = {
    "language": "ja",
    "prompt": "あなたは研究チームの一員です。丁寧な日本語で、短く答えてください。",
    "soul": {
        "personaName": "慎重な分析家",
        "socialStyle": {"assertiveness": -0.4, "responsiveness": -0.6},
        "personality": {
            "openness": 0.5,
            "conscientiousness": 0.9,
            "extraversion": 0.3,
            "agreeableness": 0.6,
            "neuroticism": 0.2,
        },
        "thinkingStyle": {
            "primary": "分析的",
            "secondary": "論理的",
            "description": "データと根拠を重視し、結論を急がない。",
        },
        "customTraits": {"values": ["誠実さ", "好奇心"], "口癖": "なるほど"},
    },
    "identity": {"name": "ハナコ", "role": "facilitator", "jobTitle": "主任研究員"},
}


PARTS = ("soul", "identity", "heartbeat")


def _shoot(page: Page, name: str) -> None:
    """Screenshots of the whole page in a window as tall as it, so sticky parts sit in place."""
    size = page.viewport_size
    assert size is not None
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": height})
    shoot(page, name)
    page.set_viewport_size(size)


def _open(page: Page, name: str) -> None:
    response = page.goto(f"/agents/{quote(name)}/persona")
    assert response is not None
    assert response.status == 200


def test_a_persona_edit_persists(page: Watched, api: httpx.Client) -> None:
    make_agent(api, "hanako", **PERSONA)
    p = page.page
    _open(p, "hanako")
    expect(p.get_by_label("Persona", exact=True)).to_have_value("慎重な分析家")
    expect(p.get_by_label("Description", exact=True)).to_have_value(
        "データと根拠を重視し、結論を急がない。"
    )
    expect(p.get_by_label("Values", exact=True)).to_have_value("誠実さ\n好奇心")
    expect(p.get_by_label("Custom traits", exact=True)).to_have_value("口癖: なるほど")
    expect(p.get_by_label("Role", exact=True)).to_have_value("facilitator")

    # a slider moved with the keyboard shows its value as it goes
    openness = p.get_by_role("slider", name="Openness")
    openness.focus()
    for _ in range(20):
        p.keyboard.press("ArrowRight")
    expect(openness).to_have_value("0.7")
    expect(p.locator("#slider-openness-value")).to_have_text("0.70")
    assertiveness = p.get_by_role("slider", name="Assertiveness")
    assertiveness.focus()
    p.keyboard.press("End")  # all the way to "tells": the automatic style becomes Driving
    expect(p.locator("#slider-assertiveness-value")).to_have_text("1.00")
    expect(p.get_by_label("Style name", exact=True)).to_contain_text("Automatic: Driving")

    p.get_by_label("Persona", exact=True).fill("穏やかな司会者")
    p.get_by_label("Role", exact=True).select_option("custom")
    p.get_by_label("Custom role name", exact=True).fill("司会補佐")
    p.get_by_label("Organisation", exact=True).fill("カニ研究所")
    p.get_by_label("Primary", exact=True).fill("直感的")
    p.get_by_label("Values", exact=True).fill("誠実さ\nチームワーク\n好奇心")
    p.get_by_label("Custom traits", exact=True).fill("口癖: なるほど\n得意: 議論の整理\nlevel: 3")
    p.get_by_label("Instructions", exact=True).fill(
        "議論を整理し、全員の意見を引き出してください。"
    )
    p.get_by_label("Heartbeat interval (seconds)", exact=True).fill("31")
    p.get_by_label("Heartbeat on", exact=True).uncheck()
    expect(p.get_by_text("Unsaved changes")).to_be_visible()
    _shoot(p, "persona-editing")

    p.get_by_role("button", name="Save").click()
    expect(p.get_by_role("status")).to_have_text("Persona saved")
    expect(p.get_by_text("Unsaved changes")).to_be_hidden()

    soul = api.get("/api/agents/hanako/soul").json()
    assert soul["personaName"] == "穏やかな司会者"
    assert soul["personality"]["openness"] == 0.7
    assert soul["personality"]["conscientiousness"] == 0.9  # untouched fields keep their value
    assert soul["socialStyle"] == {
        "assertiveness": 1.0,
        "responsiveness": -0.6,
        "styleName": "Driving",
    }
    assert soul["thinkingStyle"]["primary"] == "直感的"
    assert soul["customTraits"] == {
        "口癖": "なるほど",
        "得意": "議論の整理",
        "level": 3,
        "values": ["誠実さ", "チームワーク", "好奇心"],
    }
    who = api.get("/api/agents/hanako/identity").json()
    assert (who["name"], who["role"], who["jobTitle"], who["organization"]) == (
        "ハナコ",
        {"custom": "司会補佐"},
        "主任研究員",
        "カニ研究所",
    )
    agent = api.get("/api/agents/hanako").json()
    assert agent["prompt"] == "議論を整理し、全員の意見を引き出してください。"
    assert agent["language"] == "ja"
    heartbeat = api.get("/api/agents/hanako/heartbeat").json()
    assert (heartbeat["intervalSecs"], heartbeat["enabled"]) == (31, False)

    p.reload()  # the page shows what was stored
    expect(p.get_by_label("Custom role name", exact=True)).to_have_value("司会補佐")
    expect(p.get_by_label("Custom traits", exact=True)).to_have_value(
        "口癖: なるほど\n得意: 議論の整理\nlevel: 3"
    )
    expect(p.get_by_role("slider", name="Openness")).to_have_value("0.7")
    expect(p.get_by_label("Heartbeat on", exact=True)).not_to_be_checked()


def test_values_the_api_refuses_are_shown_next_to_their_fields(
    page: Watched, api: httpx.Client
) -> None:
    make_agent(api, "kenta", **PERSONA)
    page.allow("HTTP 400: PUT")  # the refusal this test provokes, and its console line
    page.allow("the server responded with a status of 400")
    p = page.page
    _open(p, "kenta")
    p.get_by_label("Persona", exact=True).fill("")
    p.get_by_label("Heartbeat interval (seconds)", exact=True).fill("0")
    p.get_by_role("button", name="Save").click()

    persona_error = p.locator('[data-error-for="soul.personaName"]')
    expect(persona_error).to_be_visible()
    expect(persona_error).to_contain_text("at least 1 character")
    heartbeat_error = p.locator('[data-error-for="heartbeat.intervalSecs"]')
    expect(heartbeat_error).to_contain_text("greater than or equal to 1")
    expect(p.get_by_label("Persona", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(p.get_by_label("Persona", exact=True)).to_be_focused()
    expect(p.locator(".save-bar .form-error")).to_contain_text(
        re.compile(r"^Not saved: .*soul\.personaName: String should have at least 1 character")
    )
    _shoot(p, "persona-invalid")
    assert api.get("/api/agents/kenta/soul").json()["personaName"] == "慎重な分析家"  # kept

    # a traits line the form cannot read is named before anything is sent
    p.get_by_label("Persona", exact=True).fill("慎重な分析家")
    p.get_by_label("Heartbeat interval (seconds)", exact=True).fill("29")
    p.get_by_label("Custom traits", exact=True).fill("口癖: なるほど\nただの文")
    p.get_by_role("button", name="Save").click()
    expect(p.locator('[data-error-for="soul.customTraits"]')).to_have_text(
        'line 2 is not "name: value"'
    )
    expect(p.locator('[data-error-for="soul.personaName"]')).to_be_hidden()


def test_the_preview_shows_the_models_reply_to_the_unsaved_persona(
    page: Watched, api: httpx.Client, llm: FakeLlmServer
) -> None:
    make_agent(api, "yui", **PERSONA)
    llm.reset()
    said = "はい、ユイと申します。まずは目的と制約を整理してから、小さく試してみます。"
    llm.reply(
        CHAT,
        Reply(
            json=completion(
                {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "send_speech",
                                "arguments": '{"content": "' + said + '"}',
                            },
                        }
                    ],
                },
                finish="tool_calls",
            )
        ),
    )
    p = page.page
    _open(p, "yui")
    expect(p.get_by_label("Sample message", exact=True)).to_have_value(
        "こんにちは！自己紹介をして、新しいプロジェクトにどう取りかかるか教えてください。"
    )
    p.get_by_label("Persona", exact=True).fill("陽気な冒険家")
    extraversion = p.get_by_role("slider", name="Extraversion")
    extraversion.focus()
    p.keyboard.press("End")
    p.get_by_label("Name", exact=True).fill("ユイ")
    p.get_by_label("Sample message", exact=True).fill("自己紹介してください。")

    p.get_by_role("button", name="Preview reply").click()

    expect(p.locator("#preview-reply")).to_have_text(said)
    expect(p.locator("#preview-asked")).to_have_text("自己紹介してください。")
    expect(p.locator("#preview-who")).to_have_text("ユイ")
    expect(p.locator("#preview-meta")).to_contain_text("gpt-5-mini-2025-08-07")
    expect(p.locator("#preview-reply")).to_have_attribute("lang", "ja")
    sent = llm.requests_to(CHAT)[-1].json
    system = sent["messages"][0]["content"]
    assert "ペルソナ: 陽気な冒険家" in system
    assert "  - 外向性: 1.0" in system
    assert "名前: ユイ" in system
    assert sent["messages"][-1]["content"] == "受信メッセージ: 自己紹介してください。"
    p.get_by_text("System prompt sent").click()
    expect(p.locator("#preview-system")).to_contain_text("ペルソナ: 陽気な冒険家")
    _shoot(p, "persona-preview")
    p.set_viewport_size({"width": 1024, "height": 900})  # the narrowest width it supports
    _shoot(p, "persona-preview-1024")
    assert p.evaluate("document.documentElement.scrollWidth") <= 1024
    # the preview saved nothing
    assert api.get("/api/agents/yui/soul").json()["personaName"] == "慎重な分析家"
    assert api.get("/api/sessions", params={"agentId": "yui", "kind": "all"}).json() == []


def test_a_failed_preview_shows_the_apis_message(
    page: Watched, api: httpx.Client, llm: FakeLlmServer
) -> None:
    make_agent(api, "sora", **PERSONA)
    llm.reset()
    llm.reply(
        CHAT,
        Reply(status=401, json={"error": {"message": "Incorrect API key provided", "type": "x"}}),
    )
    page.allow("HTTP 502: POST")
    page.allow("the server responded with a status of 502")
    p = page.page
    _open(p, "sora")
    p.get_by_role("button", name="Preview reply").click()
    error = p.locator("#preview-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("Incorrect API key provided")
    expect(p.locator("#preview-result")).to_be_hidden()

    # a bad value is named next to its field, and the model is not asked
    asked = len(llm.requests_to(CHAT))
    page.allow("HTTP 400: POST")
    page.allow("the server responded with a status of 400")
    p.get_by_label("Role", exact=True).select_option("custom")
    p.get_by_label("Custom role name", exact=True).fill("")
    p.get_by_role("button", name="Preview reply").click()
    expect(p.locator('[data-error-for="identity.role"]')).to_contain_text("custom role")
    expect(error).to_contain_text(re.compile("^Not previewed: body.identity.role"))
    assert len(llm.requests_to(CHAT)) == asked


def test_saving_an_untouched_page_changes_nothing(page: Watched, api: httpx.Client) -> None:
    tricky = {
        **PERSONA["soul"],
        "personality": {**PERSONA["soul"]["personality"], "openness": 0.55},
        "customTraits": {"count": "30", "a:b": "x", "list": ["将棋", 2], "note": "true"},
    }
    make_agent(api, "mio", **{**PERSONA, "soul": tricky})
    session_id = api.post("/api/sessions", json={"agentId": "mio"}).json()["id"]
    home = {"gateway": "session", "sessionId": session_id, "everySecs": 600}
    assert api.put("/api/agents/mio/heartbeat", json={"intervalSecs": 47, "home": home}).is_success
    who = {**PERSONA["identity"], "imageUrl": "https://example.org/mio.png", "metadata": {"k": 1}}
    assert api.put("/api/agents/mio/identity", json=who).is_success
    before = {part: api.get(f"/api/agents/mio/{part}").json() for part in PARTS}

    p = page.page
    _open(p, "mio")
    expect(p.get_by_label("Custom traits", exact=True)).to_have_value(
        'count: "30"\n"a:b": x\nlist: ["将棋", 2]\nnote: "true"'
    )
    p.get_by_role("button", name="Save").click()
    expect(p.get_by_role("status")).to_have_text("Persona saved")

    assert {part: api.get(f"/api/agents/mio/{part}").json() for part in PARTS} == before


def test_the_page_reads_without_javascript(api: httpx.Client) -> None:
    make_agent(api, "rin", **PERSONA)
    html = api.get("/agents/rin/persona")
    assert html.status_code == 200
    assert "text/html" in html.headers["content-type"]
    for shown in (
        'value="慎重な分析家"',
        "データと根拠を重視し、結論を急がない。",
        '<option value="facilitator" selected>Facilitator</option>',
        '<option value="ja" selected>',
        'lang="ja"',
    ):
        assert shown in html.text
    assert re.search(r'name="soul\.personality\.conscientiousness"[^>]*value="0\.9"', html.text)
    missing = api.get("/agents/nobody/persona")
    assert missing.status_code == 404
    assert "text/html" in missing.headers["content-type"]


def test_a_non_prime_heartbeat_interval_warns_as_the_cli_does(
    page: Watched, api: httpx.Client
) -> None:
    make_agent(api, "Tick", heartbeat={"enabled": False})
    p = page.page
    _open(p, "Tick")
    hint = p.locator("#heartbeat-hint")
    expect(hint).to_have_text("A prime number keeps agents from ticking in step.")
    warning = (  # the words `opencrab agent create` prints (core/heartbeat.py prime_warning)
        "heartbeat interval 30 s is not a prime; nearest primes: 29, 31 "
        "(prime intervals keep agents from ticking in step)."
    )
    p.get_by_label("Heartbeat interval (seconds)").fill("30")
    expect(hint.locator(".warn-text")).to_have_text(warning)
    with p.expect_response(lambda r: r.request.method == "PUT") as saved:
        p.get_by_role("button", name="Save", exact=True).click()
    assert saved.value.ok
    expect(hint.locator(".warn-text")).to_have_text(warning)  # still there once saved
    p.reload()
    expect(hint.locator(".warn-text")).to_have_text(warning)
    p.get_by_label("Heartbeat interval (seconds)").fill("31")
    expect(hint).to_have_text("A prime number keeps agents from ticking in step.")
