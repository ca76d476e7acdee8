"""Discussions: autonomous turn-taking and facilitated rounds, with a scripted model."""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa

from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.discussion import Discussion
from opencrab.core.identity import AgentRole, Identity
from opencrab.core.runtime import Runtime
from opencrab.errors import NotFoundError, ValidationError
from opencrab.event_log import EventLog
from opencrab.store.tables import sessions
from tests.core.conftest import calls, speak
from tests.fakes.scripted_provider import ScriptedProvider


@pytest.fixture
def pair(runtime: Runtime) -> tuple[Agent, Agent]:
    """Two agents speaking ja: the prompts they get are the Japanese texts tests quote."""
    return (
        runtime.agents.create(AgentCreate(name="ann", language="ja")),
        runtime.agents.create(AgentCreate(name="ben", language="ja")),
    )


def script(scripted: ScriptedProvider, *outcomes: object) -> None:
    scripted.outcomes.clear()
    scripted.then(*outcomes)  # type: ignore[arg-type]


async def test_autonomous_discussion_takes_turns_and_ends_when_all_are_done(
    runtime: Runtime, pair: tuple[Agent, Agent], scripted: ScriptedProvider
) -> None:
    ann, ben = pair
    script(
        scripted,
        speak("週休3日制に賛成です"),  # ann
        speak("生産性の根拠はありますか"),  # ben
        calls(("declare_done", {"reason": "言い尽くした"})),  # ann
        speak("では試行から始めましょう"),  # ben (the only one left)
        calls(("declare_done", {})),  # ben
    )
    discussion = Discussion.create(
        runtime.db, theme="週休3日制", participants=[ann.id, ben.id], max_turns=10
    )

    outcome = await discussion.run(runtime)

    assert outcome.ended_by == "all_done"
    assert outcome.status == "completed"
    assert [(t.agent, t.action) for t in outcome.turns] == [
        ("ann", "send_speech"),
        ("ben", "send_speech"),
        ("ann", "declare_done"),
        ("ben", "send_speech"),
        ("ben", "declare_done"),
    ]
    # ben's first prompt shows ann's speech; ann's second shows only what is new to her
    prompts = [str(r.messages[-1].content) for r in scripted.requests]
    assert "ann: 週休3日制に賛成です" in prompts[1]
    assert "ben: 生産性の根拠はありますか" in prompts[2]
    assert "週休3日制に賛成です" not in prompts[2]
    assert "テーマ: 週休3日制" in prompts[0]
    with runtime.db.read() as conn:
        row = conn.execute(sa.select(sessions).where(sessions.c.id == discussion.id)).one()
    assert (row.turn_number, row.done_count, row.status) == (5, 2, "completed")
    # each participant keeps its own trace in the shared session
    log = EventLog(runtime.db)
    ann_trace = log.trace(discussion.trace_for(ann.id))
    ben_trace = log.trace(discussion.trace_for(ben.id))
    assert [e.type for e in ann_trace].count("user") == 2
    assert [e.type for e in ben_trace].count("user") == 3
    assert [s.text for s in discussion.speeches()] == [
        "週休3日制に賛成です",
        "生産性の根拠はありますか",
        "では試行から始めましょう",
    ]


async def test_nobody_speaks_twice_in_a_row_while_others_may(
    runtime: Runtime, pair: tuple[Agent, Agent], scripted: ScriptedProvider
) -> None:
    ann, ben = pair
    carl = runtime.agents.create(AgentCreate(name="carl"))
    script(scripted, speak("意見です"))
    discussion = Discussion.create(
        runtime.db, theme="t", participants=[ann.id, ben.id, carl.id], max_turns=7
    )

    outcome = await discussion.run(runtime)

    assert outcome.ended_by == "max_turns"
    speakers = [t.agent for t in outcome.turns]
    assert len(speakers) == 7
    assert all(a != b for a, b in itertools.pairwise(speakers))
    assert speakers[:3] == ["ann", "ben", "carl"]  # least recently heard first


async def test_a_silent_discussion_ends(
    runtime: Runtime, pair: tuple[Agent, Agent], scripted: ScriptedProvider
) -> None:
    script(scripted, calls(("send_noreact", {"reason": "nothing to add"})))
    discussion = Discussion.create(
        runtime.db, theme="t", participants=[p.id for p in pair], max_turns=50
    )
    outcome = await discussion.run(runtime)
    assert outcome.ended_by == "silence"
    assert len(outcome.turns) == 4


async def test_facilitated_discussion_follows_the_facilitator(
    runtime: Runtime, pair: tuple[Agent, Agent], scripted: ScriptedProvider
) -> None:
    ann, ben = pair
    lead = runtime.agents.create(
        AgentCreate(
            name="lead",
            identity=Identity(name="Lead", role=AgentRole.facilitator()),
            language="ja",
        )
    )
    script(
        scripted,
        calls(("broadcast_guidance", {"content": "まず自由に意見を", "phase": "divergent"})),
        speak("賛成です"),
        speak("反対です"),
        calls(("broadcast_guidance", {"content": "論点を絞りましょう", "phase": "convergent"})),
        speak("コストが論点"),
        speak("同意"),
        calls(("declare_done", {"reason": "結論が出た"})),
    )
    discussion = Discussion.create(
        runtime.db,
        theme="リモートワーク",
        participants=[ann.id, ben.id],
        mode="facilitated",
        facilitator_id=lead.id,
        max_turns=20,
    )

    outcome = await discussion.run(runtime)

    assert outcome.ended_by == "facilitator_done"
    assert [t.agent for t in outcome.turns] == [
        "lead",
        "ann",
        "ben",
        "lead",
        "ann",
        "ben",
        "lead",
    ]
    discussion.refresh()
    assert discussion.phase == "convergent"
    assert "broadcast_guidance" in {t.name for t in scripted.requests[0].tools or []}
    assert "broadcast_guidance" not in {t.name for t in scripted.requests[1].tools or []}
    assert "lead: まず自由に意見を" in str(scripted.requests[1].messages[-1].content)
    assert "ファシリテーター" in str(scripted.requests[0].messages[-1].content)


async def test_bad_discussions_are_refused(runtime: Runtime, pair: tuple[Agent, Agent]) -> None:
    ann, ben = pair
    with pytest.raises(ValidationError, match="theme"):
        Discussion.create(runtime.db, theme="  ", participants=[ann.id, ben.id])
    with pytest.raises(ValidationError, match="at least two"):
        Discussion.create(runtime.db, theme="t", participants=[ann.id])
    with pytest.raises(ValidationError, match="facilitator"):
        Discussion.create(runtime.db, theme="t", participants=[ann.id], mode="facilitated")
    with pytest.raises(NotFoundError):
        Discussion.create(
            runtime.db, theme="t", participants=[ann.id, "00000000-0000-0000-0000-000000000000"]
        )
    outsider = runtime.agents.create(AgentCreate(name="out"))
    discussion = Discussion.create(runtime.db, theme="t", participants=[ann.id, ben.id])
    with pytest.raises(ValidationError, match="does not take part"):
        await discussion.take_turn(runtime, outsider)
