"""The memory page in Chromium against a real `opencrab up`: search, curated memory,
impressions and the export downloads.

Session logs are made the way a user makes them: chat turns posted over REST, the fake
OpenAI server answering (its replies, and an `update_impression` tool call).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import CHAT, QUIET, make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer, Reply
from tests.fakes.openai_bodies import completion
from tests.fakes.served import ServedOpenCrab


def said(text: str) -> Reply:
    return Reply(json=completion({"content": text}))


def impression(**arguments: Any) -> Reply:
    """The model records an impression (a tool call), as OpenAI sends one."""
    call = {
        "id": "call_imp",
        "type": "function",
        "function": {"name": "update_impression", "arguments": json.dumps(arguments)},
    }
    return Reply(json=completion({"content": None, "tool_calls": [call]}, finish="tool_calls"))


def chat(api: httpx.Client, llm: FakeLlmServer, agent: str, *turns: tuple[str, list[Reply]]) -> str:
    """A chat session with one turn per (message, the model's replies); returns its id."""
    session_id: str = api.post("/api/sessions", json={"agentId": agent}).json()["id"]
    for text, replies in turns:
        llm.reset()
        llm.reply(CHAT, *replies)
        posted = api.post(f"/api/sessions/{session_id}/messages", json={"content": text})
        assert posted.status_code == 201, posted.text
    return session_id


def memory_url(name: str, query: str = "") -> str:
    return f"/agents/{quote(name)}/memory" + (f"?q={quote(query)}" if query else "")


def search(page: Page, words: str) -> None:
    page.get_by_label("Words").fill(words)
    page.get_by_role("button", name="Search", exact=True).click()


def test_search_finds_japanese_chinese_and_english_and_links_to_the_session(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    make_agent(api, "ハナコ", language="ja", description="記憶を大切にする秘書です。")
    session_id = chat(
        api,
        fake_llm_server,
        "ハナコ",
        ("明日は東京へ行きます。天気はどうでしょうか", [said("我明天去北京。")]),
        ("The tomatoes need water on Fridays.", [said("I will remember the tomatoes.")]),
        ("<i>東京</i>タワーは<script>高い</script>", [said("そうですね。")]),
    )
    other = chat(api, fake_llm_server, "ハナコ", ("大阪の話です", [said("了解です。")]))
    p = page.page
    p.goto(memory_url("ハナコ"))
    expect(p.get_by_role("heading", name="Search the session logs")).to_be_visible()

    search(p, "東京")  # a two-character Japanese word: below what trigrams index
    expect(p).to_have_url(re.compile(re.escape(memory_url("ハナコ", "東京")) + "$"))
    hits = p.locator(".hit")
    expect(hits).to_have_count(2)
    expect(p.locator(".result-count")).to_contain_text("2 lines match")
    first = hits.filter(has_text="明日は")
    expect(first.locator("mark")).to_have_text("東京")
    link = first.get_by_role("link", name=re.compile("Session"))
    expect(link).to_have_attribute("href", f"/sessions/{session_id}")
    tagged = hits.filter(has_text="タワー")
    expect(tagged.locator(".hit-text")).to_have_text("<i>東京</i>タワーは<script>高い</script>")
    assert tagged.locator("i, script").count() == 0  # the logged text stays text
    expect(tagged.locator("mark")).to_have_text("東京")
    assert other not in p.locator("#memory-results").inner_html()
    shoot(p, "memory-search")

    search(p, "北京")  # Chinese, two characters
    expect(hits).to_have_count(1)
    expect(hits.locator("mark")).to_have_text("北京")
    expect(hits.locator(".meta")).to_contain_text("ハナコ")  # the agent's reply, by its name
    expect(hits.get_by_role("link")).to_have_attribute("href", f"/sessions/{session_id}")

    search(p, "TOMATOES")  # English, any case
    expect(hits).to_have_count(2)
    expect(hits.locator("mark").first).to_have_text("tomatoes")

    p.get_by_label("Kind").select_option("Speech")
    search(p, "雪")
    expect(p.locator(".result-count")).to_contain_text("No lines match")
    expect(p).to_have_url(re.compile(r"logType=speech"))


def test_search_works_without_javascript(
    browser: Browser, served: ServedOpenCrab, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    make_agent(api, "ジロウ", language="ja")
    session_id = chat(api, fake_llm_server, "ジロウ", ("東京は雨です", [said("傘を持って。")]))
    context = browser.new_context(base_url=served.url, java_script_enabled=False)
    served.sign_in(context)
    watched = Watched(context.new_page(), served.url)
    p = watched.page
    p.goto(memory_url("ジロウ"))
    p.get_by_label("Words").fill("東京")
    p.get_by_label("Words").press("Enter")  # the plain GET form
    expect(p).to_have_url(re.compile(re.escape(memory_url("ジロウ", "東京"))))
    expect(p.locator(".hit mark")).to_have_text("東京")
    expect(p.locator(".hit a")).to_have_attribute("href", f"/sessions/{session_id}")
    watched.check()
    context.close()


def test_curated_memory_is_added_edited_and_deleted_in_the_page(
    page: Watched, api: httpx.Client
) -> None:
    agent = make_agent(api, "サクラ", language="ja")
    curated = f"/api/agents/{agent['id']}/memory/curated"
    p = page.page
    p.goto(memory_url("サクラ"))
    expect(p.get_by_text("No curated memories yet.")).to_be_visible()

    form = p.locator("form.add-memory")
    form.get_by_label("Category").fill("人物")
    form.get_by_label("Memory").fill("ユイは紅茶が好き")
    form.get_by_role("button", name="Add memory").click()
    item = p.locator(".memory").filter(has_text="ユイは紅茶が好き")
    expect(item).to_be_visible()
    expect(p.locator(".category h3")).to_contain_text("人物")
    expect(form.get_by_label("Memory")).to_have_value("")  # a fresh form after the swap
    stored = api.get(curated).json()
    assert [(m["category"], m["content"]) for m in stored] == [("人物", "ユイは紅茶が好き")]

    item.locator("summary", has_text="Edit").click()
    item.get_by_label("Memory").fill("   ")
    page.allow(f"{curated}/{stored[0]['id']}")  # the refused edit: 400
    item.get_by_role("button", name="Save").click()
    expect(item.get_by_role("alert").filter(has_text="empty")).to_be_visible()
    p.evaluate("window.scrollTo(0, 0)")
    shoot(p, "memory-edit-refused")
    assert api.get(curated).json()[0]["content"] == "ユイは紅茶が好き"  # nothing lost

    item.get_by_label("Category").fill("core")
    item.get_by_label("Memory").fill("ユイは緑茶が好き\n朝は早い")
    item.get_by_role("button", name="Save").click()
    edited = p.locator(".memory").filter(has_text="ユイは緑茶が好き")
    expect(edited).to_be_visible()
    (memory,) = api.get(curated).json()
    assert (memory["id"], memory["category"], memory["content"]) == (
        stored[0]["id"],
        "core",
        "ユイは緑茶が好き\n朝は早い",
    )
    form.get_by_label("Category").fill("予定")
    form.get_by_label("Memory").fill("金曜日に京都で会議")
    form.get_by_role("button", name="Add memory").click()
    expect(p.locator(".memory")).to_have_count(2)
    p.evaluate("window.scrollTo(0, 0)")
    shoot(p, "memory-curated")

    p.once("dialog", lambda dialog: dialog.accept())
    edited.get_by_role("button", name=re.compile("^Delete")).click()
    expect(edited).to_have_count(0)
    assert [m["content"] for m in api.get(curated).json()] == ["金曜日に京都で会議"]


def test_impressions_are_listed_with_their_session(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    make_agent(api, "ケンタ", language="ja")
    session_id = chat(
        api,
        fake_llm_server,
        "ケンタ",
        (
            "はじめまして、ユイです。",
            [
                impression(
                    target_id="user",
                    target_name="ユイ",
                    personality="几帳面で慎重、でも冗談が好き",
                    communication_style="丁寧語で短く話す",
                    agreement="賛成",
                ),
                said("よろしくお願いします。"),
            ],
        ),
    )
    p = page.page
    p.goto(memory_url("ケンタ"))
    shown = p.locator(".impression")
    expect(shown).to_have_count(1)
    expect(shown.get_by_role("heading", name=re.compile("ユイ"))).to_be_visible()
    expect(shown).to_contain_text("几帳面で慎重、でも冗談が好き")
    expect(shown).to_contain_text("丁寧語で短く話す")
    expect(shown.locator(".badge")).to_have_text("賛成")
    expect(shown.get_by_role("link")).to_have_attribute("href", f"/sessions/{session_id}")
    listed = api.get("/api/agents/ケンタ/memory/impressions").json()
    assert [(i["targetName"], i["sessionId"]) for i in listed] == [("ユイ", session_id)]
    shoot(p, "memory-page")


def test_the_exports_download(
    page: Watched, api: httpx.Client, fake_llm_server: FakeLlmServer
) -> None:
    agent = make_agent(api, "ミドリ", language="ja")
    api.post(
        f"/api/agents/{agent['id']}/memory/curated",
        json={"category": "core", "content": "ユーザーは東京在住"},
    )
    session_id = chat(api, fake_llm_server, "ミドリ", ("東京の天気は？", [said("晴れです。")]))
    p = page.page
    p.goto(memory_url("ミドリ"))

    with p.expect_download() as info:
        p.get_by_role("link", name="Download JSON").click()
    download = info.value
    assert download.suggested_filename == "memory-ミドリ.json"
    exported = json.loads(download.path().read_text(encoding="utf-8"))
    assert exported["agent"]["name"] == "ミドリ"
    assert [m["content"] for m in exported["curated"]] == ["ユーザーは東京在住"]
    (session,) = exported["sessions"]
    assert session["sessionId"] == session_id
    assert [log["content"] for log in session["logs"] if log["logType"] == "speech"] == [
        "東京の天気は？",
        "晴れです。",
    ]

    with p.expect_download() as info:
        p.get_by_role("link", name="Download Markdown").click()
    markdown = info.value
    assert markdown.suggested_filename == "memory-ミドリ.md"
    text = markdown.path().read_text(encoding="utf-8")
    assert text.startswith("# Memory of ミドリ\n")
    assert "- ユーザーは東京在住\n" in text
    assert "> 晴れです。\n" in text


def test_the_search_fragment_and_bad_queries(api: httpx.Client) -> None:
    make_agent(api, "タロウ", language="ja")
    part = api.get(memory_url("タロウ") + "/search", params={"q": "東京", "logType": "speech"})
    assert part.status_code == 200
    assert "<html" not in part.text
    assert "No lines match" in part.text
    assert part.headers["hx-push-url"] == memory_url("タロウ", "東京") + "&logType=speech"
    for bad in ({"q": "x" * 1001}, {"logType": "dream"}, {"page": "2"}):
        refused = api.get(memory_url("タロウ"), params=bad)
        assert refused.status_code == 400, bad
        assert "text/html" in refused.headers["content-type"]
    missing = api.get(memory_url("だれも"))
    assert missing.status_code == 404
    assert "text/html" in missing.headers["content-type"]


def memory_eval(served: ServedOpenCrab, agent: str, *args: str) -> dict[str, Any]:
    """`opencrab memory eval` on the served data directory, as a user runs it."""
    exe = str(Path(sys.executable).parent / "opencrab")
    done = subprocess.run(
        [exe, "memory", "eval", agent, "--json", "--data-dir", str(served.data_dir), *args],
        env=served.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_recall_panel_shows_the_eval_runs_and_a_search_names_its_time(
    page: Watched, api: httpx.Client, served: ServedOpenCrab, fake_llm_server: FakeLlmServer
) -> None:
    make_agent(api, "タマの係", language="ja", heartbeat=QUIET)
    p = page.page
    p.goto(memory_url("タマの係"))
    panel = p.locator(".memory-recall")
    expect(panel).to_contain_text("No measurement yet")
    expect(panel).to_contain_text("opencrab memory eval タマの係")
    chat(
        api,
        fake_llm_server,
        "タマの係",
        ("ユーザーの猫の名前はタマで、マグロが好きです", [said("タマはマグロが好きなんですね。")]),
        ("来週の会議は大阪支社で開かれます", [said("大阪支社の会議、承知しました。")]),
        ("The printer on the third floor needs toner", [said("I will order toner today.")]),
    )
    first = memory_eval(served, "タマの係", "--generator", "builtin")
    second = memory_eval(served, "タマの係", "--generator", "builtin", "--questions", "3")
    assert first["legs"]["lexical"]["available"] is True

    p.goto(memory_url("タマの係"))
    expect(panel).to_contain_text("The latest of 2 runs")
    expect(panel).to_contain_text(f"{second['questions']} keyword questions")
    rows = panel.locator(".recall-table tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("lexical")
    expect(rows.nth(0)).to_contain_text(f"{second['legs']['lexical']['recall@5']:.2f}")
    expect(rows.nth(1)).to_contain_text("Not available: this agent's memory has no vectors yet")
    expect(rows.nth(2)).to_contain_text("Not available: this agent's memory has no vectors yet")
    chart = panel.locator(".recall-chart svg")
    expect(chart).to_have_attribute("aria-label", re.compile(r"Recall@5 .* last 2 runs"))
    expect(chart.locator("polyline")).to_have_count(1)  # lexical: the only leg with figures
    expect(chart.locator("circle")).to_have_count(2)  # one point per run
    expect(panel.locator("figcaption")).to_contain_text("lexical")

    search(p, "今日 マグロ")  # a time: what was said today, the tuna first
    expect(p.locator(".time-window")).to_contain_text("今日")
    hits = p.locator(".hit")
    expect(hits.first).to_contain_text("マグロ")
    expect(hits.first.locator(".meta")).to_contain_text(re.compile(r"\d"))  # its time
    search(p, "去年")  # last year: nothing was said then
    expect(p.locator(".time-window")).to_contain_text("去年")
    expect(p.locator(".result-count")).to_contain_text("No lines for")
    search(p, "今日 マグロ")
    expect(p.locator(".result-count")).to_contain_text("6 lines for")
    shoot(p, "memory-recall")
