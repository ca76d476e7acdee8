"""AgentStore on a real database: create, look up, update, delete (with cascades), persona
files and the daily budget."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import pydantic
import pytest
import sqlalchemy as sa

from opencrab.config import Settings
from opencrab.core.agent import (
    AgentCreate,
    AgentStore,
    AgentUpdate,
    HeartbeatConfig,
    load_persona,
)
from opencrab.core.identity import AgentRole, Identity
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.skill_files import load_skill_dirs
from opencrab.core.skills import PACKAGED_DIR, SkillManager
from opencrab.core.soul import Personality, Soul
from opencrab.errors import (
    BudgetExceeded,
    NameTaken,
    NotFoundError,
    ValidationError,
)
from opencrab.llm.metrics import CallRecord, MetricsRecorder
from opencrab.store import Database
from opencrab.store.tables import (
    agents,
    identity,
    impressions,
    memory_curated,
    memory_sessions,
    skills,
    soul,
)


@pytest.fixture
def store(db: Database, settings: Settings) -> AgentStore:
    return AgentStore(db, settings)


def count(db: Database, table: sa.Table, agent_id: str) -> int:
    with db.read() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).select_from(table).where(table.c.agent_id == agent_id)
            ).scalar()
            or 0
        )


# ------------------------------------------------------------------ create / read
def test_create_with_defaults(store: AgentStore, settings: Settings) -> None:
    agent = store.create(AgentCreate(name="  aki  ", description="notes", prompt="You help."))
    assert agent.name == "aki"  # trimmed
    assert (agent.description, agent.prompt) == ("notes", "You help.")
    assert agent.soul == Soul(persona_name="aki")
    assert agent.identity == Identity(name="aki")
    assert agent.role == AgentRole.discussant()
    assert agent.heartbeat == HeartbeatConfig(
        interval_secs=settings.agent.heartbeat_interval_secs, enabled=True
    )
    assert agent.llm_config == AgentLlmConfig.from_settings(settings)
    assert agent.tool_ids == []
    assert agent.created_at == agent.updated_at
    assert agent.created_at.tzinfo is not None
    summary = agent.summary()
    assert summary["name"] == "aki"
    assert summary["role"] == "discussant"
    assert summary["heartbeat"] == {"interval_secs": 29, "enabled": True}


def test_create_with_everything(store: AgentStore) -> None:
    spec = AgentCreate(
        name="yui",
        soul=Soul(persona_name="慎重な分析家", personality=Personality(openness=0.9)),
        identity=Identity(name="ユイ", role="facilitator", job_title="PM"),
        llm=AgentLlmConfig(
            default_provider="openai", default_model="gpt-5-mini", daily_budget_usd=2
        ),
        heartbeat=HeartbeatConfig(interval_secs=31, enabled=False),
    )
    agent = store.create(spec)
    loaded = store.get(agent.id)
    assert loaded.soul == spec.soul
    assert loaded.identity == spec.identity
    assert loaded.llm_config == spec.llm
    assert loaded.heartbeat == spec.heartbeat


def test_get_by_name_or_id(store: AgentStore) -> None:
    agent = store.create(AgentCreate(name="kai"))
    assert store.get("kai").id == agent.id
    assert store.get("  kai ").id == agent.id
    assert store.get(agent.id).name == "kai"
    assert store.get(agent.id.upper()).name == "kai"  # any spelling of the UUID
    with pytest.raises(NotFoundError, match="no agent 'nobody'"):
        store.get("nobody")
    with pytest.raises(NotFoundError):
        store.get(str(uuid4()))
    with pytest.raises(NotFoundError):
        store.get("KAI")  # names are exact


def test_an_agent_by_id_is_one_read_through_sqlalchemy_and_the_same_as_by_name(
    store: AgentStore, db: Database
) -> None:
    """By id, the agent's soul, identity and grants are read ahead with its row (prepared
    reads: on PostgreSQL in the same round trip); what comes back is what a look-up by
    name and the list (each part its own query) give."""
    spec = AgentCreate(
        name="yui",
        soul=Soul(persona_name="慎重な分析家", personality=Personality(openness=0.9)),
        identity=Identity(name="ユイ", role="facilitator", job_title="PM"),
    )
    made = store.create(spec)
    seen: list[str] = []  # through SQLAlchemy's compiler
    prepared: list[str] = []  # compiled once, straight to the driver (no context)

    def note(
        _c: object, _cur: object, statement: str, _p: object, context: object, *_: object
    ) -> None:
        (prepared if context is None else seen).append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", note)
    try:
        loaded = store.get(made.id)
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", note)
    assert len(seen) == 1, seen  # the agents row; the rest went ahead with it
    tables = sorted(s.split("FROM ")[1].split()[0] for s in prepared)
    assert tables == ["agent_tools", "identity", "soul"], prepared
    assert loaded == store.get("yui") == store.list()[0]
    assert (loaded.soul, loaded.identity) == (spec.soul, spec.identity)


def test_list_in_creation_order(store: AgentStore) -> None:
    assert store.list() == []
    for name in ("c", "a", "b"):
        store.create(AgentCreate(name=name))
    assert [a.name for a in store.list()] == ["c", "a", "b"]


def test_a_duplicate_name_is_refused(store: AgentStore, db: Database) -> None:
    first = store.create(AgentCreate(name="kai"))
    with pytest.raises(NameTaken, match=f"an agent named 'kai' already exists \\({first.id}\\)"):
        store.create(AgentCreate(name="kai"))
    with pytest.raises(NameTaken):
        store.create(AgentCreate(name=" kai "))
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(agents)).scalar() == 1


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (str(uuid4()), "must not be a UUID"),
        (str(uuid4()).upper(), "must not be a UUID"),
        ("", "1 to 100 characters"),
        ("   ", "1 to 100 characters"),
        ("x" * 101, "1 to 100 characters"),
        ("tab\there", "control characters"),
        ("del\x7f", "control characters"),
    ],
)
def test_bad_names_are_refused(name: str, message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        AgentCreate(name=name)
    with pytest.raises(pydantic.ValidationError, match=message):
        AgentUpdate(name=name)


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="colour"):
        AgentCreate.model_validate({"name": "x", "colour": "red"})
    with pytest.raises(pydantic.ValidationError):
        HeartbeatConfig(interval_secs=0)
    with pytest.raises(pydantic.ValidationError):
        HeartbeatConfig(interval_secs=86_401)


# ------------------------------------------------------------------ update
def test_update_changes_only_what_is_given(store: AgentStore) -> None:
    agent = store.create(AgentCreate(name="kai", description="d", prompt="p"))
    updated = store.update("kai", AgentUpdate(prompt="q"))
    assert (updated.name, updated.description, updated.prompt) == ("kai", "d", "q")
    assert updated.updated_at > agent.updated_at
    assert updated.created_at == agent.created_at

    updated = store.update(
        agent.id,
        AgentUpdate(
            identity=Identity(name="Kai", role="observer"),
            soul=Soul(persona_name="new persona"),
            llm=AgentLlmConfig(daily_budget_usd=1.5),
            heartbeat=HeartbeatConfig(interval_secs=7),
        ),
    )
    assert updated.role == AgentRole.observer()
    assert updated.soul.persona_name == "new persona"
    assert updated.llm_config.daily_budget_usd == 1.5
    assert updated.heartbeat.interval_secs == 7
    assert updated.prompt == "q"


def test_rename(store: AgentStore) -> None:
    agent = store.create(AgentCreate(name="kai"))
    store.create(AgentCreate(name="lea"))
    with pytest.raises(NameTaken, match="'lea' already exists"):
        store.update("kai", AgentUpdate(name="lea"))
    assert store.get(agent.id).name == "kai"
    assert store.update("kai", AgentUpdate(name="kai", prompt="same name is fine")).name == "kai"
    renamed = store.update("kai", AgentUpdate(name="kai2"))
    assert renamed.id == agent.id
    assert store.get("kai2").id == agent.id
    with pytest.raises(NotFoundError):
        store.get("kai")
    with pytest.raises(NotFoundError):
        store.update("ghost", AgentUpdate(prompt="x"))


def test_save_parts(store: AgentStore) -> None:
    agent = store.create(AgentCreate(name="kai"))
    store.save_soul(agent.id, Soul(persona_name="saved"))
    store.save_identity(agent.id, Identity(name="K", role="custom:記録係"))
    store.save_llm_config(agent.id, AgentLlmConfig(selectable_models=["fast"]))
    loaded = store.get(agent.id)
    assert loaded.soul.persona_name == "saved"
    assert loaded.role == AgentRole.custom_role("記録係")
    assert loaded.llm_config.selectable_models == ["fast"]
    with pytest.raises(NotFoundError):
        store.save_llm_config(str(uuid4()), AgentLlmConfig())


# ------------------------------------------------------------------ delete
def test_delete_cascades_to_everything_keyed_by_the_agent(store: AgentStore, db: Database) -> None:
    agent = store.create(AgentCreate(name="kai"))
    keeper = store.create(AgentCreate(name="keeper"))
    session = str(uuid4())
    for who in (agent, keeper):
        memory = MemoryManager(db, who.id)
        memory.save_curated("core", "a memory")
        memory.append_session_log(SessionLog(session_id=session, log_type="speech", content="hi"))
        memory.update_impression(session, "u1", "Yui", personality="calm")
        docs, _ = load_skill_dirs([PACKAGED_DIR], "en")
        SkillManager(db, who.id, docs).ensure_default_skills()

    tables = (soul, identity, memory_curated, memory_sessions, impressions, skills)
    assert all(count(db, t, agent.id) > 0 for t in tables)

    deleted = store.delete("kai")
    assert deleted.id == agent.id
    with pytest.raises(NotFoundError):
        store.get(agent.id)
    assert {t.name: count(db, t, agent.id) for t in tables} == {t.name: 0 for t in tables}
    assert all(count(db, t, keeper.id) > 0 for t in tables)  # nobody else's rows
    assert [a.name for a in store.list()] == ["keeper"]
    assert MemoryManager(db, keeper.id).search("hi") != []  # the FTS index kept the rest
    with pytest.raises(NotFoundError):
        store.delete("kai")
    assert store.create(AgentCreate(name="kai")).id != agent.id  # the name is free again


# ------------------------------------------------------------------ persona files
def test_load_persona_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "aki.toml"
    path.write_text(
        'name = "aki"\n'
        'prompt = "You keep notes."\n'
        "[soul]\n"
        'persona_name = "記録係"\n'
        "[soul.personality]\n"
        "openness = 0.8\n"
        "[identity]\n"
        'name = "Aki"\n'
        'role = "custom:記録係"\n'
        "[llm]\n"
        "daily_budget_usd = 0.5\n"
        "[heartbeat]\n"
        "interval_secs = 31\n",
        encoding="utf-8",
    )
    spec = load_persona(path)
    assert spec.name == "aki"
    assert spec.prompt == "You keep notes."
    assert spec.soul is not None
    assert spec.soul.personality.openness == 0.8
    assert spec.identity is not None
    assert spec.identity.role == AgentRole.custom_role("記録係")
    assert spec.llm is not None
    assert spec.llm.daily_budget_usd == 0.5
    assert spec.heartbeat == HeartbeatConfig(interval_secs=31)


def test_load_persona_from_yaml_and_json(tmp_path: Path) -> None:
    yaml_file = tmp_path / "p.yml"
    yaml_file.write_text(
        "name: yui\nsoul:\n  persona_name: 分析家\n  social_style:\n    assertiveness: -0.4\n"
        "    responsiveness: -0.6\nidentity:\n  name: Yui\n  role: facilitator\n",
        encoding="utf-8",
    )
    spec = load_persona(yaml_file)
    assert spec.soul is not None
    assert spec.soul.social_style.style_name == "Analytical"
    assert spec.identity is not None
    assert spec.identity.role == AgentRole.facilitator()

    json_file = tmp_path / "p.JSON"  # the suffix is case-insensitive
    json_file.write_text(json.dumps({"name": "from-file", "identity": {"name": "J"}}))
    assert load_persona(json_file).name == "from-file"
    assert load_persona(json_file, name="given").name == "given"  # the argument wins


def test_load_persona_then_create(tmp_path: Path, store: AgentStore) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("soul:\n  persona_name: P\n")
    agent = store.create(load_persona(path, name="from-yaml"))
    assert store.get("from-yaml").soul.persona_name == "P"
    assert agent.identity.name == "from-yaml"


@pytest.mark.parametrize(
    ("file_name", "text", "message"),
    [
        (
            "bad.toml",
            'name = "t"\n[soul]\npersona_name = "P"\n[soul.personality]\nopenness = 1.5\n',
            r"bad\.toml: soul\.personality\.openness: Input should be less than or equal to 1",
        ),
        (
            "bad.json",
            '{"name": "j", "soul": {"persona_name": "P", "social_style": {"assertiveness": 3}}}',
            r"bad\.json: soul\.social_style\.assertiveness:",
        ),
        (
            "bad.yaml",
            "name: y\nheartbeat:\n  interval_secs: 0\n",
            r"bad\.yaml: heartbeat\.interval_secs:",
        ),
        ("extra.yaml", "name: y\ncolour: red\n", r"extra\.yaml: colour: Extra inputs"),
        ("role.yaml", "name: y\nidentity:\n  name: Y\n  role: emperor\n", r"identity\.role"),
        (
            "two.json",
            '{"name": "j", "soul": {"persona_name": ""}, "heartbeat": {"interval_secs": 0}}',
            r"two\.json: soul\.persona_name: .*; heartbeat\.interval_secs: ",
        ),
        ("uuid.toml", f'name = "{uuid4()}"\n', r"uuid\.toml: name: .*must not be a UUID"),
        ("noname.yaml", "prompt: hi\n", r"noname\.yaml: no name"),
        ("list.yaml", "- a\n- b\n", r"list\.yaml: the persona must be a table/mapping"),
        ("empty.json", "[]", r"empty\.json: the persona must be a table"),
        ("broken.toml", "name = ", r"broken\.toml: not valid TOML"),
        ("broken.json", "{", r"broken\.json: not valid JSON"),
        ("broken.yaml", "name: [", r"broken\.yaml: not valid YAML"),
        ("persona.txt", "name = 'x'", r"persona\.txt: persona files are \.toml"),
    ],
)
def test_load_persona_errors_name_file_and_key(
    tmp_path: Path, file_name: str, text: str, message: str
) -> None:
    path = tmp_path / file_name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValidationError, match=message):
        load_persona(path)


def test_load_persona_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"missing\.toml: cannot read the persona file"):
        load_persona(tmp_path / "missing.toml")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValidationError, match=r"latin\.yaml: the persona file is not UTF-8"):
        load_persona(latin)


# ------------------------------------------------------------------ budget
def spend(db: Database, agent_id: str, amount: float, when: datetime) -> None:
    """One call of the agent at `when`, stored by the metrics writer (calls and rollup)."""
    MetricsRecorder(db).write(
        [
            CallRecord(
                id=str(uuid4()),
                agent_id=agent_id,
                timestamp=when,
                provider="openai",
                model="gpt-5.2",
                purpose="conversation",
                input_tokens=10,
                output_tokens=5,
                total_tokens=15,
                estimated_cost_usd=amount,
                latency_ms=100,
            )
        ]
    )


def test_spent_today_counts_only_today_and_only_this_agent(store: AgentStore, db: Database) -> None:
    agent = store.create(AgentCreate(name="frugal"))
    other = store.create(AgentCreate(name="spender"))
    now = datetime.now(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    assert store.spent_today(agent.id) == 0.0
    spend(db, agent.id, 5.0, now - timedelta(days=1))  # yesterday
    spend(db, agent.id, 7.0, midnight - timedelta(microseconds=1))  # just before midnight
    spend(db, other.id, 9.0, now)  # someone else
    assert store.spent_today(agent.id) == 0.0
    spend(db, agent.id, 0.25, midnight)  # midnight itself is today
    spend(db, agent.id, 0.5, now)
    assert store.spent_today(agent.id) == pytest.approx(0.75)
    assert store.spent_today(other.id) == pytest.approx(9.0)


def test_check_budget_only_when_todays_spend_reaches_it(store: AgentStore, db: Database) -> None:
    agent = store.create(AgentCreate(name="frugal", llm=AgentLlmConfig(daily_budget_usd=1.0)))
    now = datetime.now(UTC)
    spend(db, agent.id, 50.0, now - timedelta(days=1))
    store.check_budget(agent)  # yesterday's spend does not count
    spend(db, agent.id, 0.6, now)
    store.check_budget(agent)
    spend(db, agent.id, 0.39, now)
    store.check_budget(agent)  # 0.99 < 1.0
    spend(db, agent.id, 0.01, now)  # exactly the budget
    with pytest.raises(
        BudgetExceeded, match=r"agent frugal has spent \$1\.0000 of its \$1\.00"
    ) as e:
        store.check_budget(agent)
    assert e.value.retryable is False
    assert "llm.daily_budget_usd" in str(e.value)


def test_no_budget_means_no_limit_and_zero_means_none_at_all(
    store: AgentStore, db: Database
) -> None:
    unlimited = store.create(AgentCreate(name="rich"))
    assert unlimited.llm_config.daily_budget_usd is None
    spend(db, unlimited.id, 1_000_000.0, datetime.now(UTC))
    store.check_budget(unlimited)
    zero = store.create(AgentCreate(name="broke", llm=AgentLlmConfig(daily_budget_usd=0)))
    with pytest.raises(BudgetExceeded):
        store.check_budget(zero)


def test_every_wrong_key_of_a_persona_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: x\nlanguage: fr\nsoul:\n  personality:\n    openness: 7\n"
        "heartbeat:\n  interval_secs: -5\n",
        encoding="utf-8",
    )
    with pytest.raises(ValidationError) as e:
        load_persona(path)
    text = str(e.value)
    assert text.startswith(f"{path}: ")
    for key in ("language", "soul.personality.openness", "heartbeat.interval_secs"):
        assert f"{key}: " in text, text
    assert "more)" not in text
