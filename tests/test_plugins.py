"""Plugins add CLI commands and routes through the same hooks the built-ins use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer
from fastapi import APIRouter, FastAPI
from typer.testing import CliRunner

from opencrab.cli import build_app
from opencrab.config import Settings
from opencrab.plugins import (
    DEFAULT_PLUGINS,
    SERVER_PLUGINS,
    hookimpl,
    plugin_manager,
    server_plugin_manager,
)
from opencrab.server.app import create_app
from opencrab.store import Database
from tests.server.local import LocalClient


class HelloPlugin:
    @hookimpl
    def register_commands(self, app: typer.Typer) -> None:
        @app.command()
        def hello(name: str = "crab") -> None:
            """Say hello."""
            typer.echo(f"hello, {name}")

    @hookimpl
    def register_routes(self, app: FastAPI) -> None:
        router = APIRouter()

        @router.get("/api/hello")
        def hello() -> dict[str, str]:
            return {"hello": "crab"}

        app.include_router(router)


@pytest.fixture
def plugin() -> Iterator[HelloPlugin]:
    instance = HelloPlugin()
    plugin_manager().register(instance, name="hello-test")
    yield instance
    plugin_manager().unregister(name="hello-test")


def test_builtins_are_plugins() -> None:
    names = {name for name, _ in plugin_manager().list_name_plugin()}
    assert set(DEFAULT_PLUGINS) <= names
    served = {name for name, _ in server_plugin_manager().list_name_plugin()}
    assert set(DEFAULT_PLUGINS) | set(SERVER_PLUGINS) <= served


def test_plugin_adds_a_command(plugin: HelloPlugin) -> None:
    result = CliRunner().invoke(build_app(), ["hello", "--name", "ada"])
    assert result.exit_code == 0
    assert result.stdout == "hello, ada\n"


def test_plugin_adds_a_route(plugin: HelloPlugin, settings: Settings, db: Database) -> None:
    with LocalClient(create_app(settings, db)) as client:
        assert client.get("/api/hello").json() == {"hello": "crab"}
        assert client.get("/api/health").status_code == 200
