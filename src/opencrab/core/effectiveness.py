"""Skill effectiveness (seed 001 `Skill.effectiveness`): how well turns using a skill went.

A skill is *used* in a turn when one of its actions runs in it. Each such turn gets a
score between 0 and 1:
- if any LLM call of the turn that asked for an action was rated (evaluate_response:
  quality_score 0–1 and task_success), the mean over those rated calls of
  (quality_score + success) / 2, where success is 1 or 0 (a call rated without
  task_success counts its quality alone);
- otherwise the share of the skill's action runs in that turn that succeeded.
A skill that names no action (guidance only, as skills learned by reflection often are)
is *used* in every turn in which it was in context (active): each such turn counts one
use and scores the mean of its rated calls, else the share of all its action runs that
succeeded, else 1 (a turn that ended with a reply and nothing failed).
A skill's effectiveness is the mean score of the last `WINDOW` turns that used it (None
until one did). The engine folds each turn's score in when the turn ends (a rating given
in the turn counts at once): the skill row keeps its recent scores
(`effectiveness_scores`, newest last), so a turn costs one small read of its own calls'
ratings and one write (in the transaction of the step that ends the turn, when an
action ends it; none when the scores stay as they were), however long the agent's
history is. The read of the scores locks the
agent's skill rows on PostgreSQL (FOR UPDATE), so two turns ending at once fold one
after the other instead of one overwriting the other's score. A turn's score is fixed
when it ends: rating an earlier turn's call later (evaluate_response with its
`metrics_id`) does not change it.

The skills' scores are stored through store/repositories/skills.py, the calls' ratings
read through agent_stats.py.

Example:
    facts = TurnFacts()
    facts.add("ws_write", success=True, metrics_id=reply.metrics_id)
    record_turn(db, agent_id, facts)        # {"workspace-management": 0.83, …}
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy.engine import Connection

from opencrab.store import Database
from opencrab.store.repositories import agent_stats
from opencrab.store.repositories import skills as skills_repo

WINDOW = 50  # turns per skill
RATING_ACTION = "evaluate_response"


@dataclass
class TurnFacts:
    """What one turn's actions did: runs per action and the calls that asked for them."""

    runs: dict[str, list[int]] = field(default_factory=dict)  # action -> [succeeded, ran]
    metrics_ids: set[str] = field(default_factory=set)
    in_context: set[str] = field(default_factory=set)
    """The ids of the turn's active skills that name no action (used by being there)."""

    def anything(self) -> bool:
        """Whether the turn used a skill: an action ran, or a guidance skill was there."""
        return bool(self.runs or self.in_context)

    def add(self, action: str, *, success: bool, metrics_id: str | None) -> None:
        """One action run of the turn."""
        counts = self.runs.setdefault(action, [0, 0])
        counts[0] += 1 if success else 0
        counts[1] += 1
        if metrics_id:
            self.metrics_ids.add(metrics_id)


def record_turn(db: Database, agent_id: str, facts: TurnFacts) -> dict[str, float]:
    """Fold one turn's score into every skill of the agent it used; their new values."""
    if not facts.anything():
        return {}
    with db.write() as conn:
        return fold_turn(conn, agent_id, facts)


def fold_turn(
    conn: Connection, agent_id: str, facts: TurnFacts, *, count: Collection[str] = ()
) -> dict[str, float]:
    """`record_turn` inside the caller's transaction (the turn's last step, say); a
    guidance skill that was in context also counts the turn as one use, and so do the
    skills in `count` (the last action's: SkillManager.record_action_use, written with
    their scores where a skill gets both)."""
    now = datetime.now(UTC)
    uncounted = set(count)
    if not facts.anything():
        _count_uses(conn, uncounted, now)
        return {}
    # evaluate_response is the only writer of ratings, and it rates this turn's calls
    rated = (
        list(_ratings(conn, agent_id, facts.metrics_ids).values())
        if RATING_ACTION in facts.runs
        else []
    )
    updated: dict[str, float] = {}
    for row in skills_repo.skill_scores(conn, agent_id):
        if row.actions:
            used = [facts.runs[a] for a in row.actions if a in facts.runs]
        elif row.id in facts.in_context:
            used = list(facts.runs.values()) or [[1, 1]]  # nothing ran: nothing failed
            skills_repo.count_use(conn, row.id, now)
        else:
            continue
        if not used:
            continue
        if rated:
            score = sum(rated) / len(rated)
        else:
            score = sum(ok for ok, _ in used) / sum(ran for _, ran in used)
        scores = [*row.recent_scores[-(WINDOW - 1) :], round(score, 4)]
        value = round(sum(scores) / len(scores), 4)
        used_now = row.id in uncounted
        uncounted.discard(row.id)
        updated[row.name] = value
        if not used_now and value == row.effectiveness and scores == row.recent_scores:
            continue  # a full window of one score took one more of it: nothing to write
        skills_repo.set_scores(conn, row.id, value, scores, used_at=now if used_now else None)
    _count_uses(conn, uncounted, now)
    return updated


def _count_uses(conn: Connection, skill_ids: Collection[str], now: datetime) -> None:
    for skill_id in sorted(skill_ids):
        skills_repo.count_use(conn, skill_id, now)


def _ratings(conn: Connection, agent_id: str, metrics_ids: set[str]) -> dict[str, float]:
    """The rated calls among `metrics_ids`: (quality + success) / 2, or quality alone."""
    if not metrics_ids:
        return {}
    return {
        r.id: r.quality_score
        if r.task_success is None
        else (r.quality_score + (1.0 if r.task_success else 0.0)) / 2
        for r in agent_stats.rated_calls(conn, agent_id, sorted(metrics_ids))
    }
