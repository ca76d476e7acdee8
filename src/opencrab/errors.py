"""The OpenCrab error tree: one shallow hierarchy, drawn here.

    OpenCrabError                 base of everything OpenCrab raises on purpose
    ├── ConfigError               invalid configuration: file, key and problem are named
    ├── StoreError                the database cannot be opened, migrated or written
    ├── ValidationError           input that breaks a documented rule
    │   └── EventValidationError  an AgentEvent batch that breaks a seed-000 rule
    └── NotFoundError             a referenced record does not exist

Errors a user can fix say what to do, naming the key, variable or record involved.
CLI commands map them to exit codes (ConfigError → 2, others → 1) and the server
maps them to the `{"error", "message"}` JSON shape.
"""

from __future__ import annotations

from collections.abc import Sequence


class OpenCrabError(Exception):
    """Base class for errors OpenCrab raises deliberately."""

    code = "opencrab_error"


class ConfigError(OpenCrabError):
    """The configuration is invalid; the message names the source, key and problem."""

    code = "config_error"

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.source = source
        self.key = key
        parts = [p for p in (source, key) if p]
        super().__init__(": ".join([*parts, message]))


class StoreError(OpenCrabError):
    """The database could not be opened, migrated or written."""

    code = "store_error"


class ValidationError(OpenCrabError):
    """Input that breaks a documented rule."""

    code = "validation_error"


class EventValidationError(ValidationError):
    """An AgentEvent batch broke a rule; nothing of the batch was written.

    `problems` lists every offending event as (index in batch, event id or None, reason).
    """

    code = "invalid_event"

    def __init__(self, problems: Sequence[tuple[int, str | None, str]]):
        self.problems = list(problems)
        shown = [_describe(i, eid, why) for i, eid, why in problems[:20]]
        more = len(problems) - len(shown)
        if more > 0:
            shown.append(f"... and {more} more")
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"{len(problems)} {noun}, nothing written: " + "; ".join(shown))


def _describe(index: int, event_id: str | None, reason: str) -> str:
    where = f"event #{index + 1}" + (f" ({event_id})" if event_id else "")
    return f"{where}: {reason}"


class NotFoundError(OpenCrabError):
    """A referenced record does not exist."""

    code = "not_found"
