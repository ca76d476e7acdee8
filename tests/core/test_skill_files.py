"""Skill files and SkillManager: parsing errors name file and line, the five standard skills,
acquired skills, switching off, usage and effectiveness."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from opencrab.actions.base import default_registry
from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.skills import (
    PACKAGED_DIR,
    SkillManager,
    load_skill_dirs,
    parse_skill_text,
    standard_skill_dirs,
)
from opencrab.errors import ConflictError, SkillFileError, ValidationError
from opencrab.store import Database

AUTONOMOUS = "自律モードスキル - ファシリテーターなしで自発的に議論に参加する"
GOOD = "---\nname: demo\ndescription: A demo\nversion: 2\nactions:\n  - ws_read\n---\n\nDo it.\n"


def test_standard_skills_match_the_specification() -> None:
    docs, problems = load_skill_dirs([PACKAGED_DIR])
    assert problems == []
    actions = {d.name: d.actions for d in docs}
    assert actions == {
        "autonomous": ("send_speech", "send_noreact", "declare_done"),
        "self-learning": (
            "learn_from_experience",
            "learn_from_peer",
            "reflect_and_learn",
            "search_my_history",
            "summarize_and_save",
            "create_my_skill",
        ),
        "workspace-management": (
            "ws_read",
            "ws_write",
            "ws_edit",
            "ws_list",
            "ws_delete",
            "ws_mkdir",
        ),
        "llm-selection": ("select_llm", "get_available_models", "get_current_llm_config"),
        "llm-meta-analysis": (
            "analyze_llm_usage",
            "evaluate_response",
            "optimize_model_selection",
            "get_llm_metrics",
            "compare_models",
        ),
    }
    registry = default_registry()
    assert all(a in registry for acts in actions.values() for a in acts)
    autonomous = next(d for d in docs if d.name == "autonomous")
    assert (
        autonomous.description == "自律モードスキル - ファシリテーターなしで自発的に議論に参加する"
    )
    assert autonomous.guidance.startswith("# 自律モードマニュアル")
    assert "最後の発言から30秒未満 → 発言しない" in autonomous.guidance


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("name: x\n", 1, "must start with a '---'"),
        ("---\nname: x\n", 2, "never closed"),
        ("---\nname: x\ndescription: [unclosed\n---\nbody", 3, "invalid YAML"),
        ("---\nname: x\ndescription: d\ncolour: red\n---\nbody", 4, "unknown frontmatter key"),
        ("---\nname: x\ndescription: d\nversion: 0\n---\nbody", 4, "version"),
        ("---\nname: x\ndescription: d\nactions: [Bad-Name]\n---\nbody", 4, "actions"),
        ("---\nname: x\ndescription: d\n---\n\n", 5, "body"),
        ("---\ndescription: d\n---\nbody", 2, "name"),
    ],
)
def test_malformed_skill_files_say_where_and_why(text: str, line: int, reason: str) -> None:
    with pytest.raises(SkillFileError) as caught:
        parse_skill_text(text, "x.skill.md")
    assert caught.value.file == "x.skill.md"
    assert caught.value.line == line
    assert reason in caught.value.reason


def test_bad_files_are_skipped_not_fatal(tmp_path: Path, settings: Settings) -> None:
    extra = Path(settings.data_dir) / "skills"
    extra.mkdir(parents=True)
    (extra / "demo.skill.md").write_text(GOOD)
    (extra / "broken.skill.md").write_text("no frontmatter")
    (extra / "dup.skill.md").write_text(GOOD.replace("name: demo", "name: autonomous"))
    (extra / "binary.skill.md").write_bytes(b"\xff\xfe\x00")
    docs, problems = load_skill_dirs(standard_skill_dirs(settings))
    assert "demo" in {d.name for d in docs}
    assert len(docs) == 6
    assert sorted(Path(p.file).name for p in problems) == [
        "binary.skill.md",
        "broken.skill.md",
        "dup.skill.md",
    ]
    assert any("already defined" in p.reason for p in problems)


@pytest.fixture
def skills(db: Database, settings: Settings) -> SkillManager:
    agent = AgentStore(db, settings).create(AgentCreate(name="learner"))
    docs, _ = load_skill_dirs([PACKAGED_DIR])
    manager = SkillManager(db, agent.id, docs)
    manager.ensure_default_skills()
    return manager


def test_defaults_are_copied_once_and_refreshed_by_version(skills: SkillManager) -> None:
    skills.ensure_default_skills()
    assert len(skills.list()) == 5
    newer = replace(skills.docs[0], version=9, guidance="new text")
    SkillManager(skills.db, skills.agent_id, [newer]).ensure_default_skills()
    refreshed = skills.get(newer.name)
    assert (refreshed.version, refreshed.guidance) == (9, "new text")


def test_acquired_skills(skills: SkillManager) -> None:
    first = skills.acquire(
        name="ask why", description="d", guidance="g", source="peer", actions=["send_speech"]
    )
    again = skills.acquire(name="ask why", description="d2", guidance="g2", source="reflection")
    assert (again.id, again.version, again.description) == (first.id, 2, "d2")
    with pytest.raises(ConflictError, match="standard skill"):
        skills.acquire(name="autonomous", description="d", guidance="g", source="experience")
    with pytest.raises(ValidationError, match="source"):
        skills.acquire(name="x", description="d", guidance="g", source="dreams")
    with pytest.raises(ConflictError):
        skills.delete("autonomous")
    skills.delete("ask why")
    assert "ask why" not in {s.name for s in skills.list()}


def test_toggle_usage_effectiveness_and_context(skills: SkillManager) -> None:
    skills.toggle("llm-meta-analysis", False)
    active = skills.get_active_skills()
    assert "llm-meta-analysis" not in {s.name for s in active}
    assert skills.record_action_use("ws_read") == 1
    assert skills.record_action_use("compare_models") == 0  # its skill is off
    assert skills.get("workspace-management").usage_count == 1
    assert skills.set_effectiveness("autonomous", 0.75).effectiveness == 0.75
    with pytest.raises(ValidationError):
        skills.set_effectiveness("autonomous", 1.5)
    names = skills.action_names(active)
    assert len(names) == len(set(names))
    definitions = skills.build_action_definitions(active, default_registry())
    assert {d.name for d in definitions} == set(names)
    context = skills.build_context(active)
    assert context.startswith("【利用可能なスキル】\n\n## autonomous\n")
    assert (
        "\n## autonomous\n自律モードスキル - ファシリテーターなしで自発的に議論に参加する\n"
        in context
    )
    skills.toggle("llm-meta-analysis")
    assert "llm-meta-analysis" in {s.name for s in skills.get_active_skills()}
