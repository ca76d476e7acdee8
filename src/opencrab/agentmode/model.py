"""Seed 004's data model: an AgentSession with its Conversation, Task DAG, SubAgents and
WorktreeRefs, exactly as the seed's Rust structs serialise with serde.

Field names are the seed's (snake_case), enums serialise as their variant names
(`"Active"`, `"ClaudeCode"`, `"New"`, `"Hook"`), id newtypes (`SessionId(String)`) as
plain strings, `PathBuf` as a string, `DateTime<Utc>` as RFC 3339 with `Z`, every
`Option` as `null` when absent. The fields of AgentSession are declared in the order of
the seed's JSON example, so `dump_session` of the example reproduces its text.

These types describe shape only; the seed's rules (UUID v4 ids, `task-NNN`, `agent/`
branches, an acyclic DAG) are `opencrab.agentmode.validation`, the state machines
`opencrab.agentmode.states`, the files `opencrab.agentmode.files`.

Example:
    session = load_session_json(text)
    session.tasks[0].status is TaskStatus.COMPLETED
    dump_session(session)   # the file's text
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NewType

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, field_validator

SessionId = NewType("SessionId", str)
TaskId = NewType("TaskId", str)
SubAgentId = NewType("SubAgentId", str)


def _utc_text(value: datetime) -> str:
    """RFC 3339 in UTC with `Z`, as chrono's serde writes `DateTime<Utc>`."""
    text = value.astimezone(UTC).isoformat()
    return text.removesuffix("+00:00") + "Z"


Timestamp = Annotated[datetime, PlainSerializer(_utc_text, return_type=str)]
"""A `DateTime<Utc>`: aware, stored in UTC, written like `2026-01-22T10:30:00Z`."""

PathText = Annotated[Path, PlainSerializer(str, return_type=str)]


def utcnow() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*", mode="after")
    @classmethod
    def _aware(cls, value: Any) -> Any:
        """Timestamps without a zone are refused; others are converted to UTC."""
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError("a timestamp needs a time zone (seed 004: DateTime<Utc>)")
            return value.astimezone(UTC)
        return value


class SessionStatus(StrEnum):
    """セッション状態: the session's state."""

    ACTIVE = "Active"
    PAUSED = "Paused"
    COMPLETED = "Completed"
    FAILED = "Failed"


class MessageRole(StrEnum):
    """Who wrote a conversation message."""

    USER = "User"
    ASSISTANT = "Assistant"
    SYSTEM = "System"


class TaskStatus(StrEnum):
    """タスク状態: a task's state."""

    PENDING = "Pending"
    READY = "Ready"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class WorktreeStrategy(StrEnum):
    """New: a worktree of its own; Shared: its dependency's worktree, after it."""

    NEW = "New"
    SHARED = "Shared"


class SubAgentType(StrEnum):
    """The coding CLI a sub-agent runs."""

    CLAUDE_CODE = "ClaudeCode"
    CODEX = "Codex"
    GEMINI = "Gemini"
    OPEN_CODE = "OpenCode"
    OTHER = "Other"


class SubAgentStatus(StrEnum):
    """A sub-agent's state."""

    STARTING = "Starting"
    RUNNING = "Running"
    WAITING_INPUT = "WaitingInput"
    COMPLETED = "Completed"
    ERROR = "Error"


class CompletionSource(StrEnum):
    """How a sub-agent's completion was detected."""

    HOOK = "Hook"
    PROCESS_EXIT = "ProcessExit"
    OUTPUT_PATTERN = "OutputPattern"
    IDLE_TIMEOUT = "IdleTimeout"


class Message(_Record):
    """One message of the conversation between the user and the master agent."""

    role: MessageRole
    content: str
    timestamp: Timestamp


class Conversation(_Record):
    """The conversation, oldest message first."""

    messages: list[Message] = Field(default_factory=list)

    def add(self, role: MessageRole, content: str, at: datetime | None = None) -> Message:
        """Append a message (timestamped now unless `at`) and return it."""
        message = Message(role=role, content=content, timestamp=at or utcnow())
        self.messages.append(message)
        return message


class PullRequestRef(_Record):
    """A pull request a task opened."""

    number: int = Field(ge=0, le=2**64 - 1)
    url: str


class TaskResult(_Record):
    """What a finished task produced."""

    success: bool
    summary: str
    pull_request: PullRequestRef | None
    error: str | None


class WorktreeRef(_Record):
    """A git worktree: its `agent/` branch, its path and the tasks working in it."""

    branch_name: str
    path: PathText
    created_at: Timestamp
    task_ids: list[TaskId]


class SubAgent(_Record):
    """A coding CLI instance running a task in a tmux pane."""

    id: SubAgentId
    agent_type: SubAgentType
    pane_id: str
    pid: int = Field(ge=0, le=2**32 - 1)
    status: SubAgentStatus
    started_at: Timestamp
    completed_at: Timestamp | None
    completion_source: CompletionSource | None


class Task(_Record):
    """One task of the DAG."""

    id: TaskId
    name: str
    description: str
    status: TaskStatus
    dependencies: list[TaskId]
    worktree_strategy: WorktreeStrategy
    assigned_worktree: WorktreeRef | None
    sub_agent: SubAgent | None
    created_at: Timestamp
    started_at: Timestamp | None
    completed_at: Timestamp | None
    result: TaskResult | None


class AgentSession(_Record):
    """An agent-mode session: the conversation, the task DAG and its worktrees."""

    id: SessionId = Field(min_length=1)
    created_at: Timestamp
    updated_at: Timestamp
    status: SessionStatus
    repository_path: PathText
    conversation: Conversation
    tasks: list[Task]
    worktrees: list[WorktreeRef]
    # Not the seed's: the OpenCrab instance (`instance.instance_id`) whose session this is,
    # written last and only when set, so two instances sharing `~/.gwt/sessions` (and
    # other tools' files there) leave each other's sessions alone.
    opencrab_instance: str | None = None

    def task(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        return next((t for t in self.tasks if t.id == task_id), None)

    def request(self) -> str:
        """The user's request: the conversation's first User message ("" without one)."""
        first = next((m for m in self.conversation.messages if m.role is MessageRole.USER), None)
        return "" if first is None else first.content

    def task_counts(self) -> dict[TaskStatus, int]:
        """How many tasks are in each state (every state present, zero included)."""
        counts = dict.fromkeys(TaskStatus, 0)
        for task in self.tasks:
            counts[task.status] += 1
        return counts


def dump_session(session: AgentSession) -> str:
    """The session as the seed's JSON file text (2-space indent, UTF-8 characters kept),
    with the owning instance's mark last when it has one."""
    data = session.model_dump(mode="json")
    if data.get("opencrab_instance") is None:
        data.pop("opencrab_instance", None)
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def load_session_json(text: str | bytes) -> AgentSession:
    """Parse a session file's text (pydantic's ValidationError names any bad field)."""
    return AgentSession.model_validate_json(text)
