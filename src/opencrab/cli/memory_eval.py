"""`opencrab memory eval AGENT`: how well the agent's memory search finds its own lines.

Builds a question set from the agent's memory (core/memory_eval.py: the analysis model's
questions when it answers, the built-in keyword questions otherwise, so it works on a
fresh install with no key), scores each search leg (recall@1/5/10, MRR, latency), stores
the run and prints the table. Registered on `opencrab memory` by cli/agents.py.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    JsonOption,
    console,
    exits_on_error,
    print_json,
    settings_from,
)

AgentArg = Annotated[str, typer.Argument(help="The agent's name or id.", show_default=False)]


@exits_on_error
def memory_eval(
    agent: AgentArg,
    questions: Annotated[
        int, typer.Option("--questions", "-n", min=1, max=1000, help="How many questions.")
    ] = 50,
    draw: Annotated[
        int,
        typer.Option(
            "--draw", help="Which draw of lines to ask about: the same number, the same set."
        ),
    ] = 7,
    generator: Annotated[
        str,
        typer.Option(
            "--generator",
            help="auto: the agent's analysis model when it answers, else builtin; "
            "builtin: keyword questions, no model needed; model: the analysis model only.",
        ),
    ] = "auto",
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Measure how well the agent's memory search finds its own lines: recall@1/5/10,
    MRR and latency of each search leg; the run is stored (the dashboard's memory page
    charts the runs).

    Example: opencrab memory eval aki --questions 100
    """
    import asyncio

    from opencrab.errors import ValidationError

    if generator not in ("auto", "builtin", "model"):
        raise ValidationError(f"--generator {generator!r}: choose auto, builtin or model")
    settings = settings_from(config, data_dir)
    run = asyncio.run(_evaluate(settings, agent, questions, draw, generator))
    if as_json:
        print_json(run.model_dump(mode="json"))
        return
    show(run)


async def _evaluate(settings: Any, name: str, questions: int, draw: int, generator: str) -> Any:
    from opencrab.core.llm_config import agent_model
    from opencrab.core.memory_eval import evaluate
    from opencrab.core.runtime import Runtime

    async with Runtime.open(settings) as runtime:
        agent = runtime.agents.get(name)
        model = agent_model(agent.llm_config, "analysis", {}, {})
        return await evaluate(
            runtime.db,
            agent,
            questions=questions,
            seed=draw,
            generator=generator,  # type: ignore[arg-type]
            router=runtime.router,
            model=model,
        )


def show(run: Any) -> None:
    """The run as a table: one row per leg; a leg this install lacks says so."""
    title = (
        f"memory recall of {run.questions} questions ({run.generator} questions), "
        f"{run.created_at:%Y-%m-%d %H:%M} UTC"
    )
    notes = [
        f"{name}: not available ({leg.get('note', '')})"
        for name, leg in run.legs.items()
        if not leg.get("available")
    ]
    table = Table(title=escape(title))
    for column in ("leg", "recall@1", "recall@5", "recall@10", "MRR", "p50 ms", "mean ms"):
        table.add_column(column, justify="left" if column == "leg" else "right")
    for name, leg in run.legs.items():
        if not leg.get("available"):
            table.add_row(name, *["n/a"] * 6)
            continue
        table.add_row(
            name,
            f"{leg['recall@1']:.2f}",
            f"{leg['recall@5']:.2f}",
            f"{leg['recall@10']:.2f}",
            f"{leg['mrr']:.3f}",
            f"{leg['p50_ms']:.1f}",
            f"{leg['mean_ms']:.1f}",
        )
    console.print(table)
    for note in notes:
        console.print(escape(note), soft_wrap=True)
