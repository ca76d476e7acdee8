"""Skill effectiveness (seed 001 `Skill.effectiveness`): how well turns using a skill went.

A skill is *used* in a turn when one of its actions runs in it. Each such turn gets a
score between 0 and 1:
- if any LLM call of the turn was rated (evaluate_response: quality_score 0–1 and
  task_success), the mean over its rated calls of (quality_score + success) / 2, where
  success is 1 or 0 (a call rated without task_success counts its quality alone);
- otherwise the share of the skill's action runs in that turn that succeeded.
A skill's effectiveness is the mean score of the last `WINDOW` turns that used it
(None until one did). The engine recomputes it at the end of every turn in which an
action ran, so a rating given in a turn counts at once.

The facts come from the agent's memory: each action log line names the action, whether
it succeeded, the turn (the id of its user event) and the LLM call that asked for it.

Example:
    scores = skill_effectiveness(db, agent_id, skills.list())   # {"autonomous": 0.83, …}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from opencrab.core.skills import Skill
from opencrab.store import Database
from opencrab.store.tables import llm_usage_metrics, memory_sessions

WINDOW = 50  # turns per skill
ACTION_LOGS = 1000  # the most recent action log lines read


@dataclass
class _Turn:
    runs: dict[str, list[int]] = field(default_factory=dict)  # action -> [succeeded, ran]
    calls: set[str] = field(default_factory=set)  # metrics ids of its LLM calls


def skill_effectiveness(
    db: Database, agent_id: str, skills: Sequence[Skill]
) -> dict[str, float | None]:
    """Every skill's effectiveness by name, from the agent's recent turns (see above)."""
    turns = _recent_turns(db, agent_id)
    ratings = _ratings(db, agent_id, {c for t in turns for c in t.calls})
    scores: dict[str, float | None] = {}
    for skill in skills:
        mine = set(skill.actions)
        values: list[float] = []
        for turn in turns:  # newest first
            used = [turn.runs[a] for a in mine if a in turn.runs]
            if not used:
                continue
            rated = [ratings[c] for c in turn.calls if c in ratings]
            if rated:
                values.append(sum(rated) / len(rated))
            else:
                values.append(sum(ok for ok, _ in used) / sum(ran for _, ran in used))
            if len(values) >= WINDOW:
                break
        scores[skill.name] = round(sum(values) / len(values), 4) if values else None
    return scores


def _recent_turns(db: Database, agent_id: str) -> list[_Turn]:
    m = memory_sessions.c
    with db.read() as conn:
        rows = conn.execute(
            sa.select(m.id, m.metadata_json)
            .where(m.agent_id == agent_id, m.log_type == "action")
            .order_by(m.id.desc())
            .limit(ACTION_LOGS)
        ).all()
    turns: dict[str, _Turn] = {}
    for row in rows:
        meta: Any = row.metadata_json
        if not isinstance(meta, dict) or not isinstance(meta.get("action"), str):
            continue
        key = meta.get("turn")
        turn = turns.setdefault(key if isinstance(key, str) else f"log-{row.id}", _Turn())
        counts = turn.runs.setdefault(meta["action"], [0, 0])
        counts[0] += 1 if meta.get("success") else 0
        counts[1] += 1
        if isinstance(meta.get("metrics_id"), str):
            turn.calls.add(meta["metrics_id"])
    return list(turns.values())  # insertion order: newest turn first


def _ratings(db: Database, agent_id: str, metrics_ids: set[str]) -> dict[str, float]:
    """The rated calls among `metrics_ids`: (quality + success) / 2, or quality alone."""
    if not metrics_ids:
        return {}
    u = llm_usage_metrics.c
    with db.read() as conn:
        rows = conn.execute(
            sa.select(u.id, u.quality_score, u.task_success).where(
                u.agent_id == agent_id,
                u.id.in_(sorted(metrics_ids)),
                u.quality_score.is_not(None),
            )
        ).all()
    return {
        str(r.id): float(r.quality_score)
        if r.task_success is None
        else (float(r.quality_score) + (1.0 if r.task_success else 0.0)) / 2
        for r in rows
    }
