"""The importer test corpora in tests/fixtures (six real, redacted Codex rollouts and a
hand-made Claude Code session), what tests expect of them, and hand-made rollout lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

CODEX_CORPUS = FIXTURES / "codex"
"""Six real, redacted Codex rollouts (where they come from: its SOURCE.md), kept in the
repository so a clone alone runs the tests."""
CODEX_FILES = sorted(CODEX_CORPUS.rglob("rollout-*.jsonl"))
"""The corpus's six rollouts, in path order."""

CLAUDE_CORPUS = FIXTURES / "claude"
"""A Claude Code projects folder holding one hand-made session (tests/importers/test_claude)."""
CLAUDE_FILE = CLAUDE_CORPUS / "-home-dev-crab" / "4f35e220-c435-4cf7-b9b9-f40426042847.jsonl"
CLAUDE_FILES = sorted(CLAUDE_CORPUS.rglob("*.jsonl"))


def last_total(path: Path) -> int:
    """A rollout's last cumulative token total, read from its raw lines (not the parser)."""
    total = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        payload = json.loads(line)["payload"]
        if payload.get("type") == "token_count" and payload.get("info"):
            total = payload["info"]["total_token_usage"]["total_tokens"]
    return total


def jsonl_lines(*events: Any, end: bytes = b"\n") -> list[bytes]:
    """Events (dicts, or bytes kept as they are) as the lines of a file; the last ends
    with `end`."""
    raw = [e if isinstance(e, bytes) else json.dumps(e).encode() for e in events]
    return [line + b"\n" for line in raw[:-1]] + [raw[-1] + end]


def response_item(payload: dict[str, Any], ts: str = "2026-02-23T10:00:00.000Z") -> dict[str, Any]:
    """A rollout's `response_item` line holding `payload`."""
    return {"timestamp": ts, "type": "response_item", "payload": payload}
