"""The calls rated a failed task in the daily LLM rollups: `failed_tasks` of
`llm_usage_daily` and `llm_usage_fleet_daily`.

Revision ID: 0046
Revises: 0042
Create Date: 2026-12-02

The model suggestions (opencrab.llm.analysis `optimize`, the Costs page's suggestions)
weigh each model's success rate: the calls that returned (status ok) and were not rated
a failed task (`task_success` false). The rollups kept everything else they need, not
that count, so the suggestions summed a month of the agent's calls every time. The
metrics repository (store/repositories/metrics.py) adds to the column in the transaction
of every insert and rating from now on; the calls stored before are counted into it
here, by rollup key (UTC day × agent × provider × model × purpose × task type × status;
the fleet's without the agent).
"""

from __future__ import annotations

from collections import defaultdict

import sqlalchemy as sa
from alembic import op

from opencrab.store.dialects import postgresql, sqlite

revision = "0046"
down_revision = "0042"
branch_labels = None
depends_on = None

KEYS = ("day", "agent_id", "provider", "model", "purpose", "task_type", "status")


def upgrade() -> None:
    for table in ("llm_usage_daily", "llm_usage_fleet_daily"):
        op.add_column(
            table,
            sa.Column("failed_tasks", sa.BigInteger(), nullable=False, server_default="0"),
        )
    conn = op.get_bind()
    m = sa.table(
        "llm_usage_metrics",
        *(sa.column(n) for n in ("timestamp", *KEYS[1:], "task_success")),
    )
    dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
    day = dialect.utc_day(m.c.timestamp)
    task = sa.func.coalesce(m.c.task_type, "")
    keys = (day, m.c.agent_id, m.c.provider, m.c.model, m.c.purpose, task, m.c.status)
    failed = conn.execute(
        sa.select(*keys, sa.func.count()).where(m.c.task_success == sa.false()).group_by(*keys)
    ).all()
    fleet: dict[tuple[str, ...], int] = defaultdict(int)
    for *key, count in failed:
        fleet[(key[0], *key[2:])] += int(count)
    for name, keyed, counts in (
        ("llm_usage_daily", KEYS, {tuple(row[:-1]): int(row[-1]) for row in failed}),
        ("llm_usage_fleet_daily", tuple(k for k in KEYS if k != "agent_id"), fleet),
    ):
        if not counts:
            continue
        t = sa.table(name, *(sa.column(k) for k in keyed), sa.column("failed_tasks"))
        conn.execute(
            t.update()
            .where(*(t.c[k] == sa.bindparam(f"k_{k}") for k in keyed))
            .values(failed_tasks=sa.bindparam("n")),
            [
                {"n": n, **{f"k_{k}": v for k, v in zip(keyed, key, strict=True)}}
                for key, n in counts.items()
            ],
        )


def downgrade() -> None:
    for table in ("llm_usage_fleet_daily", "llm_usage_daily"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("failed_tasks")
