"""Soul, Identity and the per-agent LLM config: the seed's context blocks character for
character, validation, role parsing, model precedence and session overrides."""

from __future__ import annotations

from uuid import uuid4

import pydantic
import pytest
import sqlalchemy as sa

from opencrab.config import Settings, load_settings
from opencrab.config.models import ModelRef
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.identity import AgentRole, Identity
from opencrab.core.llm_config import (
    PURPOSES,
    AgentLlmConfig,
    AgentModels,
    build_llm_context,
    effective_model,
    session_overrides,
    set_session_override,
)
from opencrab.core.sessions import ensure_chat_session
from opencrab.core.soul import Personality, SocialStyle, Soul, ThinkingStyle, quadrant
from opencrab.errors import NotFoundError, ValidationError
from opencrab.store import Database
from opencrab.store.tables import sessions

# ------------------------------------------------------------------ soul
SEED_SOUL = Soul(
    persona_name="X",
    social_style=SocialStyle(assertiveness=0.7, responsiveness=-0.3),
    personality=Personality(
        openness=0.8,
        conscientiousness=0.9,
        extraversion=0.4,
        agreeableness=0.6,
        neuroticism=0.1,
    ),
    thinking_style=ThinkingStyle(
        primary="分析的", secondary="論理的", description="データを重視する"
    ),
)


def test_soul_context_is_the_seed_format() -> None:
    assert SEED_SOUL.build_context("ja") == (
        "【SOUL】\n"
        "ペルソナ: X\n"
        "ソーシャルスタイル: Driving（主張性: 0.7, 感情性: -0.3）\n"
        "性格特性:\n"
        "  - 開放性: 0.8\n"
        "  - 誠実性: 0.9\n"
        "  - 外向性: 0.4\n"
        "  - 協調性: 0.6\n"
        "  - 神経症傾向: 0.1\n"
        "思考スタイル: 分析的（副: 論理的）\n"
        "データを重視する"
    )


def test_default_soul_context() -> None:
    assert Soul(persona_name="aki").build_context("ja") == (
        "【SOUL】\n"
        "ペルソナ: aki\n"
        "ソーシャルスタイル: Expressive（主張性: 0.0, 感情性: 0.0）\n"
        "性格特性:\n"
        "  - 開放性: 0.5\n"
        "  - 誠実性: 0.5\n"
        "  - 外向性: 0.5\n"
        "  - 協調性: 0.5\n"
        "  - 神経症傾向: 0.5\n"
        "思考スタイル: 論理的（副: 直感的）\n"
    )


def test_numbers_have_one_decimal() -> None:
    soul = Soul(
        persona_name="p",
        social_style=SocialStyle(assertiveness=-1, responsiveness=1),
        personality=Personality(openness=1, conscientiousness=0, extraversion=0.333),
    )
    text = soul.build_context("ja")
    assert "Amiable（主張性: -1.0, 感情性: 1.0）" in text
    assert "  - 開放性: 1.0\n" in text
    assert "  - 誠実性: 0.0\n" in text
    assert "  - 外向性: 0.3\n" in text


@pytest.mark.parametrize(
    ("assertiveness", "responsiveness", "name"),
    [
        (0.7, -0.3, "Driving"),
        (0.5, 0.5, "Expressive"),
        (-0.5, 0.5, "Amiable"),
        (-0.4, -0.6, "Analytical"),
        (0.0, 0.0, "Expressive"),  # the axes count as the assertive / feeling side
        (0.0, -0.01, "Driving"),
        (-0.01, 0.0, "Amiable"),
        (-1.0, -1.0, "Analytical"),
    ],
)
def test_quadrant_names(assertiveness: float, responsiveness: float, name: str) -> None:
    assert quadrant(assertiveness, responsiveness) == name
    style = SocialStyle(assertiveness=assertiveness, responsiveness=responsiveness)
    assert style.style_name == name


def test_a_given_style_name_is_kept() -> None:
    style = SocialStyle(assertiveness=0.9, responsiveness=0.9, style_name="Analytical")
    assert style.style_name == "Analytical"
    assert "ソーシャルスタイル: Analytical（" in Soul(
        persona_name="p", social_style=style
    ).build_context("ja")


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (
            {"persona_name": "p", "social_style": {"assertiveness": 1.01}},
            "social_style.assertiveness",
        ),
        (
            {"persona_name": "p", "social_style": {"responsiveness": -1.5}},
            "social_style.responsiveness",
        ),
        ({"persona_name": "p", "personality": {"openness": 1.2}}, "personality.openness"),
        ({"persona_name": "p", "personality": {"neuroticism": -0.1}}, "personality.neuroticism"),
        ({"persona_name": ""}, "persona_name"),
        ({"persona_name": "p" * 201}, "persona_name"),
        ({}, "personaName"),  # a missing field is named as the API spells it
        ({"persona_name": "p", "mood": "happy"}, "mood"),
        ({"persona_name": "p", "personality": {"humour": 0.5}}, "personality.humour"),
    ],
)
def test_soul_validation_names_the_field(data: dict[str, object], where: str) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        Soul.model_validate(data)
    locations = {".".join(str(p) for p in e["loc"]) for e in caught.value.errors()}
    assert where in locations


def test_soul_range_messages() -> None:
    with pytest.raises(pydantic.ValidationError, match="less than or equal to 1"):
        Personality(openness=1.5)
    with pytest.raises(pydantic.ValidationError, match="greater than or equal to -1"):
        SocialStyle(assertiveness=-2)


def test_soul_round_trips_through_json() -> None:
    soul = SEED_SOUL.model_copy(update={"custom_traits": {"口癖": "なるほど", "level": 3}})
    again = Soul.model_validate_json(soul.model_dump_json())
    assert again == soul
    assert again.build_context("ja") == soul.build_context("ja")


def test_values_and_custom_traits_follow_the_seed_block() -> None:
    soul = SEED_SOUL.model_copy(
        update={
            "custom_traits": {
                "values": ["誠実さ", "好奇心"],
                "口癖": "なるほど",
                "level": 3,
                "hobbies": ["将棋"],
            }
        }
    )
    assert soul.build_context("ja") == SEED_SOUL.build_context("ja") + (
        "\n価値観: 誠実さ、好奇心"
        "\nその他の特性:"
        "\n  - 口癖: なるほど"
        "\n  - level: 3"
        '\n  - hobbies: ["将棋"]'
    )
    english = soul.build_context("en")
    assert english.startswith(SEED_SOUL.build_context("en").rstrip("\n") + "\n")
    assert "Your values: 誠実さ, 好奇心." in english
    assert "- 口癖: なるほど" in english


def test_no_custom_traits_leave_the_seed_block_exactly() -> None:
    for traits in (None, {}, {"values": []}, {"values": "  "}):
        soul = SEED_SOUL.model_copy(update={"custom_traits": traits})
        assert soul.build_context("ja") == SEED_SOUL.build_context("ja")
    no_description = Soul(persona_name="X", custom_traits={"values": "正直"})
    assert no_description.build_context("ja").endswith("（副: 直感的）\n価値観: 正直")


# ------------------------------------------------------------------ identity
def test_identity_context_with_a_built_in_role() -> None:
    who = Identity(name="Aki", role="facilitator", job_title="PM", organization="Crab Inc")
    assert who.build_context("ja") == (
        "【IDENTITY】\n名前: Aki\n役割: Facilitator\n職種: PM\n所属: Crab Inc"
    )


def test_identity_context_with_a_custom_role() -> None:
    who = Identity(name="ユイ", role=AgentRole.custom_role("司会補佐"))
    assert who.build_context("ja") == '【IDENTITY】\n名前: ユイ\n役割: Custom("司会補佐")'
    with_org = Identity(name="ユイ", role="custom:司会補佐", organization="研究所")
    assert with_org.build_context("ja") == (
        '【IDENTITY】\n名前: ユイ\n役割: Custom("司会補佐")\n所属: 研究所'
    )


def test_identity_defaults_to_discussant() -> None:
    assert Identity(name="Bo").build_context("ja") == "【IDENTITY】\n名前: Bo\n役割: Discussant"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("discussant", AgentRole.discussant()),
        ("Facilitator", AgentRole.facilitator()),
        ("FACILITATOR", AgentRole.facilitator()),
        ("  observer ", AgentRole.observer()),
        ("custom:司会補佐", AgentRole.custom_role("司会補佐")),
        ("Custom:  note taker ", AgentRole.custom_role("note taker")),
        ('Custom("司会補佐")', AgentRole.custom_role("司会補佐")),
        ('custom("say \\"hi\\"")', AgentRole.custom_role('say "hi"')),
        ("Custom(plain words)", AgentRole.custom_role("plain words")),
        ({"custom": "記録係"}, AgentRole.custom_role("記録係")),
        ({"kind": "Observer"}, AgentRole.observer()),
        ({"kind": "Custom", "custom": "x"}, AgentRole.custom_role("x")),
        (AgentRole.facilitator(), AgentRole.facilitator()),
    ],
)
def test_role_parse_variants(value: object, expected: AgentRole) -> None:
    assert AgentRole.parse(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("emperor", "is not one of discussant, facilitator, observer"),
        ("", "is not one of"),
        (5, "is not one of"),
        (None, "is not one of"),
        ({}, "is not one of"),
        ({"custom": 5}, "is not one of"),
        ({"role": "observer"}, "is not one of"),
        ("custom:", "custom role needs 1 to 57 characters"),
        ("custom:   ", "custom role needs 1 to 57 characters"),
        ("Custom()", "custom role needs 1 to 57 characters"),
        ("custom:" + "x" * 58, "custom role needs 1 to 57 characters"),
        ({"kind": "Custom"}, "custom role needs"),
        ('Custom("unterminated)', "bad quoting in Custom"),
    ],
)
def test_role_parse_errors(value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AgentRole.parse(value)


def test_role_debug_form_and_stored_form() -> None:
    assert str(AgentRole.discussant()) == "Discussant"
    assert str(AgentRole.facilitator()) == "Facilitator"
    assert str(AgentRole.observer()) == "Observer"
    assert str(AgentRole.custom_role("司会補佐")) == 'Custom("司会補佐")'
    assert str(AgentRole.custom_role('say "hi"')) == 'Custom("say \\"hi\\"")'
    assert AgentRole.facilitator().stored() == "facilitator"
    assert AgentRole.custom_role("司会補佐").stored() == "custom:司会補佐"
    assert len(AgentRole.custom_role("x" * 57).stored()) == 64  # fits the column


@pytest.mark.parametrize(
    "role",
    [
        AgentRole.discussant(),
        AgentRole.facilitator(),
        AgentRole.observer(),
        AgentRole.custom_role("司会補佐"),
        AgentRole.custom_role('with "quotes" and: colon'),
    ],
)
def test_role_round_trips(role: AgentRole) -> None:
    assert AgentRole.parse(role.stored()) == role
    assert AgentRole.parse(str(role)) == role
    who = Identity(name="n", role=role)
    assert Identity.model_validate(who.model_dump()) == who
    assert Identity.model_validate_json(who.model_dump_json()).role == role


def test_identity_serializes_roles_like_the_api() -> None:
    assert Identity(name="n", role="observer").model_dump()["role"] == "observer"
    assert Identity(name="n", role="custom:x").model_dump()["role"] == {"custom": "x"}


def test_identity_validation() -> None:
    with pytest.raises(pydantic.ValidationError, match="emperor"):
        Identity(name="n", role="emperor")
    with pytest.raises(pydantic.ValidationError):
        Identity(name="")
    with pytest.raises(pydantic.ValidationError):
        Identity(name="n", nickname="x")  # type: ignore[call-arg]


def test_identity_and_soul_are_stored_with_the_agent(db: Database, settings: Settings) -> None:
    store = AgentStore(db, settings)
    who = Identity(
        name="ユイ",
        role="custom:司会補佐",
        job_title="PM",
        organization="研究所",
        image_url="https://example.invalid/a.png",
        metadata={"lang": "ja"},
    )
    agent = store.create(AgentCreate(name="yui", soul=SEED_SOUL, identity=who))
    loaded = store.get("yui")
    assert loaded.identity == who
    assert loaded.role == AgentRole.custom_role("司会補佐")
    assert loaded.soul == SEED_SOUL
    assert loaded.soul.build_context("ja") == SEED_SOUL.build_context("ja")
    assert loaded.identity.build_context("ja") == who.build_context("ja")
    assert loaded.summary()["role"] == "custom:司会補佐"
    assert agent.id == loaded.id


# ------------------------------------------------------------------ LLM config
def test_llm_context_with_the_packaged_settings(settings: Settings) -> None:
    assert build_llm_context(AgentLlmConfig(), language="ja", settings=settings) == (
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
        "- reasoning: openai/gpt-5.2-pro\n"
        "- creative: anthropic/claude-sonnet-4.5\n"
        "- local: ollama/llama3.3:70b\n"
        "- cheap: google/gemini-2.5-flash-lite\n"
        "\n"
        "LLMを切り替えたい場合は select_llm アクションを使用してください。"
    )


def test_llm_context_with_agent_choices_and_overrides(settings: Settings) -> None:
    config = AgentLlmConfig(
        default_provider="anthropic",
        default_model="claude-sonnet-4.5",
        models=AgentModels(conversation=ModelRef(provider="ollama", model="qwen3:8b")),
        selectable_models=["fast", "unknown_alias"],
    )
    text = build_llm_context(
        config,
        {"thinking": "openai/gpt-5.2-pro", "conversation": "openai/gpt-5-mini"},
        language="ja",
        settings=settings,
        server_default="ignored/when-pinned",
    )
    assert text == (
        "【現在のLLM設定】\n"
        "- デフォルト: anthropic/claude-sonnet-4.5\n"
        "- 思考用: openai/gpt-5.2-pro\n"
        "- 会話用: openai/gpt-5-mini\n"
        "- ツールコーリング用: openai/gpt-5.2\n"
        "- 分析用: openai/gpt-5-mini\n"
        "\n"
        "【選択可能なモデル】\n"
        "- fast: openai/gpt-5-mini\n"
        "- unknown_alias\n"
        "\n"
        "LLMを切り替えたい場合は select_llm アクションを使用してください。"
    )


def test_llm_context_without_settings() -> None:
    assert build_llm_context(AgentLlmConfig(), language="ja") == (
        "【現在のLLM設定】\n"
        "- デフォルト: デフォルト\n"
        "- 思考用: デフォルト\n"
        "- 会話用: デフォルト\n"
        "- ツールコーリング用: デフォルト\n"
        "- 分析用: デフォルト\n"
        "\n"
        "【選択可能なモデル】\n"
        "（なし）\n"
        "\n"
        "LLMを切り替えたい場合は select_llm アクションを使用してください。"
    )
    text = build_llm_context(
        AgentLlmConfig(selectable_models=["fast"]),
        language="ja",
        server_default="ollama/llama3.1:8b",
    )
    assert "- デフォルト: ollama/llama3.1:8b\n" in text
    assert "【選択可能なモデル】\n- fast\n\n" in text


def test_llm_context_when_self_selection_is_off(settings: Settings) -> None:
    off = build_llm_context(
        AgentLlmConfig(allow_self_selection=False), language="ja", settings=settings
    )
    assert "【選択可能なモデル】\n（モデルの自己選択は無効です）\n\n" in off
    server_off = load_settings(overrides={"llm": {"self_selection": {"enabled": False}}})
    assert AgentLlmConfig.from_settings(server_off).allow_self_selection is False
    assert AgentLlmConfig.from_settings(settings).allow_self_selection is True
    text = build_llm_context(AgentLlmConfig(), language="ja", settings=server_off)
    assert "（モデルの自己選択は無効です）" in text
    assert "- fast:" not in text


def test_effective_model_precedence() -> None:
    config = AgentLlmConfig(
        models=AgentModels(thinking=ModelRef(provider="anthropic", model="claude-opus-4.6"))
    )
    turn = {"thinking": "openai/gpt-5.2-pro"}
    session = {"thinking": "openai/gpt-5.2", "analysis": "google/gemini-3-flash"}
    assert effective_model(config, "thinking", turn, session) == ModelRef(
        provider="openai", model="gpt-5.2-pro"
    )
    assert effective_model(config, "thinking", {}, session) == ModelRef(
        provider="openai", model="gpt-5.2"
    )
    assert effective_model(config, "thinking", {}, {}) == ModelRef(
        provider="anthropic", model="claude-opus-4.6"
    )
    assert effective_model(config, "analysis", turn, session) == ModelRef(
        provider="google", model="gemini-3-flash"
    )
    assert effective_model(config, "conversation", turn, session) is None
    assert effective_model(config, "thinking", {"thinking": ""}, {}) == ModelRef(
        provider="anthropic", model="claude-opus-4.6"
    )  # an empty choice is no choice
    # a model name may itself contain "/" (OpenRouter)
    assert effective_model(config, "creative", {"creative": "openrouter/qwen/qwen3"}, {}) == (
        ModelRef(provider="openrouter", model="qwen/qwen3")
    )
    for bad in ("gpt-5", "/gpt-5", "openai/"):
        with pytest.raises(ValidationError, match="not provider/model"):
            effective_model(config, "thinking", {"thinking": bad}, {})


def test_llm_config_validation() -> None:
    assert AgentLlmConfig().default_ref() is None
    assert AgentLlmConfig(default_provider="openai").default_ref() is None
    assert AgentLlmConfig(default_provider="openai", default_model="gpt-4o").default_ref() == (
        ModelRef(provider="openai", model="gpt-4o")
    )
    with pytest.raises(pydantic.ValidationError):
        AgentLlmConfig(daily_budget_usd=-0.01)
    with pytest.raises(pydantic.ValidationError):
        AgentLlmConfig.model_validate({"models": {"dreaming": {"provider": "a", "model": "b"}}})
    assert AgentLlmConfig(daily_budget_usd=0).daily_budget_usd == 0


def test_session_overrides_round_trip(db: Database, settings: Settings) -> None:
    store = AgentStore(db, settings)
    aki = store.create(AgentCreate(name="aki"))
    bo = store.create(AgentCreate(name="bo"))
    chat = ensure_chat_session(db, aki.id)
    assert session_overrides(db, chat, aki.id) == {}
    assert session_overrides(db, None, aki.id) == {}
    assert session_overrides(db, str(uuid4()), aki.id) == {}  # unknown session: nothing

    set_session_override(db, chat, aki.id, "analysis", "openai/gpt-5-mini")
    set_session_override(db, chat, aki.id, "thinking", "anthropic/claude-opus-4.6")
    set_session_override(db, chat, aki.id, "analysis", "google/gemini-3-flash")  # replaced
    set_session_override(db, chat, bo.id, "analysis", "ollama/qwen3:8b")
    assert session_overrides(db, chat, aki.id) == {
        "analysis": "google/gemini-3-flash",
        "thinking": "anthropic/claude-opus-4.6",
    }
    assert session_overrides(db, chat, bo.id) == {"analysis": "ollama/qwen3:8b"}
    other_chat = ensure_chat_session(db, aki.id)
    assert session_overrides(db, other_chat, aki.id) == {}

    config = AgentLlmConfig()
    assert effective_model(config, "analysis", {}, session_overrides(db, chat, aki.id)) == ModelRef(
        provider="google", model="gemini-3-flash"
    )


def test_session_overrides_keep_the_rest_of_the_context(db: Database, settings: Settings) -> None:
    agent = AgentStore(db, settings).create(AgentCreate(name="ctx"))
    chat = ensure_chat_session(db, agent.id)
    with db.write() as conn:
        conn.execute(
            sessions.update()
            .where(sessions.c.id == chat)
            .values(context={"topic": "東京", "llm_overrides": "garbage"})
        )
    assert session_overrides(db, chat, agent.id) == {}  # a malformed entry is ignored
    set_session_override(db, chat, agent.id, "creative", "anthropic/claude-sonnet-4.5")
    with db.read() as conn:
        context = conn.execute(sa.select(sessions.c.context).where(sessions.c.id == chat)).scalar()
    assert context == {
        "topic": "東京",
        "llm_overrides": {agent.id: {"creative": "anthropic/claude-sonnet-4.5"}},
    }


def test_session_override_refusals(db: Database, settings: Settings) -> None:
    agent = AgentStore(db, settings).create(AgentCreate(name="picky"))
    chat = ensure_chat_session(db, agent.id)
    with pytest.raises(ValidationError, match="purpose 'dreaming' is not one of"):
        set_session_override(db, chat, agent.id, "dreaming", "openai/gpt-5-mini")
    with pytest.raises(ValidationError, match="not provider/model"):
        set_session_override(db, chat, agent.id, "analysis", "gpt-5-mini")
    with pytest.raises(NotFoundError, match="no session"):
        set_session_override(db, str(uuid4()), agent.id, "analysis", "openai/gpt-5-mini")
    assert session_overrides(db, chat, agent.id) == {}
    for purpose in PURPOSES:
        set_session_override(db, chat, agent.id, purpose, f"p/{purpose}")
    assert session_overrides(db, chat, agent.id) == {p: f"p/{p}" for p in PURPOSES}
