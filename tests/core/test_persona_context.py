"""SOUL, IDENTITY and LLM-config context blocks in the seed's exact format; agents stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import pytest
import sqlalchemy as sa

from opencrab.config import Settings
from opencrab.config.models import ModelRef
from opencrab.core.agent import AgentCreate, AgentStore, AgentUpdate, load_persona
from opencrab.core.identity import AgentRole, Identity
from opencrab.core.llm_config import (
    AgentLlmConfig,
    AgentModels,
    build_llm_context,
    effective_model,
    session_overrides,
    set_session_override,
)
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.sessions import ensure_chat_session
from opencrab.core.soul import Personality, SocialStyle, Soul, ThinkingStyle
from opencrab.errors import BudgetExceeded, ConflictError, NotFoundError, ValidationError
from opencrab.store import Database
from opencrab.store.tables import identity, llm_usage_metrics, memory_sessions, soul


def test_soul_context_is_the_seed_format() -> None:
    persona = Soul(
        persona_name="慎重な分析家",
        social_style=SocialStyle(assertiveness=0.7, responsiveness=-0.25),
        personality=Personality(
            openness=0.8,
            conscientiousness=0.9,
            extraversion=0.3,
            agreeableness=0.6,
            neuroticism=0.2,
        ),
        thinking_style=ThinkingStyle(
            primary="論理的", secondary="分析的", description="根拠を重視"
        ),
    )
    assert persona.build_context() == (
        "【SOUL】\n"
        "ペルソナ: 慎重な分析家\n"
        "ソーシャルスタイル: Driving（主張性: 0.7, 感情性: -0.2）\n"
        "性格特性:\n"
        "  - 開放性: 0.8\n"
        "  - 誠実性: 0.9\n"
        "  - 外向性: 0.3\n"
        "  - 協調性: 0.6\n"
        "  - 神経症傾向: 0.2\n"
        "思考スタイル: 論理的（副: 分析的）\n"
        "根拠を重視"
    )
    assert SocialStyle(assertiveness=-0.5, responsiveness=0.5).style_name == "Amiable"
    assert SocialStyle(assertiveness=-0.5, responsiveness=-0.5).style_name == "Analytical"
    assert SocialStyle(assertiveness=0.5, responsiveness=0.5).style_name == "Expressive"
    with pytest.raises(ValueError, match="less than or equal to 1"):
        Personality(openness=1.5)


def test_identity_context_and_roles() -> None:
    who = Identity(name="Aki", role="custom:司会補佐", job_title="PM", organization="Crab Inc")
    assert who.build_context() == (
        '【IDENTITY】\n名前: Aki\n役割: Custom("司会補佐")\n職種: PM\n所属: Crab Inc'
    )
    assert Identity(name="Bo").build_context() == "【IDENTITY】\n名前: Bo\n役割: Discussant"
    assert str(AgentRole.parse("FACILITATOR")) == "Facilitator"
    assert AgentRole.parse('Custom("x")') == AgentRole.custom_role("x")
    assert AgentRole.parse({"custom": "y"}).stored() == "custom:y"
    assert AgentRole.parse(AgentRole.observer().stored()) == AgentRole.observer()
    with pytest.raises(ValidationError, match="not one of"):
        AgentRole.parse("emperor")


def test_llm_context_and_model_precedence(settings: Settings, db: Database) -> None:
    config = AgentLlmConfig(
        models=AgentModels(thinking=ModelRef(provider="anthropic", model="claude-opus-4.6")),
        selectable_models=["fast", "smart"],
    )
    text = build_llm_context(config, {"analysis": "openai/gpt-5-mini"}, settings=settings)
    assert text == (
        "【現在のLLM設定】\n"
        "- デフォルト: openai/gpt-4o\n"
        "- 思考用: anthropic/claude-opus-4.6\n"
        "- 会話用: openai/gpt-5.2\n"
        "- ツールコーリング用: openai/gpt-5.2\n"
        "- 分析用: openai/gpt-5-mini\n"
        "\n"
        "【選択可能なモデル】\n"
        "- fast: openai/gpt-5-mini\n"
        "- smart: openai/gpt-5.2\n"
        "\n"
        "LLMを切り替えたい場合は select_llm アクションを使用してください。"
    )
    turn, session = {"thinking": "openai/gpt-5.2-pro"}, {"thinking": "openai/gpt-5.2"}
    ref = effective_model(config, "thinking", turn, session)
    assert ref is not None
    assert ref.model == "gpt-5.2-pro"
    ref = effective_model(config, "thinking", {}, session)
    assert ref is not None
    assert ref.model == "gpt-5.2"
    ref = effective_model(config, "thinking", {}, {})
    assert ref is not None
    assert ref.model == "claude-opus-4.6"
    assert effective_model(config, "analysis", {}, {}) is None
    agent = AgentStore(db, settings).create(AgentCreate(name="sel"))
    chat = ensure_chat_session(db, agent.id)
    set_session_override(db, chat, agent.id, "analysis", "openai/gpt-5-mini")
    assert session_overrides(db, chat, agent.id) == {"analysis": "openai/gpt-5-mini"}
    with pytest.raises(ValidationError):
        set_session_override(db, chat, agent.id, "dreaming", "openai/gpt-5-mini")


def test_agent_store_lifecycle(db: Database, settings: Settings) -> None:
    store = AgentStore(db, settings)
    agent = store.create(AgentCreate(name="kai", prompt="p"))
    assert store.get("kai").id == agent.id
    assert store.get(agent.id).name == "kai"
    assert agent.heartbeat.interval_secs == 29
    with pytest.raises(ConflictError):
        store.create(AgentCreate(name="kai"))
    with pytest.raises(ValueError, match="UUID"):
        AgentCreate(name=str(uuid4()))
    other = store.create(AgentCreate(name="lea"))
    with pytest.raises(ConflictError):
        store.update("lea", AgentUpdate(name="kai"))
    updated = store.update(
        "kai", AgentUpdate(identity=Identity(name="Kai", role="observer"), prompt="q")
    )
    assert (updated.prompt, updated.role) == ("q", AgentRole.observer())
    MemoryManager(db, agent.id).append_session_log(
        SessionLog(session_id=str(uuid4()), log_type="speech", content="bye")
    )
    store.delete("kai")
    with pytest.raises(NotFoundError):
        store.get("kai")
    with db.read() as conn:
        for table in (soul, identity, memory_sessions):
            assert (
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(table)
                    .where(table.c.agent_id == agent.id)
                ).scalar()
                == 0
            )
    assert [a.name for a in store.list()] == [other.name]


def test_persona_files(tmp_path: Path) -> None:
    toml = tmp_path / "p.toml"
    toml.write_text('name = "t"\n[soul]\npersona_name = "P"\n[heartbeat]\ninterval_secs = 31\n')
    assert load_persona(toml).heartbeat is not None
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text("soul:\n  persona_name: P\n")
    assert load_persona(yaml_file, name="y").name == "y"
    with pytest.raises(ValidationError, match="no name"):
        load_persona(yaml_file)
    bad = tmp_path / "p.json"
    bad.write_text(
        '{"name": "j", "soul": {"persona_name": "P", "social_style": {"assertiveness": 3}}}'
    )
    with pytest.raises(ValidationError, match=r"p\.json: soul\.social_style\.assertiveness"):
        load_persona(bad)
    broken = tmp_path / "b.toml"
    broken.write_text("name = ")
    with pytest.raises(ValidationError, match="not valid TOML"):
        load_persona(broken)
    text = tmp_path / "p.txt"
    text.write_text("name = 'x'")
    with pytest.raises(ValidationError, match=r"are \.toml"):
        load_persona(text)


def test_budget_counts_only_today(db: Database, settings: Settings) -> None:
    store = AgentStore(db, settings)
    agent = store.create(AgentCreate(name="frugal", llm=AgentLlmConfig(daily_budget_usd=1.0)))
    now = datetime.now(UTC)

    def spend(amount: float, when: datetime) -> None:
        with db.write() as conn:
            conn.execute(
                llm_usage_metrics.insert().values(
                    id=str(uuid4()),
                    agent_id=agent.id,
                    timestamp=when,
                    provider="openai",
                    model="gpt-5.2",
                    purpose="analysis",
                    input_tokens=1,
                    output_tokens=1,
                    total_tokens=2,
                    estimated_cost_usd=amount,
                    latency_ms=1,
                    created_at=when,
                )
            )

    spend(5.0, now - timedelta(days=2))
    spend(0.4, now)
    assert store.spent_today(agent.id) == pytest.approx(0.4)
    store.check_budget(agent)
    spend(0.6, now)
    with pytest.raises(BudgetExceeded, match="daily budget"):
        store.check_budget(agent)
