"""An agent's memory over REST: impressions, search in any language, the JSON and Markdown export.

Memory is made the way an agent makes it: chat turns through the real engine with a
scripted model (its speech and its `update_impression` calls), curated memory over REST.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote
from uuid import uuid4

from fastapi.testclient import TestClient

from opencrab.server.api.memory_export import MemoryExport
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider
from tests.server.conftest import error_of, new_agent


def chat(client: TestClient, agent_id: str, *messages: str) -> str:
    """A chat session with `messages` posted to it one turn each; returns its id."""
    session_id: str = client.post("/api/sessions", json={"agentId": agent_id}).json()["id"]
    for text in messages:
        turn = client.post(f"/api/sessions/{session_id}/messages", json={"content": text})
        assert turn.status_code == 201, turn.text
    return session_id


def impression_turn(scripted: ScriptedProvider, **fields: Any) -> None:
    """The model's next turn records an impression of the user, then answers."""
    scripted.outcomes.clear()  # the last reply of an earlier script would come first
    scripted.then(calls(("update_impression", fields)), speak("わかりました。"))


def test_impressions_kept_by_the_agent_are_listed(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client)["id"]
    impression_turn(
        scripted,
        target_id="user",
        target_name="ユイ",
        personality="几帳面で慎重",
        agreement="賛成",
    )
    first = chat(client, agent_id, "よろしくお願いします")
    impression_turn(scripted, target_id="user", target_name="ユイ", notes="second session")
    second = chat(client, agent_id, "また来ました")

    base = f"/api/agents/{agent_id}/memory/impressions"
    listed = client.get(base)
    assert listed.status_code == 200, listed.text
    assert [(i["sessionId"], i["targetName"]) for i in listed.json()] == [
        (second, "ユイ"),
        (first, "ユイ"),
    ]
    kept = client.get(f"{base}?sessionId={first}").json()
    assert len(kept) == 1
    assert kept[0]["personality"] == "几帳面で慎重"
    assert kept[0]["agreement"] == "賛成"
    assert kept[0]["communicationStyle"] == ""
    assert client.get(f"{base}?sessionId={uuid4()}").json() == []
    assert "sessionId" in error_of(client.get(f"{base}?sessionId=nope"), 400, "validation_error")
    error_of(client.get(f"/api/agents/{uuid4()}/memory/impressions"), 404, "not_found")


def test_search_finds_two_character_japanese_and_chinese_words_and_english(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client)["id"]
    scripted.then(speak("我明天去北京。"))
    session_id = chat(client, agent_id, "明日は東京へ行きます", "The tomatoes need water")
    search = f"/api/agents/{agent_id}/memory/search"

    def found(query: str) -> list[tuple[str, str]]:
        response = client.post(search, json={"query": query})
        assert response.status_code == 200, response.text
        return [(h["content"], h["sessionId"]) for h in response.json()]

    assert found("東京") == [("明日は東京へ行きます", session_id)]
    assert ("我明天去北京。", session_id) in found("北京")
    assert found("tomatoes") == [("The tomatoes need water", session_id)]
    assert found("東京 tomatoes") == []


def test_json_export_is_what_the_other_memory_routes_show(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client, name="ハナコ")["id"]
    base = f"/api/agents/{agent_id}/memory"
    client.post(f"{base}/curated", json={"category": "core", "content": "ユーザーは東京在住"})
    client.post(f"{base}/curated", json={"category": "人物", "content": "ユイは紅茶が好き"})
    impression_turn(scripted, target_id="user", target_name="ユイ", personality="穏やか")
    older = chat(client, agent_id, "こんにちは")
    scripted.outcomes.clear()
    scripted.then(speak('She said "hi"\nand left.'))
    newer = chat(client, agent_id, "東京の天気は？")

    response = client.get(f"{base}/export")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    disposition = response.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="memory-___.json"')
    assert f"filename*=UTF-8''{quote('memory-ハナコ.json')}" in disposition

    exported = json.loads(response.content.decode("utf-8"))
    MemoryExport.model_validate(exported)  # the documented shape
    assert exported["format"] == "opencrab.memory/1"
    assert exported["agent"] == {"id": agent_id, "name": "ハナコ", "language": "en"}
    assert exported["curated"] == client.get(f"{base}/curated").json()
    assert exported["impressions"] == client.get(f"{base}/impressions").json()
    assert [s["sessionId"] for s in exported["sessions"]] == [newer, older]
    for session in exported["sessions"]:
        logs = client.get(f"{base}/sessions/{session['sessionId']}?limit=1000").json()
        assert session["logs"] == logs
    assert 'She said "hi"\nand left.' in [log["content"] for log in exported["sessions"][0]["logs"]]


def test_markdown_export_reads_as_a_document(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent_id = new_agent(client, name="ハナコ")["id"]
    base = f"/api/agents/{agent_id}/memory"
    client.post(f"{base}/curated", json={"category": "core", "content": "一行目\n二行目"})
    impression_turn(scripted, target_id="user", target_name="ユイ", personality="穏やか")
    session_id = chat(client, agent_id, "東京の話をしよう\n\n二段落目")

    response = client.get(f"{base}/export?format=markdown")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/markdown; charset=utf-8"
    disposition = response.headers["content-disposition"]
    assert f"filename*=UTF-8''{quote('memory-ハナコ.md')}" in disposition
    text = response.content.decode("utf-8")
    assert text.startswith("# Memory of ハナコ\n")
    assert "## Curated memories\n\n### core\n\n- 一行目\n  二行目\n" in text
    assert "_(updated " in text
    assert "\n\n## Impressions\n\n### ユイ\n" in text
    assert "- Personality: 穏やか\n" in text
    assert f"### Session `{session_id}`\n" in text
    assert "> 東京の話をしよう\n>\n> 二段落目\n" in text  # every line of a message quoted
    assert " · speech · ハナコ**\n\n> わかりました。\n" in text  # the agent by its name


def test_export_of_an_agent_without_memory_and_bad_requests(client: TestClient) -> None:
    agent_id = new_agent(client)["id"]
    empty = client.get(f"/api/agents/{agent_id}/memory/export").json()
    assert (empty["curated"], empty["impressions"], empty["sessions"]) == ([], [], [])
    markdown = client.get(f"/api/agents/{agent_id}/memory/export?format=markdown").text
    assert markdown.count("_None._") == 3
    message = error_of(
        client.get(f"/api/agents/{agent_id}/memory/export?format=pdf"), 400, "validation_error"
    )
    assert "format" in message
    error_of(client.get(f"/api/agents/{uuid4()}/memory/export"), 404, "not_found")
