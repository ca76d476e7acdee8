"""`opencrab config show`: the effective configuration and where each value came from."""

from __future__ import annotations

from collections.abc import Sequence

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
from opencrab.plugins import hookimpl

config_app = typer.Typer(help="The effective configuration.", no_args_is_help=True)


@config_app.command()
@exits_on_error
def show(
    config: ConfigOption = None, data_dir: DataDirOption = None, as_json: JsonOption = False
) -> None:
    """Every setting in force and its source: packaged, file, environment or flag.

    Layers: packaged default.toml < your file (--config / OPENCRAB_CONFIG) < environment
    (OPENCRAB_SECTION__KEY) < flags. API keys, tokens and passwords are redacted. The
    model table shows which model each purpose uses: a per-purpose model you set beats
    your default model, which beats the packaged per-purpose model.
    """
    from opencrab.config.provenance import effective_values, purpose_choices

    settings = settings_from(config, data_dir)
    values = effective_values(settings)
    models = purpose_choices(settings)
    if as_json:
        print_json(
            {
                "values": {
                    key: {"value": value, "source": kind, "origin": label}
                    for key, value, kind, label in values
                },
                "purposeModels": {
                    purpose: {"model": model, "chosenBy": key, "source": _kind(values, key)}
                    for purpose, (model, key) in models.items()
                },
            }
        )
        return
    table = Table(title="configuration")
    table.add_column("key", no_wrap=True)  # a key is one word: never cut inside it
    for column in ("value", "source"):
        table.add_column(column, overflow="fold")
    for key, value, kind, label in values:
        shown = value
        if isinstance(value, dict):
            shown = f"{value['provider']}/{value['model']}"
        elif isinstance(value, list):
            shown = ", ".join(str(v) for v in value)
        # a file's label is its path (spaces and all), the environment's "environment NAME"
        origin = label.removeprefix("environment ")
        where = kind if kind in ("packaged", "flag") else f"{kind}: {origin}"
        table.add_row(escape(key), escape("" if shown is None else str(shown)), escape(where))
    console.print(table)
    purposes = Table(title="model per purpose")
    for column in ("purpose", "model", "chosen by"):
        purposes.add_column(column)
    for purpose, (model, key) in models.items():
        purposes.add_row(purpose, escape(model), f"{key} ({_kind(values, key)})")
    console.print(purposes)


def _kind(values: Sequence[tuple[str, object, str, str]], key: str) -> str:
    return next((kind for k, _, kind, _ in values if k == key), "packaged")


@hookimpl
def register_commands(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
