"""The rows a session's events make (dashboard/event_rows.py; live.js follows the same rules)."""

from __future__ import annotations

from typing import Any

from opencrab.dashboard.event_rows import build_rows

ANN = "a1111111-0000-4000-8000-000000000000"
SPEAKERS = {ANN: ("アン", "ja")}


def event(n: int, type_: str, content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": f"e{n}",
        "trace_id": "t",
        "parent_id": extra.pop("parent", None),
        "timestamp": "2026-12-08T10:00:00Z",
        "type": type_,
        "content": content,
        **({"metadata": extra["metadata"]} if "metadata" in extra else {}),
    }


def test_results_and_usage_join_their_rows_and_count_in_the_totals() -> None:
    rows = build_rows(
        [
            (1, ANN, event(1, "tool_call", {"name": "ws_read", "arguments": {"path": "a.md"}})),
            (
                2,
                ANN,
                event(
                    2,
                    "token_usage",
                    {"input_tokens": 1000, "output_tokens": 20, "total_tokens": 1020},
                    parent="e1",
                    metadata={"cost_usd": 0.0125, "model": "m"},
                ),
            ),
            (
                3,
                ANN,
                event(3, "tool_result", {"output": "boom", "tool_call_id": "e1", "is_error": True}),
            ),
            (
                4,
                ANN,
                event(
                    4,
                    "tool_result",
                    {"output": "late", "tool_call_id": "gone"},
                    metadata={"name": "ws_list"},
                ),
            ),
        ],
        SPEAKERS,
        "en",
    )
    call, orphan = rows.rows
    assert (call.kind, call.name, call.arguments, call.result, call.state) == (
        "action",
        "ws_read",
        '{\n  "path": "a.md"\n}',
        "boom",
        "failed",
    )
    assert call.usage is not None
    assert call.usage.describe() == "1,000 in · 20 out tokens · $0.0125 · m"
    assert (orphan.kind, orphan.name, orphan.result, orphan.state) == (
        "action",
        "ws_list",
        "late",
        "ok",
    )
    assert (rows.totals.input_tokens, rows.totals.output_tokens, rows.totals.cost_usd) == (
        1000,
        20,
        0.0125,
    )


def test_each_kind_of_row_has_its_label_speaker_and_language() -> None:
    rows = build_rows(
        [
            (1, ANN, event(1, "user", {"text": "prompt"}, metadata={"source": "internal"})),
            (
                2,
                None,
                event(
                    2,
                    "user",
                    {"text": "費用も"},
                    metadata={"source": "discussion", "sender_name": "Mentor"},
                ),
            ),
            (
                3,
                ANN,
                event(3, "user", {"text": "hi"}, metadata={"source": "rest", "sender": "kai"}),
            ),
            (4, ANN, event(4, "reasoning", {"text": "うーん"})),
            (
                5,
                ANN,
                event(
                    5,
                    "tool_call",
                    {"name": "generate_inner_voice", "arguments": {"content": "静かに"}},
                ),
            ),
            (
                6,
                ANN,
                event(6, "message", {"text": "皆さん"}, metadata={"via": "broadcast_guidance"}),
            ),
            (7, ANN, event(7, "message", {"text": "途中"}, metadata={"interrupted": True})),
            (
                8,
                ANN,
                event(
                    8,
                    "message",
                    {"text": "empty reply"},
                    metadata={"kind": "error", "error": "empty_reply"},
                ),
            ),
            (9, "b2222222-0000-4000-8000-000000000000", event(9, "message", {"text": "?"})),
        ],
        SPEAKERS,
        "en",
    )
    seen = [(r.kind, r.label, r.who, r.lang, r.text, r.interrupted) for r in rows.rows]
    assert seen == [
        ("prompt", "Prompt to", "アン", "ja", "prompt", False),
        ("mentor", "Mentor", "Mentor", "en", "費用も", False),
        ("user", "User", "kai", "ja", "hi", False),
        ("inner", "Inner voice", "アン", "ja", "うーん", False),
        ("inner", "Inner voice", "アン", "ja", "静かに", False),
        ("speech", "Guidance", "アン", "ja", "皆さん", False),
        ("speech", "Speech", "アン", "ja", "途中", True),
        ("error", "Error", "アン", "ja", "empty reply", False),
        ("speech", "Speech", "b2222222", "en", "?", False),  # an agent deleted since
    ]
