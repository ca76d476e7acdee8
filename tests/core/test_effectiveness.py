"""Skill effectiveness is computed from the outcomes of the turns that used the skill."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import text

from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentCreate, AgentStore
from opencrab.core.effectiveness import TurnFacts, fold_turn, record_turn
from opencrab.core.runtime import Runtime
from opencrab.core.skills import SkillManager
from opencrab.llm.types import ChatResponse
from opencrab.store import Database
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider


def script(scripted: ScriptedProvider, *outcomes: ChatResponse) -> None:
    scripted.outcomes.clear()  # the last outcome stays queued; start afresh
    scripted.then(*outcomes)


def effectiveness(runtime: Runtime, agent: Agent) -> dict[str, float | None]:
    return {s.name: s.effectiveness for s in runtime.engine.skills_for(agent).list()}


async def test_effectiveness_follows_action_success_and_rated_quality(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    assert set(effectiveness(runtime, agent).values()) == {None}
    script(
        scripted,
        calls(("ws_write", {"path": "a.md", "content": "x"}), ("ws_read", {"path": "nope.md"})),
        speak("one of two worked"),
    )
    first = await runtime.chat(agent, "write and read")
    assert [a.result.success for a in first.actions] == [True, False, True]

    after_one = effectiveness(runtime, agent)
    assert after_one["workspace-management"] == pytest.approx(0.5)  # 1 of 2 runs succeeded
    assert after_one["autonomous"] == pytest.approx(1.0)
    assert after_one["llm-meta-analysis"] is None  # none of its actions ran yet

    # the model rates its own call: quality 0.6 with success -> (0.6 + 1) / 2 = 0.8 for
    # the whole turn, whatever its actions' own results
    script(
        scripted,
        calls(
            ("ws_write", {"path": "b.md", "content": "y"}),
            (
                "evaluate_response",
                {"quality_score": 0.6, "task_success": True, "evaluation": "fine"},
            ),
        ),
        speak("rated"),
    )
    await runtime.chat(agent, "write and rate")

    after_two = effectiveness(runtime, agent)
    assert after_two["workspace-management"] == pytest.approx((0.5 + 0.8) / 2)
    assert after_two["autonomous"] == pytest.approx((1.0 + 0.8) / 2)
    assert after_two["llm-meta-analysis"] == pytest.approx(0.8)
    assert after_two["self-learning"] is None

    # a failed rating (task_success false) pulls the turn down to (quality + 0) / 2
    script(
        scripted,
        calls(
            (
                "evaluate_response",
                {"quality_score": 0.4, "task_success": False, "evaluation": "wrong"},
            )
        ),
        speak("sorry"),
    )
    await runtime.chat(agent, "rate badly")
    assert effectiveness(runtime, agent)["llm-meta-analysis"] == pytest.approx((0.8 + 0.2) / 2)


async def test_effectiveness_is_the_mean_of_the_last_fifty_turns(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    # ten failing turns, then fifty good ones: the failures fall out of the window
    for n in range(60):
        path = "nope.md" if n < 10 else "a.md"
        action = ("ws_read", {"path": path}) if n < 10 else ("ws_write", {"path": path})
        if n >= 10:
            action[1]["content"] = "x"
        script(scripted, calls(action), speak("done"))
        await runtime.chat(agent, f"turn {n}")
        if n == 9:
            assert effectiveness(runtime, agent)["workspace-management"] == pytest.approx(0.0)
        if n == 34:  # 10 failures and 25 successes in the window
            assert effectiveness(runtime, agent)["workspace-management"] == pytest.approx(
                25 / 35, abs=1e-4
            )  # stored to 4 places
    skill = runtime.engine.skills_for(agent).get("workspace-management")
    assert skill.effectiveness == pytest.approx(1.0)
    with runtime.db.read() as conn:
        from opencrab.store.tables import skills

        kept = (
            conn.execute(skills.select().where(skills.c.id == skill.id)).one().effectiveness_scores
        )
    assert len(kept) == 50


async def test_a_learned_skill_naming_no_action_is_scored_by_the_turns_it_was_in(
    runtime: Runtime, agent: Agent, scripted: ScriptedProvider
) -> None:
    guidance = {
        "name": "be-concise",
        "description": "Answer in one sentence",
        "guidance": "One sentence, no preamble.",
    }
    script(scripted, calls(("create_my_skill", guidance)), speak("learned it"))
    learned = await runtime.chat(agent, "learn to be concise")
    assert learned.actions[0].result.success

    def skill() -> Any:
        return next(s for s in runtime.engine.skills_for(agent).list() if s.name == "be-concise")

    assert skill().actions == []
    assert (skill().usage_count, skill().effectiveness) == (0, None)  # not in that turn yet

    script(scripted, speak("Short answer."))  # in context; its one action (the speech) worked
    await runtime.chat(agent, "what is a crab?")
    assert (skill().usage_count, skill().effectiveness) == (1, pytest.approx(1.0))

    script(
        scripted,
        calls(("ws_read", {"path": "missing.md"})),  # fails; the speech works: 1 of 2
        speak("Could not read it."),
    )
    await runtime.chat(agent, "read missing.md")
    assert (skill().usage_count, skill().effectiveness) == (2, pytest.approx((1 + 0.5) / 2))

    script(
        scripted,
        calls(
            (
                "evaluate_response",
                {"quality_score": 0.6, "task_success": True, "evaluation": "ok"},
            )
        ),
        speak("rated"),
    )
    await runtime.chat(agent, "rate yourself")  # a rated turn scores its rating: 0.8
    mean = pytest.approx((1 + 0.5 + 0.8) / 3, abs=1e-4)  # stored to four places
    assert (skill().usage_count, skill().effectiveness) == (3, mean)

    runtime.engine.skills_for(agent).toggle("be-concise", False)
    script(scripted, speak("Long answer."))
    await runtime.chat(agent, "switched off")  # not in context: not used
    assert skill().usage_count == 3


def test_two_turns_ending_at_once_both_count(any_db: Database, settings: Settings) -> None:
    """Two turns of one agent fold their scores at the same time (PostgreSQL: two
    connections, READ COMMITTED): the second waits for the first's rows and folds its
    score after it, so neither is lost."""
    agent = AgentStore(any_db, settings).create(AgentCreate(name="pair"))
    skills = SkillManager(any_db, agent.id)
    skills.acquire(
        name="writing", description="d", guidance="g", source="reflection", actions=["ws_write"]
    )
    ok, failed = TurnFacts(), TurnFacts()
    ok.add("ws_write", success=True, metrics_id=None)
    failed.add("ws_write", success=False, metrics_id=None)
    second: dict[str, float] = {}
    other = threading.Thread(target=lambda: second.update(record_turn(any_db, agent.id, failed)))
    with any_db.write() as first:
        assert fold_turn(first, agent.id, ok) == {"writing": 1.0}
        if any_db.dialect == "postgresql":  # SQLite runs one write transaction at a time
            other.start()
            wait_for_lock(any_db)
    if any_db.dialect == "postgresql":
        other.join(timeout=60)
    else:
        other.run()
    assert second == {"writing": 0.5}  # folded after the first: (1 + 0) / 2
    assert skills.get("writing").effectiveness == pytest.approx(0.5)


def wait_for_lock(db: Database) -> None:
    """Until another connection waits for a row lock (the second turn's read)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with db.read() as conn:
            waiting = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
            ).scalar_one()
        if waiting:
            return
        time.sleep(0.01)
    raise AssertionError("the second turn never waited for the first one's rows")


def test_a_turn_that_changes_no_score_writes_no_skill_row(
    any_db: Database, settings: Settings
) -> None:
    """A full window of successes taking one more: the scores and the mean stay as they
    are, and the skill row is not written; a value set by hand is put right by the next
    turn all the same."""
    agent = AgentStore(any_db, settings).create(AgentCreate(name="steady"))
    skills = SkillManager(any_db, agent.id)
    skills.acquire(
        name="writing", description="d", guidance="g", source="reflection", actions=["ws_write"]
    )
    ok = TurnFacts()
    ok.add("ws_write", success=True, metrics_id=None)
    seen: list[str] = []

    def note(_c: object, _cur: object, statement: str, *_: object) -> None:
        seen.append(" ".join(statement.split()))

    def skill_writes() -> list[str]:
        return [s for s in seen if s.startswith("UPDATE skills")]

    for _ in range(50):
        record_turn(any_db, agent.id, ok)
    sa.event.listen(any_db.engine, "before_cursor_execute", note)
    try:
        assert record_turn(any_db, agent.id, ok) == {"writing": 1.0}
        assert skill_writes() == []
        assert skills.get("writing").effectiveness == pytest.approx(1.0)
        skills.set_effectiveness("writing", 0.25)
        seen.clear()
        assert record_turn(any_db, agent.id, ok) == {"writing": 1.0}
        assert len(skill_writes()) == 1
    finally:
        sa.event.remove(any_db.engine, "before_cursor_execute", note)
    assert skills.get("writing").effectiveness == pytest.approx(1.0)
