"""A skill's version history: each version's text is kept where the skill changes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import sqlalchemy as sa

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.skill_files import load_skill_dirs, parse_skill_text
from opencrab.core.skill_versions import MAX_VERSIONS
from opencrab.core.skills import PACKAGED_DIR, SkillManager
from opencrab.errors import ConflictError
from opencrab.store import Database, migrate
from opencrab.store import tables as t
from opencrab.store.types import utcnow


@pytest.fixture
def agent_id(db: Database, settings: Settings) -> str:
    return AgentStore(db, settings).create(AgentCreate(name="learner")).id


@pytest.fixture
def skills(db: Database, agent_id: str) -> SkillManager:
    docs, _ = load_skill_dirs([PACKAGED_DIR], "en")
    manager = SkillManager(db, agent_id, docs)
    manager.ensure_default_skills()
    return manager


def test_learning_refining_and_editing_each_keep_a_version(skills: SkillManager) -> None:
    first = skills.acquire(
        name="要約のコツ",
        description="長い議論を要約する",
        guidance="決定事項を先に書く。",
        source="experience",
        source_context="[success] 会議の要約",
    )
    skills.acquire(
        name="要約のコツ",
        description="長い議論を短く要約する",
        guidance="決定事項と未決事項を分ける。",
        situation_pattern="議論が長くなった時",
        source="peer",
        source_context="Bob: 要約が上手だった",
        actions=["send_speech"],
    )
    skills.update(first.id, guidance="三行で要約する。")
    skills.toggle(first.id, False)  # switching is not a version
    skills.record_action_use("send_speech")  # nor is a use
    versions = skills.versions("要約のコツ")
    assert [(v.version, v.change) for v in versions] == [
        (3, "edited"),
        (2, "refined"),
        (1, "created"),
    ]
    edited, refined, created = versions
    assert (created.guidance, created.source, created.source_context) == (
        "決定事項を先に書く。",
        "experience",
        "[success] 会議の要約",
    )
    assert (refined.source, refined.situation_pattern, refined.actions) == (
        "peer",
        "議論が長くなった時",
        ["send_speech"],
    )
    assert edited.guidance == "三行で要約する。"
    assert edited.description == refined.description
    assert edited.created_at >= refined.created_at >= created.created_at
    assert skills.get(first.id).version == 3
    as_file = parse_skill_text(refined.markdown(), strict_name=False)
    assert (as_file.version, as_file.situation_pattern, as_file.guidance) == (
        2,
        "議論が長くなった時",
        "決定事項と未決事項を分ける。",
    )


def test_a_standard_skill_keeps_its_file_versions(
    skills: SkillManager, db: Database, agent_id: str
) -> None:
    assert [(v.version, v.change) for v in skills.versions("autonomous")] == [(1, "created")]
    docs, _ = load_skill_dirs([PACKAGED_DIR], "en")
    autonomous = next(d for d in docs if d.name == "autonomous")
    newer = replace(autonomous, version=2, guidance="Version two.")
    SkillManager(db, agent_id, [newer]).ensure_default_skills()
    assert [(v.version, v.change) for v in skills.versions("autonomous")] == [
        (2, "file"),
        (1, "created"),
    ]
    # the agent's language changed: same version number, that version's text is replaced
    ja_docs, _ = load_skill_dirs([PACKAGED_DIR], "ja")
    ja = next(d for d in ja_docs if d.name == "autonomous")
    SkillManager(db, agent_id, [replace(ja, version=2)]).ensure_default_skills()
    latest = skills.versions("autonomous")
    assert [(v.version, v.change) for v in latest] == [(2, "file"), (1, "created")]
    assert latest[0].guidance == ja.guidance


def test_only_the_newest_versions_are_kept(skills: SkillManager, db: Database) -> None:
    skill = skills.acquire(name="often", description="d", guidance="g0", source="reflection")
    for n in range(1, MAX_VERSIONS + 5):
        skills.update(skill.id, guidance=f"g{n}")
    versions = skills.versions(skill.id)
    assert len(versions) == MAX_VERSIONS
    assert versions[0].version == MAX_VERSIONS + 5
    assert versions[-1].version == 6
    assert versions[0].guidance == f"g{MAX_VERSIONS + 4}"


def test_an_edit_of_a_stale_version_stores_nothing(skills: SkillManager) -> None:
    skill = skills.acquire(name="stale", description="d", guidance="g", source="research")
    skills.acquire(name="stale", description="d", guidance="refined by the agent", source="peer")
    with pytest.raises(ConflictError, match="changed since version 1 was read"):
        skills.update(skill.id, guidance="my edit of version 1", expected_version=1)
    assert skills.get(skill.id).guidance == "refined by the agent"
    assert [v.version for v in skills.versions(skill.id)] == [2, 1]
    assert skills.update(skill.id, guidance="ok", expected_version=2).version == 3


def test_forgetting_a_skill_forgets_its_history(skills: SkillManager, db: Database) -> None:
    skill = skills.acquire(name="gone", description="d", guidance="g", source="experience")
    skills.update(skill.id, guidance="g2")
    skills.delete(skill.id)
    with db.read() as conn:
        left = conn.execute(
            sa.select(sa.func.count())
            .select_from(t.skill_versions)
            .where(t.skill_versions.c.skill_id == skill.id)
        ).scalar()
    assert left == 0


def test_the_migration_records_the_text_of_existing_skills(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/old.db")
    migrate.upgrade(db, "0011")
    now = utcnow()
    with db.write() as conn:
        conn.execute(
            t.agents.insert(),
            {"id": "a1", "name": "Ada", "prompt": "p", "created_at": now, "updated_at": now},
        )
        conn.execute(
            sa.text(
                "INSERT INTO skills (id, agent_id, name, description, situation_pattern, "
                "guidance, source_type, source_context, version, actions_json, created_at, "
                "updated_at) VALUES ('s1', 'a1', 'old', 'd', 'when', 'g', 'peer', 'Bob', 4, "
                "'[\"send_speech\"]', '2026-01-02T03:04:05.000000Z', "
                "'2026-01-03T03:04:05.000000Z')"
            )
        )
    db.upgrade()
    with db.read() as conn:
        rows = conn.execute(sa.select(t.skill_versions)).all()
    assert [(r.skill_id, r.version, r.change, r.source_type) for r in rows] == [
        ("s1", 4, "recorded", "peer")
    ]
    assert (rows[0].situation_pattern, rows[0].actions_json) == ("when", ["send_speech"])
    assert rows[0].created_at.isoformat() == "2026-01-03T03:04:05+00:00"
    migrate.downgrade(db, "0011")
    db.close()
