"""Tool calls that wait for a person (issue 20 "Approvals"): the policy and the held call.

Each agent has an approval policy per tool in its tool settings
(opencrab.actions.tool_settings, `PUT /api/agents/{id}/tool-settings` with
`{"approvals": {"write_file": "unsafe"}}`): `never` (every tool's default), `always`, or
`unsafe` — only calls that may change something outside the store (`unsafe_call`), and
every call of a tool source's tool (an MCP server's, core/tool_sources.py: what it
changes is not known here) unless the tool declares itself read-only (`Action.read_only`,
an MCP tool annotated readOnlyHint and not destructive).

In a turn, a valid call its policy holds back is not run (SkillEngine's one hook,
`hold_calls`): in one transaction the call is stored as a `pending` approval
(store/repositories/approvals.py), the reply's later calls get an error result, and the
approval hooks are told (`held`: a ticket's session suspends, opencrab.tickets.approvals).
The turn ends with `stopped_by` "approval" and the approval's id in its TurnResult. A
person then approves or denies it (core/approval_decisions.py); until then the call has
no result and the model's history says it waits (core/context.py).

Layers above core join through the `register_approval_hooks` plugin hook:

    @hookimpl
    def register_approval_hooks(register):
        register(MyHook())   # .held(conn, record) and .decided(conn, record)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID, uuid4

from sqlalchemy.engine import Connection

from opencrab.actions.base import ActionCallError, ActionRegistry, ActionResult
from opencrab.actions.tool_settings import ApprovalPolicy, load_tool_settings
from opencrab.core.steps import ActionDone, EngineStep, LlmReplied, TurnResult
from opencrab.llm.types import ToolCall
from opencrab.store import Database
from opencrab.store.repositories import approvals as repo
from opencrab.store.repositories.approvals import ApprovalRecord
from opencrab.store.types import utcnow

if TYPE_CHECKING:
    from opencrab.core.agent import Agent
    from opencrab.core.recorder import TurnRecorder

UNSAFE_TOOLS = frozenset({"execute_command", "write_file"})
"""Tools whose every call may change something outside the store (http_request: non-GET)."""

STOPPED_BY = "approval"
"""TurnResult.stopped_by of a turn that ended on a held call."""


def unsafe_call(name: str, arguments: Any) -> bool:
    """True when the call may change something outside the store: execute_command,
    write_file, and http_request with a method other than GET."""
    if name in UNSAFE_TOOLS:
        return True
    if name == "http_request":
        method = arguments.get("method", "GET") if isinstance(arguments, dict) else "GET"
        return not isinstance(method, str) or method.strip().upper() != "GET"
    return False


class ApprovalHook(Protocol):
    """Told, inside the writing transaction, when a call is held and when it is decided."""

    def held(self, conn: Connection, record: ApprovalRecord) -> None: ...

    def decided(self, conn: Connection, record: ApprovalRecord) -> None: ...


@cache
def approval_hooks() -> tuple[ApprovalHook, ...]:
    """The hooks registered through the `register_approval_hooks` plugin hook."""
    from opencrab.plugins import plugin_manager

    hooks: list[ApprovalHook] = []
    plugin_manager().hook.register_approval_hooks(register=hooks.append)
    return tuple(hooks)


@dataclass(frozen=True)
class ApprovalGate:
    """One turn's approval policies: which of its calls wait for a person."""

    policies: dict[str, ApprovalPolicy]
    registry: ActionRegistry
    allowed: set[str]

    @classmethod
    def load(
        cls, db: Database, agent_id: str, registry: ActionRegistry, allowed: set[str]
    ) -> ApprovalGate:
        """The agent's policies as stored now (read once per turn)."""
        settings = load_tool_settings(db, agent_id)
        return cls({k: v for k, v in settings.approvals.items() if v != "never"}, registry, allowed)

    def needs(self, name: str, arguments: Any) -> bool:
        """True when this call must wait for a person: its policy says so and it is a
        valid call the agent may make (an invalid one runs, and fails, as usual)."""
        policy = self.policies.get(name, "never")
        unsafe = unsafe_call(name, arguments) or self._unknown_effects(name)
        if policy == "never" or (policy == "unsafe" and not unsafe):
            return False
        try:
            self.registry.validate(name, arguments, self.allowed)
        except ActionCallError:
            return False
        return True

    def _unknown_effects(self, name: str) -> bool:
        """A tool source's tool that does not declare itself read-only."""
        if self.registry.source_of(name) is None:
            return False
        action = self.registry.get(name)
        return action is None or not action.read_only


class HeldTurn(Protocol):
    """What `hold_calls` needs of the engine's turn."""

    agent: Agent
    session_id: str
    trace_id: str
    recorder: TurnRecorder
    result: TurnResult


async def hold_calls(
    turn: HeldTurn, calls: Sequence[tuple[ToolCall, UUID]], waiting: LlmReplied | None
) -> list[EngineStep]:
    """Hold the first of `calls` for a person and answer the others with an error, in
    one step; the turn's remaining steps (ending with its TurnResult) are returned."""
    (call, call_event_id), rest = calls[0], calls[1:]
    record = ApprovalRecord(
        id=str(uuid4()),
        session_id=turn.session_id,
        agent_id=turn.agent.id,
        trace_id=turn.trace_id,
        tool_name=call.name,
        arguments=call.arguments,
        call_id=call.id,
        call_event_id=str(call_event_id),
        status="pending",
        created_at=utcnow(),
        decided_at=None,
        decided_by=None,
        reason=None,
        result_event_id=None,
    )
    refusal = ActionResult.fail(
        f"not run: {call.name} waits for a person's approval, so the turn ends here; "
        "make this call again once that is decided"
    )
    recorder = turn.recorder
    note = recorder.log(
        "system",
        f"{call.name} waits for a person's approval (approval {record.id})",
        None,
        metadata={"approval": record.id, "action": call.name},
    )

    def store(conn: Connection) -> None:
        repo.insert(conn, record)
        for hook in approval_hooks():
            hook.held(conn, record)

    # the held call waits for a person: nothing is left to interrupt
    events = await recorder.refused(rest, refusal.output(), note, extra=store)
    steps: list[EngineStep] = [] if waiting is None else [waiting]
    for (other, other_event), event_id in zip(rest, events, strict=True):
        done = ActionDone(other.name, other.arguments, refusal, str(other_event), str(event_id))
        turn.result.actions.append(done)
        steps.append(done)
    turn.result.stopped_by = STOPPED_BY
    turn.result.approval_id = record.id
    steps.append(turn.result)
    return steps


def pending_for(db: Database, session_ids: Iterable[str]) -> dict[str, list[ApprovalRecord]]:
    """The pending approvals of these sessions, oldest first, by session id."""
    found: dict[str, list[ApprovalRecord]] = {}
    with db.read() as conn:
        for session_id in session_ids:
            rows = repo.list_approvals(conn, session_id=session_id, status="pending")
            if rows:
                found[session_id] = rows
    return found
