"""Sub-agent signals: the hook / notify command that records them, and their reader.

A coding CLI's hooks (Claude Code `Stop`, `Notification`, `SessionEnd`; Gemini CLI's
hooks), Codex's `notify` and the plugin agent mode writes for OpenCode run this file as a
command:

    python -I /…/opencrab/agentmode/signals.py --dir DIR --source claude [EVENT]

It reads the hook's JSON from stdin (Claude Code, Gemini CLI, OpenCode) or from its last argument
(Codex passes one JSON argument) and appends one JSON line to `DIR/signals.jsonl` with a
single `O_APPEND` write, so lines from concurrent hooks never interleave. The file imports
only the standard library and is run by path, so a hook costs one small interpreter start
and needs neither OpenCrab's import path nor its settings.

`read_signals(DIR, offset)` returns the lines written after `offset` (a line still being
written is left for the next read).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SIGNALS_FILE = "signals.jsonl"
MAX_PAYLOAD = 64 * 1024  # bytes of hook input kept; a longer input is cut, never dropped


@dataclass(frozen=True)
class Signal:
    """One recorded hook or notify call."""

    source: str  # "claude", "codex", "gemini", …
    event: str  # hook_event_name / notify type, e.g. "Stop", "agent-turn-complete"
    at: float  # unix time it was recorded
    payload: dict[str, Any] = field(default_factory=dict)


def signals_path(directory: str | os.PathLike[str]) -> Path:
    """The signals file of one sub-agent's signal directory."""
    return Path(directory) / SIGNALS_FILE


def record(directory: str | os.PathLike[str], source: str, raw: str, event: str = "") -> Signal:
    """Append one signal built from a hook's raw JSON input (atomic O_APPEND write)."""
    payload = _payload(raw)
    name = event or str(
        payload.get("hook_event_name") or payload.get("type") or payload.get("event") or ""
    )
    signal = Signal(source=source, event=name, at=time.time(), payload=payload)
    line = json.dumps(
        {"source": signal.source, "event": signal.event, "at": signal.at, "payload": payload},
        ensure_ascii=False,
    )
    path = signals_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    return signal


def read_signals(directory: str | os.PathLike[str], offset: int = 0) -> tuple[list[Signal], int]:
    """Signals appended after byte `offset`, and the offset to read from next time."""
    path = signals_path(directory)
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
    signals: list[Signal] = []
    for raw in data[:end].splitlines():
        try:
            row = json.loads(raw)
        except ValueError:
            continue  # never written by record(); not ours to trust
        if isinstance(row, dict):
            payload = row.get("payload")
            signals.append(
                Signal(
                    source=str(row.get("source", "")),
                    event=str(row.get("event", "")),
                    at=float(row.get("at", 0.0)),
                    payload=payload if isinstance(payload, dict) else {},
                )
            )
    return signals, offset + end


def _payload(raw: str) -> dict[str, Any]:
    text = raw.strip()
    if len(text.encode()) > MAX_PAYLOAD:
        return {"raw": text.encode()[:MAX_PAYLOAD].decode(errors="replace"), "truncated": True}
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"value": value}


def main(argv: list[str] | None = None) -> int:
    """The hook / notify command: record one signal, print nothing, exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="the sub-agent's signal directory")
    parser.add_argument("--source", required=True, help="which CLI calls (claude, codex, …)")
    parser.add_argument("--event", default="", help="the event name when the input has none")
    parser.add_argument("json", nargs="?", help="the JSON payload (Codex notify); else stdin")
    args = parser.parse_args(argv)
    raw = args.json if args.json is not None else sys.stdin.read()
    record(args.dir, args.source, raw, args.event)
    return 0


if __name__ == "__main__":
    sys.exit(main())
