"""`opencrab a2a-remotes check|encrypt-token` against the official SDK's server
(tests/fakes/a2a_remote.py): a remote's card read with the token the table names, a
refused one explained, and a token encrypted for `token_encrypted`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from opencrab.cli import build_app
from opencrab.config.secret_key import SecretBox
from tests.fakes.a2a_remote import RemoteAgent
from tests.fakes.ports import free_port
from tests.fakes.threaded_server import serve_in_thread

runner = CliRunner()


def test_check_reads_each_card_with_its_token_and_names_a_refused_remote(
    data_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    encrypted = runner.invoke(
        build_app(), ["a2a-remotes", "encrypt-token", "--data-dir", str(data)], input="t0ken\n"
    )
    assert encrypted.exit_code == 0, encrypted.output
    line = encrypted.stdout.strip()
    assert line.startswith('token_encrypted = "')
    token = line.split('"')[1]
    assert SecretBox.load(data, create=False).decrypt(token) == "t0ken"

    remote = RemoteAgent(free_port())
    config = tmp_path / "opencrab.toml"
    config.write_text(
        f'[a2a.remotes.echo]\nurl = "{remote.url}"\nallow_private = true\n'
        f'token_encrypted = "{token}"\n'
        f'[a2a.remotes.guarded]\nurl = "{remote.url}"\n',
        encoding="utf-8",
    )
    with serve_in_thread(remote.app(), remote.port):
        checked = runner.invoke(
            build_app(),
            ["a2a-remotes", "check", "--json", "-c", str(config), "--data-dir", str(data)],
        )
        assert checked.exit_code == 1, checked.output  # one of the two cannot be read
        echo, guarded = json.loads(checked.stdout)
        assert echo["remote"] == "echo"
        assert echo["state"] == "running"
        assert echo["agent"] == "Echo crab"
        assert echo["skills"] == ["Echo", "Slow work"]
        assert echo["tools"] == ["ask"]
        assert set(remote.authorizations) == {"Bearer t0ken"}
        assert guarded["state"] == "failed"
        assert "a loopback address" in guarded["last_error"]
        assert "allow_private = true in [a2a.remotes.guarded]" in guarded["last_error"]

        args = ["a2a-remotes", "check", "echo", "-c", str(config), "--data-dir", str(data)]
        one = runner.invoke(build_app(), args)
        assert one.exit_code == 0, one.output
        assert "echo (" in one.stdout
        assert "Echo crab; skills: Echo, Slow work; tool ask" in one.stdout

    unknown = runner.invoke(
        build_app(), ["a2a-remotes", "check", "nope", "-c", str(config), "--data-dir", str(data)]
    )
    assert unknown.exit_code == 2
    assert "no [a2a.remotes.nope] table (the remotes: echo, guarded)" in unknown.output


def test_encrypt_token_refuses_an_empty_token(data_dir: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        build_app(), ["a2a-remotes", "encrypt-token", "--data-dir", str(tmp_path)], input="\n"
    )
    assert result.exit_code == 1
    assert "give the token on stdin" in result.output
