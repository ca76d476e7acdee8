"""The agents aggregate's repositories on SQLite and PostgreSQL: what they store and return.

Rows the aggregate does not write (sessions, metrics, memories) are put in place with
plain inserts, as their own writers would leave them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
import sqlalchemy as sa

from opencrab.store import Database
from opencrab.store.repositories import agent_stats, skills, tokens, tools
from opencrab.store.repositories import agents as repo
from opencrab.store.repositories import sessions as session_context
from opencrab.store.repositories.agents import AgentRow, IdentityRow, SoulRow
from opencrab.store.repositories.skills import SkillValues
from opencrab.store.repositories.tokens import ApiToken
from opencrab.store.repositories.tools import ToolRow
from opencrab.store.tables import (
    agent_sessions,
    agent_tools,
    agents,
    llm_usage_metrics,
    memory_curated,
    sessions,
    skill_versions,
    soul,
)

T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


def new_agent(db: Database, name: str, *, at: datetime = T0, **fields: Any) -> AgentRow:
    row = AgentRow(
        id=str(uuid4()),
        name=name,
        description=fields.get("description"),
        prompt=fields.get("prompt", ""),
        language=fields.get("language"),
        llm_config=fields.get("llm_config"),
        heartbeat=fields.get("heartbeat"),
        created_at=at,
        updated_at=at,
    )
    with db.write() as conn:
        repo.insert_agent(conn, row)
    return row


def new_tool(db: Database, name: str) -> ToolRow:
    row = ToolRow(str(uuid4()), name, f"does {name}", {"type": "object"}, T0)
    with db.write() as conn:
        tools.insert_tool(conn, row)
    return row


def text(description: str, **more: Any) -> SkillValues:
    values: SkillValues = {
        "description": description,
        "guidance": "do it well",
        "situation_pattern": "",
        "actions": ["ws_read"],
        "source": "experience",
        "updated_at": T0,
    }
    values.update(more)  # type: ignore[typeddict-item]
    return values


# ------------------------------------------------------------------ agents
def test_an_agent_row_comes_back_as_stored_by_id_or_by_name(any_db: Database) -> None:
    stored = new_agent(
        any_db,
        "aki",
        description="notes",
        prompt="You help.",
        language="ja",
        llm_config={"daily_budget_usd": 2.5},
        heartbeat={"interval_secs": 31, "enabled": False},
    )
    with any_db.read() as conn:
        by_id = repo.find_agent(conn, stored.id)
        by_name = repo.find_agent(conn, "  aki ")
        upper = repo.find_agent(conn, stored.id.upper())
        assert repo.find_agent(conn, "nobody") is None
        assert repo.find_agent(conn, str(uuid4())) is None
    assert by_id == by_name == upper == stored
    assert by_id is not None
    assert by_id.llm_config == {"daily_budget_usd": 2.5}


def test_agents_list_oldest_first_with_summaries_and_names(any_db: Database) -> None:
    later = new_agent(any_db, "later", at=T0 + timedelta(hours=1), language="zh")
    first = new_agent(any_db, "first", description="the first")
    with any_db.read() as conn:
        assert [a.name for a in repo.all_agents(conn)] == ["first", "later"]
        summaries = repo.agent_summaries(conn)
        names = repo.agent_names(conn)
        assert repo.agent_id_named(conn, "later") == later.id
        assert repo.agent_id_named(conn, "Later") is None
    assert [(s.id, s.name, s.description) for s in summaries] == [
        (first.id, "first", "the first"),
        (later.id, "later", None),
    ]
    assert names == {first.id: ("first", None), later.id: ("later", "zh")}


def test_update_agent_changes_only_what_is_given(any_db: Database) -> None:
    stored = new_agent(any_db, "aki", description="notes", prompt="p", language="en")
    later = T0 + timedelta(minutes=5)
    with any_db.write() as conn:
        assert repo.update_agent(conn, stored.id, updated_at=later, prompt="q", language=None) == 1
        assert repo.update_agent(conn, str(uuid4()), updated_at=later, prompt="x") == 0
    with any_db.read() as conn:
        row = repo.find_agent(conn, stored.id)
    assert row is not None
    assert (row.prompt, row.language, row.description, row.name) == ("q", None, "notes", "aki")
    assert row.updated_at == later
    assert row.created_at == T0


def test_soul_and_identity_are_inserted_then_updated_in_place(any_db: Database) -> None:
    stored = new_agent(any_db, "aki")
    with any_db.read() as conn:
        assert repo.soul_of(conn, stored.id) is None
        assert repo.identity_of(conn, stored.id) is None
    persona = SoulRow("Aki", {"style": "Amiable"}, {"openness": 0.9}, {"primary": "x"}, ["calm"])
    who = IdentityRow("Aki", "facilitator", "editor", "OpenCrab", None, {"k": 1})
    with any_db.write() as conn:
        repo.save_soul(conn, stored.id, persona, T0)
        repo.save_identity(conn, stored.id, who, T0)
        repo.save_soul(conn, stored.id, SoulRow("Aki 2"), T0)
    with any_db.read() as conn:
        assert repo.soul_of(conn, stored.id) == SoulRow("Aki 2")
        assert repo.identity_of(conn, stored.id) == who
        assert repo.all_souls(conn) == {stored.id: SoulRow("Aki 2")}
        assert repo.all_identities(conn) == {stored.id: who}
        assert conn.execute(sa.select(sa.func.count()).select_from(soul)).scalar() == 1


def test_deleting_an_agent_takes_its_persona_and_grants(any_db: Database) -> None:
    stored = new_agent(any_db, "aki")
    tool = new_tool(any_db, "ws_read")
    with any_db.write() as conn:
        repo.save_soul(conn, stored.id, SoulRow("Aki"), T0)
        tools.replace_grants(conn, stored.id, [tool.id])
    with any_db.write() as conn:
        repo.delete_agent(conn, stored.id)
    with any_db.read() as conn:
        assert repo.find_agent(conn, stored.id) is None
        assert repo.soul_of(conn, stored.id) is None
        assert conn.execute(sa.select(sa.func.count()).select_from(agent_tools)).scalar() == 0
        assert conn.execute(sa.select(sa.func.count()).select_from(agents)).scalar() == 0
        assert tools.tool_by_id(conn, tool.id) == tool  # the tool itself stays


# ------------------------------------------------------------------ tools and grants
def test_tools_are_listed_by_name_and_refreshed_by_name(any_db: Database) -> None:
    b = new_tool(any_db, "b_tool")
    a = new_tool(any_db, "a_tool")
    with any_db.write() as conn:
        tools.update_tool(conn, "b_tool", "new text", {"type": "object", "required": ["x"]})
    with any_db.read() as conn:
        listed = tools.all_tools(conn)
        assert tools.tool_by_id(conn, str(uuid4())) is None
        assert tools.tool_texts(conn) == {
            "a_tool": ("does a_tool", {"type": "object"}),
            "b_tool": ("new text", {"type": "object", "required": ["x"]}),
        }
        assert tools.tool_names(conn, [a.id, str(uuid4())]) == {a.id: "a_tool"}
        assert tools.known_tool_ids(conn, [b.id, str(uuid4())]) == {b.id}
    assert [t.name for t in listed] == ["a_tool", "b_tool"]
    assert listed[0] == a
    assert listed[0].created_at == T0


def test_grants_are_replaced_whole_and_read_per_agent_or_for_all(any_db: Database) -> None:
    aki, ben = new_agent(any_db, "aki"), new_agent(any_db, "ben")
    read, write, web = (new_tool(any_db, n) for n in ("ws_read", "ws_write", "web_search"))
    with any_db.write() as conn:
        tools.replace_grants(conn, aki.id, [read.id, write.id])
        tools.replace_grants(conn, ben.id, [web.id])
        tools.replace_grants(conn, aki.id, [write.id, web.id])
    with any_db.read() as conn:
        assert tools.granted_tool_names(conn, aki.id) == {"ws_write", "web_search"}
        assert sorted(tools.granted_tool_ids(conn, aki.id)) == sorted([write.id, web.id])
        grants = tools.all_grants(conn)
    assert {k: sorted(v) for k, v in grants.items()} == {
        aki.id: sorted([write.id, web.id]),
        ben.id: [web.id],
    }
    with any_db.write() as conn:
        tools.replace_grants(conn, aki.id, [])
    with any_db.read() as conn:
        assert tools.granted_tool_names(conn, aki.id) == set()
        assert tools.granted_tool_ids(conn, ben.id) == [web.id]


# ------------------------------------------------------------------ skills and versions
def test_a_skill_is_stored_found_and_updated_only_at_its_version(any_db: Database) -> None:
    agent = new_agent(any_db, "aki")
    skill_id = str(uuid4())
    with any_db.write() as conn:
        skills.insert_skill(conn, skill_id, agent.id, "notes", text("take notes", version=1), T0)
    with any_db.read() as conn:
        row = skills.find_skill(conn, agent.id, "notes")
        assert skills.find_skill(conn, agent.id, skill_id) == row
        assert skills.find_skill(conn, str(uuid4()), "notes") is None
        heads = skills.skill_heads(conn, agent.id)
    assert row is not None
    assert (row.name, row.description, row.actions, row.source, row.version) == (
        "notes",
        "take notes",
        ["ws_read"],
        "experience",
        1,
    )
    assert (row.is_active, row.usage_count, row.effectiveness, row.recent_scores) == (
        True,
        0,
        None,
        [],
    )
    assert heads["notes"].id == skill_id
    assert heads["notes"].source == "experience"
    later = T0 + timedelta(minutes=1)
    with any_db.write() as conn:
        stale = skills.update_skill(conn, skill_id, {"guidance": "x", "version": 5}, at_version=4)
        done = skills.update_skill(
            conn,
            skill_id,
            {"actions": ["ws_write"], "version": 2, "updated_at": later},
            at_version=1,
        )
    assert (stale, done) == (0, 1)
    with any_db.read() as conn:
        after = skills.skill_by_id(conn, skill_id)
        head = skills.skill_head_named(conn, agent.id, "notes")
    assert (after.actions, after.version, after.guidance, after.updated_at) == (
        ["ws_write"],
        2,
        "do it well",
        later,
    )
    assert head is not None
    assert head.version == 2


def test_skills_list_standard_first_and_active_only_on_request(any_db: Database) -> None:
    agent = new_agent(any_db, "aki")
    with any_db.write() as conn:
        skills.insert_skill(conn, str(uuid4()), agent.id, "learned", text("l"), T0)
        off = str(uuid4())
        skills.insert_skill(
            conn, off, agent.id, "zz-standard", text("s", source="standard"), T0 + timedelta(1)
        )
        skills.insert_skill(
            conn, str(uuid4()), agent.id, "a-standard", text("s", source="standard"), T0
        )
        skills.update_skill(conn, off, {"is_active": False})
    with any_db.read() as conn:
        every = [s.name for s in skills.list_skills(conn, agent.id)]
        active = [s.name for s in skills.list_skills(conn, agent.id, active_only=True)]
        counts = skills.skill_counts(conn, None)
        only = skills.skill_counts(conn, [str(uuid4())])
        pairs = skills.active_skill_actions(conn, agent.id)
    assert every == ["a-standard", "zz-standard", "learned"]
    assert active == ["a-standard", "learned"]
    assert counts == {agent.id: (2, 2)}
    assert only == {}
    assert sorted(actions for _, actions in pairs) == [["ws_read"], ["ws_read"]]


def test_the_stamp_moves_on_every_change_and_uses_are_counted(any_db: Database) -> None:
    agent = new_agent(any_db, "aki")
    skill_id = str(uuid4())
    with any_db.read() as conn:
        empty = skills.skills_stamp(conn, agent.id)
    with any_db.write() as conn:
        skills.insert_skill(conn, skill_id, agent.id, "notes", text("n"), T0)
    with any_db.read() as conn:
        one = skills.skills_stamp(conn, agent.id)
    with any_db.write() as conn:
        skills.update_skill(conn, skill_id, {"updated_at": T0 + timedelta(seconds=1)})
        skills.count_use(conn, skill_id, T0 + timedelta(hours=1))
        skills.count_use(conn, skill_id, T0 + timedelta(hours=2))
    with any_db.read() as conn:
        moved = skills.skills_stamp(conn, agent.id)
        row = skills.skill_by_id(conn, skill_id)
    assert empty == (0, None)
    assert one == (1, T0)
    assert moved == (1, T0 + timedelta(seconds=1))
    assert (row.usage_count, row.last_used_at) == (2, T0 + timedelta(hours=2))


def test_scores_are_stored_and_read_back_for_effectiveness(any_db: Database) -> None:
    agent = new_agent(any_db, "aki")
    skill_id = str(uuid4())
    with any_db.write() as conn:
        skills.insert_skill(conn, skill_id, agent.id, "notes", text("n"), T0)
        skills.set_scores(conn, skill_id, 0.75, [0.5, 1.0])
    with any_db.read() as conn:
        [scores] = skills.skill_scores(conn, agent.id)
        row = skills.skill_by_id(conn, skill_id)
    assert (scores.id, scores.name, scores.actions, scores.recent_scores) == (
        skill_id,
        "notes",
        ["ws_read"],
        [0.5, 1.0],
    )
    assert (row.effectiveness, row.recent_scores) == (0.75, [0.5, 1.0])


def test_versions_replace_their_number_and_keep_only_the_newest(any_db: Database) -> None:
    agent = new_agent(any_db, "aki")
    skill_id = str(uuid4())
    with any_db.write() as conn:
        skills.insert_skill(conn, skill_id, agent.id, "notes", text("v1", version=1), T0)
        skills.record_version(conn, skill_id, "created", T0, keep=2)
        for n in (2, 3):
            skills.update_skill(conn, skill_id, {"description": f"v{n}", "version": n})
            skills.record_version(conn, skill_id, "edited", T0 + timedelta(minutes=n), keep=2)
        skills.update_skill(conn, skill_id, {"description": "v3 again"})
        skills.record_version(conn, skill_id, "file", T0 + timedelta(hours=1), keep=2)
    with any_db.read() as conn:
        kept = skills.list_versions(conn, skill_id)
    assert [(v.version, v.description, v.change) for v in kept] == [
        (3, "v3 again", "file"),
        (2, "v2", "edited"),
    ]
    assert kept[0].created_at == T0 + timedelta(hours=1)
    assert (kept[0].actions, kept[0].source, kept[0].skill_id) == (
        ["ws_read"],
        "experience",
        skill_id,
    )
    with any_db.write() as conn:
        skills.delete_skill(conn, skill_id)
    with any_db.read() as conn:
        assert skills.list_versions(conn, skill_id) == []
        assert conn.execute(sa.select(sa.func.count()).select_from(skill_versions)).scalar() == 0


# ------------------------------------------------------------------ tokens
def test_tokens_are_stored_listed_revoked_and_found_by_hash(any_db: Database) -> None:
    first = ApiToken(str(uuid4()), "cli", "ocb_aaaa", T0, None, None)
    second = ApiToken(str(uuid4()), "ci", "ocb_bbbb", T0 + timedelta(1), None, None)
    with any_db.read() as conn:
        assert tokens.any_active(conn) is False
    with any_db.write() as conn:
        tokens.insert_token(conn, first, token_hash="a" * 64)
        tokens.insert_token(conn, second, token_hash="b" * 64)
    with any_db.read() as conn:
        assert tokens.list_tokens(conn) == [first, second]
        assert tokens.active_token_with_hash(conn, "a" * 64) == first
        assert tokens.any_active(conn) is True
    used = T0 + timedelta(hours=3)
    with any_db.write() as conn:
        tokens.touch_token(conn, first.id, used)
        tokens.revoke_token(conn, second.id, used)
    missing = str(uuid4())
    with any_db.read() as conn:
        assert tokens.list_tokens(conn) == [ApiToken(first.id, "cli", "ocb_aaaa", T0, used, None)]
        every = tokens.list_tokens(conn, include_revoked=True)
        assert tokens.active_token_with_hash(conn, "b" * 64) is None
        assert tokens.active_among(conn, [first.id, second.id, missing]) == {first.id}
    assert [(t.name, t.active) for t in every] == [("cli", True), ("ci", False)]
    assert every[1].revoked_at == used


# ------------------------------------------------------------------ reads across aggregates
def metrics_row(agent_id: str, at: datetime, cost: float, **more: Any) -> dict[str, Any]:
    return {
        "id": str(uuid4()),
        "agent_id": agent_id,
        "timestamp": at,
        "provider": "fake",
        "model": "m",
        "purpose": "conversation",
        "input_tokens": 1,
        "output_tokens": 1,
        "total_tokens": 2,
        "estimated_cost_usd": cost,
        "latency_ms": 5,
        "created_at": at,
        **more,
    }


def test_spend_is_summed_since_a_time_per_agent(any_db: Database) -> None:
    aki, ben = new_agent(any_db, "aki"), new_agent(any_db, "ben")
    with any_db.write() as conn:
        conn.execute(
            llm_usage_metrics.insert(),
            [
                metrics_row(aki.id, T0, 1.25),
                metrics_row(aki.id, T0 + timedelta(hours=1), 0.5),
                metrics_row(aki.id, T0 - timedelta(seconds=1), 100.0),
                metrics_row(ben.id, T0, 2.0),
            ],
        )
    with any_db.read() as conn:
        assert agent_stats.spent_since(conn, aki.id, T0) == pytest.approx(1.75)
        assert agent_stats.spent_since(conn, str(uuid4()), T0) == 0.0
        assert agent_stats.spent_by_agent(conn, T0, None) == pytest.approx(
            {aki.id: 1.75, ben.id: 2.0}
        )
        assert agent_stats.spent_by_agent(conn, T0, [ben.id]) == pytest.approx({ben.id: 2.0})


def test_rated_calls_are_the_agents_own_rated_ones(any_db: Database) -> None:
    aki, ben = new_agent(any_db, "aki"), new_agent(any_db, "ben")
    good = metrics_row(aki.id, T0, 0, quality_score=0.8, task_success=True)
    plain = metrics_row(aki.id, T0, 0, quality_score=0.4)
    unrated = metrics_row(aki.id, T0, 0)
    other = metrics_row(ben.id, T0, 0, quality_score=1.0)
    with any_db.write() as conn:
        for row in (good, plain, unrated, other):
            conn.execute(llm_usage_metrics.insert().values(row))
    ids = [good["id"], plain["id"], unrated["id"], other["id"]]
    with any_db.read() as conn:
        rated = agent_stats.rated_calls(conn, aki.id, ids)
        assert agent_stats.rated_calls(conn, aki.id, []) == []
    assert sorted((r.id, r.quality_score, r.task_success) for r in rated) == sorted(
        [(good["id"], 0.8, True), (plain["id"], 0.4, None)]
    )


def test_session_and_memory_counts_per_agent(any_db: Database) -> None:
    aki, ben = new_agent(any_db, "aki"), new_agent(any_db, "ben")
    chat, talk = str(uuid4()), str(uuid4())
    with any_db.write() as conn:
        stamps = {"created_at": T0, "updated_at": T0}
        conn.execute(sessions.insert().values(id=chat, kind="chat", agent_id=aki.id, **stamps))
        conn.execute(sessions.insert().values(id=talk, kind="discussion", theme="tea", **stamps))
        conn.execute(
            agent_sessions.insert(),
            [{"agent_id": aki.id, "session_id": talk}, {"agent_id": ben.id, "session_id": talk}],
        )
        conn.execute(
            memory_curated.insert(),
            [
                {"id": str(uuid4()), "agent_id": aki.id, "category": "c", "content": "x"}
                | {"updated_at": T0}
                for _ in range(3)
            ],
        )
    with any_db.read() as conn:
        assert agent_stats.session_counts(conn, None) == {aki.id: 2, ben.id: 1}
        assert agent_stats.session_counts(conn, [ben.id]) == {ben.id: 1}
        assert agent_stats.memory_counts(conn, None) == {aki.id: 3}
        assert agent_stats.memory_counts(conn, [ben.id]) == {}


def test_a_sessions_context_is_read_and_replaced(any_db: Database) -> None:
    agent = new_agent(any_db, "aki")
    session_id = str(uuid4())
    with any_db.write() as conn:
        conn.execute(
            sessions.insert().values(
                id=session_id, kind="chat", agent_id=agent.id, created_at=T0, updated_at=T0
            )
        )
    missing = str(uuid4())
    with any_db.read() as conn:
        assert session_context.session_context(conn, session_id) is None
        assert session_context.find_session_context(conn, missing) is None
        found = session_context.find_session_context(conn, session_id)
    assert found is not None
    assert found.context == {}
    with any_db.write() as conn:
        session_context.set_session_context(conn, session_id, {"llm_overrides": {"a": {}}})
    with any_db.read() as conn:
        assert session_context.session_context(conn, session_id) == {"llm_overrides": {"a": {}}}
        again = session_context.find_session_context(conn, session_id)
        assert session_context.session_context(conn, missing) is None
    assert again is not None
    assert again.context == {"llm_overrides": {"a": {}}}
