"""Actions (seed 001 "Action Crate"): what an agent can do, as tools the model can call.

An action is a small class with a name, a description, a JSON Schema for its arguments
and an async `execute`. The registry validates arguments against the schema before an
action runs; a call the model gets wrong (unknown name, arguments that are not JSON or
are nested more than MAX_ARGUMENT_DEPTH levels deep, a schema violation) comes back as an
error result the model sees, never as an exception.
`execute` runs on the event loop: blocking file or database work in it goes through
`await opencrab.offload.run_blocking(fn, ...)` (writes through `ctx.write` already join
the step's transaction, which the engine commits off the loop).

Example:
    class Echo(Action):
        name = "echo"
        description = "Say the text back."
        parameters = {
            "type": "object",
            "required": ["text"],
            "properties": {"text": {"type": "string"}},
            "additionalProperties": False,
        }

        async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
            return ActionResult.ok({"text": args["text"]})

    @hookimpl
    def register_actions(register):
        register(Echo())
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import jsonschema
from pydantic import BaseModel, Field

from opencrab.core.llm_config import agent_model, session_overrides
from opencrab.errors import OpenCrabError
from opencrab.llm.types import ToolDefinition

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from opencrab.config import Settings
    from opencrab.core.agent import Agent
    from opencrab.core.memory import MemoryManager
    from opencrab.core.skills import SkillManager
    from opencrab.core.workspace import Workspace
    from opencrab.llm.router import LlmRouter
    from opencrab.store import Database
    from opencrab.store.repositories.memory import SessionLog

log = logging.getLogger(__name__)

# arguments nested deeper than this are refused before anything walks them: no action's
# schema comes close, and the serialisers that record a call give up near 255 levels
MAX_ARGUMENT_DEPTH = 64


class SideEffect(BaseModel):
    """Something an action changed outside its result (seed `SideEffect`)."""

    type: Literal["message_sent", "skill_acquired", "file_written", "llm_switched", "done"]
    channel: str | None = None
    content: str | None = None
    skill_id: str | None = None
    path: str | None = None
    purpose: str | None = None
    model: str | None = None


class ActionResult(BaseModel):
    """The outcome of one action (seed `ActionResult`)."""

    success: bool
    data: Any = None
    error: str | None = None
    side_effects: list[SideEffect] = Field(default_factory=list)

    @classmethod
    def ok(cls, data: Any = None, *effects: SideEffect) -> ActionResult:
        return cls(success=True, data=data, side_effects=list(effects))

    @classmethod
    def fail(cls, message: str) -> ActionResult:
        return cls(success=False, error=message)

    def output(self) -> str:
        """The text the model sees as the tool result: the data, or the error."""
        if not self.success:
            return json.dumps({"error": self.error}, ensure_ascii=False)
        return json.dumps(self.data, ensure_ascii=False, default=str)


@dataclass
class TurnState:
    """What one engine turn accumulates; actions read and change it."""

    trace_id: str | None = None
    turn_number: int = 0
    speeches: list[str] = field(default_factory=list)  # send_speech / broadcast_guidance
    no_react: bool = False  # send_noreact was called
    done: bool = False  # declare_done was called
    inner_voice: list[str] = field(default_factory=list)
    last_metrics_id: str | None = None  # the turn's latest LLM call, for evaluate_response
    # select_llm with duration this_turn: purpose -> "provider/model"
    llm_overrides: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionContext:
    """Everything an action may use (seed `ActionContext`)."""

    agent: Agent
    db: Database
    settings: Settings
    workspace: Workspace
    memory: MemoryManager
    skills: SkillManager
    registry: ActionRegistry
    router: LlmRouter | None = None
    session_id: str | None = None
    turn: TurnState = field(default_factory=TurnState)
    # set by the engine while an action runs: writes that join the step's transaction
    pending: list[Callable[[Connection], Any]] | None = None
    # … and memory lines that join the step's own (one insert with them)
    pending_logs: list[SessionLog] | None = None

    @property
    def agent_id(self) -> str:
        return str(self.agent.id)

    def model_for(self, purpose: str) -> str:
        """The model the agent uses for `purpose` now ("" for the router's choice)."""
        session = session_overrides(self.db, self.session_id, self.agent_id)
        return agent_model(self.agent.llm_config, purpose, self.turn.llm_overrides, session)

    def write(self, change: Callable[[Connection], Any]) -> None:
        """Apply `change` in a write transaction: the step's own inside an engine turn
        (so it commits with the action's tool_result event), else a new one now."""
        if self.pending is not None:
            self.pending.append(change)
            return
        with self.db.write() as conn:
            change(conn)

    def log(self, line: SessionLog) -> None:
        """Store a memory session line: with the step's own lines inside an engine turn
        (one insert, the step's transaction), else as `write` would."""
        if self.pending_logs is not None:
            self.pending_logs.append(line)
            return
        self.write(lambda conn: self.memory.append_session_log(line, conn=conn))


class Action(ABC):
    """One thing an agent can do; see the module docstring for an example."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    ends_turn: ClassVar[bool] = False  # the engine stops after it (send_speech, …)
    # True when every effect is a `ctx.write` (it joins the step's transaction) and
    # nothing outside the store changes: the engine may then commit the model's call
    # together with its result, one transaction instead of two, and lose nothing on a
    # crash (before that commit the action has done nothing that lasts)
    store_only: ClassVar[bool] = False

    @abstractmethod
    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        """Run with arguments already validated against `parameters`."""

    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters
        )


class ActionCallError(Exception):
    """A tool call the registry refuses before running anything; `reason` is for the model."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class ActionRegistry:
    """Every registered action by name, with compiled argument validators."""

    def __init__(self, actions: Iterable[Action] = ()) -> None:
        self._actions: dict[str, Action] = {}
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self._definitions: dict[str, ToolDefinition] = {}  # built once; do not mutate
        for action in actions:
            self.register(action)

    def register(self, action: Action) -> None:
        """Add an action; its schema must itself be a valid JSON Schema."""
        validator_cls = jsonschema.validators.validator_for(action.parameters)
        validator_cls.check_schema(action.parameters)
        self._actions[action.name] = action
        self._validators[action.name] = validator_cls(action.parameters)
        self._definitions[action.name] = action.definition()

    def get(self, name: str) -> Action | None:
        return self._actions.get(name)

    def names(self) -> list[str]:
        return sorted(self._actions)

    def __contains__(self, name: object) -> bool:
        return name in self._actions

    def definitions(self, names: Iterable[str] | None = None) -> list[ToolDefinition]:
        """Tool definitions for `names` (every action when None), sorted by name."""
        wanted = self._actions.keys() if names is None else set(names) & self._actions.keys()
        return [self._definitions[name] for name in sorted(wanted)]

    def validate(self, name: str, arguments: Any, allowed: Iterable[str] | None = None) -> Action:
        """The action and checked arguments, or ActionCallError saying what is wrong.

        `arguments` may be a dict or the raw JSON text the model produced.
        """
        action = self._actions.get(name)
        permitted = set(self._actions) if allowed is None else set(allowed) & set(self._actions)
        if action is None or name not in permitted:
            offered = ", ".join(sorted(permitted))
            what = f"unknown action {name!r}" if action is None else f"you may not call {name!r}"
            raise ActionCallError(f"{what}; the actions you can call are: {offered}")
        errors = sorted(
            self._validators[name].iter_errors(arguments), key=lambda e: list(e.absolute_path)
        )
        if errors:
            raise ActionCallError(
                f"invalid arguments for {name}: " + "; ".join(_explain(e) for e in errors[:5])
            )
        return action

    async def dispatch(
        self,
        name: str,
        arguments: Any,
        ctx: ActionContext,
        *,
        allowed: Iterable[str] | None = None,
    ) -> ActionResult:
        """Validate and run one call; every failure becomes an error result."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return ActionResult.fail(f"arguments for {name} are not valid JSON: {exc}")
            except RecursionError:
                return ActionResult.fail(_too_deep(name))
        if nested_too_deep(arguments):
            return ActionResult.fail(_too_deep(name))
        try:
            action = self.validate(name, arguments, allowed)
        except ActionCallError as exc:
            return ActionResult.fail(exc.reason)
        try:
            return await action.execute(arguments, ctx)
        except OpenCrabError as exc:
            return ActionResult.fail(str(exc))
        except OSError as exc:  # its text would name a server path the model must not see
            log.exception("action %s failed", name)
            return ActionResult.fail(f"{name} failed: {exc.strerror or type(exc).__name__}")
        except Exception as exc:
            log.exception("action %s failed", name)
            return ActionResult.fail(f"{name} failed: {type(exc).__name__}: {exc}")


def nested_too_deep(value: Any, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """True when lists and objects in `value` nest more than `limit` levels deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list | tuple):
            continue
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)
    return False


def _too_deep(name: str) -> str:
    return (
        f"arguments for {name} are nested more than {MAX_ARGUMENT_DEPTH} levels deep; "
        "send a flat JSON object as the action's schema describes"
    )


def _explain(error: jsonschema.ValidationError) -> str:
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{where.lstrip('.') or 'arguments'}: {error.message}"


def default_registry() -> ActionRegistry:
    """A registry with every action registered through the `register_actions` hook."""
    from opencrab.plugins import plugin_manager

    registry = ActionRegistry()
    plugin_manager().hook.register_actions(register=registry.register)
    return registry
