"""An agent's language: the context, the standard skills, discussion prompts, learning and
compaction texts all come from it; it follows `[agent] language` unless the agent has its
own, and can be changed."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pydantic
import pytest
import sqlalchemy as sa

from opencrab.config import Settings, load_settings
from opencrab.core.agent import Agent, AgentCreate, AgentStore, AgentUpdate
from opencrab.core.discussion import Discussion
from opencrab.core.memory import MemoryManager
from opencrab.core.runtime import Runtime
from opencrab.core.steps import Compacted, TurnResult
from opencrab.llm.types import ChatRequest
from opencrab.prompts import prompts
from opencrab.store import Database
from opencrab.store.tables import agents as agents_table
from opencrab.store.tables import skills as skills_table
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider, SmallWindow
from tests.fakes.scripted_runtime import scripted_runtime

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef\u3000-\u303f]")


def queue(scripted: ScriptedProvider, *outcomes: object) -> None:
    scripted.outcomes.clear()
    scripted.then(*outcomes)  # type: ignore[arg-type]


def system_of(request: ChatRequest) -> str:
    assert request.messages[0].role == "system"
    return str(request.messages[0].content)


async def test_a_fresh_agent_gets_an_english_context(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="amy", prompt="You keep notes."))
    assert agent.language == "en"
    queue(scripted, "Hello!")
    result = await runtime.chat(agent, "Hello! Please note that Tokyo is sunny today.")
    assert result.reply == "Hello!"
    request = scripted.requests[-1]
    system = system_of(request)
    assert not CJK.search(system), CJK.findall(system)[:10]
    assert system.startswith("Your name is amy and your role is Discussant.\n\n")
    assert "Your persona is amy." in system
    assert "Your thinking: logical first, intuitive second." in system
    assert "Your instructions:\nYou keep notes." in system
    assert "Your skills:\n" in system
    assert "# Autonomous mode manual" in system  # the English standard skill
    assert "Your LLM settings:" in system
    assert system.endswith(prompts("en")["instruction"])
    assert request.messages[-1].content == "Hello! Please note that Tokyo is sunny today."


async def test_zh_and_ja_agents_get_their_language(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    zh = runtime.agents.create(AgentCreate(name="li", language="zh"))
    ja = runtime.agents.create(AgentCreate(name="aki", language="ja"))
    queue(scripted, "好", "はい")
    await runtime.chat(zh, "你好")
    await runtime.chat(ja, "こんにちは")
    zh_system, ja_system = (system_of(r) for r in scripted.requests[-2:])
    assert zh_system.startswith("【IDENTITY】\n名字: li\n角色: Discussant\n\n【SOUL】\n人格: li\n")
    assert "思维风格: 逻辑型（次: 直觉型）" in zh_system
    assert "# 自主模式手册" in zh_system
    assert zh_system.endswith("必须调用至少一个动作。\n")
    assert scripted.requests[-2].messages[-1].content == "收到的消息: 你好"
    assert ja_system.startswith(
        "【IDENTITY】\n名前: aki\n役割: Discussant\n\n【SOUL】\nペルソナ: aki\n"
    )
    assert "思考スタイル: 論理的（副: 直感的）" in ja_system
    assert "# 自律モードマニュアル" in ja_system
    assert ja_system.endswith(prompts("ja")["instruction"])
    assert scripted.requests[-1].messages[-1].content == "受信メッセージ: こんにちは"


@pytest.fixture
async def ja_server(
    settings: Settings, db: Database, scripted: ScriptedProvider
) -> AsyncIterator[Runtime]:
    """A runtime whose [agent] language is ja."""
    ja = settings.model_copy(update={"agent": settings.agent.model_copy(update={"language": "ja"})})
    async with scripted_runtime(ja, db, scripted) as rt:
        yield rt


async def test_agents_follow_the_server_language_unless_they_have_their_own(
    ja_server: Runtime, db: Database, settings: Settings, scripted: ScriptedProvider
) -> None:
    follows = ja_server.agents.create(AgentCreate(name="follows"))
    own = ja_server.agents.create(AgentCreate(name="own", language="en"))
    assert (follows.language, own.language) == ("ja", "en")
    with db.read() as conn:
        stored = dict(conn.execute(sa.select(agents_table.c.name, agents_table.c.language)).all())
    assert stored == {"follows": None, "own": "en"}  # only a chosen language is stored
    queue(scripted, "はい")
    await ja_server.chat(follows, "hi")
    assert system_of(scripted.requests[-1]).startswith("【IDENTITY】\n名前: follows")
    # the same rows under the default (en) server: the follower now speaks English
    en_store = AgentStore(db, settings)
    assert (en_store.get("follows").language, en_store.get("own").language) == ("en", "en")


async def test_changing_the_language_switches_context_and_standard_skills(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="sam", language="ja"))
    skills = runtime.engine.skills_for(agent)
    skills.record_action_use("send_speech")
    skills.toggle("llm-selection", False)
    assert skills.get("autonomous").guidance.startswith("# 自律モードマニュアル")

    for language, heading in (("en", "# Autonomous mode manual"), ("ja", "# 自律モードマニュアル")):
        agent = runtime.agents.update(agent.id, AgentUpdate(language=language))
        assert agent.language == language
        queue(scripted, "ok")
        await runtime.chat(agent, "hi")
        system = system_of(scripted.requests[-1])
        assert heading in system
        autonomous = runtime.engine.skills_for(agent).get("autonomous")
        assert autonomous.guidance.startswith(heading)
        assert autonomous.description == prompts_skill_description(language)
        # the agent's own bookkeeping survives the switch
        assert autonomous.usage_count == 1
        assert runtime.engine.skills_for(agent).get("llm-selection").is_active is False
    with runtime.db.read() as conn:
        count = conn.execute(
            sa.select(sa.func.count())
            .select_from(skills_table)
            .where(skills_table.c.agent_id == agent.id)
        ).scalar()
    assert count == 5  # switched in place, never duplicated


def prompts_skill_description(language: str) -> str:
    return {
        "en": "Autonomous mode skill - join a discussion on your own initiative, "
        "without a facilitator",
        "ja": "自律モードスキル - ファシリテーターなしで自発的に議論に参加する",
    }[language]


def test_an_unknown_language_is_refused_naming_the_allowed_values(
    db: Database, settings: Settings
) -> None:
    store = AgentStore(db, settings)
    with pytest.raises(pydantic.ValidationError, match="'en', 'ja' or 'zh'"):
        AgentCreate(name="x", language="fr")  # type: ignore[arg-type]
    agent = store.create(AgentCreate(name="x", language="zh"))
    with pytest.raises(pydantic.ValidationError, match="'en', 'ja' or 'zh'"):
        AgentUpdate(language="klingon")  # type: ignore[arg-type]
    assert store.get(agent.id).language == "zh"  # nothing lost


async def test_discussion_prompts_are_in_each_participants_language(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    en = runtime.agents.create(AgentCreate(name="eve"))
    ja = runtime.agents.create(AgentCreate(name="kei", language="ja"))
    discussion = Discussion.create(
        runtime.db, theme="Four-day week", participants=[en.id, ja.id], max_turns=8
    )
    queue(scripted, speak("I am for it."), speak("賛成です"))
    await discussion.take_turn(runtime, en)
    await discussion.take_turn(runtime, ja)
    to_en, to_ja = (str(r.messages[-1].content) for r in scripted.requests[-2:])
    assert to_en == (
        "Discussion: Four-day week\n"
        "Mode: autonomous / phase: divergent / turn: 1/8\n"
        "Nobody has spoken yet.\n" + prompts("en")["discussion_your_turn"]
    )
    assert to_ja.startswith("受信メッセージ: 【議論】テーマ: Four-day week\n")
    assert "これまでの発言:\n- eve: I am for it." in to_ja


async def test_learning_results_and_reflection_prompts_use_the_language(
    runtime: Runtime, scripted: ScriptedProvider
) -> None:
    agent = runtime.agents.create(AgentCreate(name="lee"))
    queue(
        scripted,
        calls(
            (
                "create_my_skill",
                {
                    "name": "ask why",
                    "description": "Ask why",
                    "guidance": "Ask",
                    "situation_pattern": "a claim",
                },
            ),
            ("reflect_and_learn", {}),
        ),
        '{"skill_name": null}',
        "done",
    )
    result = await runtime.chat(agent, "learn something")
    created = next(a for a in result.actions if a.name == "create_my_skill").result
    assert created.data is not None
    assert created.data["message"] == "You created your own skill"
    skill_file = runtime.engine.skills_for(agent).get("ask why")
    assert skill_file.source == "reflection"
    written = (
        runtime.action_context(agent).workspace.root / "skills" / "ask-why.skill.md"
    ).read_text(encoding="utf-8")
    assert "## When to use\na claim\n" in written
    assert "## Guidance\nAsk\n" in written
    reflection = next(r for r in scripted.requests if r.tools is None)
    assert reflection.messages[0].content == prompts("en")["reflect_system"]
    assert str(reflection.messages[1].content).startswith(
        "Focus: what worked, what did not, what to do differently\n\nLog:\n"
    )


async def test_compaction_summarises_in_the_agents_language(runtime: Runtime) -> None:
    agent = runtime.agents.create(AgentCreate(name="max", prompt="You keep notes."))
    small = SmallWindow("openai", "ok")
    runtime.router.register_provider(small)
    session = None
    compacted = False
    for n in range(12):
        small.outcomes.clear()
        small.then(speak(f"reply {n}: " + "talk " * 300))
        async for step in runtime.turns.chat_steps(
            agent, f"message {n}: " + "words " * 300, session_id=session
        ):
            compacted = compacted or isinstance(step, Compacted)
            if isinstance(step, TurnResult):
                session = step.session_id
    assert compacted
    summary = next(r for r in small.requests if r.tools is None)
    assert summary.messages[0].content == prompts("en")["compaction_system"]
    assert str(summary.messages[1].content).startswith("User: message 0: words")
    notes = MemoryManager(runtime.db, agent.id).search("Summarised the conversation")
    assert notes


async def test_reading_an_agent_needs_no_language_in_its_row(
    db: Database, settings: Settings
) -> None:
    store = AgentStore(db, settings)
    agent = store.create(AgentCreate(name="old"))
    zh = load_settings(env={"OPENCRAB_AGENT__LANGUAGE": "zh"}, cwd=settings.data_dir.parent)
    assert AgentStore(db, zh).get(agent.id).language == "zh"
    assert isinstance(store.get(agent.id), Agent)
