"""A store seeded with known activity for the analytics tests (repository, API, pages).

    seeded = seed_analytics(db)               # creates the agents too
    seeded = seed_analytics(db, ids=created)  # or uses agents made over REST {name: id}

Two Japanese agents (SAKURA, TARO) and one without relations (LONELY): spoken lines,
actions, heartbeat ticks, skills and their versions over three recent UTC days,
impressions of each other in one discussion, and the discussion's messages. The
expected figures are attributes of the returned `Seeded`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

from opencrab.store.database import Database
from opencrab.store.tables import (
    agents,
    heartbeat_log,
    impressions,
    memory_sessions,
    messages,
    sessions,
    skill_versions,
    skills,
)

SAKURA, TARO, LONELY = "さくら", "たろう", "ひとり"
SKILL = "議論の進め方"


@dataclass
class Seeded:
    ids: dict[str, str]
    days: list[str]  # d0, d1, d2 (UTC), oldest first
    session_id: str
    speech: dict[str, list[int]] = field(default_factory=dict)  # name -> per day
    impression_ids: list[str] = field(default_factory=list)  # SAKURA's of TARO, TARO's of SAKURA


def _ago(now: datetime, days: int) -> datetime:
    return now - timedelta(days=days, minutes=1)


def seed_analytics(db: Database, ids: dict[str, str] | None = None) -> Seeded:
    """Write the known activity (and the agents unless `ids` names them)."""
    now = datetime.now(UTC)
    t = [_ago(now, 2), _ago(now, 1), _ago(now, 0)]
    days = [x.date().isoformat() for x in t]
    session = str(uuid4())
    with db.write() as conn:
        if ids is None:
            ids = {name: str(uuid4()) for name in (SAKURA, TARO, LONELY)}
            conn.execute(
                agents.insert(),
                [
                    {
                        "id": i,
                        "name": n,
                        "prompt": "p",
                        "language": "ja",
                        "created_at": now,
                        "updated_at": now,
                    }
                    for n, i in ids.items()
                ],
            )
        a, b = ids[SAKURA], ids[TARO]
        conn.execute(
            sessions.insert().values(
                id=session,
                kind="discussion",
                status="active",
                theme="週休三日制の是非",
                participant_ids_json=[a, b],
                created_at=now,
                updated_at=now,
            )
        )

        def log(agent: str, when: datetime, kind: str, meta: Any = None) -> dict[str, Any]:
            return {
                "agent_id": agent,
                "session_id": session,
                "log_type": kind,
                "speaker_id": agent,  # the agent's own line, as the recorder writes it
                "content": "賛成です。" if kind == "speech" else kind,
                "metadata_json": meta,
                "created_at": when,
            }

        logs = (
            [log(a, t[0], "speech")] * 3
            + [log(a, t[2], "speech")] * 2
            + [log(b, t[1], "speech")]
            + [log(a, t[1], "action", {"action": "reflect_and_learn", "success": True})]
            + [log(a, t[2], "action", {"action": "send_speech", "success": True})] * 2
            + [log(b, t[1], "action", {"action": "send_speech", "success": False})]
            + [log(b, t[1], "inner_voice")]
        )
        conn.execute(memory_sessions.insert(), logs)
        beats = [
            (a, t[0], "speak"),
            (a, t[0], "speak"),
            (a, t[1], "idle"),
            (a, t[2], "learn"),
            (a, t[2], "skip"),
            (b, t[2], "idle"),
            (b, t[2], "idle"),
            (b, t[2], "idle"),
        ]
        conn.execute(
            heartbeat_log.insert(),
            [{"agent_id": x, "decision": d, "created_at": w} for x, w, d in beats],
        )
        skill_a, skill_b, skill_b2 = str(uuid4()), str(uuid4()), str(uuid4())

        def skill(
            sid: str, agent: str, name: str, used: int, score: float | None
        ) -> dict[str, Any]:
            return {
                "id": sid,
                "agent_id": agent,
                "name": name,
                "description": "d",
                "situation_pattern": "s",
                "guidance": "g",
                "source_type": "experience",
                "effectiveness": score,
                "usage_count": used,
                "is_active": True,
                "actions_json": ["send_speech"] if name == SKILL else [],
                "version": 1,
                "created_at": now,
                "updated_at": now,
            }

        conn.execute(
            skills.insert(),
            [
                skill(skill_a, a, SKILL, 4, 0.8),
                skill(skill_b, b, SKILL, 1, 0.6),
                skill(skill_b2, b, "振り返り", 0, None),
            ],
        )

        def version(
            sid: str, n: int, change: str, when: datetime, source: str = "experience"
        ) -> dict[str, Any]:
            return {
                "skill_id": sid,
                "version": n,
                "name": SKILL,
                "description": "d",
                "situation_pattern": "s",
                "guidance": "g",
                "actions_json": [],
                "source_type": source,
                "change": change,
                "created_at": when,
            }

        conn.execute(
            skill_versions.insert(),
            [
                version(skill_a, 1, "created", t[0]),
                version(skill_a, 2, "refined", t[2]),
                version(skill_b, 1, "created", t[1]),
                version(skill_b2, 1, "created", t[2], "standard"),  # installed, not learned
            ],
        )
        seen = [str(uuid4()), str(uuid4()), str(uuid4())]

        def impression(iid: str, agent: str, target: str, name: str, agree: str) -> dict[str, Any]:
            return {
                "id": iid,
                "agent_id": agent,
                "session_id": session,
                "target_id": target,
                "target_name": name,
                "personality": "論理的で率直",
                "communication_style": "丁寧",
                "recent_behavior": "データを示した",
                "agreement": agree,
                "notes": "",
                "last_updated_turn": 3,
                "created_at": t[1],
                "updated_at": t[1],
            }

        conn.execute(
            impressions.insert(),
            [
                impression(seen[0], a, b, TARO, "賛成"),
                impression(seen[1], b, "not-an-id", SAKURA, "反対"),  # found by name
                impression(seen[2], a, "human", "司会者", "中立"),
            ],  # not an agent: no edge
        )
        said = [
            ("user", "human", "司会者"),
            ("assistant", a, SAKURA),
            ("assistant", b, TARO),
            ("assistant", a, SAKURA),
            ("assistant", a, SAKURA),
            ("assistant", b, TARO),
        ]
        conn.execute(
            messages.insert(),
            [
                {
                    "session_id": session,
                    "role": role,
                    "content": "発言",
                    "timestamp": t[1] + timedelta(seconds=n),
                    "speaker_id": who,
                    "speaker_name": name,
                }
                for n, (role, who, name) in enumerate(said)
            ],
        )
    return Seeded(
        ids=ids,
        days=days,
        session_id=session,
        speech={SAKURA: [3, 0, 2], TARO: [0, 1, 0]},
        impression_ids=seen[:2],
    )
