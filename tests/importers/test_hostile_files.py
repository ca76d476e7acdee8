"""Hostile transcript files (issue 17 §7): a zstd bomb, a file of nothing but newlines and
over-long lines are reported as problems and read in bounded memory; nothing of a file
refused whole is stored."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import zstandard
from typer.testing import CliRunner

from opencrab.cli import build_app
from opencrab.importers.common import ReadLimits
from opencrab.importers.sessions import normalized_messages, session_problems
from opencrab.importers.store import FileResult, Importer
from opencrab.store import Database
from opencrab.store.tables import events, import_chunks, import_sessions
from tests.fakes.corpora import jsonl_lines, response_item

MiB = 1024 * 1024
SMALL = ReadLimits(max_bytes=64 * MiB, max_lines=100_000, max_line_bytes=MiB)
BOUNDED = 16 * MiB  # far below the hundreds of MiB the files below expand to
USER = response_item(
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
)


def zst_of(path: Path, unit: bytes, size: int, *, head: bytes = b"", tail: bytes = b"") -> Path:
    """A .zst of `head`, `size` bytes of `unit` over and over, then `tail`: written in
    1 MiB pieces, so the test never holds what the file expands to."""
    block = unit * (MiB // len(unit))
    with path.open("wb") as out, zstandard.ZstdCompressor(level=1).stream_writer(out) as writer:
        writer.write(head)
        for _ in range(size // len(block)):
            writer.write(block)
        writer.write(tail)
    return path


def peak_of(work: Callable[[], Any]) -> tuple[Any, int]:
    """What `work` returns and the most memory Python held while it ran."""
    tracemalloc.start()
    try:
        return work(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def stored(db: Database) -> int:
    with db.read() as conn:
        return sum(
            conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for table in (events, import_chunks, import_sessions)
        )


def test_a_zstd_bomb_is_refused_as_a_problem_in_bounded_memory(
    db: Database, tmp_path: Path
) -> None:
    bomb = zst_of(tmp_path / "rollout-bomb.jsonl.zst", b"\0", 256 * MiB)
    assert bomb.stat().st_size < 64 * 1024  # 256 MiB of zeros is a few KB of zstd
    result, peak = peak_of(lambda: Importer(db, "codex", limits=SMALL).file(bomb))
    assert isinstance(result, FileResult)
    assert result.status == "failed"
    (problem,) = result.problems
    assert "64 MB" in problem.reason
    assert "[imports] max_decompressed_mb" in problem.reason
    assert peak < BOUNDED, f"{peak / MiB:.0f} MiB held"
    assert stored(db) == 0


def test_a_file_of_newlines_is_refused_at_the_line_limit(db: Database, tmp_path: Path) -> None:
    flood = zst_of(tmp_path / "rollout-flood.jsonl.zst", b"\n", 256 * MiB)
    result, peak = peak_of(lambda: Importer(db, "codex", limits=SMALL).file(flood))
    assert result.status == "failed"
    (problem,) = result.problems
    assert "100000 lines" in problem.reason
    assert "[imports] max_lines" in problem.reason
    assert peak < BOUNDED, f"{peak / MiB:.0f} MiB held"
    assert stored(db) == 0


def test_an_over_long_line_is_skipped_without_holding_it(db: Database, tmp_path: Path) -> None:
    head, tail = b"".join(jsonl_lines(USER)), b"\n" + b"".join(jsonl_lines(USER))
    path = zst_of(tmp_path / "rollout-long.jsonl.zst", b"x", 40 * MiB, head=head, tail=tail)
    importer = Importer(db, "codex", limits=SMALL)
    result, peak = peak_of(lambda: importer.file(path))
    assert result.status == "new"
    assert result.lines == 3
    assert [(p.line, p.reason) for p in result.problems] == [
        (2, f"line of {40 * MiB + 1} bytes is too long")
    ]
    assert result.kinds == {"message": 2}
    assert peak < BOUNDED, f"{peak / MiB:.0f} MiB held"
    # what the API reads back agrees, and a second import sees the same file
    _, transcript = normalized_messages(db, result.session_id)
    assert [(p.line, p.reason) for p in transcript.problems] == [
        (2, f"line of {40 * MiB + 1} bytes is too long")
    ]
    assert session_problems(db, result.session_id) == [(2, transcript.problems[0].reason)]
    assert importer.file(path).status == "unchanged"
    # an appended line imports alone: the skipped line counts the same each time
    zst_of(path, b"x", 40 * MiB, head=head, tail=tail + b"".join(jsonl_lines(USER)))
    appended = importer.file(path)
    assert (appended.status, appended.lines, appended.problems) == ("appended", 1, [])


def test_the_limits_come_from_the_imports_config(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    folder = tmp_path / "sessions"
    folder.mkdir()
    zst_of(folder / "rollout-bomb.jsonl.zst", b"\0", 8 * MiB)
    runner = CliRunner()
    app = build_app()
    config = tmp_path / "opencrab.toml"
    config.write_text("[imports]\nmax_decompressed_mb = 4\n")
    result = runner.invoke(
        app,
        ["import", "codex", str(folder), "--data-dir", data_dir, "--config", str(config), "--json"],
    )
    summary = json.loads(result.stdout)
    assert summary["files_by_status"] == {"failed": 1}
    (problem,) = summary["problems"]
    assert "4 MB" in problem["reason"]
