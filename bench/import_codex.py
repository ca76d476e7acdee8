"""Codex import benchmark: MB/s importing the corpus repeated to ≥ 100 MB, against just
parsing the same lines with orjson (the fastest JSON parser OpenCrab uses).

Our path is what `opencrab import codex` does with an agent chosen: read every rollout,
scan each line (JSON, seed 003 classification, tool joins, token counting), and in one
transaction per file write the events (user, reasoning, tool calls and results,
messages, token_usage sidecars), the agent's memory log lines, the LLM metrics rows,
the lines themselves (zstd) and the session's bookkeeping — into a fresh, migrated
SQLite database. The baseline reads the same files and `orjson.loads` every line. Both
run in this process, alternating, best of several rounds, so machine noise hits both
alike. A second import of the same files (which must add nothing) is timed too.

The storage floor says what any importer could reach on this machine: the rows this
import wrote, copied by SQLite itself (`INSERT … SELECT`, no Python per row) into another
fresh store in one transaction. An importer must parse every line once and store those
rows, so parse / (parse + floor) is the best ratio possible here; it is printed with and
without the memory log lines.

    python bench/import_codex.py [--mb 100] [--rounds 2]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import orjson

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.importers.codex_scan import scan_lines
from opencrab.importers.store import Importer
from opencrab.store import Database

TARGET_RATIO = 0.25
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "codex"


def build_tree(folder: Path, megabytes: float) -> tuple[list[Path], int]:
    """Copies of the corpus files, each its own session, until `megabytes` is reached."""
    sources = sorted(CORPUS.rglob("rollout-*.jsonl"))
    files: list[Path] = []
    size = 0
    copy = 0
    while size < megabytes * 1_000_000:
        day = folder / f"copy-{copy:04d}"
        day.mkdir(parents=True)
        for source in sources:
            target = day / source.name
            shutil.copyfile(source, target)
            files.append(target)
            size += target.stat().st_size
        copy += 1
    return files, size


def parse_only(files: list[Path]) -> float:
    loads = orjson.loads
    started = time.perf_counter()
    for path in files:
        with path.open("rb") as handle:
            for line in handle:
                loads(line)
    return time.perf_counter() - started


def scan_only(files: list[Path]) -> float:
    """The importer's reading half alone: scan every line, store nothing."""
    started = time.perf_counter()
    for path in files:
        with path.open("rb") as handle:
            scan_lines(handle, str(path))
    return time.perf_counter() - started


def fresh_store(data: Path) -> tuple[Database, str]:
    """A migrated SQLite store in `data` with one agent."""
    if data.exists():
        shutil.rmtree(data)
    settings = load_settings(None, overrides={"data_dir": str(data)})
    data.mkdir(parents=True)
    db = Database(settings.database_url)
    db.upgrade()
    agent = AgentStore(db, settings).create(AgentCreate(name="coder", prompt="You code."))
    return db, agent.id


# what one import writes, in the order the importer writes it
WRITTEN = (
    "import_sessions",
    "import_problems",
    "events",
    "memory_sessions",
    "llm_usage_metrics",
    "import_chunks",
)


def storage_floor(imported: Path, work: Path) -> dict[str, float]:
    """Seconds SQLite takes to store the rows of `imported` (a store the import wrote)
    in a fresh store, by table, and the commit; no Python runs per row."""
    db, _ = fresh_store(work / "floor")
    db.close()
    conn = sqlite3.connect(work / "floor" / "opencrab.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # as the application's connections
        conn.execute("ATTACH DATABASE ? AS imported", (str(imported),))
        conn.execute("DELETE FROM main.agents")
        conn.execute("INSERT INTO main.agents SELECT * FROM imported.agents")
        times: dict[str, float] = {}
        gc.collect()
        conn.execute("BEGIN IMMEDIATE")
        for table in WRITTEN:
            columns = ", ".join(
                f'"{row[1]}"' for row in conn.execute(f"PRAGMA imported.table_info({table})")
            )
            started = time.perf_counter()
            conn.execute(
                f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM imported.{table}"
            )
            times[table] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("COMMIT")
        times["commit"] = time.perf_counter() - started
        return times
    finally:
        conn.close()


def import_all(folder: Path, work: Path) -> tuple[float, float, dict[str, object]]:
    db, agent_id = fresh_store(work / "data")
    gc.collect()
    started = time.perf_counter()
    summary = Importer(db, "codex", agent_id=agent_id).run([folder])
    first = time.perf_counter() - started
    started = time.perf_counter()
    again = Importer(db, "codex", agent_id=agent_id).run([folder]).as_json()
    second = time.perf_counter() - started
    db.close()
    assert again["events"] == 0, "a second import added events"
    return first, second, summary.as_json()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="Corpus size to import (MB).")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="opencrab-bench-") as tmp:
        work = Path(tmp)
        folder = work / "sessions"
        files, size = build_tree(folder, args.mb)
        lines = sum(1 for path in files for _ in path.open("rb"))
        print(f"corpus: {len(files)} rollouts, {size / 1e6:.1f} MB, {lines:,} lines")
        parse_best = scan_best = import_best = again_best = float("inf")
        floor: dict[str, float] = {}
        summary: dict[str, object] = {}
        for _ in range(args.rounds):
            parse_best = min(parse_best, parse_only(files))
            scan_best = min(scan_best, scan_only(files))
            took, again, summary = import_all(folder, work)
            import_best, again_best = min(import_best, took), min(again_best, again)
            times = storage_floor(work / "data" / "opencrab.db", work)
            if not floor or sum(times.values()) < sum(floor.values()):
                floor = times
        mb = size / 1e6
        parse_rate, import_rate = mb / parse_best, mb / import_best
        ratio = import_rate / parse_rate
        print(f"orjson.loads of every line: {parse_rate:8.1f} MB/s ({parse_best:.2f} s)")
        print(
            f"scan only (nothing stored): {mb / scan_best:8.1f} MB/s ({scan_best:.2f} s), "
            f"ratio {parse_best / scan_best:.3f}"
        )
        print(
            f"opencrab import codex:      {import_rate:8.1f} MB/s ({import_best:.2f} s; "
            f"{summary['events']:,} events, {summary['calls']:,} calls, "
            f"{summary['messages']:,} messages)"
        )
        print(f"ratio import/parse: {ratio:.3f} (target >= {TARGET_RATIO})")
        print(f"second import of the same files (adds nothing): {again_best:.3f} s")
        stored = sum(floor.values())
        without_memory = stored - floor["memory_sessions"]
        print(
            f"storage floor (SQLite copying the rows this import wrote): {stored:.2f} s "
            + ", ".join(f"{name} {seconds:.2f}" for name, seconds in floor.items())
        )
        print(
            f"best ratio possible here, parse / (parse + floor): "
            f"{parse_best / (parse_best + stored):.3f}; "
            f"without the memory log lines: {parse_best / (parse_best + without_memory):.3f}"
        )
        return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
