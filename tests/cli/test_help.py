"""Help texts and cold start of the `opencrab` command.

The help rules hold for every command of the Typer app, so commands added later are held
to them too: no internal jargon (seed numbers), every option that has a default shows it,
every main command has an `Example:`, nothing the help shows loses text to Rich
markup, and no help is written in Japanese or Chinese (the CLI speaks English).
`opencrab --help` must not import the heavy libraries (SDKs, llama.cpp, the database
layer, the web server), and `--version` not even the CLI framework.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from opencrab.cli import build_app

SRC = Path(__file__).resolve().parents[2] / "src"
JARGON = re.compile(r"\bseeds?\b|\bseed[ -]?\d{3}\b", re.IGNORECASE)
CJK = re.compile("[\u3040-\u30ff\u4e00-\u9fff\uff00-\uffef]+")
"""Kana, CJK ideographs and full-width forms."""
# Commands a person runs first: their help shows an example of a real call.
MAIN_COMMANDS = (
    "up",
    "worker",
    "db upgrade",
    "events import",
    "events show",
    "import codex",
    "import claude",
    "token create",
    "agent create",
    "schedule add",
    "chat",
    "discuss",
    "llm chat",
)
HEAVY = (
    "openai",
    "anthropic",
    "llama_cpp",
    "sqlalchemy",
    "alembic",
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "pydantic",
    "jsonschema",
    "discord",
    "yaml",
)


def commands() -> list[tuple[str, Any]]:
    """Every command and group of the app (click objects), by path (e.g. "events import")."""
    root = typer.main.get_command(build_app())
    found: list[tuple[str, Any]] = []

    def walk(path: str, command: Any) -> None:
        found.append((path, command))
        if hasattr(command, "commands"):  # a group
            for name, sub in command.commands.items():
                walk(f"{path} {name}".strip(), sub)

    walk("", root)
    return found


COMMANDS = commands()


def help_text(path: str) -> str:
    result = CliRunner().invoke(build_app(), [*path.split(), "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[p or "opencrab" for p, _ in COMMANDS])
def test_help_has_no_jargon_and_shows_defaults(path: str, command: Any) -> None:
    text = help_text(path)
    assert not JARGON.search(text), f"`opencrab {path} --help` says: {JARGON.search(text)}"
    for param in command.params:
        if param.param_type_name != "option" or param.hidden or param.is_flag:
            continue
        if param.default is None or param.name == "help":
            continue
        # an option with a real default shows it: Typer prints [default: …]
        default = param.default.value if hasattr(param.default, "value") else param.default
        shown = ", ".join(map(str, default)) if isinstance(default, list | tuple) else default
        assert f"[default: {shown}]" in text, f"`opencrab {path}`: {param.opts[0]} hides {shown}"


def test_no_help_is_written_in_japanese_or_chinese() -> None:
    found = {
        f"opencrab {path}".strip(): hits
        for path, _ in COMMANDS
        if (hits := CJK.findall(help_text(path)))
    }
    assert found == {}, f"help texts with Japanese/Chinese: {found}"


# `[database]`; not `[/]`, nor one escaped with a backslash
BRACKETED = re.compile(r"(?<!\\)\[[a-z][^\[\]\s]*\]")


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[p or "opencrab" for p, _ in COMMANDS])
def test_help_loses_no_bracketed_words_to_rich_markup(path: str, command: Any) -> None:
    """A config section named in a help (`[database] url`) is shown, not taken for a
    Rich style tag and dropped."""
    texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    wanted = {word for text in texts for word in BRACKETED.findall(text)}
    shown = help_text(path)
    assert {word for word in wanted if word not in shown} == set(), f"`opencrab {path} --help`"


def test_options_read_from_the_config_say_so() -> None:
    text = help_text("up")
    words = " ".join(text.replace("│", " ").split())  # the option table wraps inside its box
    assert "Address to bind (config: gateway.rest.host" in words


@pytest.mark.parametrize("path", MAIN_COMMANDS)
def test_main_commands_have_an_example(path: str) -> None:
    assert path in dict(COMMANDS), f"no command `opencrab {path}`"
    text = " ".join(help_text(path).split())
    assert "Example: opencrab " + path in text or "Examples: opencrab " + path in text, text


def _modules_after(*args: str) -> set[str]:
    """Modules imported by running `opencrab ARGS` in a fresh interpreter (top-level
    packages and full names)."""
    code = (
        "import sys\n"
        f"sys.argv = ['opencrab', *{list(args)!r}]\n"
        "from opencrab.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    names = set(done.stderr.split())
    return names | {name.split(".")[0] for name in names}


def test_help_does_not_import_heavy_libraries() -> None:
    loaded = _modules_after("--help")
    assert "typer" in loaded  # it did build the app
    assert sorted(loaded & set(HEAVY)) == []


def test_a_group_help_does_not_import_heavy_libraries() -> None:
    # Typer itself coerces a group's parameters with pydantic, so that one is allowed here
    heavy = set(HEAVY) - {"pydantic"}
    for group in ("agent", "llm", "import", "events", "db", "token", "schedule"):
        assert sorted(_modules_after(group, "--help") & heavy) == [], group


def test_version_imports_neither_the_cli_framework_nor_package_metadata() -> None:
    loaded = _modules_after("--version")
    assert sorted(loaded & {"typer", "click", "rich", "pluggy", *HEAVY}) == []
    assert "importlib.metadata" not in loaded


def test_the_version_in_the_source_is_the_installed_one() -> None:
    from importlib.metadata import version

    from opencrab import __version__

    assert version("opencrab") == __version__  # pyproject.toml reads it from the source


def test_worker_help_does_not_import_heavy_libraries() -> None:
    # (Typer itself imports pydantic for a command's help, as for a group's)
    loaded = _modules_after("worker", "--help")
    assert "opencrab.cli.worker" in loaded  # its command module is what answered
    assert sorted(loaded & (set(HEAVY) - {"pydantic"})) == []
