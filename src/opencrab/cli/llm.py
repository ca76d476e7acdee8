"""`opencrab llm models|health|chat|metrics|prices|price`: the LLM layer from the command
line."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from opencrab.cli.common import (
    ConfigOption,
    DataDirOption,
    JsonOption,
    console,
    err_console,
    exits_on_error,
    open_store,
    print_json,
    settings_from,
    store_from,
)
from opencrab.errors import LlmError
from opencrab.plugins import hookimpl

if TYPE_CHECKING:  # the LLM layer loads when a command runs, not for `--help`
    from opencrab.llm.pricing import ModelPrice
    from opencrab.llm.router import LlmRouter
    from opencrab.llm.types import ChatRequest, ChatResponse

llm_app = typer.Typer(help="LLM providers, models, chat and usage metrics.", no_args_is_help=True)
PROBE_TIMEOUT = 10.0


# Listed here for the help text (the modules that define them load only when a command
# runs); tests/cli/test_llm_cli.py checks they match config.models.PURPOSES, metrics.GROUPS.
PURPOSE_NAMES = ("thinking", "conversation", "analysis", "tool_calling", "creative", "embedding")
GROUP_NAMES = ("model", "provider", "purpose", "task_type", "agent", "day", "week")


def one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """An option callback that accepts only `choices` (a usage error, exit 2, otherwise)."""

    def check(value: str) -> str:
        if value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return check


@asynccontextmanager
async def routed(config: Path | None, data_dir: Path | None) -> AsyncIterator[LlmRouter]:
    """A started router with the dashboard's LLM settings, whose metrics go to the
    store; flushed and closed on exit."""
    from opencrab.llm.live_settings import LiveLlmSettings
    from opencrab.llm.metrics import MetricsRecorder
    from opencrab.llm.router import LlmRouter

    settings = settings_from(config, data_dir)
    db = open_store(settings)
    recorder = MetricsRecorder(db)
    router = LlmRouter.from_settings(settings, metrics=recorder)
    try:
        await router.start()
        live = LiveLlmSettings(settings, db, router)
        stored = await live.apply_stored()
        live.require_keys(stored)
        for problem in stored:
            err_console.print(f"[yellow]note:[/] {escape(problem)}", highlight=False)
        if router.notice:
            err_console.print(f"[yellow]note:[/] {escape(router.notice)}", highlight=False)
        yield router
    finally:
        await recorder.aclose()
        await router.aclose()
        db.close()


@llm_app.command()
@exits_on_error
def models(
    config: ConfigOption = None, data_dir: DataDirOption = None, as_json: JsonOption = False
) -> None:
    """Models of every configured provider (asks servers that list them)."""
    import asyncio

    rows = asyncio.run(_models(config, data_dir))
    if as_json:
        print_json(rows)
        return
    table = Table(title="models")
    for column in ("provider", "model", "context", "vision", "tools", "note"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            escape(row["provider"]),
            escape(row.get("id") or ""),
            str(row.get("contextWindow") or ""),
            _yes(row.get("vision")),
            _yes(row.get("functions")),
            escape(row.get("error") or ""),
        )
    console.print(table)


async def _models(config: Path | None, data_dir: Path | None) -> list[dict[str, Any]]:
    import asyncio

    rows: list[dict[str, Any]] = []
    async with routed(config, data_dir) as router:
        for name, provider in router.providers.items():
            if not provider.is_configured():
                rows.append({"provider": name, "error": "not configured"})
                continue
            try:
                found = await asyncio.wait_for(provider.available_models(), PROBE_TIMEOUT)
            except (LlmError, TimeoutError) as exc:
                rows.append({"provider": name, "error": str(exc) or "timed out"})
                continue
            rows += [
                {
                    "provider": name,
                    "id": m.id,
                    "contextWindow": m.context_window,
                    "vision": m.supports_vision,
                    "functions": m.supports_functions,
                }
                for m in found
            ]
    return rows


@llm_app.command()
@exits_on_error
def health(
    config: ConfigOption = None, data_dir: DataDirOption = None, as_json: JsonOption = False
) -> None:
    """Which providers are configured and answering (a server that turns out to be
    OpenCrab itself is not healthy: the note says which base_url to change)."""
    import asyncio

    rows = asyncio.run(_health(config, data_dir))
    if as_json:
        print_json(rows)
        return
    table = Table(title="providers")
    for column in ("provider", "configured", "healthy", "ms", "note"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            escape(row["provider"]),
            _yes(row["configured"]),
            _yes(row["healthy"]),
            str(row["latencyMs"] or ""),
            escape(row["note"] or ""),
        )
    console.print(table)


async def _health(config: Path | None, data_dir: Path | None) -> list[dict[str, Any]]:
    import asyncio

    async with routed(config, data_dir) as router:

        async def probe(name: str) -> dict[str, Any]:
            provider = router.providers[name]
            configured = provider.is_configured()
            healthy, elapsed = False, None
            if configured:
                start = time.perf_counter()
                try:
                    healthy = await asyncio.wait_for(provider.health_check(), PROBE_TIMEOUT)
                except TimeoutError:
                    healthy = False
                elapsed = round((time.perf_counter() - start) * 1000)
            return {
                "provider": name,
                "configured": configured,
                "healthy": healthy and not provider.refused,
                "latencyMs": elapsed,
                "note": provider.refused,
            }

        return list(await asyncio.gather(*(probe(name) for name in router.providers)))


@llm_app.command()
@exits_on_error
def chat(
    prompt: Annotated[str, typer.Argument(help="What to say; - reads standard input.")],
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="An alias (fast, smart, …) or PROVIDER/MODEL."),
    ] = None,
    purpose: Annotated[
        str,
        typer.Option(callback=one_of(PURPOSE_NAMES), help=f"One of {', '.join(PURPOSE_NAMES)}."),
    ] = "conversation",
    system: Annotated[str | None, typer.Option(help="A system prompt.")] = None,
    image: Annotated[
        list[str] | None, typer.Option(help="An image URL or data: URL to send (repeatable).")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="The longest reply, in tokens.")
    ] = None,
    stream: Annotated[
        bool, typer.Option("--stream", help="Print the reply as it arrives.")
    ] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send one prompt through the router; the call is recorded in the metrics.

    Example: opencrab llm chat "Name three prime numbers." --model fast
    """
    import asyncio

    from opencrab.llm.types import ChatRequest, Message

    text = sys.stdin.read() if prompt == "-" else prompt
    messages = [Message.system(system)] if system else []
    messages.append(Message.user(text, images=image))
    request = ChatRequest(model=model or "", messages=messages, max_tokens=max_tokens)
    reply = asyncio.run(_chat(config, data_dir, request, purpose, stream and not as_json))
    if as_json:
        print_json(chat_json(reply))
    elif not stream:
        console.print(reply.text, markup=False, highlight=False, soft_wrap=True)
        for call in reply.tool_calls:
            console.print(
                f"[tool call] {call.name}({call.arguments})", markup=False, soft_wrap=True
            )


async def _chat(
    config: Path | None, data_dir: Path | None, request: ChatRequest, purpose: str, echo: bool
) -> ChatResponse:
    from opencrab.llm.router import CallInfo, StreamResult

    async with routed(config, data_dir) as router:
        info = CallInfo(purpose=purpose, task_type="cli")
        if not echo:
            return await router.chat(request, info)
        result = StreamResult()
        async for chunk in router.stream(request, info, result):
            if chunk.text:
                sys.stdout.write(chunk.text)
                sys.stdout.flush()
        sys.stdout.write("\n")
        assert result.response is not None
        return result.response


def chat_json(reply: ChatResponse) -> dict[str, Any]:
    """The `llm chat --json` document."""
    return {
        "text": reply.text,
        "toolCalls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls
        ],
        "finishReason": reply.finish_reason,
        "usage": reply.usage.model_dump(exclude={"raw"}),
        "provider": reply.provider,
        "model": reply.model,
        "latencyMs": reply.latency_ms,
        "costUsd": reply.cost_usd,
        "metricsId": reply.metrics_id,
    }


@llm_app.command()
@exits_on_error
def metrics(
    period: Annotated[
        str, typer.Option(help="hour, day, week, month, all, or a count like 24h, 7d.")
    ] = "week",
    group_by: Annotated[
        str, typer.Option(callback=one_of(GROUP_NAMES), help=f"One of {', '.join(GROUP_NAMES)}.")
    ] = "model",
    agent: Annotated[str | None, typer.Option(help="Only this agent's calls.")] = None,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Calls, errors, tokens, cost and latency per group."""
    from opencrab.llm.metrics import period_start
    from opencrab.reports.llm_metrics import named_usage_groups

    since = period_start(period)
    with store_from(config, data_dir) as db:
        groups = named_usage_groups(db, group_by=group_by, since=since, agent_id=agent)
    if as_json:
        rows = [
            {"key": g.key, "name": name, **g.model_dump(by_alias=True, exclude={"key"})}
            for g, name in groups
        ]
        print_json({"period": period, "groupBy": group_by, "groups": rows})
        return
    table = Table(title=f"LLM usage by {group_by}, period {period}")
    for column in (group_by, "calls", "errors", "in", "out", "cost $", "avg ms", "ttft ms"):
        table.add_column(column, justify="left" if column == group_by else "right")
    for g, name in groups:
        table.add_row(
            escape(name or g.key or "—"),
            str(g.calls),
            str(g.errors),
            str(g.input_tokens),
            str(g.output_tokens),
            f"{g.cost_usd:.6f}",
            "" if g.avg_latency_ms is None else f"{g.avg_latency_ms:.0f}",
            "" if g.avg_ttft_ms is None else f"{g.avg_ttft_ms:.0f}",
        )
    console.print(table)


def _price_json(price: ModelPrice) -> dict[str, Any]:
    return {
        "provider": price.provider,
        "model": price.model,
        "inputPricePer1m": price.input_price_per_1m,
        "outputPricePer1m": price.output_price_per_1m,
        "cacheReadPricePer1m": price.cache_read_price_per_1m,
        "cacheWritePricePer1m": price.cache_write_price_per_1m,
        "contextWindow": price.context_window,
    }


def _tokens(count: int | None) -> str:
    """200000 → 200k, 1000000 → 1M."""
    if count is None:
        return ""
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if count >= size:
            return f"{count / size:g}{unit}"
    return str(count)


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


@llm_app.command()
@exits_on_error
def prices(
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """The price table calls are costed with ($ per 1M tokens)."""
    from opencrab.llm.pricing import PriceBook

    with store_from(config, data_dir) as db, db.read() as conn:
        rows = sorted(PriceBook.load(conn).prices(), key=lambda p: (p.provider, p.model))
    if as_json:
        print_json({"prices": [_price_json(p) for p in rows]})
        return
    table = Table(title="Model prices, $ per 1M tokens (cache: empty = as input)")
    table.add_column("provider", no_wrap=True)
    table.add_column("model", no_wrap=True)
    for column in ("input", "output", "cache read", "cache write", "window"):
        table.add_column(column, justify="right")
    for p in rows:
        table.add_row(
            escape(p.provider),
            escape(p.model),
            _rate(p.input_price_per_1m),
            _rate(p.output_price_per_1m),
            _rate(p.cache_read_price_per_1m),
            _rate(p.cache_write_price_per_1m),
            _tokens(p.context_window),
        )
    console.print(table)


@llm_app.command()
@exits_on_error
def price(
    provider: Annotated[str, typer.Argument(help="Provider name, e.g. openai.")],
    model: Annotated[
        str, typer.Argument(help="Model id as calls name it, or a pattern such as 'gpt-6*'.")
    ],
    input_price: Annotated[
        float, typer.Option("--input", help="$ per 1M input tokens.", show_default=False)
    ],
    output_price: Annotated[
        float, typer.Option("--output", help="$ per 1M output tokens.", show_default=False)
    ],
    cache_read: Annotated[
        float | None,
        typer.Option(help="$ per 1M input tokens read from a prompt cache (default: as input)."),
    ] = None,
    cache_write: Annotated[
        float | None,
        typer.Option(help="$ per 1M input tokens written to a prompt cache (default: as input)."),
    ] = None,
    context_window: Annotated[int | None, typer.Option(help="Context window in tokens.")] = None,
    again: Annotated[
        bool,
        typer.Option(
            "--reprice",
            help="Also cost again the recorded calls this price now covers (imports too).",
        ),
    ] = False,
    config: ConfigOption = None,
    data_dir: DataDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Set a model's price (a running server uses it within seconds)."""
    from opencrab.llm.pricing import ModelPrice, reprice, save_price

    row = ModelPrice(
        provider, model, input_price, output_price, context_window, cache_read, cache_write
    )
    with store_from(config, data_dir) as db, db.write() as conn:
        save_price(conn, row)
        updated = reprice(conn, row) if again else 0
    if as_json:
        print_json({"price": _price_json(row), "repriced": updated})
        return
    console.print(
        f"{escape(provider)}/{escape(model)}: input {input_price:g}, "
        f"output {output_price:g} $ per 1M tokens"
    )
    if again:
        console.print(f"{updated} recorded call(s) costed again")


def _yes(value: Any) -> str:
    if value is None:
        return ""
    return "yes" if value else "no"


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(llm_app, name="llm")
