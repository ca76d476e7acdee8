"""`POST /api/agents/{id}/preview`: the model answers with the edited, unsaved persona.

The request is the one a real turn builds (compared with a real turn's after saving the
same persona), nothing of the conversation is stored, bad values are 400 naming the
field, and provider failures, a spent budget and a deadline come back as the API's error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from opencrab.config import Settings
from opencrab.errors import ProviderAuthError
from opencrab.llm.metrics import MetricsRecorder
from opencrab.llm.router import LlmRouter
from opencrab.llm.types import ChatRequest
from opencrab.server.app import create_app
from opencrab.store import Database
from opencrab.store.tables import (
    events,
    identity,
    llm_usage_metrics,
    memory_sessions,
    messages,
    sessions,
    soul,
)
from tests.core.conftest import calls
from tests.fakes.scripted_provider import ScriptedProvider, reply
from tests.server.conftest import error_of, new_agent
from tests.server.local import LocalClient

EDITED: dict[str, Any] = {
    "soul": {
        "personaName": "慎重な分析家",
        "socialStyle": {"assertiveness": -0.4, "responsiveness": -0.6},
        "personality": {
            "openness": 0.9,
            "conscientiousness": 0.8,
            "extraversion": 0.2,
            "agreeableness": 0.7,
            "neuroticism": 0.1,
        },
        "thinkingStyle": {"primary": "分析的", "secondary": "論理的", "description": "根拠を探す"},
        "customTraits": {"values": ["誠実さ", "好奇心"], "口癖": "なるほど"},
    },
    "identity": {
        "name": "ハナ",
        "role": "custom:司会補佐",
        "jobTitle": "研究員",
        "organization": "カニ研究所",
    },
    "prompt": "いつも敬語で話してください。",
    "language": "ja",
}


@pytest.fixture
def metered(settings: Settings, db: Database, scripted: ScriptedProvider) -> Iterator[TestClient]:
    """An app whose router records every call in the metrics table."""
    router = LlmRouter(settings, metrics=MetricsRecorder(db))
    router.register_provider(scripted)
    with LocalClient(create_app(settings, db, router=router)) as c:
        yield c


def _system(request: ChatRequest) -> str:
    assert request.messages[0].role == "system"
    return request.messages[0].text


def _tools(request: ChatRequest) -> list[str]:
    return [t.name for t in request.tools or []]


def _counts(db: Database) -> dict[str, int]:
    with db.read() as conn:
        return {
            t.name: int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar() or 0)
            for t in (sessions, messages, events, memory_sessions)
        }


def test_the_model_answers_with_the_unsaved_persona(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    agent = new_agent(client, "aki")
    stored_soul = client.get("/api/agents/aki/soul").json()
    scripted.then("はい、ハナと申します。")

    shown = client.post("/api/agents/aki/preview", json={**EDITED, "message": "自己紹介して"})

    assert shown.status_code == 200, shown.text
    body = shown.json()
    assert body["reply"] == "はい、ハナと申します。"
    assert body["thought"] is None
    assert body["actions"] == []
    assert body["provider"] == "openai"
    assert body["usage"] == {"inputTokens": 10, "outputTokens": 5}
    sent = scripted.requests[-1]
    system = _system(sent)
    for edited in (
        '【IDENTITY】\n名前: ハナ\n役割: Custom("司会補佐")\n職種: 研究員\n所属: カニ研究所',
        "ペルソナ: 慎重な分析家",
        "ソーシャルスタイル: Analytical（主張性: -0.4, 感情性: -0.6）",
        "  - 開放性: 0.9",
        "  - 外向性: 0.2",
        "思考スタイル: 分析的（副: 論理的）\n根拠を探す",
        "価値観: 誠実さ、好奇心",
        "  - 口癖: なるほど",
        "いつも敬語で話してください。",
        "【利用可能なスキル】",  # the skills in the edited language
    ):
        assert edited in system
    assert body["systemPrompt"] == system
    assert sent.messages[-1].text == "受信メッセージ: 自己紹介して"
    assert "send_speech" in _tools(sent)
    # the stored persona is untouched
    assert client.get("/api/agents/aki/soul").json() == stored_soul
    assert client.get(f"/api/agents/{agent['id']}").json()["language"] == "en"


def test_the_preview_is_the_request_a_real_turn_sends_after_saving(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    new_agent(client, "aki")
    scripted.then("はい。")
    assert client.post(
        "/api/agents/aki/preview", json={**EDITED, "message": "こんにちは"}
    ).is_success
    previewed = scripted.requests[-1]

    saved = client.put("/api/agents/aki", json=EDITED)  # one request saves it all
    assert saved.status_code == 200, saved.text
    session_id = client.post("/api/sessions", json={"agentId": "aki"}).json()["id"]
    turn = client.post(f"/api/sessions/{session_id}/messages", json={"content": "こんにちは"})
    assert turn.status_code == 201, turn.text
    real = scripted.requests[-1]

    assert real is not previewed
    assert [(m.role, m.text) for m in previewed.messages] == [
        (m.role, m.text) for m in real.messages
    ]
    assert _tools(previewed) == _tools(real)
    assert previewed.model == real.model


def test_the_preview_stores_nothing_but_its_metrics_row(
    metered: TestClient, scripted: ScriptedProvider, db: Database
) -> None:
    client = metered
    agent = new_agent(client, "aki", llm={"dailyBudgetUsd": 0.5})
    with db.read() as conn:
        persona_before = (
            conn.execute(sa.select(soul)).all(),
            conn.execute(sa.select(identity)).all(),
        )
    before = _counts(db)
    scripted.then(reply("Hello.", cost_usd=0.5))

    first = client.post("/api/agents/aki/preview", json={**EDITED, "message": "Hi"})

    assert first.status_code == 200, first.text
    assert first.json()["costUsd"] == 0.5
    # its spend counts against the budget: the next preview is refused before any call
    calls_made = len(scripted.requests)
    refused = client.post("/api/agents/aki/preview", json={"message": "Hi again"})
    assert "daily budget" in error_of(refused, 429, "budget_exceeded")
    assert len(scripted.requests) == calls_made
    assert _counts(db) == before
    with db.read() as conn:
        assert (conn.execute(sa.select(soul)).all(), conn.execute(sa.select(identity)).all()) == (
            persona_before
        )
        rows = conn.execute(
            sa.select(
                llm_usage_metrics.c.agent_id,
                llm_usage_metrics.c.session_id,
                llm_usage_metrics.c.task_type,
                llm_usage_metrics.c.estimated_cost_usd,
            )
        ).all()
    assert [tuple(r) for r in rows] == [(agent["id"], None, "preview", 0.5)]


def test_a_speech_action_is_the_reply_and_other_actions_are_shown_not_run(
    client: TestClient, scripted: ScriptedProvider, db: Database
) -> None:
    new_agent(client, "aki")
    before = _counts(db)
    scripted.then(
        calls(
            ("ws_write", {"path": "note.md", "content": "x"}),
            ("send_speech", {"content": "  Nice to meet you.  "}),
            text="They greet me; I will answer warmly.",
        )
    )
    body = client.post("/api/agents/aki/preview", json={"message": "Hello"}).json()
    assert body["reply"] == "Nice to meet you."
    assert body["thought"] == "They greet me; I will answer warmly."
    assert body["actions"] == [
        {"name": "ws_write", "arguments": {"path": "note.md", "content": "x"}}
    ]
    assert _counts(db) == before
    assert client.get("/api/agents/aki/workspace").json()["entries"] == []  # ws_write not run


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"soul": {**EDITED["soul"], "personality": {"openness": 1.5}}},
            "soul.personality.openness",
        ),
        ({"soul": {**EDITED["soul"], "personaName": ""}}, "soul.personaName"),
        ({"soul": {**EDITED["soul"], "mood": "happy"}}, "soul.mood"),
        ({"soul": {**EDITED["soul"], "customTraits": ["誠実さ"]}}, "soul.customTraits"),
        ({"identity": {"name": "ハナ", "role": "custom:" + "x" * 80}}, "identity.role"),
        ({"prompt": ""}, "prompt"),
        ({"language": "fr"}, "language"),
        ({"message": "   "}, "message"),
    ],
)
def test_bad_values_are_400_naming_the_field(
    client: TestClient, scripted: ScriptedProvider, change: dict[str, Any], field: str
) -> None:
    new_agent(client, "aki")
    body = {**EDITED, "message": "Hi", **change}
    message = error_of(client.post("/api/agents/aki/preview", json=body), 400, "validation_error")
    assert message.startswith(f"body.{field}: "), message
    assert scripted.requests == []  # refused before the model is asked


def test_an_unknown_agent_is_404(client: TestClient, scripted: ScriptedProvider) -> None:
    for ref in ("nobody", str(uuid4())):
        response = client.post(f"/api/agents/{ref}/preview", json={"message": "Hi"})
        assert ref in error_of(response, 404, "not_found")
    assert scripted.requests == []


def test_a_provider_failure_is_the_apis_error(
    client: TestClient, scripted: ScriptedProvider
) -> None:
    new_agent(client, "aki")
    scripted.then(ProviderAuthError("HTTP 401: invalid API key", provider="openai"))
    response = client.post("/api/agents/aki/preview", json={"message": "Hi"})
    assert "invalid API key" in error_of(response, 502, "provider_auth_error")


def test_the_turn_deadline_bounds_the_call(
    client: TestClient, scripted: ScriptedProvider, settings: Settings
) -> None:
    new_agent(client, "aki")
    settings.agent.turn_timeout_secs = 0.5
    scripted.hold = threading.Event()  # the model never answers in time
    try:
        response = client.post("/api/agents/aki/preview", json={"message": "Hi"})
    finally:
        scripted.hold.set()
    assert "turn_timeout_secs" in error_of(response, 504, "turn_timeout")


def test_one_put_saves_persona_identity_prompt_and_heartbeat_or_nothing(
    client: TestClient,
) -> None:
    new_agent(client, "aki")
    heartbeat = {"intervalSecs": 31, "enabled": False}
    saved = client.put("/api/agents/aki", json={**EDITED, "heartbeat": heartbeat})
    assert saved.status_code == 200, saved.text
    assert saved.json()["prompt"] == EDITED["prompt"]
    assert client.get("/api/agents/aki/soul").json()["customTraits"] == {
        "values": ["誠実さ", "好奇心"],
        "口癖": "なるほど",
    }
    who = client.get("/api/agents/aki/identity").json()
    assert (who["name"], who["role"], who["jobTitle"]) == ("ハナ", {"custom": "司会補佐"}, "研究員")
    assert client.get("/api/agents/aki/heartbeat").json() == {**heartbeat, "home": None}

    bad = {
        **EDITED,
        "soul": {**EDITED["soul"], "personaName": "別人"},
        "heartbeat": {"intervalSecs": 0},
    }
    message = error_of(client.put("/api/agents/aki", json=bad), 400, "validation_error")
    assert message.startswith("body.heartbeat.intervalSecs: ")
    assert client.get("/api/agents/aki/soul").json()["personaName"] == "慎重な分析家"  # kept


def test_the_heartbeat_has_its_own_route(client: TestClient) -> None:
    new_agent(client, "aki")
    assert client.get("/api/agents/aki/heartbeat").json()["enabled"] is True
    changed = client.put("/api/agents/aki/heartbeat", json={"intervalSecs": 37, "enabled": False})
    assert changed.status_code == 200, changed.text
    assert client.get("/api/agents/aki/heartbeat").json() == {
        "intervalSecs": 37,
        "enabled": False,
        "home": None,
    }
    message = error_of(
        client.put("/api/agents/aki/heartbeat", json={"intervalSecs": 0}), 400, "validation_error"
    )
    assert message.startswith("body.intervalSecs: ")
    assert client.get("/api/agents/aki/heartbeat").json()["intervalSecs"] == 37
    error_of(client.get(f"/api/agents/{uuid4()}/heartbeat"), 404, "not_found")
