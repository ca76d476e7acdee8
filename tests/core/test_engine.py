"""SkillEngine with a scripted provider: every action, the stop rules, malformed calls,
the event chain, the budget, compaction and streaming."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
import sqlalchemy as sa

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.core.agent import Agent, AgentCreate, AgentUpdate
from opencrab.core.budgets import Budgets
from opencrab.core.context import COMPACTION_KIND, estimate_tokens, message_tokens, tools_tokens
from opencrab.core.identity import AgentRole, Identity
from opencrab.core.llm_config import AgentLlmConfig, session_overrides
from opencrab.core.memory import MemoryManager
from opencrab.core.runtime import Runtime
from opencrab.core.skill_files import parse_skill_text
from opencrab.core.steps import Compacted, TextDelta, TurnResult
from opencrab.core.tools import sync_tools, tool_id
from opencrab.core.workspace import Workspace
from opencrab.errors import ProviderServerError
from opencrab.event_log import EventLog
from opencrab.events import MessageEvent, TokenUsageEvent, ToolCallEvent, ToolResultEvent
from opencrab.llm.types import ChatRequest
from opencrab.store import Database
from opencrab.store.tables import agent_sessions, llm_usage_metrics, sessions
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider, SmallWindow, reply


async def turn(runtime: Runtime, agent: Agent, text: str = "hi", **kw: Any) -> TurnResult:
    return await runtime.chat(agent, text, **kw)


def queue(scripted: ScriptedProvider, *outcomes: Any) -> None:
    scripted.outcomes.clear()
    scripted.then(*outcomes)


def only(result: TurnResult, name: str) -> Any:
    found = [a for a in result.actions if a.name == name]
    assert len(found) == 1, [a.name for a in result.actions]
    assert found[0].result.success, found[0].result.error
    return found[0].result.data


# ------------------------------------------------------------------ stop rules
async def test_plain_text_ends_the_turn(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(scripted, "Hello!")
    result = await turn(runtime, agent)
    assert (result.reply, result.stopped_by, result.iterations) == ("Hello!", "message", 1)


@pytest.mark.parametrize("action", ["send_noreact", "declare_done"])
async def test_silent_turn_enders_stop_without_a_reply(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, action: str
) -> None:
    queue(scripted, calls((action, {"reason": "nothing to add"})), "never asked")
    result = await turn(runtime, agent)
    assert (result.reply, result.stopped_by) == (None, action)
    assert len(scripted.requests) == 1


async def test_max_iterations_stops_a_model_that_never_speaks(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    runtime.engine.max_iterations = 3
    queue(scripted, calls(("ws_list", {})))
    result = await turn(runtime, agent)
    assert result.stopped_by == "max_iterations"
    assert result.iterations == 3
    assert len(scripted.requests) == 3
    logs = MemoryManager(runtime.db, agent.id).session_logs(result.session_id)
    assert logs[-1].log_type == "system"
    assert "3 iterations" in logs[-1].content


# ------------------------------------------------------------------ malformed calls
async def test_malformed_calls_become_error_results_and_the_loop_goes_on(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(
        scripted,
        calls(
            ("fly_to_the_moon", {}),
            ("ws_write", "{broken"),
            ("ws_write", {"path": "a.md", "content": 5}),
            ("broadcast_guidance", {"content": "only facilitators"}),
        ),
        speak("ok"),
    )
    result = await turn(runtime, agent)
    errors = [a.result.error or "" for a in result.actions[:4]]
    assert "unknown action 'fly_to_the_moon'" in errors[0]
    assert "not valid JSON" in errors[1]
    assert "content: 5 is not of type 'string'" in errors[2]
    assert "you may not call 'broadcast_guidance'" in errors[3]
    assert result.reply == "ok"
    fed_back = [m for m in scripted.requests[1].messages if m.role == "tool"]
    assert len(fed_back) == 4
    assert all(m.is_error for m in fed_back)
    assert all("error" in json.loads(str(m.content)) for m in fed_back)


# ------------------------------------------------------------------ the event chain
async def test_every_step_is_recorded_as_a_linked_event_chain(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(
        scripted,
        calls(
            ("ws_write", {"path": "a.md", "content": "x"}),
            ("ws_read", {"path": "a.md"}),
            text="I will write then read.",
        ),
        speak("done"),
    )
    result = await turn(runtime, agent)
    events = EventLog(runtime.db).trace(result.trace_id)
    assert [e.type for e in events] == [
        "user",
        "reasoning",
        "tool_call",
        "token_usage",
        "tool_call",
        "tool_result",
        "tool_result",
        "tool_call",
        "token_usage",
        "tool_result",
        "message",
    ]
    assert events[0].parent_id is None
    ids = {e.id for e in events}
    assert all(e.parent_id in ids for e in events[1:])
    call_events = [e for e in events if isinstance(e, ToolCallEvent)]
    result_events = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [r.content.tool_call_id for r in result_events] == [c.id for c in call_events]
    usage = [e for e in events if isinstance(e, TokenUsageEvent)]
    assert [u.parent_id for u in usage] == [call_events[0].id, call_events[2].id]
    assert usage[0].content.input_tokens == 10
    assert usage[0].metadata is not None
    assert usage[0].metadata["metrics_id"]
    assert events[-1].content.text == "done"  # type: ignore[union-attr]
    # memory logs carry the same event ids, written in the same transactions
    logs = MemoryManager(runtime.db, agent.id).session_logs(result.session_id)
    assert {log.event_id for log in logs} <= {str(e.id) for e in events}
    assert [log.log_type for log in logs] == [
        "speech",
        "inner_voice",
        "action",
        "action",
        "action",
        "speech",
    ]
    totals = EventLog(runtime.db).token_totals(result.trace_id).as_json()
    assert totals["total_tokens"] == 30


class _Peek(Action):
    """Looks at the store from another connection while it runs, as a crash would see it."""

    name = "peek"
    description = "records which events are durable while it runs"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def __init__(self, db_url: str, *, store_only: bool) -> None:
        self.db_url = db_url
        self.store_only = store_only  # type: ignore[misc]
        self.seen: list[list[str]] = []

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        other = Database(self.db_url)
        with other.read() as conn:
            types = conn.execute(sa.text("SELECT type FROM events ORDER BY seq")).scalars()
            self.seen.append(list(types))
        other.close()
        return ActionResult.ok({})


@pytest.mark.parametrize("store_only", [False, True])
async def test_a_call_is_durable_before_an_action_that_changes_the_world(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider, store_only: bool
) -> None:
    peek = _Peek(str(runtime.db.url), store_only=store_only)
    runtime.registry.register(peek)
    sync_tools(runtime.db, runtime.registry)  # granted as a tool: a learned skill grants nothing
    runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("peek")]))
    queue(scripted, calls(("peek", {})), speak("done"))
    await turn(runtime, agent)
    # an action that may touch the world runs only once its call is on disk; a
    # store-only one commits with its call (nothing of it lasts if the process dies)
    expected = ["user", "tool_call", "token_usage"] if not store_only else ["user"]
    assert peek.seen == [expected]
    events = EventLog(runtime.db).trace(await _last_session(runtime, agent))
    assert [e.type for e in events][:4] == ["user", "tool_call", "token_usage", "tool_result"]


async def _last_session(runtime: Runtime, agent: Agent) -> str:
    (session,) = [s.session_id for s in MemoryManager(runtime.db, agent.id).sessions()]
    return session


async def test_plain_reply_carries_its_token_usage(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(scripted, "hi there")
    result = await turn(runtime, agent)
    events = EventLog(runtime.db).trace(result.trace_id)
    assert [e.type for e in events] == ["user", "message", "token_usage"]
    assert events[2].parent_id == events[1].id


async def test_second_turn_sees_the_first(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(scripted, calls(("ws_list", {})), speak("one"), speak("two"))
    first = await turn(runtime, agent, "first")
    await turn(runtime, agent, "second", session_id=first.session_id)
    history = scripted.requests[-1].messages
    roles = [m.role for m in history]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert history[-1].content == "受信メッセージ: second"
    chain = EventLog(runtime.db).trace(first.session_id)
    assert chain[0].parent_id is None
    assert sum(1 for e in chain if e.parent_id is None) == 1  # one chain across turns


# ------------------------------------------------------------------ errors and budget
async def test_llm_failure_is_a_recorded_error_not_a_crash(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(scripted, ProviderServerError("boom", provider="openai"))
    result = await turn(runtime, agent)
    assert result.error is not None
    assert result.error.error == "provider_server_error"
    last = EventLog(runtime.db).trace(result.trace_id)[-1]
    assert isinstance(last, MessageEvent)
    assert last.metadata == {"kind": "error", "error": "provider_server_error"}


async def test_budget_spent_refuses_the_next_call(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    config = AgentLlmConfig(daily_budget_usd=1.0)
    agent = runtime.agents.update(agent.id, AgentUpdate(llm=config))
    # each call's estimate (its prompt and 1,024 output tokens of gpt-5.2, about $0.03)
    # fits under $1; the reply costing $1 spends the budget: the next call is refused
    big = reply("costly", usage=None, cost_usd=1.0)
    queue(scripted, calls(("ws_list", {})), big)
    queue(scripted, big)
    first = await turn(runtime, agent)
    assert first.error is None
    calls_made = len(scripted.requests)
    second = await turn(runtime, agent)
    assert second.error is not None
    assert second.error.error == "budget_exceeded"
    assert len(scripted.requests) == calls_made  # refused before calling
    assert runtime.agents.spent_today(agent.id) >= 1.0


async def test_a_fleet_cap_stored_during_a_call_refuses_the_turns_next_call(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    # the check before a call reads the fleet's caps with the turn's last step: a cap
    # stored while the model answered the first call still stops the second
    class CapsWhileAnswering(ScriptedProvider):
        async def chat_completion(self, request: ChatRequest) -> Any:
            if not self.requests:  # another process (the dashboard) caps the fleet now
                Budgets(runtime.db, runtime.settings).set_fleet_caps(0.001, None)
            return await super().chat_completion(request)

    costly = CapsWhileAnswering("openai")
    runtime.router.register_provider(costly)
    costly.then(reply("", tool_calls=calls(("ws_list", {})).tool_calls, cost_usd=0.01))
    costly.then(speak("never said"))
    result = await turn(runtime, agent)
    assert result.error is not None
    assert result.error.error == "budget_exceeded"
    assert "the fleet has spent" in result.error.message
    assert len(costly.requests) == 1  # the second call was refused before it was made
    assert [a.name for a in result.actions] == ["ws_list"]


# ------------------------------------------------------------------ every action
async def test_speech_actions_record_speech_state(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(
        scripted,
        calls(
            ("generate_inner_voice", {"content": "考え中"}),
            ("update_impression", {"target_id": "u1", "target_name": "Yui", "agreement": "賛成"}),
        ),
        calls(("declare_done", {})),
    )
    result = await turn(runtime, agent)
    assert only(result, "update_impression")["agreement"] == "賛成"
    assert only(result, "declare_done")["done_count"] == 1
    memory = MemoryManager(runtime.db, agent.id)
    assert [i.target_name for i in memory.impressions(result.session_id)] == ["Yui"]
    assert any(
        log.log_type == "inner_voice" and log.content == "考え中"
        for log in memory.session_logs(result.session_id)
    )
    queue(scripted, speak("hello"))
    await turn(runtime, agent, session_id=result.session_id)
    with runtime.db.read() as conn:
        row = conn.execute(
            sa.select(agent_sessions).where(agent_sessions.c.session_id == result.session_id)
        ).one()
        done = conn.execute(
            sa.select(sessions.c.done_count).where(sessions.c.id == result.session_id)
        ).scalar()
    assert row.done_declared
    assert row.last_speech_at is not None
    assert done == 1


async def test_workspace_actions(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(
        scripted,
        calls(
            ("ws_mkdir", {"path": "notes"}),
            ("ws_write", {"path": "notes/a.md", "content": "v1 v1"}),
        ),
        calls(
            ("ws_edit", {"path": "notes/a.md", "old_string": "v1", "new_string": "v2"}),
            ("ws_edit", {"path": "notes/a.md", "old_string": "v1 v1", "new_string": "v2"}),
            ("ws_read", {"path": "notes/a.md"}),
            ("ws_list", {"path": "notes"}),
            ("ws_write", {"path": "tmp.txt", "content": "bye"}),
            ("ws_delete", {"path": "tmp.txt"}),
        ),
        speak("ok"),
    )
    result = await turn(runtime, agent)
    edits = [a for a in result.actions if a.name == "ws_edit"]
    assert not edits[0].result.success
    assert "appears 2 times" in (edits[0].result.error or "")
    assert edits[1].result.success
    assert only(result, "ws_read")["content"] == "v2"
    assert [e["path"] for e in only(result, "ws_list")["entries"]] == ["notes/a.md"]
    workspace = Workspace.for_agent(runtime.settings, agent.id)
    assert workspace.read("notes/a.md") == "v2"
    assert not workspace.exists("tmp.txt")


async def test_learning_actions_acquire_skills(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    lesson = {
        "skill_name": "具体例で説明",
        "description": "抽象的な概念は具体例で",
        "situation_pattern": "説明する場面",
        "guidance": "具体例を1つ挙げる",
    }
    queue(
        scripted,
        speak("東京タワーは333メートルです"),  # something to reflect on
        calls(
            (
                "learn_from_experience",
                {
                    "experience": "e",
                    "outcome": "success",
                    "lesson": "L1",
                    "skill_name": "exp-skill",
                },
            ),
            (
                "learn_from_peer",
                {
                    "peer_name": "Yui",
                    "observation": "asked why",
                    "lesson": "ask why",
                    "skill_name": "peer-skill",
                },
            ),
            ("reflect_and_learn", {}),
        ),
        json.dumps(lesson, ensure_ascii=False),  # the reflection's own model call
        calls(
            ("search_my_history", {"query": "東京タワー"}),
            ("summarize_and_save", {"content": "今日のまとめ", "filename": "summaries/today.md"}),
            (
                "create_my_skill",
                {
                    "name": "効果的な質問",
                    "description": "質問で深める",
                    "guidance": "なぜ、と聞く",
                    "actions": ["send_speech"],
                },
            ),
        ),
        speak("learned"),
    )
    first = await turn(runtime, agent, "タワーの高さは?")
    result = await turn(runtime, agent, "振り返って", session_id=first.session_id)
    skills = {s.name: s for s in runtime.engine.skills_for(agent).list()}
    assert skills["exp-skill"].source == "experience"
    assert skills["peer-skill"].source == "peer"
    assert skills["具体例で説明"].source == "reflection"
    assert skills["具体例で説明"].guidance == "具体例を1つ挙げる"
    assert skills["効果的な質問"].actions == ["send_speech"]
    assert only(result, "reflect_and_learn")["learned"] is True
    found = only(result, "search_my_history")
    assert any("333" in hit["content"] for hit in found["results"])
    workspace = Workspace.for_agent(runtime.settings, agent.id)
    assert "今日のまとめ" in workspace.read("summaries/today.md")
    written = parse_skill_text(workspace.read(only(result, "create_my_skill")["path"]))
    assert (written.name, written.actions) == ("効果的な質問", ("send_speech",))
    reflection_request = next(r for r in scripted.requests if not r.tools)
    assert "333" in str(reflection_request.messages[-1].content)


async def test_select_llm_durations(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(
        scripted,
        calls(
            ("select_llm", {"purpose": "tool_calling", "model_alias": "fast", "reason": "cheap"})
        ),
        speak("on the fast model"),
        calls(
            (
                "select_llm",
                {
                    "purpose": "tool_calling",
                    "model_alias": "smart",
                    "reason": "r",
                    "duration": "this_session",
                },
            )
        ),
        speak("session"),
        calls(
            (
                "select_llm",
                {
                    "purpose": "thinking",
                    "model_alias": "reasoning",
                    "reason": "r",
                    "duration": "permanent",
                },
            ),
            ("select_llm", {"purpose": "thinking", "model_alias": "gpt-4-turbo", "reason": "r"}),
        ),
        speak("permanent"),
    )
    first = await turn(runtime, agent)
    assert [r.model for r in scripted.requests] == ["gpt-5.2", "gpt-5-mini"]
    second = await turn(runtime, agent, session_id=first.session_id)
    assert session_overrides(runtime.db, second.session_id, agent.id) == {
        "tool_calling": "openai/gpt-5.2"
    }
    third = await turn(runtime, agent, session_id=first.session_id)
    refused = [a for a in third.actions if a.name == "select_llm"][1]
    assert "このモデルは選択できません" in (refused.result.error or "")
    stored = runtime.agents.get(agent.id).llm_config.models.thinking
    assert stored is not None
    assert (stored.provider, stored.model) == ("openai", "gpt-5.2-pro")


async def test_meta_analysis_actions_use_real_metrics(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(
        scripted,
        calls(
            (
                "evaluate_response",
                {"quality_score": 0.9, "task_success": True, "evaluation": "accurate"},
            )
        ),
        calls(
            ("analyze_llm_usage", {"period": "last_day", "group_by": "model"}),
            ("get_llm_metrics", {"period": "last_day"}),
            ("compare_models", {"models": ["fast", "smart"]}),
            ("optimize_model_selection", {"optimization_goal": "minimize_cost"}),
            ("get_available_models", {}),
            ("get_current_llm_config", {}),
        ),
        speak("analysed"),
    )
    result = await turn(runtime, agent)
    with runtime.db.read() as conn:
        rated = (
            conn.execute(
                sa.select(llm_usage_metrics.c.quality_score).where(
                    llm_usage_metrics.c.quality_score.is_not(None)
                )
            )
            .scalars()
            .all()
        )
    assert rated == [0.9]
    analysis = only(result, "analyze_llm_usage")
    assert analysis["calls"] == 2
    assert analysis["total_tokens"] == 30
    metrics = only(result, "get_llm_metrics")
    assert metrics["total"]["usage_count"] == 2
    compared = only(result, "compare_models")
    assert len(compared["models"]) == 2
    assert only(result, "optimize_model_selection")["calls_considered"] >= 2
    aliases = [m["alias"] for m in only(result, "get_available_models")["models"]]
    assert "fast" in aliases
    current = only(result, "get_current_llm_config")
    assert current["effective"]["tool_calling"] is None  # no agent-level choice


async def test_facilitator_may_broadcast_guidance(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    lead = runtime.agents.create(
        AgentCreate(name="lead", identity=Identity(name="Lead", role=AgentRole.facilitator()))
    )
    queue(
        scripted,
        calls(("broadcast_guidance", {"content": "意見を出しましょう", "phase": "convergent"})),
    )
    result = await turn(runtime, lead)
    assert (result.reply, result.stopped_by) == ("意見を出しましょう", "broadcast_guidance")
    offered = {t.name for t in scripted.requests[0].tools or []}
    assert "broadcast_guidance" in offered
    with runtime.db.read() as conn:
        phase = conn.execute(
            sa.select(sessions.c.phase).where(sessions.c.id == result.session_id)
        ).scalar()
    assert phase == "convergent"


async def test_switched_off_skill_takes_its_actions_away(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    runtime.engine.skills_for(agent).toggle("workspace-management", False)
    queue(scripted, calls(("ws_write", {"path": "a", "content": "b"})), speak("no"))
    result = await turn(runtime, agent)
    assert not result.actions[0].result.success
    assert "ws_write" not in {t.name for t in scripted.requests[0].tools or []}


# ------------------------------------------------------------------ context window
async def test_old_turns_are_summarised_when_the_window_fills(
    runtime: Runtime, agent: Agent
) -> None:
    small = SmallWindow("openai", "ok")
    runtime.router.register_provider(small)
    session = None
    compactions: list[Compacted] = []
    for n in range(12):
        small.outcomes.clear()
        small.then(speak(f"reply {n}: " + "話 " * 300))
        async for step in runtime.turns.chat_steps(
            agent, f"message {n}: " + "words " * 300, session_id=session
        ):
            if isinstance(step, Compacted):
                compactions.append(step)
            if isinstance(step, TurnResult):
                session = step.session_id
    assert compactions, "the history never needed compacting"
    for request in small.requests:
        if request.tools is None:
            continue  # the summary call itself
        used = sum(message_tokens(m) for m in request.messages) + tools_tokens(request.tools)
        assert used <= 9000
        system = str(request.messages[0].content)
        assert "【IDENTITY】" in system
        assert "【SOUL】" in system
        assert "【PROMPT】\nYou keep notes." in system
    events = EventLog(runtime.db).trace(str(session))
    marks = [
        e
        for e in events
        if isinstance(e, MessageEvent) and e.metadata and e.metadata.get("kind") == COMPACTION_KIND
    ]
    assert len(marks) == len(compactions)
    assert marks[0].metadata is not None
    assert marks[0].metadata["dropped_turns"] >= 1
    notes = MemoryManager(runtime.db, agent.id).search("会話を要約しました")
    assert notes
    summary_requests = [r for r in small.requests if r.tools is None]
    assert summary_requests  # summarised by the model before dropping
    assert estimate_tokens("abc") >= 1


# ------------------------------------------------------------------ streaming
async def test_streaming_yields_text_deltas(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(scripted, "Streaming words arrive piece by piece")
    deltas = []
    async for step in runtime.turns.chat_steps(agent, "hi", stream=True):
        if isinstance(step, TextDelta):
            deltas.append(step.text)
        if isinstance(step, TurnResult):
            assert step.reply == "Streaming words arrive piece by piece"
    assert len(deltas) > 1
    assert "".join(deltas) == "Streaming words arrive piece by piece"
    request: ChatRequest = scripted.requests[0]
    assert request.tools


class NoTools(ScriptedProvider):
    def supports_function_calling(self) -> bool:
        return False


async def test_a_model_without_tools_gets_a_plain_instruction(
    runtime: Runtime, agent: Agent
) -> None:
    plain = NoTools("openai", "I am a small model.")
    runtime.router.register_provider(plain)
    result = await turn(runtime, agent)
    assert (result.reply, result.stopped_by) == ("I am a small model.", "message")
    request = plain.requests[0]
    assert request.tools is None
    system = str(request.messages[0].content)
    assert "【利用可能なスキル】" not in system
    assert "必ず1つ以上のアクションを呼び出してください" not in system
    assert system.endswith("あなたの人格と役割に沿って、受信メッセージに簡潔に返答してください。\n")


@pytest.fixture
def db(any_db: Database) -> Database:
    """Every engine test here runs on SQLite and on PostgreSQL (issue 19)."""
    return any_db
