"""`opencrab config show`: the effective configuration, each value's source, secrets redacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opencrab.cli import build_app

runner = CliRunner()


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    file = tmp_path / "mine.toml"
    file.write_text(
        '[llm]\ndefault_provider = "anthropic"\ndefault_model = "claude-haiku-4.5"\n'
        '[llm.models]\nanalysis = { provider = "openai", model = "gpt-5-mini" }\n',
        encoding="utf-8",
    )
    return file


def test_show_json_gives_value_and_source_per_key(
    user_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-very-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-very-secret")
    monkeypatch.setenv("OPENCRAB_GATEWAY__REST__PORT", "9100")
    result = runner.invoke(
        build_app(),
        ["config", "show", "--json", "-c", str(user_file), "--data-dir", str(tmp_path / "d")],
    )
    assert result.exit_code == 0, result.output
    assert "very-secret" not in result.stdout
    shown = json.loads(result.stdout)
    values = shown["values"]
    assert values["llm.default_model"] == {
        "value": "claude-haiku-4.5",
        "source": "file",
        "origin": str(user_file),
    }
    assert values["gateway.rest.port"] == {
        "value": 9100,
        "source": "environment",
        "origin": "environment OPENCRAB_GATEWAY__REST__PORT",
    }
    assert values["data_dir"]["source"] == "flag"
    assert values["data_dir"]["value"] == str(tmp_path / "d")
    assert values["gateway.rest.host"] == {
        "value": "127.0.0.1",
        "source": "packaged",
        "origin": "packaged default.toml",
    }
    assert values["llm.providers.anthropic.api_key"]["value"] == "<redacted>"
    assert values["llm.providers.google.api_key"]["value"] is None  # not set at all
    assert shown["purposeModels"]["thinking"] == {
        "model": "anthropic/claude-haiku-4.5",
        "chosenBy": "llm.default_model",
        "source": "file",
    }
    assert shown["purposeModels"]["analysis"] == {
        "model": "openai/gpt-5-mini",
        "chosenBy": "llm.models.analysis",
        "source": "file",
    }


def test_show_prints_a_table(user_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-very-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-very-secret")
    result = runner.invoke(build_app(), ["config", "show", "-c", str(user_file)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "very-secret" not in text
    assert "llm.default_model" in text
    assert "claude-haiku-4.5" in text
    assert "<redacted>" in text
    assert "thinking │ anthropic/claude-haiku-4.5 │ llm.default_model (file)" in text


def test_show_reports_a_bad_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[gateway.rest]\nport = 0\n", encoding="utf-8")
    result = runner.invoke(build_app(), ["config", "show", "-c", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}: gateway.rest.port" in result.stderr


def test_show_names_a_file_with_spaces_and_keys_with_brackets_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    folder = tmp_path / "my configs"
    folder.mkdir()
    file = folder / "c.toml"
    file.write_text('[llm.aliases]\n"[red]al" = { provider = "openai", model = "m" }\n')
    result = runner.invoke(build_app(), ["config", "show", "-c", str(file)])
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.stdout.splitlines() if "openai/m" in line]
    assert "llm.aliases.[red]al" in row
    assert f"file: {file}" in row


def test_a_heartbeat_interval_over_a_day_is_a_config_error(tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text("[agent]\nheartbeat_interval_secs = 86401\n", encoding="utf-8")
    result = runner.invoke(build_app(), ["config", "show", "-c", str(file)])
    assert result.exit_code == 2
    assert "agent.heartbeat_interval_secs" in result.stderr


def test_show_keeps_every_key_whole_at_80_columns(tmp_path: Path) -> None:
    app = build_app()
    data_dir = str(tmp_path / "d")
    shown = runner.invoke(app, ["config", "show", "--data-dir", data_dir], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    keys = json.loads(
        runner.invoke(app, ["config", "show", "--data-dir", str(tmp_path / "d"), "--json"]).stdout
    )["values"]
    assert "gateway.rest.ws_max_turns_per_connection" in keys  # 40 characters
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    cells = {cell.strip() for line in lines for cell in line.split("│")}
    assert [key for key in keys if key not in cells] == []
