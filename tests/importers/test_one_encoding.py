"""One type per record: every parsed line is a seed-003 NormalizedMessage (the type the
API serves), and every event an import stores is encoded exactly as the event log
encodes that AgentEvent (`event_log.event_row`, from the seed-000 types)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from opencrab.event_log import event_row, row_json
from opencrab.events import parse_event
from opencrab.importers import claude, codex
from opencrab.importers.normalized import NORMALIZED_ADAPTER, NormalizedMessage
from opencrab.importers.store import Importer
from opencrab.server.api import imports as api
from opencrab.store import Database
from opencrab.store.repositories import events as events_repo
from opencrab.store.types import format_timestamp
from tests.fakes.corpora import CLAUDE_FILES, CODEX_FILES


@pytest.mark.parametrize("path", [*CODEX_FILES, *CLAUDE_FILES], ids=lambda p: p.name)
def test_every_parsed_line_is_a_normalized_message(path: Path) -> None:
    parse = codex.parse_file if path in CODEX_FILES else claude.parse_file
    messages = parse(path).messages
    assert messages
    typed = NORMALIZED_ADAPTER.validate_python(messages)
    # the type keeps every field a parser writes: nothing is dropped on the way out
    assert [m.model_dump(mode="json", exclude_unset=True) for m in typed] == messages


def test_the_api_documents_the_importers_type() -> None:
    route = next(r for r in api.router.routes if getattr(r, "name", "") == "list_import_messages")
    assert route.response_model == list[NormalizedMessage]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("source", "files"), [("codex", CODEX_FILES), ("claude", CLAUDE_FILES)])
def test_imported_events_are_encoded_as_the_event_log_encodes_them(
    db: Database, agent_id: str, source: str, files: list[Path]
) -> None:
    summary = Importer(db, source, agent_id=agent_id).run(files)
    checked = 0
    with db.read() as conn:
        # the column trace_rows does not read: a tool_result's call, as text
        rows = conn.execute(sa.text("SELECT id, tool_call_id FROM events"))
        call_of = dict(rows.all())
        for result in summary.files:
            for stored in events_repo.trace_rows(conn, result.session_id):
                event = parse_event(row_json(stored))  # a valid seed-000 AgentEvent
                again = event_row(
                    str(event.id),
                    str(event.trace_id),
                    None if event.parent_id is None else str(event.parent_id),
                    format_timestamp(event.timestamp),
                    event.content,
                    event.metadata,
                )
                assert again == (
                    stored.id,
                    stored.trace_id,
                    stored.parent_id,
                    stored.type,
                    stored.timestamp,
                    stored.content,
                    stored.metadata,
                    call_of[stored.id],
                )
                checked += 1
    assert checked == summary.as_json()["events"] > 0
