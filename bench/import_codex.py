"""Codex import benchmark: importing the corpus repeated to ≥ 100 MB, against what any
importer must at least spend on this machine — parsing every line (orjson, the fastest
JSON parser OpenCrab uses) plus the storage floor for the same rows.

Target (issue 19): import time ≤ 2 × (parse + storage floor).

Our path is what `opencrab import codex` does with an agent chosen: read every rollout,
scan each line (JSON, seed 003 classification, tool joins, token counting), and in one
transaction per 16 MB of lines (importers.store.BATCH_BYTES; a file is never split) write
the events (user, reasoning, tool calls and results,
messages, token_usage sidecars), the agent's memory log lines, the LLM metrics rows,
the lines themselves (zstd) and the session's bookkeeping — into a fresh, migrated
SQLite database. The baseline reads the same files and `orjson.loads` every line. Both
run in this process, alternating, best of several rounds, so machine noise hits both
alike. A second import of the same files (which must add nothing) is timed too. CPU
seconds are printed beside the wall-clock ratio: on a machine busy with other work they
move less than wall-clock time.

The storage floor is what SQLite needs for the same rows: every row this import wrote
(WRITTEN: every table it adds rows to, the searchable message texts and the metrics'
daily rollup included), read back beforehand (untimed), then stored in a fresh migrated
store (same tables, same indexes and triggers, same pragmas) by a bare `executemany` per
table in one transaction, and committed — sqlite3 with no Python per row but the
driver's own binding. An importer must parse every line once and store those rows; the
ratio printed is import / (parse + floor), and the target is at most 2.

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
from tests.fakes.corpora import CODEX_FILES

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.importers.codex_scan import scan_lines
from opencrab.importers.store import Importer
from opencrab.store import Database

TARGET = 2.0
"""import time / (parse + storage floor) must not exceed this."""


def build_tree(folder: Path, megabytes: float) -> tuple[list[Path], int]:
    """Copies of the corpus files, each its own session, until `megabytes` is reached."""
    sources = CODEX_FILES
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


def parse_only(files: list[Path]) -> tuple[float, float]:
    """Seconds (wall, CPU) to orjson.loads every line."""
    loads = orjson.loads
    started, cpu = time.perf_counter(), time.process_time()
    for path in files:
        with path.open("rb") as handle:
            for line in handle:
                loads(line)
    return time.perf_counter() - started, time.process_time() - cpu


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
    "import_texts",
    "events",
    "memory_sessions",
    "llm_usage_metrics",
    "llm_usage_daily",
    "import_chunks",
)


def written_rows(imported: Path) -> dict[str, tuple[list[str], list[tuple[object, ...]]]]:
    """Every row of WRITTEN in the store the import wrote: table → (columns, rows)."""
    conn = sqlite3.connect(imported)
    try:
        found: dict[str, tuple[list[str], list[tuple[object, ...]]]] = {}
        for table in WRITTEN:
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            names = ", ".join(f'"{c}"' for c in columns)
            found[table] = (columns, conn.execute(f"SELECT {names} FROM {table}").fetchall())
        return found
    finally:
        conn.close()


def storage_floor(imported: Path, work: Path) -> tuple[dict[str, float], float]:
    """Seconds SQLite takes to store the rows of `imported` (a store the import wrote) in
    a fresh store with one bare executemany per table, by table, and the commit; and the
    CPU seconds of all of it."""
    rows = written_rows(imported)
    db, _ = fresh_store(work / "floor")
    db.close()
    conn = sqlite3.connect(work / "floor" / "opencrab.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # as the application's connections
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("ATTACH DATABASE ? AS imported", (str(imported),))
        conn.execute("DELETE FROM main.agents")  # the agent the rows name
        conn.execute("INSERT INTO main.agents SELECT * FROM imported.agents")
        conn.execute("DETACH DATABASE imported")
        times: dict[str, float] = {}
        gc.collect()
        cpu = time.process_time()
        conn.execute("BEGIN IMMEDIATE")
        for table in WRITTEN:
            columns, values = rows[table]
            names = ", ".join(f'"{c}"' for c in columns)
            marks = ", ".join("?" * len(columns))
            started = time.perf_counter()
            conn.executemany(f"INSERT INTO main.{table} ({names}) VALUES ({marks})", values)
            times[table] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("COMMIT")
        times["commit"] = time.perf_counter() - started
        return times, time.process_time() - cpu
    finally:
        conn.close()


def import_all(folder: Path, work: Path) -> tuple[float, float, float, dict[str, object]]:
    """Seconds of the import (wall, CPU), of a second import, and the first's summary."""
    db, agent_id = fresh_store(work / "data")
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    summary = Importer(db, "codex", agent_id=agent_id).run([folder])
    first, first_cpu = time.perf_counter() - started, time.process_time() - cpu
    started = time.perf_counter()
    again = Importer(db, "codex", agent_id=agent_id).run([folder]).as_json()
    second = time.perf_counter() - started
    db.close()
    assert again["events"] == 0, "a second import added events"
    return first, first_cpu, second, summary.as_json()


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
        parse_cpu = import_cpu = floor_cpu = float("inf")
        floor: dict[str, float] = {}
        summary: dict[str, object] = {}
        for _ in range(args.rounds):
            parsed, parsed_cpu = parse_only(files)
            parse_best, parse_cpu = min(parse_best, parsed), min(parse_cpu, parsed_cpu)
            scan_best = min(scan_best, scan_only(files))
            took, took_cpu, again, summary = import_all(folder, work)
            import_best, again_best = min(import_best, took), min(again_best, again)
            import_cpu = min(import_cpu, took_cpu)
            times, stored_cpu = storage_floor(work / "data" / "opencrab.db", work)
            floor_cpu = min(floor_cpu, stored_cpu)
            if not floor or sum(times.values()) < sum(floor.values()):
                floor = times
        mb = size / 1e6
        stored = sum(floor.values())
        least = parse_best + stored
        ratio = import_best / least
        print(f"orjson.loads of every line: {mb / parse_best:8.1f} MB/s ({parse_best:.2f} s)")
        print(
            f"storage floor (bare executemany of the same rows): {stored:.2f} s: "
            + ", ".join(f"{name} {seconds:.2f}" for name, seconds in floor.items())
        )
        print(f"parse + floor: {least:.2f} s")
        print(f"scan only (nothing stored): {mb / scan_best:8.1f} MB/s ({scan_best:.2f} s)")
        print(
            f"opencrab import codex:      {mb / import_best:8.1f} MB/s ({import_best:.2f} s; "
            f"{summary['events']:,} events, {summary['calls']:,} calls, "
            f"{summary['messages']:,} messages)"
        )
        print(f"ratio import / (parse + floor): {ratio:.2f} (target <= {TARGET})")
        print(  # CPU seconds: what a machine shared with other work still tells apart
            f"the same in CPU seconds: {import_cpu:.2f} / ({parse_cpu:.2f} + {floor_cpu:.2f})"
            f" = {import_cpu / (parse_cpu + floor_cpu):.2f}"
        )
        print(f"second import of the same files (adds nothing): {again_best:.3f} s")
        return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
