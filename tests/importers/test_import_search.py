"""Searching imported transcripts on both databases: what is indexed, Japanese and
ASCII terms (trigram and short), the index filled as the importer stores, the backfill
of sessions imported before it, and the session list's filters and daily costs."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from opencrab.errors import ValidationError
from opencrab.importers.search import catch_up, search
from opencrab.importers.sessions import import_cost_by_day, import_facets, import_sessions_page
from opencrab.importers.store import Importer
from opencrab.store import Database
from opencrab.store.tables import import_sessions, import_texts, llm_usage_metrics
from tests.fakes.transcripts import (
    JA_ASSISTANT,
    JA_USER,
    copy_rollout,
    japanese_rollout,
    price_corpus_model,
)


def texts(db: Database) -> int:
    with db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(import_texts)).scalar_one())


def test_message_texts_are_searchable_in_japanese_and_english(
    any_db: Database, tmp_path: Path
) -> None:
    ja = japanese_rollout(tmp_path / "ja")
    real = copy_rollout(tmp_path / "real")
    summary = Importer(any_db, "codex").run([tmp_path])
    assert {f.status for f in summary.files} == {"new"}
    ja_session = next(f.session_id for f in summary.files if f.path == str(ja.path))
    assert texts(any_db) > 0

    long = search(any_db, "東京の天気")  # three characters and more: the trigram index
    assert [(h.session_id, h.line, h.role) for h in long] == [(ja_session, ja.user_line, "user")]
    assert "東京の天気" in long[0].snippet
    short = search(any_db, "天気")  # two characters: LIKE
    assert {(h.role, h.session_id) for h in short} == {
        ("user", ja_session),
        ("assistant", ja_session),
    }
    both = search(any_db, "天気 要約")  # every word must occur
    assert [h.role for h in both] == ["assistant"]
    assert JA_ASSISTANT in both[0].snippet
    # tool arguments and outputs are not indexed; the file's own texts are (ASCII,
    # case-insensitive), in both sessions, newest first
    assert search(any_db, "晴れのち曇り") == []
    assert search(any_db, "weather.example") == []
    found = search(any_db, "redacted_text LEN=133")
    assert len(found) == 2
    assert {h.session_id for h in found} == {
        ja_session,
        next(f.session_id for f in summary.files if f.path == str(real)),
    }
    assert found[0].timestamp >= found[-1].timestamp
    # query syntax is text: FTS5 operators and LIKE wildcards match literally
    assert search(any_db, '"東京 OR NEAR(x)*') == []
    assert search(any_db, "%") == []
    assert search(any_db, "len=133", limit=1, offset=1) == found[1:]
    with pytest.raises(ValidationError, match="empty"):
        search(any_db, "   ")


def test_an_appended_file_indexes_only_its_new_lines(any_db: Database, tmp_path: Path) -> None:
    ja = japanese_rollout(tmp_path / "ja")
    whole = ja.path.read_bytes().splitlines(keepends=True)
    ja.path.write_bytes(b"".join(whole[: ja.user_line - 1]))
    Importer(any_db, "codex").run([ja.path])
    assert search(any_db, JA_USER) == []
    first = texts(any_db)
    ja.path.write_bytes(b"".join(whole))
    Importer(any_db, "codex").run([ja.path])
    assert [h.line for h in search(any_db, JA_USER)] == [ja.user_line]
    assert texts(any_db) > first
    again = texts(any_db)
    assert catch_up(any_db) == 0  # nothing was left for the first search
    assert texts(any_db) == again


def test_sessions_imported_before_the_index_are_indexed_on_the_first_search(
    any_db: Database, tmp_path: Path
) -> None:
    ja = japanese_rollout(tmp_path / "ja")
    Importer(any_db, "codex").run([ja.path])
    indexed = texts(any_db)
    with any_db.write() as conn:  # as migration 0023 leaves a store imported before it
        conn.execute(import_texts.delete())
        conn.execute(import_sessions.update().values(texts_indexed_lines=0))
    assert texts(any_db) == 0
    hits = search(any_db, "東京の天気")
    assert [h.line for h in hits] == [ja.user_line]
    assert texts(any_db) == indexed
    assert catch_up(any_db) == 0


def test_the_list_filters_by_day_project_and_model_and_costs_add_up(
    any_db: Database, tmp_path: Path
) -> None:
    copy_rollout(tmp_path / "real")
    price_corpus_model(any_db)
    Importer(any_db, "codex").run([tmp_path])
    rows, total = import_sessions_page(any_db)
    assert total == 1
    row = rows[0]
    assert row.project == "/redacted/path/ea96e59ed9"  # the header's cwd
    facets = import_facets(any_db)
    assert facets["projects"] == [row.project]
    assert facets["models"] == [row.model]
    assert facets["days"] == ["2026-02-23"]
    assert import_sessions_page(any_db, day="2026-02-23", project=row.project)[1] == 1
    assert import_sessions_page(any_db, day="2026-02-24")[1] == 0
    assert import_sessions_page(any_db, project="/elsewhere")[1] == 0
    assert import_sessions_page(any_db, model=str(row.model))[1] == 1
    assert import_sessions_page(any_db, model="other-model")[1] == 0
    costs = import_cost_by_day(any_db)
    with any_db.read() as conn:
        stored = conn.execute(
            sa.select(sa.func.sum(llm_usage_metrics.c.estimated_cost_usd)).where(
                llm_usage_metrics.c.purpose == "import"
            )
        ).scalar_one()
    assert row.cost_usd > 0
    assert sum(c.cost_usd for c in costs) == pytest.approx(float(stored))
    assert sum(c.cost_usd for c in costs) == pytest.approx(row.cost_usd)
    assert {c.day for c in costs} <= {"2026-02-23"}
