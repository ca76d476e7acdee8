"""Actions (seed 001 "Action Crate"): what an agent can do, as tools the model can call.

An action is a small class with a name, a description, a JSON Schema for its arguments
and an async `execute`. The registry validates arguments against the schema before an
action runs; a call the model gets wrong (unknown name, arguments that are not JSON or
are nested more than MAX_ARGUMENT_DEPTH levels deep, a schema violation) comes back as an
error result the model sees, never as an exception.
`execute` runs on the event loop: blocking file or database work in it goes through
`await opencrab.offload.run_blocking(fn, ...)` (writes through `ctx.write` already join
the step's transaction, which the engine commits off the loop).
Actions that come and go while the server runs (an MCP server's) come from a tool source
(ToolSource, below), which the registry joins with the static ones.

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
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import jsonschema
from pydantic import BaseModel, Field

from opencrab.actions.argcheck import QuickCheck, quick_check
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

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A tool name every provider takes (OpenAI's, Anthropic's and Gemini's rules in common)."""


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
    # images (data: URLs) shown to the model beside the output where its provider takes
    # images in a tool result (Anthropic's tool_result); never recorded or sent elsewhere
    images: list[str] = Field(default_factory=list, exclude=True, repr=False)
    # facts about the call recorded on its tool_result event's metadata beside the
    # output (a remote agent's latency_ms and cost_usd); never shown to the model
    metadata: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)

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
    # the event loop's time the turn must end by ([agent] turn_timeout_secs; set by the
    # engine): an action that waits on something outside (a remote agent) stops there
    deadline: float | None = None


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
    # a tool source's action that declares it changes nothing (an MCP tool annotated
    # readOnlyHint and not destructiveHint): the `unsafe` approval policy lets it run;
    # every other source action is held under `unsafe` (core/approvals.py)
    read_only: bool = False

    @abstractmethod
    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        """Run with arguments already validated against `parameters`."""

    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters
        )


NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,47}")
"""What a namespace may be: letters, digits, `_` and `-` (it prefixes every tool name)."""

SEPARATOR = "__"
"""Between a source's namespace and its tool's own name: `mcp__files__read`."""

Listener = Callable[["ToolSource"], Awaitable[None]]


class StillTrying(Exception):
    """Raised by a ToolSource's `start` whose first connection failed while the source
    keeps trying in the background (with backoff): it is named among the sources that
    did not start and in the notices, yet counts as started, so `stop` ends its tries
    (core/tool_sources.py); once connected it offers its tools as usual."""


class ToolSource(ABC):
    """Actions from something that starts, stops and may change its list while it runs.

    An MCP server, a remote A2A agent: a tool source is started before the action
    registry is used and stopped when the process stops (core/tool_sources.py does both,
    for every role). Its actions reach the model as `<namespace>__<tool>` (an MCP
    server's as `mcp__<server>__<tool>`), and its list may change while it runs: the
    source announces a change with `await self.offer(actions)`, which bumps its
    `version` and tells the registry, which offers the new list from then on. Grants
    (agent_tools), approval policies and permissions apply to a source's tools exactly
    as to the built-in actions. A source whose `start` raises is logged and offers
    nothing; the server runs on. `start` that fails must release what it took itself
    (`stop` is not called then), unless it raises StillTrying (it keeps trying, and
    `stop` ends that).

    Example:
        class Clock(ToolSource):
            async def start(self) -> None:
                await self.offer([Now()])  # an Action named "now": the model sees clock__now

            async def stop(self) -> None:
                await self.offer([])

        @hookimpl
        def register_tool_sources(register, settings):
            register(Clock("clock"))
    """

    def __init__(self, namespace: str) -> None:
        if not NAMESPACE.fullmatch(namespace):
            raise ValueError(
                f"tool source namespace {namespace!r}: use 1 to 48 letters, digits, "
                "'_' or '-', starting with a letter or digit"
            )
        self.namespace = namespace
        self.version = 0  # bumped by every `offer`
        self._actions: tuple[Action, ...] = ()
        self._listeners: list[Listener] = []

    @abstractmethod
    async def start(self) -> None:
        """Connect or launch, then `await self.offer(actions)` with the first list."""

    @abstractmethod
    async def stop(self) -> None:
        """Disconnect and release what `start` took."""

    def actions(self) -> tuple[Action, ...]:
        """What the source offers now, by each action's own name (without the namespace)."""
        return self._actions

    def full_name(self, name: str) -> str:
        """The name the model sees for this source's action `name`."""
        return f"{self.namespace}{SEPARATOR}{name}"

    def owns(self, full_name: str) -> bool:
        """Whether `full_name` is in this source's namespace (offered now or not)."""
        return full_name.startswith(self.namespace + SEPARATOR)

    async def offer(self, actions: Iterable[Action]) -> None:
        """Replace what the source offers and tell every listener (the registry, the
        `tools` table); a listener that fails is logged, the others are still told."""
        self._actions = tuple(actions)
        self.version += 1
        for listener in list(self._listeners):
            try:
                await listener(self)
            except Exception:
                log.exception("tool source %s: a listener of its change failed", self.namespace)

    def subscribe(self, listener: Listener) -> None:
        """Call `listener(source)` after every `offer`."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        """Stop calling `listener`."""
        if listener in self._listeners:
            self._listeners.remove(listener)


class ActionCallError(Exception):
    """A tool call the registry refuses before running anything; `reason` is for the model."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class ActionRegistry:
    """Every callable action by name, with compiled argument validators.

    The union of the static actions (`register`, the `register_actions` hook) and what
    each attached tool source offers now (`attach`; ToolSource), under
    `<namespace>__<tool>`. A source's change replaces its part at once: a name it no
    longer offers is refused like an unknown one, saying so.
    """

    def __init__(self, actions: Iterable[Action] = ()) -> None:
        self._static: dict[str, _Entry] = {}
        self._sources: dict[str, ToolSource] = {}
        self._offered: dict[str, dict[str, _Entry]] = {}  # namespace -> full name -> entry
        # the union, replaced whole on every change and never changed in place, so a
        # reader (on the loop or in a thread) always sees one consistent set
        self._entries: dict[str, _Entry] = {}
        self.version = 0  # bumped by every change of the union
        for action in actions:
            self.register(action)

    def register(self, action: Action) -> None:
        """Add an action; its schema must itself be a valid JSON Schema."""
        definition = action.definition()
        self._static[definition.name] = _entry(action, definition)
        self._merge()

    def attach(self, source: ToolSource) -> None:
        """Offer what `source` offers, now and after each of its changes (ValueError when
        its namespace is taken, or one of the two would own the other's names)."""
        for other in self._sources.values():
            if other.owns(source.namespace + SEPARATOR) or source.owns(other.namespace + SEPARATOR):
                raise ValueError(
                    f"tool source namespace {source.namespace!r} clashes with "
                    f"{other.namespace!r}, already attached"
                )
        self._sources[source.namespace] = source
        source.subscribe(self._changed)
        self._take(source)

    def detach(self, source: ToolSource) -> None:
        """Offer nothing of `source` any more."""
        source.unsubscribe(self._changed)
        self._sources.pop(source.namespace, None)
        self._offered.pop(source.namespace, None)
        self._merge()

    def sources(self) -> list[ToolSource]:
        """The attached tool sources, in the order they were attached."""
        return list(self._sources.values())

    def source_of(self, name: str) -> ToolSource | None:
        """The attached source whose namespace `name` is in (offered now or not)."""
        return next((s for s in self._sources.values() if s.owns(name)), None)

    async def _changed(self, source: ToolSource) -> None:
        self._take(source)

    def _take(self, source: ToolSource) -> None:
        """Replace `source`'s part by what it offers now; a tool the model could not be
        offered (bad name, a built-in's name, a schema that is no JSON Schema) is logged
        and left out, the others are offered."""
        offered: dict[str, _Entry] = {}
        for action in source.actions():
            own = action.definition()
            name = source.full_name(own.name)
            problem = None
            if not TOOL_NAME.fullmatch(name):
                problem = f"{name!r} is not 1 to 64 letters, digits, '_' or '-'"
            elif name in self._static or name in offered:
                problem = f"{name!r} is taken"
            else:
                definition = ToolDefinition(
                    name=name, description=own.description, parameters=own.parameters
                )
                try:
                    offered[name] = _entry(action, definition)
                except jsonschema.SchemaError as exc:
                    problem = f"its parameters are no JSON Schema: {exc.message}"
            if problem is not None:
                log.warning(
                    "tool source %s: tool %r left out: %s", source.namespace, own.name, problem
                )
        self._offered[source.namespace] = offered
        self._merge()

    def _merge(self) -> None:
        merged: dict[str, _Entry] = {}
        for part in self._offered.values():
            merged.update(part)
        merged.update(self._static)
        self._entries = merged
        self.version += 1

    def get(self, name: str) -> Action | None:
        entry = self._entries.get(name)
        return None if entry is None else entry.action

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def definitions(self, names: Iterable[str] | None = None) -> list[ToolDefinition]:
        """Tool definitions for `names` (every action when None), sorted by name."""
        entries = self._entries
        wanted = entries.keys() if names is None else set(names) & entries.keys()
        return [entries[name].definition for name in sorted(wanted)]

    def validate(self, name: str, arguments: Any, allowed: Iterable[str] | None = None) -> Action:
        """The action and checked arguments, or ActionCallError saying what is wrong.

        `arguments` may be a dict or the raw JSON text the model produced.
        """
        entries = self._entries  # one consistent set for the whole check
        entry = entries.get(name)
        if allowed is not None and not isinstance(allowed, Collection):
            allowed = set(allowed)  # asked twice below
        if entry is None or (allowed is not None and name not in allowed):
            permitted = set(entries) if allowed is None else set(allowed) & entries.keys()
            offered = ", ".join(sorted(permitted))
            raise ActionCallError(
                f"{self._refusal(name, entry)}; the actions you can call are: {offered}"
            )
        if entry.quick is not None and entry.quick(arguments):
            return entry.action  # certainly valid (argcheck.py); else jsonschema decides
        errors = sorted(entry.validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            raise ActionCallError(
                f"invalid arguments for {name}: " + "; ".join(_explain(e) for e in errors[:5])
            )
        return entry.action

    def _refusal(self, name: str, entry: _Entry | None) -> str:
        if entry is not None:
            return f"you may not call {name!r}"
        source = self.source_of(name)
        if source is not None:
            return (
                f"{name!r} is not offered now: its tool source {source.namespace!r} does not "
                "list it (a grant of it stays; it can be called again once the source offers it)"
            )
        return f"unknown action {name!r}"

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


@dataclass(frozen=True)
class _Entry:
    """One callable action as the registry offers it."""

    action: Action
    validator: jsonschema.protocols.Validator
    definition: ToolDefinition  # under the name the model sees; shared, do not mutate
    quick: QuickCheck | None = None  # a quick yes for plainly valid arguments


def _entry(action: Action, definition: ToolDefinition) -> _Entry:
    validator_cls = jsonschema.validators.validator_for(definition.parameters)
    validator_cls.check_schema(definition.parameters)
    validator = validator_cls(definition.parameters)
    return _Entry(action, validator, definition, quick_check(definition.parameters))


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
