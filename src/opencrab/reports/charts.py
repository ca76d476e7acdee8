"""Analytics charts' figures, for the fleet and for one agent (the JSON routes of
server/api/analytics_charts.py and the dashboard's Analytics pages read the same):
- messages: lines spoken per UTC day, one series per agent (memory `speech` logs);
- heartbeats: heartbeat decisions (speak / learn / idle / skip) per day;
- learning: skill versions written per day by kind (created, refined, ...) and the
  reflections run (`reflect_and_learn` actions);
- skills (fleet): each skill's use and effectiveness summed over the agents (one agent's
  is reports.analytics.skill_analytics);
- relationships: the graph of agents from their impressions (an edge per pair, with
  its affinity, agreement labels and the impressions themselves) and who answered whom
  in discussions.
Every builder takes a Database, the agent (None: the fleet) and the period.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, timedelta

from opencrab.llm.metrics import period_start
from opencrab.reports.model import ApiModel
from opencrab.store.database import Database
from opencrab.store.repositories import agents as agents_repo
from opencrab.store.repositories import analytics as repo

DECISIONS = ("speak", "learn", "idle", "skip")
"""Heartbeat decisions, in the order the charts stack them."""

REFLECT_ACTION = "reflect_and_learn"

AGREEMENT_SCORES: dict[str, float] = {
    "賛成": 1.0,
    "同意": 1.0,
    "支持": 1.0,
    "agree": 1.0,
    "agrees": 1.0,
    "一部賛成": 0.5,
    "やや賛成": 0.5,
    "partly agree": 0.5,
    "中立": 0.0,
    "neutral": 0.0,
    "一部反対": -0.5,
    "やや反対": -0.5,
    "partly disagree": -0.5,
    "反対": -1.0,
    "disagree": -1.0,
    "disagrees": -1.0,
}
"""How an impression's agreement label scores, -1 (against) … 1 (for); others are unscored."""


class Series(ApiModel):
    key: str
    label: str
    counts: list[int]
    total: int


class DailySeries(ApiModel):
    """Counts per UTC day (`days`), one series per key; `counts[i]` is for `days[i]`."""

    period: str
    since: datetime | None
    days: list[str]
    series: list[Series]


class SkillTotal(ApiModel):
    name: str
    agents: int
    active: int
    usage_count: int
    effectiveness: float | None
    action_calls: int


class FleetSkills(ApiModel):
    period: str
    skills: list[SkillTotal]


class Node(ApiModel):
    id: str
    name: str
    language: str | None
    spoken: int


class Impression(ApiModel):
    id: str
    agent_id: str
    agent_name: str
    target_id: str
    target_name: str
    session_id: str
    agreement: str
    personality: str
    communication_style: str
    recent_behavior: str
    notes: str
    updated_at: datetime
    url: str


class Edge(ApiModel):
    """Two agents with impressions of each other (either way)."""

    source: str
    target: str
    affinity: float | None  # mean agreement score of the scored impressions, -1 … 1
    agreement: dict[str, int]  # agreement labels -> how many impressions say so
    impressions: list[Impression]


class Talk(ApiModel):
    """How often `from` answered `to` in discussions."""

    source: str
    source_name: str
    target: str
    target_name: str
    count: int


class Relationships(ApiModel):
    period: str
    nodes: list[Node]
    edges: list[Edge]
    talks: list[Talk]


def _days(since: datetime | None, found: list[str]) -> list[str]:
    """Every UTC day from the period's start (or the first day found) to today."""
    today = datetime.now(UTC).date()
    if since is not None:
        start = since.astimezone(UTC).date()
    elif found:
        start = date.fromisoformat(min(found))
    else:
        return []
    start = min([start, *(date.fromisoformat(d) for d in found)])
    return [(start + timedelta(days=n)).isoformat() for n in range((today - start).days + 1)]


def _series(
    period: str,
    since: datetime | None,
    rows: list[repo.DayCount],
    keys: list[tuple[str, str]],
) -> DailySeries:
    days = _days(since, [d for d, _, _ in rows])
    at = {d: n for n, d in enumerate(days)}
    counts = {key: [0] * len(days) for key, _ in keys}
    for day, key, n in rows:
        if key in counts and day in at:
            counts[key][at[day]] += n
    series = [
        Series(key=key, label=label, counts=counts[key], total=sum(counts[key]))
        for key, label in keys
    ]
    return DailySeries(period=period, since=since, days=days, series=series)


def messages_series(db: Database, agent_id: str | None, period: str) -> DailySeries:
    """Lines spoken per day, one series per agent (the fleet's, or one agent's)."""
    since = period_start(period)
    with db.read() as conn:
        rows = repo.speech_by_day(conn, agent_id=agent_id, since=since)
        names = agents_repo.agent_names(conn)
    keys = [(i, n) for i, (n, _) in names.items() if agent_id in (None, i)]
    spoken = {key for _, key, _ in rows}
    keys = [k for k in keys if k[0] in spoken or agent_id is not None]
    return _series(period, since, rows, sorted(keys, key=lambda k: k[1]))


def heartbeat_series(db: Database, agent_id: str | None, period: str) -> DailySeries:
    """Heartbeat decisions per day: speak, learn, idle, skip (and any other found)."""
    since = period_start(period)
    with db.read() as conn:
        rows = repo.heartbeats_by_day(conn, agent_id=agent_id, since=since)
    extra = sorted({key for _, key, _ in rows} - set(DECISIONS))
    return _series(period, since, rows, [(d, d) for d in (*DECISIONS, *extra)])


def learning_series(db: Database, agent_id: str | None, period: str) -> DailySeries:
    """Skill versions per day by kind of change, and the reflections run."""
    since = period_start(period)
    with db.read() as conn:
        rows = repo.skill_changes_by_day(conn, agent_id=agent_id, since=since)
        actions = repo.actions_by_day(conn, agent_id=agent_id, since=since)
    rows += [(d, "reflections", n) for d, name, n in actions if name == REFLECT_ACTION]
    kinds = ["created", "refined", "edited", "file", "recorded", "reflections"]
    return _series(period, since, rows, [(k, k) for k in kinds])


def fleet_skills(db: Database, period: str) -> FleetSkills:
    """Each skill name's use and mean effectiveness across the fleet."""
    since = period_start(period)
    with db.read() as conn:
        totals = repo.skill_totals(conn, agent_id=None)
        actions = repo.actions_by_day(conn, agent_id=None, since=since)
    calls: Counter[str] = Counter()
    for _, name, n in actions:
        calls[name] += n
    skills = [
        SkillTotal(
            name=t.name,
            agents=t.agents,
            active=t.active,
            usage_count=t.usage_count,
            effectiveness=None if t.effectiveness is None else round(t.effectiveness, 4),
            action_calls=sum(calls[a] for a in t.actions),
        )
        for t in totals
    ]
    return FleetSkills(period=period, skills=skills)


def _score(labels: list[str]) -> float | None:
    scores = [
        AGREEMENT_SCORES[s] for s in (x.strip().lower() for x in labels) if s in AGREEMENT_SCORES
    ]
    return round(sum(scores) / len(scores), 4) if scores else None


def relationships(db: Database, agent_id: str | None, period: str) -> Relationships:
    """The impressions graph between agents and who answered whom in discussions."""
    since = period_start(period)
    with db.read() as conn:
        names = agents_repo.agent_names(conn)
        rows = repo.impression_rows(conn, since=since)
        replies = repo.discussion_replies(conn, since=since)
        spoken = repo.speech_by_day(conn, agent_id=None, since=since)
    by_name = {name: i for i, (name, _) in names.items()}
    pairs: dict[tuple[str, str], list[Impression]] = {}
    for row in rows:
        target = row.target_id if row.target_id in names else by_name.get(row.target_name)
        if target is None or target == row.agent_id or row.agent_id not in names:
            continue
        pair = (row.agent_id, target) if row.agent_id < target else (target, row.agent_id)
        if agent_id is not None and agent_id not in pair:
            continue
        holder = names[row.agent_id][0]
        pairs.setdefault(pair, []).append(
            Impression(
                id=row.id,
                agent_id=row.agent_id,
                agent_name=holder,
                target_id=target,
                target_name=row.target_name,
                session_id=row.session_id,
                agreement=row.agreement,
                personality=row.personality,
                communication_style=row.communication_style,
                recent_behavior=row.recent_behavior,
                notes=row.notes,
                updated_at=row.updated_at,
                url=f"/api/agents/{row.agent_id}/memory/impressions?sessionId={row.session_id}",
            )
        )
    edges = [
        Edge(
            source=a,
            target=b,
            affinity=_score([i.agreement for i in found]),
            agreement=dict(Counter(i.agreement for i in found if i.agreement)),
            impressions=found,
        )
        for (a, b), found in sorted(pairs.items())
    ]
    talks = [
        Talk(
            source=s,
            source_name=names[s][0],
            target=t,
            target_name=names[t][0],
            count=n,
        )
        for (s, t), n in sorted(replies.items(), key=lambda kv: (-kv[1], kv[0]))
        if s in names and t in names and (agent_id is None or agent_id in (s, t))
    ]
    said: Counter[str] = Counter()
    for _, who, n in spoken:
        said[who] += n
    linked = {x for e in edges for x in (e.source, e.target)}
    linked |= {x for t in talks for x in (t.source, t.target)}
    if agent_id is not None:
        linked.add(agent_id)
    nodes = [
        Node(id=i, name=name, language=lang, spoken=said[i])
        for i, (name, lang) in sorted(names.items(), key=lambda kv: kv[1][0])
        if agent_id is None or i in linked
    ]
    return Relationships(period=period, nodes=nodes, edges=edges, talks=talks)
