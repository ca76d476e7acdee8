"""Transcripts in the dashboard: importing a real corpus file through the form with its
progress, the session list, a session's messages (a tool call beside its output, the
SHA-256 of encrypted reasoning, injected context collapsed), search, the cost chart,
and trace views of an imported and of a live session."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from opencrab.config import load_settings
from opencrab.store import Database
from tests.dashboard.conftest import make_agent
from tests.fakes.browser import Watched, shoot
from tests.fakes.llm_server import FakeLlmServer
from tests.fakes.served import ServedOpenCrab
from tests.fakes.transcripts import (
    JA_ARGUMENTS,
    JA_ASSISTANT,
    JA_OUTPUT,
    JA_USER,
    WRITTEN_ASSISTANT_SEEN,
    WRITTEN_USER,
    JapaneseRollout,
    copy_rollout,
    japanese_rollout,
    price_corpus_model,
    written_rollout,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, JapaneseRollout]:
    """A folder on the server holding the real rollout and its Japanese variant."""
    folder = tmp_path_factory.mktemp("corpus")
    copy_rollout(folder / "real")
    return folder, japanese_rollout(folder / "ja")


def test_import_from_the_form_then_read_search_and_trace(
    page: Watched, api: httpx.Client, served: ServedOpenCrab, corpus: tuple[Path, JapaneseRollout]
) -> None:
    folder, ja = corpus
    db = Database(load_settings(env={"OPENCRAB_HOME": str(served.data_dir)}).database_url)
    try:
        price_corpus_model(db)
    finally:
        db.close()
    p = page.page
    p.goto("/transcripts")
    expect(p.get_by_role("link", name="Transcripts")).to_have_attribute("aria-current", "page")
    expect(p.get_by_text("Nothing imported yet")).to_be_visible()

    # a path that is not there: the API's message, nothing imported
    page.allow("/api/imports")  # the 400 this test provokes
    p.get_by_label("File or directory on the server").fill(str(folder / "missing"))
    p.get_by_role("button", name="Import").click()
    expect(p.locator("#import-form .form-error")).to_contain_text(
        f"{folder / 'missing'} is not a file or folder under the import roots"
    )

    # the corpus folder: progress until every file is done
    p.get_by_label("File or directory on the server").fill(str(folder))
    p.get_by_label("Format").select_option("codex")
    p.get_by_role("button", name="Import").click()
    job = p.locator("[data-import-job]")
    expect(job.locator("[data-job-status]")).to_have_text("done")
    expect(job.locator("[data-job-files]")).to_have_text("2")
    expect(job.locator("[data-job-total]")).to_have_text("2")
    expect(job.locator("[data-job-progress]")).to_have_js_property("value", 2)
    sessions = api.get("/api/imports/sessions").json()
    assert len(sessions) == 2
    messages = sum(s["messages"] for s in sessions)
    expect(job.locator("[data-job-messages]")).to_have_text(f"{messages:,}")
    expect(job.locator("[data-job-problems]")).to_have_text("0")
    cost = sum(s["costUsd"] for s in sessions)
    assert cost > 0
    expect(job.locator("[data-job-cost]")).to_have_text(
        f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
    )
    shoot(p, "transcripts-import-done")

    # the list, with its cost chart drawn from the API and its table
    job.get_by_role("link", name="Show the imported sessions").click()
    table = p.locator("table.transcripts-table")
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table).to_contain_text("/redacted/path/ea96e59ed9")
    expect(p.locator("[data-cost-chart]")).to_have_attribute("data-drawn", "1")
    expect(p.locator("[data-cost-chart] svg")).to_have_count(1)
    p.get_by_label("Project").select_option("/redacted/path/ea96e59ed9")
    p.get_by_label("Day (UTC)").select_option("2026-02-23")
    p.get_by_role("button", name="Filter").click()
    expect(p).to_have_url(re.compile(r"project=%2Fredacted%2Fpath%2Fea96e59ed9"))
    expect(table.locator("tbody tr")).to_have_count(2)

    # search in Japanese: the hit opens the session at the message
    p.get_by_label("Words in user and assistant messages (all of them)").fill("東京の天気")
    p.get_by_role("button", name="Search").click()
    hits = p.get_by_role("list", name="Messages found")
    expect(hits.locator("li")).to_have_count(1)
    expect(hits).to_contain_text(JA_USER)
    shoot(p, "transcripts-search")
    hits.get_by_role("link").click()
    expect(p).to_have_url(re.compile(rf"/transcripts/[0-9a-f-]+#line-{ja.user_line}$"))
    expect(p.locator(f"#line-{ja.user_line}")).to_contain_text(JA_USER)
    expect(p.locator(".tr-message").filter(has_text=JA_ASSISTANT)).to_have_count(1)

    # the tool call beside its output, both indented JSON (highlighted)
    call = p.locator(".tr-tool").filter(has_text=ja.call_name).filter(has_text="東京").first
    arguments = call.get_by_label(f"Arguments of {ja.call_name}")
    output = call.get_by_label(f"Output of {ja.call_name}")
    expect(arguments).to_contain_text('"workdir": "/srv/天気"')
    expect(output).to_contain_text('"forecast": "晴れのち曇り"')
    expect(output).to_contain_text(f'"high_c": {JA_OUTPUT["high_c"]}')
    expect(arguments.locator("code.hljs")).to_have_count(1)
    assert JA_ARGUMENTS["workdir"] == "/srv/天気"
    expect(call.locator(".badge")).to_have_text("done")
    # encrypted reasoning: said so, with its SHA-256
    expect(p.locator("[data-encrypted-sha256]").first).to_have_text(ja.first_encrypted_sha256)
    # injected context starts collapsed
    injected = p.locator("details.tr-injected").first
    expect(injected).not_to_have_attribute("open", "")
    expect(injected.locator(".tr-text").first).to_be_hidden()
    injected.locator("summary").click()
    expect(injected.locator(".tr-text").first).to_be_visible()
    injected.locator("summary").click()
    p.evaluate("window.scrollTo(0, 0)")
    shoot(p, "transcripts-session")

    # the trace view of the same session
    p.get_by_role("link", name="Trace view").click()
    expect(p.get_by_role("heading", name=re.compile("^Trace"))).to_be_visible()
    steps = p.get_by_role("list", name="Steps along the parent chain")
    action = steps.locator(".step-action").filter(has_text="晴れのち曇り")
    expect(action).to_have_count(1)
    expect(action.get_by_label(f"Arguments of {ja.call_name}")).to_contain_text("/srv/天気")
    expect(action.get_by_label(f"Result of {ja.call_name}")).to_contain_text("晴れのち曇り")
    expect(action).to_contain_text(re.compile(r"after [\d,]+ ms"))
    # token_usage sidecars are folded into their step, not steps of their own
    expect(steps.locator("[data-step-usage]").first).to_contain_text(re.compile(r"in · .* out"))
    usage = api.get(f"/api/traces/{p.url.rsplit('/', 1)[1]}/events").json()
    assert steps.locator("li.step").count() < len(usage)
    assert any(e["type"] == "token_usage" for e in usage)
    shoot(p, "transcripts-trace")


def test_the_trace_of_a_live_session(page: Watched, api: httpx.Client, llm: FakeLlmServer) -> None:
    make_agent(api, "トレース", language="ja", heartbeat={"enabled": False})
    session = api.post("/api/sessions", json={"agentId": "トレース"}).json()["id"]
    said = api.post(f"/api/sessions/{session}/messages", json={"content": "今日の予定を教えて"})
    assert said.status_code == 201, said.text
    p = page.page
    p.goto(f"/sessions/{session}")
    p.get_by_role("link", name="Trace").click()
    expect(p).to_have_url(re.compile(rf"/sessions/{session}/trace$"))
    steps = p.get_by_role("list", name="Steps along the parent chain")
    expect(steps.locator(".step-user")).to_contain_text("今日の予定を教えて")
    speech = steps.locator(".step-speech")
    expect(speech).to_contain_text("Hello from the fake model.")
    expect(speech.locator("[data-step-usage]")).to_contain_text("tokens")
    expect(p.locator("[data-trace-totals]")).to_contain_text("tokens")
    shoot(p, "transcripts-live-trace")


def test_imported_text_reads_as_written_in_the_page_search_and_api(
    page: Watched, api: httpx.Client, tmp_path: Path
) -> None:
    """Seed 003's segments are allow-listed HTML: `&&` arrives as `&amp;&amp;`. The
    page shows what was written (the script as text, never run), search finds `&&`
    and `x < y`, and the API's segment is HTML standing for that text."""
    path = written_rollout(tmp_path / "written")
    job = api.post("/api/imports", json={"path": str(path), "source": "codex"})
    assert job.status_code == 202, job.text
    for _ in range(600):
        state = api.get(f"/api/imports/jobs/{job.json()['id']}").json()
        if state["status"] != "running":
            break
        page.page.wait_for_timeout(100)
    assert state["status"] == "done", state
    (session,) = [s for s in api.get("/api/imports/sessions").json() if s["filePath"] == str(path)]
    messages = api.get(f"/api/imports/sessions/{session['id']}/messages").json()
    said = [m["segments"][0]["text"] for m in messages if m["source_type"] == "message"]
    assert said[0].startswith("run `make &amp;&amp; make test` if x &lt; y &gt; z")
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt; Vec&lt;String&gt;" in said[0]
    assert said[1] == 'Use <strong>bold</strong> &amp; x&lt;y; **md** {"k": [1]}'
    for query in ("&&", "x < y", "<script>", "Vec<String>", '{"k":'):
        hits = api.get("/api/imports/search", params={"q": query}).json()
        assert [h["sessionId"] for h in hits][:1] == [session["id"]], query
    assert api.get("/api/imports/search", params={"q": "&amp;&amp;"}).json() == []

    p = page.page
    p.goto(f"/transcripts/{session['id']}")
    user, reply = p.locator(".tr-message .tr-text").all()[:2]
    assert user.inner_text() == WRITTEN_USER
    assert reply.inner_text() == WRITTEN_ASSISTANT_SEEN
    expect(reply.locator("strong")).to_have_text("bold")
    expect(p.locator(".tr-message script")).to_have_count(0)
    assert p.evaluate("() => window.pwned") is None
    shoot(p, "transcripts-written")

    p.goto("/transcripts")
    p.get_by_label("Words in user and assistant messages (all of them)").fill("make && make test")
    p.get_by_role("button", name="Search").click()
    hits = p.get_by_role("list", name="Messages found")
    expect(hits.locator("li")).to_have_count(1)
    expect(hits.locator(".hit-snippet")).to_contain_text("run `make && make test` if x < y > z")
    shoot(p, "transcripts-written-search")
