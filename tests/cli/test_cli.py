"""The `opencrab` CLI: version, db, events import/show/stats and exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from typer.testing import CliRunner

from opencrab import __version__
from opencrab.cli import build_app
from opencrab.event_log import EventLog
from opencrab.events import event_json
from opencrab.store import Database, migrate
from tests.fakes.event_chain import chain

runner = CliRunner()
app = build_app()


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def jsonl(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def stored_count(data_dir: Path) -> int:
    db = Database(f"sqlite:///{data_dir / 'opencrab.db'}")
    try:
        with db.read() as conn:
            return int(conn.exec_driver_sql("SELECT count(*) FROM events").scalar() or 0)
    finally:
        db.close()


def test_version() -> None:
    code, out, _ = run("--version")
    assert code == 0
    assert out.strip() == f"opencrab {__version__}"


def test_console_script_is_installed() -> None:
    exe = shutil.which("opencrab", path=str(Path(sys.executable).parent))
    assert exe is not None
    done = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"opencrab {__version__}"


def test_db_upgrade_and_current(data_dir: Path) -> None:
    code, out, _ = run("db", "current")
    assert (code, out.strip()) == (0, f"none (head is {migrate.head()})")
    code, out, _ = run("db", "upgrade")
    assert code == 0
    assert f"blank → {migrate.head()}" in out
    code, out, _ = run("db", "current")
    assert out.strip() == f"{migrate.head()} (head)"
    code, out, _ = run("db", "upgrade")
    assert "already at" in out
    assert (data_dir / "opencrab.db").is_file()


def test_db_upgrade_and_current_on_postgresql(
    pg_url: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCRAB_DATABASE__URL", pg_url)
    code, out, _ = run("db", "current")
    assert (code, out.strip()) == (0, f"none (head is {migrate.head()})")
    code, out, _ = run("db", "upgrade")
    assert code == 0
    assert f"blank → {migrate.head()}" in out
    code, out, _ = run("db", "current")
    assert out.strip() == f"{migrate.head()} (head)"
    code, out, _ = run("db", "upgrade")
    assert "already at" in out
    assert not (data_dir / "opencrab.db").exists()  # `path` is SQLite's, unused here
    db = Database(pg_url)
    try:
        assert db.current_revision() == migrate.head()
    finally:
        db.close()


def test_an_unreachable_postgresql_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"postgresql://crab:hunter2@/opencrab?host={tmp_path}"  # no server on that socket
    monkeypatch.setenv("OPENCRAB_DATABASE__URL", url)
    code, _, err = run("db", "current")
    assert code == 1
    assert "cannot connect to the database postgresql+psycopg://crab:***@/opencrab" in err
    assert "hunter2" not in err


def test_data_dir_flag(tmp_path: Path) -> None:
    code, _, _ = run("db", "upgrade", "--data-dir", str(tmp_path / "elsewhere"))
    assert code == 0
    assert (tmp_path / "elsewhere" / "opencrab.db").is_file()


def test_events_import_show_stats(tmp_path: Path, data_dir: Path) -> None:
    trace = uuid4()
    events = chain(trace)
    path = jsonl(tmp_path, [event_json(e) for e in events])
    code, out, _ = run("events", "import", str(path))
    assert code == 0, out
    assert "imported 7 events into 1 trace" in out
    code, out, _ = run("events", "show", str(trace), "--json")
    assert code == 0
    assert json.loads(out) == [json.loads(event_json(e)) for e in events]
    code, out, _ = run("events", "show", str(trace))
    assert code == 0
    assert "Calculate 1+1" in out
    code, out, _ = run("events", "stats", str(trace), "--json")
    stats = json.loads(out)
    assert (stats["input_tokens"], stats["output_tokens"], stats["total_tokens"]) == (250, 25, 275)
    assert set(stats["by_event"]) == {str(events[2].id), str(events[5].id)}
    code, out, _ = run("events", "stats", str(trace))
    assert code == 0
    assert "275" in out


def test_events_import_from_stdin_with_json_summary() -> None:
    events = chain(uuid4())
    text = "\n".join(event_json(e).decode() for e in events) + "\n\n"
    code, out, _ = run("events", "import", "-", "--json", input=text)
    assert code == 0
    assert json.loads(out) == {
        "events": 7,
        "traces": 1,
        "by_type": {
            "user": 1,
            "reasoning": 1,
            "tool_call": 1,
            "token_usage": 2,
            "tool_result": 1,
            "message": 1,
        },
        "warnings": [],
    }


def test_invalid_lines_write_nothing_and_name_each_line(tmp_path: Path, data_dir: Path) -> None:
    events = chain(uuid4())
    lines = [event_json(e) for e in events]
    lines[1] = b'{"id": "broken'
    lines[4] = lines[4].replace(b'"type":"tool_result"', b'"type":"tool_outcome"')
    code, _, err = run("events", "import", str(jsonl(tmp_path, lines)))
    assert code == 1
    assert f"{tmp_path / 'events.jsonl'}:2: Invalid JSON" in err
    assert ":5:" in err
    assert "nothing was written" in err
    assert not (data_dir / "opencrab.db").exists() or stored_count(data_dir) == 0


def test_a_batch_in_any_order_is_imported_along_the_parent_chain(
    tmp_path: Path, data_dir: Path
) -> None:
    trace = uuid4()
    events = chain(trace)
    shuffled = [events[i] for i in (6, 4, 0, 5, 3, 1, 2)]
    code, out, err = run(
        "events", "import", str(jsonl(tmp_path, [event_json(e) for e in shuffled]))
    )
    assert (code, err) == (0, "")
    assert "imported 7 events into 1 trace" in out
    code, out, _ = run("events", "show", str(trace), "--json")
    shown = [e["id"] for e in json.loads(out)]
    assert shown == [str(events[i].id) for i in (0, 1, 2, 4, 5, 6, 3)]


def test_rule_violations_write_nothing(tmp_path: Path, data_dir: Path) -> None:
    events = chain(uuid4())
    orphan = events[1].model_copy(update={"parent_id": uuid4()})  # a parent nowhere
    lines = [event_json(e) for e in [events[0], orphan]]
    code, _, err = run("events", "import", str(jsonl(tmp_path, lines)))
    assert code == 1
    assert f":2: parent {orphan.parent_id} does not exist" in err
    assert stored_count(data_dir) == 0


def test_a_cycle_is_an_error_naming_its_events(tmp_path: Path, data_dir: Path) -> None:
    events = chain(uuid4())
    looped = events[0].model_copy(update={"parent_id": events[1].id})  # user ← reasoning ← user
    lines = [event_json(e) for e in [events[1], looped]]
    code, _, err = run("events", "import", str(jsonl(tmp_path, lines)))
    assert code == 1
    assert f":1: parent {events[0].id} leads back to this event (a cycle of 2 events)" in err
    assert f":2: parent {events[1].id} leads back to this event (a cycle of 2 events)" in err
    assert "nothing was written" in err
    assert not (data_dir / "opencrab.db").exists() or stored_count(data_dir) == 0


def test_unknown_fields_are_ignored_with_a_warning_and_nanoseconds_kept(
    tmp_path: Path, data_dir: Path
) -> None:
    trace = uuid4()
    first = json.loads(event_json(chain(trace)[0]))
    first["timestamp"] = "2026-02-23T12:40:23.123456789Z"
    first["source"] = "rust"
    path = jsonl(tmp_path, [json.dumps(first).encode()])
    code, out, err = run("events", "import", str(path))
    assert code == 0
    assert f"{path}:1: warning: unknown field ignored: source" in err
    code, out, _ = run("events", "show", str(trace), "--json")
    del first["source"]
    assert json.loads(out) == [first]


MARKUP = "see [/oops] and [bold]x[/bold] [link=http://evil.test]click[/link]"


def test_events_show_prints_stored_text_as_it_is(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text from a model or a file is shown literally, never read as Rich markup (a
    stray closing tag crashed the command; a link tag hid its target)."""
    monkeypatch.setenv("COLUMNS", "240")  # one line per row
    events = chain(uuid4())
    for n, event in enumerate(events):
        if event.type == "message":
            text = event.content.model_copy(update={"text": MARKUP})
            events[n] = event.model_copy(update={"content": text})
        if event.type == "tool_result":
            failed = event.content.model_copy(update={"is_error": True})
            events[n] = event.model_copy(update={"content": failed})
    code, out, _ = run("events", "import", str(jsonl(tmp_path, [event_json(e) for e in events])))
    assert code == 0, out
    code, out, err = run("events", "show", str(events[0].trace_id))
    assert code == 0, err
    assert MARKUP in out
    assert "[error]: 2" in out


def test_an_error_naming_bracketed_input_shows_it(data_dir: Path) -> None:
    code, _, err = run("agent", "show", "[/x] [bold]y")
    assert code == 1
    assert "error: no agent '[/x] [bold]y'" in err


def test_events_import_names_a_folder_and_a_file_it_cannot_read(tmp_path: Path) -> None:
    code, _, err = run("events", "import", str(tmp_path))
    assert code == 1
    assert f"{tmp_path} is a directory" in err
    code, _, err = run("events", "import", "/proc/self/mem")  # a file; reading it fails
    assert code == 1
    assert "cannot read /proc/self/mem: Input/output error" in " ".join(err.split())
    assert "Traceback" not in err


def test_db_commands_name_a_file_that_is_no_database(data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "opencrab.db").write_bytes(b"garbage, not SQLite" * 100)
    for command in ("current", "upgrade"):
        code, _, err = run("db", command)
        assert code == 1
        assert "cannot read the database" in err
        assert "file is not a database" in " ".join(err.split())
    assert (data_dir / "opencrab.db").read_bytes() == b"garbage, not SQLite" * 100


def test_missing_file_and_unknown_trace(tmp_path: Path) -> None:
    code, _, err = run("events", "import", str(tmp_path / "nope.jsonl"))
    assert code == 1
    assert "no such file" in err
    code, _, err = run("events", "show", str(uuid4()))
    assert code == 1
    assert "has no events" in err
    code, _, _ = run("events", "show", "not-a-uuid")
    assert code == 2


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[gateway.rest\n", "invalid TOML"),
        ('[gateway.rest]\nport = "x"\n', "gateway.rest.port"),
        ("[nonsense]\na = 1\n", "nonsense: unknown section"),
    ],
)
def test_invalid_config_exits_2_naming_file_and_key(
    tmp_path: Path, text: str, complaint: str
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    for command in (["db", "current"], ["events", "show", str(uuid4())], ["up"]):
        code, _, err = run(*command, "--config", str(config))
        assert code == 2
        assert "config error" in err
        assert "bad.toml" in err
        assert complaint in err


def test_environment_config_errors_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENCRAB_GATEWAY__REST__PORT", "not-a-port")
    code, _, err = run("db", "current")
    assert code == 2
    assert "OPENCRAB_GATEWAY__REST__PORT" in err


def test_up_refuses_non_loopback_without_a_token() -> None:
    code, _, err = run("up", "--host", "0.0.0.0")
    assert code == 2
    assert "binding 0.0.0.0 (not a loopback address) needs bearer tokens" in err
    assert "opencrab token create" in err


def test_token_create_list_revoke(data_dir: Path) -> None:
    code, out, _ = run("token", "create", "dashboard", "--json")
    assert code == 0
    created = json.loads(out)
    assert created["token"].startswith("ocb_")
    assert created["token"].startswith(created["prefix"])
    assert created["scope"] == "admin"  # what every token could do before scopes
    code, out, _ = run("token", "list", "--json")
    listed = json.loads(out)
    assert [t["name"] for t in listed] == ["dashboard"]
    assert "token" not in listed[0]
    assert created["token"].encode() not in (data_dir / "opencrab.db").read_bytes()
    code, _, err = run("token", "create", "dashboard")
    assert code == 1
    assert "already named 'dashboard'" in err
    code, out, _ = run("token", "revoke", created["prefix"])
    assert code == 0
    assert "revoked" in out
    assert json.loads(run("token", "list", "--json")[1]) == []
    assert json.loads(run("token", "list", "--all", "--json")[1])[0]["revokedAt"] is not None
    code, _, err = run("token", "revoke", "dashboard")
    assert code == 1
    assert "no active token 'dashboard'" in err


def test_a_token_is_created_with_a_scope(data_dir: Path) -> None:
    code, out, _ = run("token", "create", "grafana", "--scope", "read", "--json")
    assert code == 0, out
    assert json.loads(out)["scope"] == "read"
    code, out, err = run("token", "create", "ci", "--scope", "operate")
    assert code == 0
    assert "'ci' (operate) created" in err
    assert [(t["name"], t["scope"]) for t in json.loads(run("token", "list", "--json")[1])] == [
        ("grafana", "read"),
        ("ci", "operate"),
    ]
    code, _, err = run("token", "create", "x", "--scope", "root")
    assert code == 2
    assert "'root' is not one of" in err


def test_a_token_name_with_brackets_is_shown_as_it_is(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    code, _, err = run("token", "create", "ci [/x]")
    assert code == 0, err
    assert "token 'ci [/x]' (admin) created" in " ".join(err.split())
    code, out, err = run("token", "list")
    assert code == 0, err
    assert "ci [/x]" in out


def test_event_log_reads_what_the_cli_wrote(tmp_path: Path, data_dir: Path) -> None:
    events = chain(uuid4())
    run("events", "import", str(jsonl(tmp_path, [event_json(e) for e in events])))
    db = Database(f"sqlite:///{data_dir / 'opencrab.db'}")
    try:
        assert EventLog(db).trace(events[0].trace_id) == events
    finally:
        db.close()


# ------------------------------------------------------------------ an unwritable data directory
def test_an_unwritable_data_directory_is_named_with_exit_2(
    tmp_path: Path, make_unwritable: Any
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    make_unwritable(locked)
    for where in (locked, locked / "inside"):  # there but closed, or not creatable
        code, out, err = run("token", "list", "--data-dir", str(where))
        assert code == 2, out + err
        assert f"data directory {where} is not writable" in " ".join(err.split())
        assert "sqlalchemy" not in err.lower()
        assert "Traceback" not in err


def test_a_read_only_database_serves_reading_commands(tmp_path: Path, make_unwritable: Any) -> None:
    home = tmp_path / "home"
    code, _, _ = run("token", "create", "ci", "--data-dir", str(home))
    assert code == 0
    make_unwritable(home / "opencrab.db", home)
    code, out, err = run("token", "list", "--json", "--data-dir", str(home))
    assert (code, err) == (0, "")
    assert [t["name"] for t in json.loads(out)] == ["ci"]
    code, out, _ = run("db", "current", "--data-dir", str(home))
    assert out.strip() == f"{migrate.head()} (head)"
    code, out, _ = run("db", "upgrade", "--data-dir", str(home))
    assert (code, out.strip()) == (0, f"database already at {migrate.head()} (head)")
    code, _, err = run("token", "create", "more", "--data-dir", str(home))
    assert code == 2
    assert f"data directory {home} is not writable" in " ".join(err.split())


def test_a_read_only_database_that_needs_migrating_is_refused(
    tmp_path: Path, make_unwritable: Any
) -> None:
    home = tmp_path / "home"
    db = Database(f"sqlite:///{home / 'opencrab.db'}")
    migrate.upgrade(db, "0001")
    db.close()
    make_unwritable(home / "opencrab.db", home)
    code, _, err = run("token", "list", "--data-dir", str(home))
    assert code == 2
    message = " ".join(err.split())
    assert f"data directory {home} is not writable" in message
    assert f"0001 → {migrate.head()}" in message
