"""An agent's own per-purpose models (seed 001 AgentModels) and select_llm choose who
answers every kind of call: discussion speech (conversation), reflect_and_learn and
compaction (analysis), the turn itself (tool_calling); every metrics row has its
purpose and complexity."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from opencrab.config.models import ModelRef
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.discussion import Discussion
from opencrab.core.heartbeat import Tick, heartbeat_act
from opencrab.core.llm_config import AgentLlmConfig, AgentModels
from opencrab.core.runtime import Runtime
from opencrab.core.steps import Compacted, TurnResult
from opencrab.store.tables import llm_usage_metrics
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider, SmallWindow

HAIKU = ModelRef(provider="anthropic", model="claude-haiku-4.5")
LESSON = json.dumps({"skill_name": None})


def anthropic(runtime: Runtime, *outcomes: Any) -> ScriptedProvider:
    provider = ScriptedProvider("anthropic", *outcomes)
    runtime.router.register_provider(provider)
    return provider


def own_models(runtime: Runtime, name: str, **models: ModelRef) -> Agent:
    config = AgentLlmConfig(models=AgentModels(**models))
    return runtime.agents.create(AgentCreate(name=name, prompt="Be brief.", llm=config))


async def metric_rows(runtime: Runtime) -> list[Any]:
    assert runtime.router.metrics is not None
    await runtime.router.metrics.flush()
    m = llm_usage_metrics.c
    with runtime.db.read() as conn:
        return list(
            conn.execute(
                sa.select(m.provider, m.model, m.purpose, m.task_type, m.complexity).order_by(
                    m.timestamp
                )
            )
        )


async def test_discussion_speech_uses_the_conversation_model(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    ann = own_models(runtime, "ann", conversation=HAIKU)
    ben = runtime.agents.create(AgentCreate(name="ben"))
    claude = anthropic(runtime, speak("ann speaks"), speak("ben speaks, creatively"))
    scripted.outcomes.clear()
    # ben has no model of his own: the server's conversation model, until he picks one
    scripted.then(
        calls(("select_llm", {"purpose": "conversation", "model_alias": "creative", "reason": "r"}))
    )
    discussion = Discussion.create(runtime.db, theme="crabs", participants=[ann.id, ben.id])

    assert (await discussion.take_turn(runtime, ann)).spoke == "ann speaks"
    assert (await discussion.take_turn(runtime, ben)).spoke == "ben speaks, creatively"

    assert [r.model for r in claude.requests] == ["claude-haiku-4.5", "claude-sonnet-4.5"]
    assert [r.model for r in scripted.requests] == ["gpt-5.2"]  # packaged conversation
    rows = await metric_rows(runtime)
    assert {(r.purpose, r.task_type) for r in rows} == {("conversation", "discussion")}


async def test_reflection_uses_the_analysis_model_and_select_llm_changes_it(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    aki = own_models(runtime, "aki", analysis=HAIKU)
    claude = anthropic(runtime, LESSON)
    scripted.outcomes.clear()
    scripted.then(speak("noted"))
    first = await runtime.chat(aki, "remember the tide tables")

    # the heartbeat's learn decision runs reflect_and_learn outside any turn
    await heartbeat_act(runtime, Tick(agent_id=aki.id, decision="learn", reason="r"))
    assert [r.model for r in claude.requests] == ["claude-haiku-4.5"]
    assert claude.requests[0].tools is None

    # select_llm for analysis in a turn: the reflection in that turn follows it
    scripted.outcomes.clear()
    scripted.then(
        calls(
            ("select_llm", {"purpose": "analysis", "model_alias": "smart", "reason": "r"}),
            ("reflect_and_learn", {}),
        ),
        LESSON,
        speak("done"),
    )
    await runtime.chat(aki, "reflect", session_id=first.session_id)
    reflection = [r for r in scripted.requests if r.tools is None]
    assert [r.model for r in reflection] == ["gpt-5.2"]
    assert len(claude.requests) == 1
    rows = await metric_rows(runtime)
    analysis = [(r.provider, r.model) for r in rows if r.task_type == "reflection"]
    assert analysis == [("anthropic", "claude-haiku-4.5"), ("openai", "gpt-5.2")]
    assert {r.purpose for r in rows if r.task_type == "reflection"} == {"analysis"}


async def test_compaction_uses_the_analysis_model(runtime: Runtime) -> None:
    aki = own_models(runtime, "aki", analysis=HAIKU)
    small = SmallWindow("openai", "ok")
    runtime.router.register_provider(small)
    claude = anthropic(runtime, "a short summary")
    session = None
    compacted = 0
    for n in range(12):
        small.outcomes.clear()
        small.then(speak(f"reply {n}: " + "話 " * 300))
        async for step in runtime.turns.chat_steps(
            aki, f"message {n}: " + "words " * 300, session_id=session
        ):
            compacted += isinstance(step, Compacted)
            if isinstance(step, TurnResult):
                session = step.session_id
    assert compacted
    assert claude.requests  # every summary came from the agent's analysis model
    assert all(r.model == "claude-haiku-4.5" and r.tools is None for r in claude.requests)
    assert all(r.tools is not None for r in small.requests)
    rows = await metric_rows(runtime)
    assert {(r.provider, r.purpose) for r in rows if r.task_type == "compaction"} == {
        ("anthropic", "analysis")
    }


async def test_every_metrics_row_has_a_complexity(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    aki = runtime.agents.create(AgentCreate(name="aki"))
    scripted.outcomes.clear()
    scripted.then(
        calls(("ws_write", {"path": "a.md", "content": "a"})),
        calls(("ws_write", {"path": "b.md", "content": "b"})),
        calls(("ws_write", {"path": "c.md", "content": "c"})),
        speak("written"),
    )
    await runtime.chat(aki, "write three files")
    rows = await metric_rows(runtime)
    # the first call has a short question and no tool round; then one, two, three rounds
    assert [r.complexity for r in rows] == ["simple", "medium", "medium", "complex"]


async def test_select_llm_for_thinking_and_creative_changes_the_model_of_that_work(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    kai = runtime.agents.create(AgentCreate(name="kai", prompt="Be brief."))
    claude = anthropic(runtime, speak("a poem, from the creative model"), speak("more verse"))
    scripted.outcomes.clear()
    scripted.then(
        # this turn: think it through on the reasoning model
        calls(("select_llm", {"purpose": "thinking", "model_alias": "reasoning", "reason": "r"})),
        speak("thought through"),
        # this session: write with the creative model; a permanent creative one is refused
        calls(
            (
                "select_llm",
                {
                    "purpose": "creative",
                    "model_alias": "creative",
                    "reason": "r",
                    "duration": "permanent",
                },
            ),
            (
                "select_llm",
                {
                    "purpose": "creative",
                    "model_alias": "creative",
                    "reason": "r",
                    "duration": "this_session",
                },
            ),
        ),
        speak("plain again"),
    )
    first = await runtime.chat(kai, "solve the puzzle")
    assert [r.model for r in scripted.requests] == ["gpt-5.2", "gpt-5.2-pro"]

    second = await runtime.chat(kai, "now write", session_id=first.session_id)
    refused, chosen = [a for a in second.actions if a.name == "select_llm"]
    assert "use duration this_turn or this_session" in (refused.result.error or "")
    assert chosen.result.success
    assert second.reply == "a poem, from the creative model"  # the rest of the turn
    assert [r.model for r in claude.requests] == ["claude-sonnet-4.5"]

    third = await runtime.chat(kai, "more", session_id=first.session_id)
    assert third.reply == "more verse"  # the session's later turns too
    assert [r.model for r in claude.requests] == ["claude-sonnet-4.5"] * 2
    other = await runtime.chat(kai, "a new session")
    assert other.reply == "plain again"  # another session: the turn's own model
    rows = await metric_rows(runtime)
    assert [(r.model, r.purpose) for r in rows] == [
        ("gpt-5.2", "tool_calling"),
        ("gpt-5.2-pro", "thinking"),
        ("gpt-5.2", "tool_calling"),
        ("claude-sonnet-4.5", "creative"),
        ("claude-sonnet-4.5", "creative"),
        ("gpt-5.2", "tool_calling"),
    ]
