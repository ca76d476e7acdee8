"""What an import did: per file (`FileResult`) and in all (`ImportSummary`), as
`opencrab import … --json` prints it, with the token counts it read (`Tokens`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opencrab.importers.common import Problem


@dataclass
class Tokens:
    """Token counts an import read, summed over its model calls."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0

    def add(self, other: Any) -> None:
        self.input_tokens += other.input_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.output_tokens += other.output_tokens
        self.reasoning_output_tokens += other.reasoning_output_tokens
        self.total_tokens += other.total_tokens

    def as_json(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class FileResult:
    """What importing one file did. status: new, appended, unchanged, changed."""

    path: str
    session_id: str
    status: str
    lines: int = 0  # new lines read
    messages: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    calls: int = 0
    tokens: Tokens = field(default_factory=Tokens)
    cost_usd: float = 0.0
    events: int = 0
    unpriced: set[str] = field(default_factory=set)


@dataclass
class ImportSummary:
    """The whole import, as `opencrab import … --json` prints it."""

    source: str
    agent_id: str | None
    files: list[FileResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # paths that could not be read

    def as_json(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        tokens = Tokens()
        problems = [p.as_json() for p in self.problems]
        status: dict[str, int] = {}
        for f in self.files:
            for k, v in f.kinds.items():
                kinds[k] = kinds.get(k, 0) + v
            tokens.add(f.tokens)
            problems += [p.as_json() for p in f.problems]
            status[f.status] = status.get(f.status, 0) + 1
        return {
            "source": self.source,
            "agent_id": self.agent_id,
            "files": len(self.files),
            "files_by_status": status,
            "lines": sum(f.lines for f in self.files),
            "messages": sum(f.messages for f in self.files),
            "messages_by_source_type": dict(sorted(kinds.items())),
            "events": sum(f.events for f in self.files),
            "calls": sum(f.calls for f in self.files),
            "tokens": tokens.as_json(),
            "cost_usd": round(sum(f.cost_usd for f in self.files), 8),
            "models_without_price": sorted({m for f in self.files for m in f.unpriced}),
            "problems": problems,
            "sessions": [
                {
                    "id": f.session_id,
                    "file": f.path,
                    "status": f.status,
                    "lines": f.lines,
                    "messages": f.messages,
                }
                for f in self.files
            ],
        }
