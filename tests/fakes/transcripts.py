"""Transcript files for import tests: a real Codex rollout from tests/fixtures, copied,
and a Japanese variant of it (the same lines, some texts and one tool call rewritten)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from opencrab.store import Database
from opencrab.store.tables import model_pricing
from opencrab.store.types import utcnow
from tests.fakes.corpora import CODEX_CORPUS

ROLLOUT = (
    CODEX_CORPUS
    / "localpush-2026-02-23"
    / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
)
"""A real Codex rollout (63 lines: tool calls with outputs, encrypted reasoning)."""

JA_USER = "東京の天気を調べて、結果を日本語でまとめてください。"
JA_ASSISTANT = "了解しました。天気予報を取得してから要約します。"
JA_ARGUMENTS = {"cmd": ["curl", "-s", "https://weather.example/東京"], "workdir": "/srv/天気"}
JA_OUTPUT = {"city": "東京", "forecast": "晴れのち曇り", "high_c": 21}


@dataclass(frozen=True)
class JapaneseRollout:
    """What the Japanese variant holds, to look for after importing it."""

    path: Path
    user_line: int  # 1-based
    call_name: str
    first_encrypted_sha256: str


def copy_rollout(folder: Path) -> Path:
    """A copy of the real rollout in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / ROLLOUT.name
    target.write_bytes(ROLLOUT.read_bytes())
    return target


def japanese_rollout(folder: Path) -> JapaneseRollout:
    """The real rollout with its last short user message, its first assistant message,
    its first tool call's arguments and that call's output in Japanese (as JSON)."""
    lines = [json.loads(line) for line in ROLLOUT.read_text().splitlines() if line.strip()]
    users = [
        i
        for i, e in enumerate(lines)
        if e.get("type") == "response_item"
        and e["payload"].get("type") == "message"
        and e["payload"].get("role") == "user"
    ]
    user = users[-1]
    lines[user]["payload"]["content"][0]["text"] = JA_USER
    assistant = next(
        i
        for i, e in enumerate(lines)
        if e.get("type") == "response_item" and e["payload"].get("role") == "assistant"
    )
    lines[assistant]["payload"]["content"][0]["text"] = JA_ASSISTANT
    call = next(
        e["payload"]
        for e in lines
        if e.get("type") == "response_item" and e["payload"].get("type") == "function_call"
    )
    call["arguments"] = json.dumps(JA_ARGUMENTS, ensure_ascii=False)
    output = next(
        e["payload"]
        for e in lines
        if e.get("type") == "response_item"
        and e["payload"].get("type") == "function_call_output"
        and e["payload"].get("call_id") == call["call_id"]
    )
    output["output"] = json.dumps(JA_OUTPUT, ensure_ascii=False)
    encrypted = next(
        e["payload"]["encrypted_content"]
        for e in lines
        if e.get("type") == "response_item" and e["payload"].get("encrypted_content")
    )
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / ROLLOUT.name
    target.write_text(
        "".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in lines)
    )
    return JapaneseRollout(
        target, user + 1, str(call["name"]), hashlib.sha256(encrypted.encode()).hexdigest()
    )


def price_corpus_model(db: Database) -> None:
    """Price the corpus's model (gpt-5.3-codex, which the default table lacks) like
    gpt-5.2, so imported calls cost something."""
    with db.write() as conn:
        conn.execute(
            model_pricing.insert().values(
                provider="openai",
                model="gpt-5.3-codex",
                input_price_per_1m=1.75,
                output_price_per_1m=14.0,
                cache_read_price_per_1m=0.175,
                updated_at=utcnow(),
            )
        )


WRITTEN_USER = (
    "run `make && make test` if x < y > z & \"q\" 'a' *b* _c_ # [l](u) {j} \\ "
    "<script>window.pwned = 1</script> Vec<String> done"
)
"""What a person typed, with what HTML, Markdown and JSON treat specially (a script too)."""
WRITTEN_ASSISTANT = 'Use <strong>bold</strong> & x<y; **md** {"k": [1]}'
"""A reply holding an allow-listed tag (shown bold) among text to show as written."""
WRITTEN_ASSISTANT_SEEN = 'Use bold & x<y; **md** {"k": [1]}'


def written_rollout(folder: Path) -> Path:
    """A three-line Codex rollout: its session header, WRITTEN_USER and WRITTEN_ASSISTANT."""

    def item(at: str, role: str, kind: str, text: str) -> dict[str, object]:
        payload = {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}
        return {"timestamp": at, "type": "response_item", "payload": payload}

    session = "019c8bfe-ec25-79e0-97d7-bda6a9c57500"
    lines = [
        {
            "timestamp": "2026-02-24T09:00:00.000Z",
            "type": "session_meta",
            "payload": {
                "id": session,
                "timestamp": "2026-02-24T09:00:00.000Z",
                "cwd": "/home/crab/project",
                "originator": "codex_cli_rs",
                "cli_version": "0.104.0",
                "model_provider": "openai",
            },
        },
        item("2026-02-24T09:00:01.000Z", "user", "input_text", WRITTEN_USER),
        item("2026-02-24T09:00:02.000Z", "assistant", "output_text", WRITTEN_ASSISTANT),
    ]
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"rollout-2026-02-24T09-00-00-{session}.jsonl"
    target.write_text("".join(json.dumps(e) + "\n" for e in lines))
    return target
