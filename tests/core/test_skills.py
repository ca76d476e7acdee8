"""Skill files (parsing errors carry file, line and reason; bad files are skipped) and the
per-agent SkillManager on a real database."""

from __future__ import annotations

import math
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from opencrab.actions.base import default_registry
from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.skill_files import (
    MAX_SKILL_FILE_BYTES,
    SkillDoc,
    SkillProblem,
    load_skill_dirs,
    parse_skill_file,
    parse_skill_text,
)
from opencrab.core.skills import (
    PACKAGED_DIR,
    PlannedSkills,
    Skill,
    SkillManager,
    standard_skill_dirs,
)
from opencrab.errors import (
    ConflictError,
    NotFoundError,
    SkillFileError,
    ValidationError,
)
from opencrab.prompts import LANGUAGES, Language
from opencrab.store import Database

SYMLINKED = "is a symlink; skill files reached through a symlink are not loaded"
SEED_ACTIONS = {
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


def skill_text(
    name: str = "demo",
    description: str = "A demo skill",
    *,
    version: int = 1,
    actions: tuple[str, ...] = ("ws_read",),
    body: str = "# Demo\n\nDo the thing.",
) -> str:
    listed = "".join(f"  - {a}\n" for a in actions)
    return (
        f"---\nname: {name}\ndescription: {description}\nversion: {version}\n"
        f"actions:\n{listed}---\n\n{body}\n"
    )


# ------------------------------------------------------------------ parsing
def test_parse_a_good_skill() -> None:
    doc = parse_skill_text(skill_text(version=3, actions=("ws_read", "ws_write")), "d.skill.md")
    assert doc == SkillDoc(
        name="demo",
        description="A demo skill",
        version=3,
        actions=("ws_read", "ws_write"),
        guidance="# Demo\n\nDo the thing.",
        file_path="d.skill.md",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\ufeff---\nname: x\ndescription: d\n---\nbody", ("x", 1, ())),  # BOM
        ("---\r\nname: x\r\ndescription: d\r\n---\r\nbody\r\n", ("x", 1, ())),  # CRLF
        ("---\nname: x\ndescription: d\nactions:\n---\nbody", ("x", 1, ())),  # null actions
        (
            "---\nname: x\ndescription: d\nactions: [ws_read, ws_write, ws_read]\n---\nbody",
            ("x", 1, ("ws_read", "ws_write")),  # repeats dropped, order kept
        ),
        ("---\nname: '  spaced name  '\ndescription: d\n---\nbody", ("spaced name", 1, ())),
        ("---\nname: 日本語スキル\ndescription: d\nversion: 7\n---\nbody", ("日本語スキル", 7, ())),
    ],
)
def test_parse_variants(text: str, expected: tuple[str, int, tuple[str, ...]]) -> None:
    doc = parse_skill_text(text)
    assert (doc.name, doc.version, doc.actions) == expected
    assert doc.guidance == "body"
    assert doc.file_path == "<text>"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        # opening and closing of the frontmatter
        ("name: x\n---\nbody", 1, "must start with a '---' line"),
        ("", 1, "must start with a '---' line"),
        ("\n---\nname: x\n---\nbody", 1, "must start with a '---' line"),
        ("---\nname: x\ndescription: d\nbody text\n", 4, "never closed by '---'"),
        # YAML errors point at the file's line
        ("---\nname: x\ndescription: d\nactions:\n\t- a\n---\nbody", 5, "invalid YAML"),
        ("---\nname: x\ndescription: d\nfoo: bar: baz\n---\nbody", 4, "invalid YAML"),
        ("---\nname: x\n  description: d\n---\nbody", 3, "invalid YAML"),
        ("---\n- a list\n---\nbody", 2, "must be a mapping"),
        ("---\n---\nbody", 2, "must be a mapping"),
        # keys
        (
            "---\nname: x\ndescription: d\ncolour: red\n---\nbody",
            4,
            "unknown frontmatter key 'colour'",
        ),
        ("---\ndescription: d\n---\nbody", 2, "name must be text"),
        ("---\nname: ../evil\ndescription: d\n---\nbody", 2, "name must be text"),
        ("---\nname: 5\ndescription: d\n---\nbody", 2, "name must be text"),
        ("---\nname: x\ndescription: ''\n---\nbody", 3, "description must be non-empty"),
        ("---\nname: x\n---\nbody", 2, "description must be non-empty"),
        # version
        ("---\nname: x\ndescription: d\nversion: 0\n---\nbody", 4, "version must be a whole"),
        ("---\nname: x\ndescription: d\nversion: -2\n---\nbody", 4, "version must be a whole"),
        ("---\nname: x\ndescription: d\nversion: 1.5\n---\nbody", 4, "version must be a whole"),
        ("---\nname: x\ndescription: d\nversion: two\n---\nbody", 4, "version must be a whole"),
        ("---\nname: x\ndescription: d\nversion: true\n---\nbody", 4, "version must be a whole"),
        # actions
        ("---\nname: x\ndescription: d\nactions: ws_read\n---\nbody", 4, "actions must be a list"),
        ("---\nname: x\ndescription: d\nactions: [WsRead]\n---\nbody", 4, "actions must be"),
        ("---\nname: x\ndescription: d\nactions: [1]\n---\nbody", 4, "actions must be a list"),
        ("---\nname: x\ndescription: d\nactions: [ws-read]\n---\nbody", 4, "actions must be"),
        # body
        ("---\nname: x\ndescription: d\n---\n", 5, "body (the skill's guidance) is empty"),
        ("---\nname: x\ndescription: d\n---\n  \n\n", 5, "body (the skill's guidance) is empty"),
    ],
)
def test_malformed_skill_text_names_file_line_and_reason(text: str, line: int, reason: str) -> None:
    with pytest.raises(SkillFileError) as caught:
        parse_skill_text(text, "skills/x.skill.md")
    error = caught.value
    assert error.file == "skills/x.skill.md"
    assert error.line == line
    assert reason in error.reason
    assert str(error) == f"skills/x.skill.md:{line}: {error.reason}"
    assert isinstance(error, ValidationError)


def test_keys_of_mixed_types_are_reported_not_crashing(tmp_path: Path) -> None:
    """YAML keys need not be text (`1:`, `null:`); sorting them must not raise TypeError."""
    for extra in ("1: a\ncolour: c", "null: a\ncolour: c", "yes: a\n2: b"):
        text = f"---\nname: x\ndescription: d\n{extra}\n---\nbody"
        with pytest.raises(SkillFileError, match="unknown frontmatter key") as caught:
            parse_skill_text(text, "k.skill.md")
        assert caught.value.line is not None
    # and a folder holding such a file still loads the rest
    (tmp_path / "mixed.skill.md").write_text("---\nname: x\ndescription: d\n1: a\nb: c\n---\nbody")
    (tmp_path / "ok.skill.md").write_text(skill_text(name="ok"))
    docs, problems = load_skill_dirs([tmp_path])
    assert [d.name for d in docs] == ["ok"]
    assert [(Path(p.file).name, p.line) for p in problems] == [("mixed.skill.md", 4)]


def test_nul_byte_has_no_line() -> None:
    with pytest.raises(SkillFileError) as caught:
        parse_skill_text("---\nname: x\x00\n---\nbody", "n.skill.md")
    assert caught.value.line is None
    assert str(caught.value) == "n.skill.md: contains a NUL byte; not a text file"


def test_parse_skill_file_errors(tmp_path: Path) -> None:
    binary = tmp_path / "binary.skill.md"
    binary.write_bytes(b"---\nname: \xff\xfe\n---\nbody")
    with pytest.raises(SkillFileError, match="not UTF-8 text") as caught:
        parse_skill_file(binary)
    assert (caught.value.file, caught.value.line) == (str(binary), None)

    huge = tmp_path / "huge.skill.md"
    huge.write_text(skill_text(body="x" * MAX_SKILL_FILE_BYTES))
    with pytest.raises(SkillFileError, match="at most 256 KiB"):
        parse_skill_file(huge)

    folder = tmp_path / "folder.skill.md"
    folder.mkdir()
    with pytest.raises(SkillFileError, match="cannot be read"):
        parse_skill_file(folder)

    with pytest.raises(SkillFileError, match="cannot be read"):
        parse_skill_file(tmp_path / "missing.skill.md")

    good = tmp_path / "good.skill.md"
    good.write_text(skill_text(name="good"), encoding="utf-8")
    assert parse_skill_file(good).file_path == str(good)


# ------------------------------------------------------------------ loading folders
def test_load_skill_dirs_skips_bad_and_duplicate_files(tmp_path: Path) -> None:
    first = tmp_path / "first"
    second = tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "a.skill.md").write_text(skill_text(name="alpha"))
    (first / "b.skill.md").write_text("no frontmatter at all")
    (first / "c.skill.md").write_text(skill_text(name="alpha", description="second alpha"))
    (first / "d.skill.md").write_text(skill_text(name="delta", actions=("ws_list",)))
    (first / "notes.md").write_text("not a skill file: wrong suffix")
    (second / "a.skill.md").write_text(skill_text(name="delta", description="shadowed"))
    (second / "e.skill.md").write_text(skill_text(name="echo"))

    docs, problems = load_skill_dirs([first, tmp_path / "does-not-exist", second])

    assert [d.name for d in docs] == ["alpha", "delta", "echo"]
    assert {d.name: d.description for d in docs}["alpha"] == "A demo skill"  # first one wins
    assert {d.name: d.description for d in docs}["delta"] == "A demo skill"
    assert [(Path(p.file).parent.name, Path(p.file).name, p.line) for p in problems] == [
        ("first", "b.skill.md", 1),
        ("first", "c.skill.md", 2),
        ("second", "a.skill.md", 2),
    ]
    assert "must start with a '---'" in problems[0].reason
    assert problems[1].reason == f"skill 'alpha' is already defined by {first / 'a.skill.md'}"
    assert str(problems[0]).startswith(f"{first / 'b.skill.md'}:1: ")


def test_problem_renders_like_the_error() -> None:
    assert str(SkillProblem("f.skill.md", 3, "bad")) == "f.skill.md:3: bad"
    assert str(SkillProblem("f.skill.md", None, "bad")) == "f.skill.md: bad"


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_five_packaged_skills_have_the_seed_actions(language: Language) -> None:
    docs, problems = load_skill_dirs([PACKAGED_DIR], language)
    assert problems == []
    assert {d.name: d.actions for d in docs} == SEED_ACTIONS
    for doc in docs:
        assert doc.version >= 1
        assert doc.description
        assert doc.guidance.startswith("# ")
        assert Path(doc.file_path).parent == PACKAGED_DIR / language
    registry = default_registry()
    missing = [a for acts in SEED_ACTIONS.values() for a in acts if a not in registry]
    assert missing == []


def test_standard_dirs_add_the_data_dir_and_skip_its_bad_files(settings: Settings) -> None:
    dirs = standard_skill_dirs(settings)
    assert dirs[0] == PACKAGED_DIR
    extra = Path(settings.data_dir) / "skills"
    assert dirs[-1] == extra
    extra.mkdir(parents=True)
    (extra / "mine.skill.md").write_text(skill_text(name="mine"))
    (extra / "broken.skill.md").write_text("---\nname: [\n---\nbody")
    (extra / "clash.skill.md").write_text(skill_text(name="autonomous"))
    docs, problems = load_skill_dirs(standard_skill_dirs(settings), "en")
    assert {d.name for d in docs} == {*SEED_ACTIONS, "mine"}
    assert sorted(Path(p.file).name for p in problems) == ["broken.skill.md", "clash.skill.md"]


def test_skill_files_reached_through_a_symlink_are_not_loaded(
    settings: Settings, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"  # e.g. a folder a model can write to
    (elsewhere / "en").mkdir(parents=True)
    (elsewhere / "planted.skill.md").write_text(skill_text(name="planted"))
    (elsewhere / "en" / "planted-en.skill.md").write_text(skill_text(name="planted-en"))
    extra = Path(settings.data_dir) / "skills"
    extra.mkdir(parents=True)
    (extra / "mine.skill.md").write_text(skill_text(name="mine"))
    (extra / "linked.skill.md").symlink_to(elsewhere / "planted.skill.md")
    (extra / "en").symlink_to(elsewhere / "en", target_is_directory=True)

    docs, problems = load_skill_dirs(standard_skill_dirs(settings), "en")

    assert {d.name for d in docs} == {*SEED_ACTIONS, "mine"}
    assert sorted((p.file, p.reason) for p in problems) == [
        (str(extra / "en"), SYMLINKED),
        (str(extra / "linked.skill.md"), SYMLINKED),
    ]
    with pytest.raises(SkillFileError, match="symlink"):
        parse_skill_file(extra / "linked.skill.md")


def test_a_symlinked_skill_folder_is_not_loaded(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.skill.md").write_text(skill_text(name="alpha"))
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    docs, problems = load_skill_dirs([tmp_path / "link"], "en")
    assert docs == []
    assert [(p.file, p.reason) for p in problems] == [(str(tmp_path / "link"), SYMLINKED)]


# ------------------------------------------------------------------ SkillManager
@pytest.fixture
def docs() -> list[SkillDoc]:
    found, _ = load_skill_dirs([PACKAGED_DIR], "ja")
    return found


@pytest.fixture
def agent_id(db: Database, settings: Settings) -> str:
    return AgentStore(db, settings).create(AgentCreate(name="learner")).id


@pytest.fixture
def skills(db: Database, agent_id: str, docs: list[SkillDoc]) -> SkillManager:
    manager = SkillManager(db, agent_id, docs)
    manager.ensure_default_skills()
    return manager


def learn(skills: SkillManager, name: str = "ask why", **kw: object) -> object:
    values: dict[str, object] = {
        "description": "Ask why before agreeing",
        "guidance": "When a claim lacks a reason, ask for one.",
        "source": "experience",
    }
    values.update(kw)
    return skills.acquire(name=name, **values)  # type: ignore[arg-type]


def test_default_skills_are_copied_once(skills: SkillManager) -> None:
    first = {s.name: (s.id, s.version) for s in skills.list()}
    assert set(first) == set(SEED_ACTIONS)
    skills.ensure_default_skills()
    skills.ensure_default_skills()
    again = {s.name: (s.id, s.version) for s in skills.list()}
    assert again == first
    for skill in skills.list():
        assert skill.source == "standard"
        assert tuple(skill.actions) == SEED_ACTIONS[skill.name]
        assert skill.is_active
        assert skill.usage_count == 0


def test_a_newer_file_version_refreshes_the_standard_skill(
    skills: SkillManager, db: Database, agent_id: str, docs: list[SkillDoc]
) -> None:
    skills.record_action_use("send_speech")
    skills.toggle("autonomous", False)
    autonomous = next(d for d in docs if d.name == "autonomous")
    same_version = replace(autonomous, guidance="ignored: same version")
    SkillManager(db, agent_id, [same_version]).ensure_default_skills()
    assert skills.get("autonomous").guidance == autonomous.guidance

    newer = replace(
        autonomous,
        version=autonomous.version + 1,
        description="new description",
        guidance="new guidance",
        actions=("send_speech", "declare_done"),
    )
    SkillManager(db, agent_id, [newer]).ensure_default_skills()
    refreshed = skills.get("autonomous")
    assert (refreshed.version, refreshed.description, refreshed.guidance) == (
        autonomous.version + 1,
        "new description",
        "new guidance",
    )
    assert refreshed.actions == ["send_speech", "declare_done"]
    # the agent's own bookkeeping survives the refresh
    assert refreshed.usage_count == 1
    assert refreshed.is_active is False

    older = replace(autonomous, version=1, guidance="older")
    SkillManager(db, agent_id, [older]).ensure_default_skills()
    assert skills.get("autonomous").guidance == "new guidance"


def _shown(skills: list[Skill]) -> list[tuple[str, str, str, tuple[str, ...], str]]:
    return [(s.name, s.description, s.guidance, tuple(s.actions), s.source) for s in skills]


def test_planned_skills_are_what_ensuring_would_leave_without_writing(
    db: Database, agent_id: str, docs: list[SkillDoc]
) -> None:
    fresh = SkillManager(db, agent_id, docs)
    planned = PlannedSkills(db, agent_id, docs).get_active_skills()
    assert fresh.list() == []  # nothing was written
    fresh.ensure_default_skills()
    assert _shown(planned) == _shown(fresh.get_active_skills())

    learn(fresh)
    fresh.toggle("llm-selection", False)
    english, _ = load_skill_dirs([PACKAGED_DIR], "en")
    before = fresh.list()
    planned = PlannedSkills(db, agent_id, english).get_active_skills()
    assert fresh.list() == before  # still nothing written: the stored skills stay ja
    assert "llm-selection" not in [s.name for s in planned]
    assert next(s for s in planned if s.name == "autonomous").guidance == next(
        d.guidance for d in english if d.name == "autonomous"
    )
    in_english = SkillManager(db, agent_id, english)
    in_english.ensure_default_skills()
    assert _shown(planned) == _shown(in_english.get_active_skills())


def test_acquire_then_refine_the_same_name(skills: SkillManager) -> None:
    first = skills.acquire(
        name="  ask   why ",
        description=" Ask why ",
        guidance="Ask for reasons.",
        source="peer",
        situation_pattern="a claim without a reason",
        source_context="Yui did this",
        actions=["send_speech", "send_speech", "search_my_history"],
    )
    assert first.name == "ask why"
    assert (first.version, first.source, first.description) == (1, "peer", "Ask why")
    assert first.actions == ["send_speech", "search_my_history"]
    assert first.situation_pattern == "a claim without a reason"
    assert first.source_context == "Yui did this"
    assert first.is_active

    refined = skills.acquire(
        name="ask why", description="Ask why, kindly", guidance="Ask gently.", source="reflection"
    )
    assert refined.id == first.id
    assert refined.version == 2
    assert (refined.description, refined.guidance, refined.source) == (
        "Ask why, kindly",
        "Ask gently.",
        "reflection",
    )
    assert refined.actions == []
    assert len([s for s in skills.list() if s.name == "ask why"]) == 1
    assert (
        skills.acquire(name="ask why", description="d", guidance="g", source="research").version
        == 3
    )


def test_acquire_refuses_standard_names_and_bad_input(skills: SkillManager) -> None:
    with pytest.raises(ConflictError, match="'autonomous' is a standard skill"):
        learn(skills, "autonomous")
    with pytest.raises(ValidationError, match="skill source 'dreams'"):
        learn(skills, source="dreams")
    with pytest.raises(ValidationError, match="skill source 'standard'"):
        learn(skills, source="standard")
    with pytest.raises(ValidationError, match="needs a name"):
        learn(skills, "   ")
    with pytest.raises(ValidationError, match="description and guidance"):
        learn(skills, description=" ")
    with pytest.raises(ValidationError, match="description and guidance"):
        learn(skills, guidance="")
    with pytest.raises(ValidationError, match="invalid action names"):
        learn(skills, actions=["Send-Speech"])
    assert {s.name for s in skills.list()} == set(SEED_ACTIONS)
    assert skills.get("autonomous").version == 1


def test_acquire_inside_a_transaction_is_rolled_back_with_it(
    skills: SkillManager, db: Database
) -> None:
    seen: list[str] = []

    def failing_step() -> None:
        with db.write() as conn:
            seen.append(learn(skills, conn=conn).name)  # type: ignore[attr-defined]
            raise RuntimeError("the step failed")

    with pytest.raises(RuntimeError):
        failing_step()
    assert seen == ["ask why"]  # it was written in the transaction, then rolled back
    with pytest.raises(NotFoundError):
        skills.get("ask why")


def test_update_an_acquired_skill_but_not_a_standard_one(skills: SkillManager) -> None:
    learn(skills)
    updated = skills.update("ask why", guidance="Ask twice.", actions=["declare_done"])
    assert (updated.version, updated.guidance, updated.actions) == (
        2,
        "Ask twice.",
        ["declare_done"],
    )
    assert updated.description == "Ask why before agreeing"
    with pytest.raises(ConflictError, match="edit its file"):
        skills.update("autonomous", guidance="hacked")
    assert skills.get("autonomous").guidance != "hacked"


def test_toggle_flips_or_sets(skills: SkillManager) -> None:
    assert skills.toggle("llm-selection").is_active is False
    assert "llm-selection" not in {s.name for s in skills.get_active_skills()}
    assert skills.toggle("llm-selection").is_active is True
    assert skills.toggle("llm-selection", True).is_active is True
    assert skills.toggle("llm-selection", False).is_active is False
    assert skills.toggle("llm-selection", False).is_active is False
    assert len(skills.list(active_only=True)) == 4
    assert len(skills.list()) == 5
    with pytest.raises(NotFoundError):
        skills.toggle("no-such-skill")


def test_delete_acquired_only(skills: SkillManager) -> None:
    acquired = learn(skills)
    with pytest.raises(ConflictError, match="switch it off instead"):
        skills.delete("autonomous")
    assert skills.get("autonomous").name == "autonomous"
    skills.delete(acquired.id)  # type: ignore[attr-defined]
    with pytest.raises(NotFoundError):
        skills.get("ask why")
    with pytest.raises(NotFoundError):
        skills.delete("ask why")


def test_get_by_name_or_id_and_per_agent(
    skills: SkillManager, db: Database, settings: Settings, docs: list[SkillDoc]
) -> None:
    autonomous = skills.get("autonomous")
    assert skills.get(autonomous.id).name == "autonomous"
    other_id = AgentStore(db, settings).create(AgentCreate(name="other")).id
    other = SkillManager(db, other_id, docs)
    assert other.list() == []
    with pytest.raises(NotFoundError):
        other.get(autonomous.id)  # another agent's row
    learn(skills)
    other.ensure_default_skills()
    assert "ask why" not in {s.name for s in other.list()}
    assert other.get("autonomous").id != autonomous.id


def test_list_puts_standard_skills_first(skills: SkillManager) -> None:
    learn(skills, "zzz first learned")
    learn(skills, "aaa second learned")
    names = [s.name for s in skills.list()]
    assert set(names[:5]) == set(SEED_ACTIONS)
    assert names[5:] == ["zzz first learned", "aaa second learned"]


def test_record_action_use_counts_active_skills_offering_it(skills: SkillManager) -> None:
    learn(skills, "speaker", actions=["send_speech"])
    learn(skills, "quiet speaker", actions=["send_speech"])
    skills.toggle("quiet speaker", False)
    assert skills.record_action_use("send_speech") == 2  # autonomous + speaker
    assert skills.record_action_use("send_speech") == 2
    assert skills.record_action_use("not_offered") == 0
    counts = {s.name: s.usage_count for s in skills.list()}
    assert counts["autonomous"] == 2
    assert counts["speaker"] == 2
    assert counts["quiet speaker"] == 0
    assert counts["workspace-management"] == 0
    assert skills.get("autonomous").last_used_at is not None
    assert skills.get("workspace-management").last_used_at is None

    # the caller's list of active skills, inside its transaction
    active = [s for s in skills.get_active_skills() if s.name == "speaker"]
    with skills.db.write() as conn:
        assert skills.record_action_use("send_speech", conn=conn, active=active) == 1
    assert skills.get("speaker").usage_count == 3
    assert skills.get("autonomous").usage_count == 2


def test_increment_usage(skills: SkillManager) -> None:
    skills.increment_usage("llm-selection")
    skills.increment_usage("llm-selection")
    assert skills.get("llm-selection").usage_count == 2
    with pytest.raises(NotFoundError):
        skills.increment_usage("nope")


def test_set_effectiveness_bounds(skills: SkillManager) -> None:
    assert skills.get("autonomous").effectiveness is None
    assert skills.set_effectiveness("autonomous", 0.0).effectiveness == 0.0
    assert skills.set_effectiveness("autonomous", 1.0).effectiveness == 1.0
    assert skills.set_effectiveness("autonomous", 0.42).effectiveness == pytest.approx(0.42)
    for bad in (-0.01, 1.01, math.nan, math.inf):
        with pytest.raises(ValidationError, match="between 0 and 1"):
            skills.set_effectiveness("autonomous", bad)
    assert skills.get("autonomous").effectiveness == pytest.approx(0.42)
    with pytest.raises(NotFoundError):
        skills.set_effectiveness("nope", 0.5)


def test_active_skills_follow_every_change(skills: SkillManager) -> None:
    """get_active_skills caches; each change must still show up on the next call."""
    names = lambda: [s.name for s in skills.get_active_skills()]  # noqa: E731
    assert len(names()) == 5
    skills.toggle("autonomous", False)
    assert "autonomous" not in names()
    learn(skills, "new one")
    assert "new one" in names()
    skills.update("new one", description="changed")
    assert next(s for s in skills.get_active_skills() if s.name == "new one").description == (
        "changed"
    )
    skills.delete("new one")
    assert "new one" not in names()
    skills.toggle("autonomous", True)
    assert len(names()) == 5
    returned = skills.get_active_skills()
    returned.clear()  # callers get a copy, not the cache itself
    assert len(names()) == 5


def test_build_context_format(skills: SkillManager) -> None:
    assert SkillManager.build_context([], "ja") == "【利用可能なスキル】\n"
    active = skills.get_active_skills()
    context = skills.build_context(active, "ja")
    assert context.startswith("【利用可能なスキル】\n")
    for skill in active:
        assert f"\n## {skill.name}\n{skill.description}\n" in context
        assert skill.guidance in context
    autonomous = skills.get("autonomous")
    assert (
        "\n## autonomous\n自律モードスキル - ファシリテーターなしで自発的に議論に参加する\n"
        in context
    )
    assert context.index("## autonomous") < context.index(autonomous.guidance)

    learned = skills.acquire(
        name="ask why",
        description="Ask why",
        guidance="Ask for reasons.",
        source="experience",
        situation_pattern="a claim without a reason",
    )
    same = skills.acquire(name="echo", description="Same text", guidance="Same text", source="peer")
    assert SkillManager.build_context([learned, same], "ja") == (
        "【利用可能なスキル】\n"
        "\n## ask why\nAsk why\n"
        "状況: a claim without a reason\n"
        "\nAsk for reasons.\n"
        "\n## echo\nSame text\n"  # guidance equal to the description is not repeated
    )


def test_action_names_and_definitions(skills: SkillManager) -> None:
    learn(skills, "extra", actions=["ws_read", "send_speech", "made_up_action"])
    active = skills.get_active_skills()
    names = SkillManager.action_names(active)
    assert len(names) == len(set(names))
    expected = {a for acts in SEED_ACTIONS.values() for a in acts} | {"made_up_action"}
    assert set(names) == expected
    standard_first = [a for a in names if a != "made_up_action"]
    assert standard_first[:3] == list(SEED_ACTIONS[active[0].name])[:3]

    registry = default_registry()
    definitions = skills.build_action_definitions(active, registry)
    defined = [d.name for d in definitions]
    assert defined == sorted(defined)
    assert set(defined) == expected - {"made_up_action"}  # unknown actions are left out
    for definition in definitions:
        assert definition.parameters["type"] == "object"
        assert definition.description

    skills.toggle("workspace-management", False)
    fewer = {d.name for d in skills.build_action_definitions(skills.get_active_skills(), registry)}
    assert "ws_write" not in fewer
    assert "ws_read" in fewer  # still offered by the acquired "extra" skill


def test_two_processes_copying_in_the_standard_skills_at_once_both_succeed(
    pg_url: str, settings: Settings, docs: list[SkillDoc]
) -> None:
    """Two runtimes starting at once on PostgreSQL both found a standard skill missing and
    both inserted it: a unique violation stopped one (seen in the two-process budget
    test). Eight agents, each copied in by two Databases released together."""
    setup = Database(pg_url)
    setup.upgrade()
    agents = [AgentStore(setup, settings).create(AgentCreate(name=f"a{i}")).id for i in range(8)]
    setup.close()
    sides = [Database(pg_url), Database(pg_url)]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def copy_in(db: Database) -> None:
        for agent in agents:
            start.wait(30)
            try:
                SkillManager(db, agent, docs).ensure_default_skills()
            except BaseException as exc:  # shown below
                errors.append(exc)

    threads = [threading.Thread(target=copy_in, args=(db,)) for db in sides]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    try:
        assert errors == []
        for agent in agents:
            names = [s.name for s in SkillManager(sides[0], agent, docs).list()]
            assert sorted(names) == sorted(doc.name for doc in docs)
    finally:
        for db in sides:
            db.close()
