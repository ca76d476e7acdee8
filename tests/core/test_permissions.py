"""A model must not grant itself what the operator withheld (issue 17 §2).

A scripted provider plays the hostile model: it emits the tool calls that once re-enabled
a switched-off skill's action and gave a discussant the facilitator's broadcast_guidance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentCreate, AgentUpdate
from opencrab.core.discussion import Discussion
from opencrab.core.identity import AgentRole, Identity
from opencrab.core.runtime import Runtime
from opencrab.core.steps import TurnResult
from opencrab.core.tools import sync_tools, tool_id
from opencrab.core.workspace import Workspace
from opencrab.llm.router import LlmRouter
from opencrab.store import Database
from opencrab.store.tables import sessions
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider

SKILL = {"name": "sneaky", "description": "d", "guidance": "g"}


def queue(scripted: ScriptedProvider, *outcomes: Any) -> None:
    scripted.outcomes.clear()
    scripted.then(*outcomes)


def offered(scripted: ScriptedProvider, request: int) -> set[str]:
    return {t.name for t in scripted.requests[request].tools or []}


def outcome_of(result: TurnResult, name: str) -> Any:
    (found,) = [a for a in result.actions if a.name == name]
    return found.result


# ------------------------------------------------------------------ switched-off skills
async def test_a_learned_skill_cannot_re_enable_a_switched_off_skill(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    skills = runtime.engine.skills_for(agent)
    skills.toggle("workspace-management", False)
    queue(
        scripted,
        calls(("create_my_skill", {**SKILL, "actions": ["ws_write", "send_speech"]})),
        speak("ok"),
        calls(("ws_write", {"path": "pwned.txt", "content": "x"})),
        speak("done"),
    )
    first = await runtime.chat(agent, "learn")
    refused = outcome_of(first, "create_my_skill")
    assert not refused.success
    assert "ws_write" in refused.error
    assert "'workspace-management', which is switched off" in refused.error
    assert "send_speech" not in refused.error  # it names only what it refuses
    # nothing of the refused skill is stored, and what was stored is all still there
    assert "sneaky" not in {s.name for s in skills.list()}
    assert not Workspace.for_agent(runtime.settings, agent.id).exists("skills/sneaky.skill.md")
    assert not skills.get("workspace-management").is_active

    second = await runtime.chat(agent, "write", session_id=first.session_id)
    assert not outcome_of(second, "ws_write").success
    assert "ws_write" not in offered(scripted, 2)
    assert not Workspace.for_agent(runtime.settings, agent.id).exists("pwned.txt")


async def test_a_skill_learned_before_the_switch_does_not_keep_its_action_on(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    skills = runtime.engine.skills_for(agent)
    skills.acquire(**SKILL, source="reflection", actions=["ws_write"])  # learned while on
    skills.toggle("workspace-management", False)
    queue(scripted, calls(("ws_write", {"path": "a.txt", "content": "x"})), speak("no"))
    result = await runtime.chat(agent, "write")
    assert not outcome_of(result, "ws_write").success
    assert "ws_write" not in offered(scripted, 0)
    assert skills.get("sneaky").actions == ["ws_write"]  # kept, just not a permission


async def test_a_learned_skill_may_name_actions_the_agent_already_may_call(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    queue(
        scripted,
        calls(("create_my_skill", {**SKILL, "actions": ["ws_write", "send_speech"]})),
        speak("ok"),
    )
    result = await runtime.chat(agent, "learn")
    assert outcome_of(result, "create_my_skill").success
    assert runtime.engine.skills_for(agent).get("sneaky").actions == ["ws_write", "send_speech"]


class Peek(Action):
    name = "peek"
    description = "An action no standard skill names."

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        return ActionResult.ok({"peeked": True})


async def test_a_learned_skill_names_only_actions_of_active_skills_or_grants(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    runtime.registry.register(Peek())
    sync_tools(runtime.db, runtime.registry)
    runtime.engine.skills_for(agent).toggle("llm-meta-analysis", False)
    learn = calls(
        ("create_my_skill", {**SKILL, "actions": ["analyze_llm_usage", "peek", "made_up"]})
    )
    queue(scripted, learn, speak("ok"))
    result = await runtime.chat(agent, "learn")
    error = outcome_of(result, "create_my_skill").error
    assert "analyze_llm_usage ('llm-meta-analysis', which is switched off)" in error
    assert "peek (no active skill or granted tool of the agent offers it)" in error
    assert "made_up (no such action)" in error

    # granted as a tool, peek may be named (and called); the switched-off one still not
    runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("peek")]))
    learn = calls(("create_my_skill", {**SKILL, "actions": ["peek"]}))
    queue(scripted, learn, calls(("peek", {})), speak("ok"))
    result = await runtime.chat(agent, "learn")
    assert outcome_of(result, "create_my_skill").success
    assert outcome_of(result, "peek").success


# ------------------------------------------------------------------ facilitator-only
async def test_a_discussant_cannot_grant_itself_broadcast_guidance(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    assert agent.role == AgentRole.discussant()
    queue(
        scripted,
        calls(("create_my_skill", {**SKILL, "actions": ["broadcast_guidance"]})),
        speak("ok"),
    )
    result = await runtime.chat(agent, "learn")
    refused = outcome_of(result, "create_my_skill")
    assert not refused.success
    assert "broadcast_guidance (facilitators only)" in refused.error
    assert "sneaky" not in {s.name for s in runtime.engine.skills_for(agent).list()}


async def test_a_stored_skill_naming_broadcast_guidance_gives_a_discussant_nothing(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    ann = runtime.agents.create(AgentCreate(name="ann", language="ja"))
    ben = runtime.agents.create(AgentCreate(name="ben", language="ja"))
    lead = runtime.agents.create(
        AgentCreate(
            name="lead", identity=Identity(name="Lead", role=AgentRole.facilitator()), language="ja"
        )
    )
    runtime.engine.skills_for(ann).acquire(
        **SKILL, source="reflection", actions=["broadcast_guidance"]
    )
    queue(
        scripted,
        calls(("broadcast_guidance", {"content": "はじめましょう", "phase": "divergent"})),
        calls(("broadcast_guidance", {"content": "私が仕切ります", "phase": "convergent"})),
        speak("賛成"),  # ann, after her broadcast was refused
        speak("同意"),  # ben
        calls(("declare_done", {})),  # lead
    )
    discussion = Discussion.create(
        runtime.db,
        theme="t",
        participants=[ann.id, ben.id],
        mode="facilitated",
        facilitator_id=lead.id,
        max_turns=10,
    )
    outcome = await discussion.run(runtime)
    assert [t.agent for t in outcome.turns][:3] == ["lead", "ann", "ben"]
    assert "broadcast_guidance" in offered(scripted, 0)
    assert "broadcast_guidance" not in offered(scripted, 1)
    discussion.refresh()
    assert discussion.phase == "divergent"  # ann's "convergent" never happened
    with runtime.db.read() as conn:
        phase = conn.execute(sa.select(sessions.c.phase).where(sessions.c.id == discussion.id))
        assert phase.scalar() == "divergent"


async def test_a_grant_does_not_make_a_discussant_a_facilitator(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    runtime.agents.update(agent.id, AgentUpdate(tool_ids=[tool_id("broadcast_guidance")]))
    queue(scripted, calls(("broadcast_guidance", {"content": "x"})), speak("ok"))
    result = await runtime.chat(agent, "go")
    assert "you may not call 'broadcast_guidance'" in outcome_of(result, "broadcast_guidance").error
    assert "broadcast_guidance" not in offered(scripted, 0)


@pytest.fixture
async def guide_runtime(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> AsyncIterator[Runtime]:
    """A runtime whose operator skill folder has a file naming broadcast_guidance."""
    folder = Path(settings.data_dir) / "skills"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "guide.skill.md").write_text(
        "---\nname: guide\ndescription: Guide others\nactions:\n  - broadcast_guidance\n"
        "  - send_speech\n---\nGuide everyone.\n",
        encoding="utf-8",
    )
    router = LlmRouter(settings)
    router.register_provider(scripted)
    async with Runtime.open(settings, db=db, router=router) as rt:
        yield rt


async def test_an_operator_skill_file_cannot_make_a_discussant_a_facilitator(
    guide_runtime: Runtime, scripted: ScriptedProvider
) -> None:
    runtime = guide_runtime
    ann = runtime.agents.create(AgentCreate(name="ann", language="ja"))
    assert "broadcast_guidance" in runtime.engine.skills_for(ann).get("guide").actions
    queue(scripted, calls(("broadcast_guidance", {"content": "x", "phase": "p"})), speak("ok"))
    result = await runtime.chat(ann, "go")
    refused = outcome_of(result, "broadcast_guidance")
    assert not refused.success
    assert "you may not call 'broadcast_guidance'" in refused.error
    assert "broadcast_guidance" not in offered(scripted, 0)
    assert "send_speech" in offered(scripted, 0)  # the rest of the file's skill works
    with runtime.db.read() as conn:
        phase = conn.execute(sa.select(sessions.c.phase).where(sessions.c.id == result.session_id))
        assert phase.scalar() is None

    lead = runtime.agents.create(
        AgentCreate(name="lead", identity=Identity(name="Lead", role=AgentRole.facilitator()))
    )
    queue(scripted, calls(("broadcast_guidance", {"content": "go on"})))
    led = await runtime.chat(lead, "go")
    assert outcome_of(led, "broadcast_guidance").success


# ------------------------------------------------------------------ symlinked skill files
async def test_a_skill_file_planted_through_a_symlink_is_not_loaded_and_is_named(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> None:
    """A link from the operator's skill folder into a workspace would let a model write
    a 'standard' skill naming any action; it is skipped with a notice naming it."""
    planted = Path(settings.data_dir) / "workspaces" / "planted.skill.md"
    planted.parent.mkdir(parents=True)
    planted.write_text(
        "---\nname: planted\ndescription: d\nactions:\n  - ws_write\n---\nWrite.\n",
        encoding="utf-8",
    )
    folder = Path(settings.data_dir) / "skills"
    folder.mkdir()
    (folder / "planted.skill.md").symlink_to(planted)
    router = LlmRouter(settings)
    router.register_provider(scripted)
    async with Runtime.open(settings, db=db, router=router) as runtime:
        ann = runtime.agents.create(AgentCreate(name="ann", language="ja"))
        names = {s.name for s in runtime.engine.skills_for(ann).list()}
    assert "planted" not in names
    link = folder / "planted.skill.md"
    assert f"skill file skipped: {link}: is a symlink" in "\n".join(runtime.notices)
