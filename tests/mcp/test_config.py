"""`[mcp.servers.<name>]` tables: a stdio or an HTTP server each, anything else refused
with an error naming the key; every table becomes a tool source `mcp__<name>`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opencrab.config import load_settings
from opencrab.config.provenance import effective_values
from opencrab.core.tool_sources import registered_tool_sources
from opencrab.errors import ConfigError
from opencrab.mcp.client import McpServerSource


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "opencrab.toml"
    path.write_text(text)
    return path


def test_each_server_table_is_a_tool_source(tmp_path: Path) -> None:
    file = config(
        tmp_path,
        """
[mcp.servers.files]
command = "npx"
args = ["-y", "server-filesystem"]
env = { ROOT = "/mcp" }

[mcp.servers.tracker]
url = "https://tracker.example.org/mcp"
headers = { "X-Team" = "crabs" }
bearer_token_env = "TRACKER_TOKEN"
call_timeout_secs = 5
""",
    )
    settings = load_settings(file, env={})
    files, tracker = settings.mcp.servers["files"], settings.mcp.servers["tracker"]
    assert (files.transport, files.args, files.env, files.call_timeout_secs) == (
        "stdio",
        ["-y", "server-filesystem"],
        {"ROOT": "/mcp"},
        60.0,
    )
    assert (tracker.transport, tracker.bearer_token_env, tracker.call_timeout_secs) == (
        "http",
        "TRACKER_TOKEN",
        5.0,
    )
    found = [s for s in registered_tool_sources(settings) if isinstance(s, McpServerSource)]
    assert [s.namespace for s in found] == ["mcp__files", "mcp__tracker"]


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ('[mcp.servers.x]\nargs = ["a"]\n', "mcp.servers.x", "set either command"),
        (
            '[mcp.servers.x]\ncommand = "a"\nurl = "http://h/mcp"\n',
            "mcp.servers.x",
            "not both",
        ),
        (
            '[mcp.servers.x]\ncommand = "a"\nheaders = { A = "b" }\n',
            "mcp.servers.x",
            "headers is a setting of an HTTP server",
        ),
        (
            '[mcp.servers.x]\nurl = "http://h/mcp"\nnetwork = true\n',
            "mcp.servers.x",
            "network is a setting of a stdio server",
        ),
        ('[mcp.servers.x]\ncommand = "a"\ncomand = "b"\n', "mcp.servers.x.comand", ""),
        ('[mcp.servers.x]\nurl = "ftp://h"\n', "mcp.servers.x.url", ""),
        ('[mcp.servers.x]\ncommand = "a"\ncall_timeout_secs = 0\n', "call_timeout_secs", ""),
        ('[mcp.servers."a__b"]\ncommand = "a"\n', "mcp.servers.a__b", "single '_'"),
        (
            '[mcp.servers.x]\nurl = "http://h/mcp"\nbearer_token_env = "A-B"\n',
            "mcp.servers.x",
            "no variable name",
        ),
    ],
)
def test_a_bad_table_is_refused_naming_its_key(
    tmp_path: Path, table: str, key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(config(tmp_path, table), env={})
    assert key in str(raised.value)
    assert problem in str(raised.value)


def test_an_mcp_servers_env_and_headers_are_redacted_when_shown(tmp_path: Path) -> None:
    file = config(
        tmp_path,
        """
[mcp.servers.files]
command = "files-server"
env = { ROOT = "/mcp", GH = "ghp_secret1" }

[mcp.servers.tracker]
url = "https://tracker.example.org/mcp"
headers = { Authorization = "Bearer secret2" }
""",
    )
    shown = {key: value for key, value, *_ in effective_values(load_settings(file, env={}))}
    assert shown["mcp.servers.files.env.GH"] == "<redacted>"
    assert shown["mcp.servers.files.env.ROOT"] == "<redacted>"
    assert shown["mcp.servers.tracker.headers.Authorization"] == "<redacted>"
    assert shown["mcp.servers.files.command"] == "files-server"
    assert "ghp_secret1" not in json.dumps(shown)
    assert "secret2" not in json.dumps(shown)
