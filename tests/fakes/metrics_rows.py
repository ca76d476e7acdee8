"""Deterministic `llm_usage_metrics` rows for the cost dashboard's tests.

`usage_rows(agent_ids, days=…)` gives calls spread over agents, models, providers,
purposes (imports among them), task types, days, statuses, cache tokens, latencies and
ratings, ending today (UTC), the same every run.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from opencrab.store.repositories.metrics import MetricRow

MODELS = (
    ("openai", "gpt-5-mini"),
    ("openai", "gpt-5.2"),
    ("anthropic", "claude-sonnet-4.5"),
    ("ollama", "qwen3:8b"),
)
PURPOSES = ("conversation", "thinking", "analysis", "import")
TASKS = ("chat", "discussion", "reflection", None)


def usage_rows(
    agent_ids: Sequence[str], *, days: int = 20, per_day: int = 6, seed: int = 21
) -> list[MetricRow]:
    """`per_day` calls per agent and day over the last `days` UTC days (today included)."""
    rng = random.Random(seed)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    rows: list[MetricRow] = []
    for day in range(days):
        for agent_id in agent_ids:
            for n in range(per_day):
                moment = today - timedelta(days=day) + timedelta(minutes=7 + 97 * n)
                if moment > datetime.now(UTC):
                    moment = today + timedelta(seconds=n)
                provider, model = MODELS[rng.randrange(len(MODELS))]
                purpose = PURPOSES[rng.randrange(len(PURPOSES))]
                ok = rng.random() > 0.1
                inputs = rng.randrange(100, 5000)
                outputs = rng.randrange(10, 800)
                read = rng.randrange(0, inputs) if rng.random() < 0.5 else 0
                rated = ok and rng.random() < 0.6
                stream = rng.random() < 0.5
                rows.append(
                    MetricRow(
                        id=str(uuid.UUID(int=rng.getrandbits(128))),
                        agent_id=agent_id,
                        session_id=None,
                        timestamp=moment,
                        provider=provider,
                        model=model,
                        purpose=purpose,
                        task_type=TASKS[rng.randrange(len(TASKS))],
                        complexity=None,
                        input_tokens=inputs,
                        output_tokens=outputs,
                        total_tokens=inputs + outputs,
                        cache_read_tokens=read,
                        cache_write_tokens=rng.randrange(0, 50),
                        reasoning_tokens=0,
                        estimated_cost_usd=round(rng.random() * 0.02, 6) if ok else 0.0,
                        cost_source="pricing",
                        latency_ms=rng.randrange(80, 9000),
                        time_to_first_token_ms=rng.randrange(20, 900) if stream else None,
                        status="ok" if ok else "error",
                        error_type=None if ok else "ProviderServerError",
                        error=None if ok else "HTTP 500",
                        stream=stream,
                        request_id=None,
                        attempt=1,
                        fallback_from=None,
                        quality_score=round(rng.random(), 3) if rated else None,
                        self_evaluation=None,
                        task_success=None,
                        would_use_again=None,
                        better_model_suggestion=None,
                        created_at=moment,
                    )
                )
    return rows
