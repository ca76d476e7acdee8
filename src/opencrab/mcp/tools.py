"""What OpenCrab offers an MCP client: one `McpTool` per operation, each calling the same
middle-floor function its REST route calls (opencrab.reports, core, tickets, importers).

Every tool declares its input JSON Schema with the REST body's limits, its annotations
(`readOnlyHint` for reads, `destructiveHint` where it may undo or run something) and the
token scope it needs (read ⊂ chat ⊂ operate, as its REST route: opencrab.server.scopes).
opencrab.mcp.server checks the arguments against the schema and the caller's scope before
`run` is called, so `run` reads its arguments as given.

Example (a tool's result is JSON):
    tool = TOOLS["search_memory"]
    hits = await tool.run(runtime, {"agent": "aki", "query": "tea"}, Caller("local"))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from pydantic_core import to_jsonable_python

from opencrab.auth import Scope
from opencrab.core.agent import MAX_NAME
from opencrab.core.approval_decisions import MAX_DECIDER, MAX_REASON
from opencrab.core.memory import MemoryManager
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import hold_turn
from opencrab.core.steps import LlmReplied, TurnResult
from opencrab.errors import ValidationError
from opencrab.messages import MAX_MESSAGE_CHARS, RestSource, Sender
from opencrab.offload import run_blocking
from opencrab.reports import approvals, budgets, inbox, tickets, transcripts
from opencrab.reports import schedules as schedule_views
from opencrab.schedules import service as schedules
from opencrab.schedules.spec import parse_input
from opencrab.tickets import service

MAX_OFFSET = 1_000_000_000
"""The largest `offset` a list takes (the REST API's bound)."""


@dataclass(frozen=True)
class Caller:
    """Who calls a tool: the API token's name ("local" over stdio or without tokens) and
    its scope (None: no token, everything allowed)."""

    name: str
    scope: Scope | None = None


Run = Callable[[Runtime, dict[str, Any], Caller], Awaitable[Any]]


@dataclass(frozen=True)
class McpTool:
    """One tool: its name, what it does, its input schema, hints and needed scope."""

    name: str
    title: str
    description: str
    properties: Mapping[str, Any]
    required: tuple[str, ...]
    scope: Scope
    run: Run
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = True
    open_world: bool = False  # it calls a model (the world beyond OpenCrab's data)

    @property
    def input_schema(self) -> dict[str, Any]:
        """The tool's arguments as a JSON Schema (draft 2020-12) object."""
        return {
            "type": "object",
            "properties": dict(self.properties),
            "required": list(self.required),
            "additionalProperties": False,
        }


def _text(description: str, max_length: int, *, min_length: int = 1) -> dict[str, Any]:
    return {
        "type": "string",
        "minLength": min_length,
        "maxLength": max_length,
        "description": description,
    }


def _int(description: str, minimum: int, maximum: int, default: int) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": minimum,
        "maximum": maximum,
        "default": default,
        "description": description,
    }


UUID_PATTERN = "^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$"
AGENT = _text("The agent's id or its name.", MAX_NAME)
MESSAGE = {**_text("The message.", MAX_MESSAGE_CHARS), "pattern": r"\S"}
OFFSET = _int("Rows to skip.", 0, MAX_OFFSET, 0)


def _uuid(what: str) -> dict[str, Any]:
    return {"type": "string", "pattern": UUID_PATTERN, "description": f"The {what}'s id."}


def json_of(value: Any) -> Any:
    """A report's value as JSON: its API field names (camelCase), ids and times as text."""
    return to_jsonable_python(value, by_alias=True)


# ------------------------------------------------------------------ agents and chat
async def list_agents(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    return [
        {"id": id_, "name": name, "description": description}
        for id_, name, description in await run_blocking(runtime.agents.summaries)
    ]


async def chat(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """One chat turn through the turn service, as `POST /api/sessions/{id}/messages`."""
    agent = await run_blocking(runtime.agents.get, args["agent"])
    session_id = args.get("session_id")
    result: TurnResult | None = None
    calls: list[LlmReplied] = []
    async for step in runtime.turns.chat_steps(
        agent,
        args["message"],
        session_id=session_id,
        source=RestSource(request_id=str(uuid4())),
        sender=Sender(id=caller.name, name=None),
        create=session_id is None,
        wait_busy=True,
    ):
        if isinstance(step, LlmReplied):
            calls.append(step)
        elif isinstance(step, TurnResult):
            result = step
    assert result is not None  # the last step of every turn
    waiting = None
    if result.approval_id is not None:
        waiting = await run_blocking(runtime.approvals.notice, result.approval_id)
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    return {
        "agent": agent.name,
        "sessionId": result.session_id,
        "traceId": result.trace_id,
        "reply": result.reply,
        "actions": [{"name": a.name, "success": a.result.success} for a in result.actions],
        "stoppedBy": result.stopped_by,
        "error": None if result.error is None else result.error.message,
        "approvalId": result.approval_id,
        "waiting": waiting,
        "cost": {
            "modelCalls": len(calls),
            "inputTokens": sum(c.input_tokens for c in calls),
            "outputTokens": sum(c.output_tokens for c in calls),
            "costUsd": sum(costs) if costs else None,
        },
    }


# ------------------------------------------------------------------ memory and skills
async def search_memory(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`POST /api/agents/{id}/memory/search`."""
    agent = await run_blocking(runtime.agents.get, args["agent"])
    hits = await run_blocking(
        MemoryManager(runtime.db, agent.id).search,
        args["query"],
        limit=args.get("limit", 10),
        session_id=args.get("session_id"),
    )
    return json_of(hits)


async def add_memory(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`POST /api/agents/{id}/memory/curated`."""
    agent = await run_blocking(runtime.agents.get, args["agent"])
    saved = await run_blocking(
        MemoryManager(runtime.db, agent.id).save_curated, args["category"], args["content"]
    )
    return json_of(saved)


async def list_skills(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`GET /api/agents/{id}/skills` (without each skill's guidance: read_skill has it)."""
    agent = await run_blocking(runtime.agents.get, args["agent"])
    found = await run_blocking(
        runtime.engine.skills_for(agent).list, active_only=bool(args.get("active_only"))
    )
    return [
        {
            "id": s.id,
            "name": s.name,
            "description": s.description,
            "version": s.version,
            "isActive": s.is_active,
        }
        for s in found
    ]


async def read_skill(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`GET /api/agents/{id}/skills/{skill_id}`: the skill and its skill file."""
    agent = await run_blocking(runtime.agents.get, args["agent"])
    skill = await run_blocking(runtime.engine.skills_for(agent).get, args["skill"])
    return {**json_of(skill.model_dump(mode="json")), "markdown": skill.markdown()}


# ------------------------------------------------------------------ tickets
async def create_ticket(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`POST /api/tickets`: the ticket scheduler runs it."""
    agent = await run_blocking(runtime.agents.get, args["agent"])
    ticket = await run_blocking(
        service.create_ticket,
        runtime.db,
        agent.id,
        params=args.get("params", {}),
        context=args.get("context", {}),
    )
    return json_of(tickets.ticket_response(ticket))


async def get_ticket(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`GET /api/tickets/{id}`: its status, steps and current session."""
    return json_of(await run_blocking(tickets.ticket_view, runtime, args["ticket_id"]))


async def answer_ticket(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """A person's answer in the ticket's current session, as `POST
    /api/sessions/{id}/messages` there: a suspended ticket resumes."""
    ticket = await run_blocking(tickets.ticket_view, runtime, args["ticket_id"])
    if ticket.current_session_id is None:
        raise ValidationError(f"ticket {ticket.id} is {ticket.status}: it has no session yet")
    session_id = str(ticket.current_session_id)
    async with hold_turn(runtime.leases, session_id, wait=True):  # never inside its turn
        await run_blocking(
            service.answer_ticket_session,
            runtime.db,
            session_id,
            args["message"],
            sender_id=caller.name,
        )
    return json_of(await run_blocking(tickets.ticket_view, runtime, str(ticket.id)))


# ------------------------------------------------------------------ approvals
async def list_approvals(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`GET /api/approvals`: held tool calls, oldest first."""
    return json_of(
        await run_blocking(
            approvals.approval_list,
            runtime,
            session_id=args.get("session_id"),
            status=args.get("status", "pending"),
            limit=args.get("limit", 100),
            offset=args.get("offset", 0),
        )
    )


async def decide_approval(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`POST /api/approvals/{id}/approve` or `/deny`; the decider is the caller."""
    record = await runtime.approvals.decide(
        args["approval_id"],
        approve=args["decision"] == "approve",
        by=caller.name[:MAX_DECIDER],
        reason=args.get("reason"),
    )
    return json_of(approvals.approval_response(record))


# ------------------------------------------------------------------ transcripts, spend
async def search_transcripts(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`GET /api/imports/search`: imported messages holding every word, newest first."""
    return json_of(
        await run_blocking(
            transcripts.search_hits,
            runtime.db,
            args["query"],
            limit=args.get("limit", 50),
            offset=args.get("offset", 0),
        )
    )


async def get_spend(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`GET /api/budgets`: spend against the fleet's and each agent's caps."""
    return json_of(await budgets.budgets_view(runtime))


# ------------------------------------------------------------------ schedules
SCHEDULE_FIELDS = ("name", "cron", "timezone", "everySecs", "at", "action", "catchUp")


async def create_schedule(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`POST /api/agents/{id}/schedules`: the schedules run it at its slots."""
    given = parse_input({k: args[k] for k in SCHEDULE_FIELDS if k in args})
    row = await run_blocking(
        schedules.create_schedule,
        runtime.db,
        runtime.settings,
        args["agent"],
        given,
        created_by=f"mcp:{caller.name}",
    )
    return json_of(await run_blocking(schedule_views.one_schedule, runtime, row))


async def list_schedules(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`GET /api/schedules`: schedules with their next slot, newest first."""
    return json_of(
        await run_blocking(schedule_views.schedule_list, runtime, agent=args.get("agent"))
    )


async def list_schedule_runs(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`GET /api/schedules/{id}/runs`: a schedule's runs, latest first."""
    found = await run_blocking(
        schedules.schedule_runs, runtime.db, args["schedule_id"], limit=args.get("limit", 20)
    )
    return json_of(schedule_views.run_list(found))


async def list_inbox(runtime: Runtime, args: dict[str, Any], caller: Caller) -> Any:
    """`GET /api/inbox`: what waits for a person, newest first."""
    kind = args.get("kind")
    return json_of(
        await inbox.inbox_view(
            runtime,
            agent=args.get("agent"),
            kinds=None if kind is None else [kind],
            limit=args.get("limit", 100),
        )
    )


def _tools() -> dict[str, McpTool]:
    read, chat_, operate = Scope.read, Scope.chat, Scope.operate
    found = [
        McpTool(
            "list_agents",
            "List agents",
            "Every agent (id, name, description), oldest first.",
            {},
            (),
            read,
            list_agents,
        ),
        McpTool(
            "chat",
            "Chat with an agent",
            "Send the agent a message and wait for its turn to end: its reply, the actions "
            "it ran, and what the turn's model calls cost. Without session_id a new chat "
            "session starts; give the returned sessionId to go on in it.",
            {
                "agent": AGENT,
                "message": MESSAGE,
                "session_id": _uuid("chat session (from an earlier reply)"),
            },
            ("agent", "message"),
            chat_,
            chat,
            read_only=False,
            idempotent=False,
            open_world=True,
        ),
        McpTool(
            "search_memory",
            "Search an agent's memory",
            "The agent's session log lines for query, best first: those holding every word "
            "(lexical) fused with those nearest in meaning (vector, once embedded); each "
            "hit's legs say which found it.",
            {
                "agent": AGENT,
                "query": _text("Words or a question (any language).", 1_000),
                "limit": _int("At most this many hits.", 1, 100, 10),
                "session_id": _text("Only this session's lines.", 64),
            },
            ("agent", "query"),
            read,
            search_memory,
        ),
        McpTool(
            "add_memory",
            "Add a curated memory",
            "Store a memory the agent keeps in its context (curated memory).",
            {
                "agent": AGENT,
                "category": _text("A category, e.g. core.", 64),
                "content": _text("What to remember.", 20_000),
            },
            ("agent", "category", "content"),
            operate,
            add_memory,
            read_only=False,
            idempotent=False,
        ),
        McpTool(
            "list_skills",
            "List an agent's skills",
            "The agent's skills (standard ones first): name, description, version, active.",
            {
                "agent": AGENT,
                "active_only": {"type": "boolean", "default": False},
            },
            ("agent",),
            read,
            list_skills,
        ),
        McpTool(
            "read_skill",
            "Read a skill",
            "One of the agent's skills by name or id, with its skill file (markdown).",
            {"agent": AGENT, "skill": _text("The skill's name or id.", 200)},
            ("agent", "skill"),
            read,
            read_skill,
        ),
        McpTool(
            "create_ticket",
            "Create a ticket",
            "Give an agent a task to work through on its own (a ticket); the ticket "
            "scheduler runs it. Read its progress with get_ticket.",
            {
                "agent": AGENT,
                "params": {"type": "object", "description": "The user's input (free-form)."},
                "context": {
                    "type": "object",
                    "description": 'The task: {"goal": "...", "constraints": [...]}.',
                },
            },
            ("agent", "context"),
            operate,
            create_ticket,
            read_only=False,
            idempotent=False,
        ),
        McpTool(
            "get_ticket",
            "Get a ticket",
            "A ticket's status, steps, error and current session.",
            {"ticket_id": _uuid("ticket")},
            ("ticket_id",),
            read,
            get_ticket,
        ),
        McpTool(
            "answer_ticket",
            "Answer a ticket",
            "A person's answer to the question a ticket's agent asked: a suspended "
            "ticket resumes with it (an active one reads it on its next turn).",
            {"ticket_id": _uuid("ticket"), "message": MESSAGE},
            ("ticket_id", "message"),
            chat_,
            answer_ticket,
            read_only=False,
            idempotent=False,
        ),
        McpTool(
            "list_approvals",
            "List approvals",
            "Tool calls held for a person's decision, oldest first (pending by default).",
            {
                "status": {"enum": ["pending", "approved", "denied"], "default": "pending"},
                "session_id": _uuid("session"),
                "limit": _int("At most this many.", 1, 1000, 100),
                "offset": OFFSET,
            },
            (),
            read,
            list_approvals,
        ),
        McpTool(
            "decide_approval",
            "Decide an approval",
            "Approve (the held tool call runs now) or deny a pending approval; the agent "
            "goes on in its session with the decision.",
            {
                "approval_id": _uuid("approval"),
                "decision": {"enum": ["approve", "deny"]},
                "reason": _text("Why (shown to the agent).", MAX_REASON),
            },
            ("approval_id", "decision"),
            operate,
            decide_approval,
            read_only=False,
            destructive=True,
            idempotent=False,
        ),
        McpTool(
            "create_schedule",
            "Schedule an agent's work",
            "Give an agent a job that runs on its own: on a 5-field cron expression in an "
            "IANA timezone, every everySecs seconds, or once at a time (ISO 8601 with its "
            "offset). action is {kind: turn, prompt, sessionId?} (a turn, in a new session "
            "unless sessionId), {kind: ticket, template: {params, context}} or {kind: post, "
            "prompt, home: {gateway, channel}} (the reply is sent to that channel).",
            {
                "agent": AGENT,
                "name": _text("What the schedule is called.", 200),
                "cron": _text("A 5-field cron expression, e.g. '0 9 * * 1-5'.", 200),
                "timezone": _text("The cron's IANA time zone, e.g. 'Europe/Berlin'.", 64),
                "everySecs": {"type": "integer", "minimum": 1, "description": "Interval."},
                "at": _text("Once, at this time: 2026-12-24T09:00:00+01:00.", 64),
                "action": {"type": "object", "description": "What a run does (see above)."},
                "catchUp": {
                    "type": "string",
                    "enum": ["once", "skip"],
                    "description": "A slot missed while no process ran: run once now, or skip.",
                },
            },
            ("agent", "action"),
            operate,
            create_schedule,
            read_only=False,
            idempotent=False,
        ),
        McpTool(
            "list_schedules",
            "List schedules",
            "Schedules (one agent's, given agent), each with its timing and next slot.",
            {"agent": AGENT},
            (),
            read,
            list_schedules,
        ),
        McpTool(
            "list_schedule_runs",
            "List a schedule's runs",
            "A schedule's runs, latest first: slot, start, end, process, outcome, cost and "
            "the session or ticket each produced.",
            {"schedule_id": _uuid("schedule"), "limit": _int("At most this many.", 1, 1000, 20)},
            ("schedule_id",),
            read,
            list_schedule_runs,
        ),
        McpTool(
            "search_transcripts",
            "Search imported transcripts",
            "Imported coding-agent sessions' user and assistant messages holding every "
            "word of query, newest first.",
            {
                "query": _text("Words, all required.", 500),
                "limit": _int("At most this many hits.", 1, 200, 50),
                "offset": OFFSET,
            },
            ("query",),
            read,
            search_transcripts,
        ),
        McpTool(
            "get_spend",
            "Get spend against budgets",
            "What the fleet and each agent spent today and this month against their caps, "
            "and the budget alerts.",
            {},
            (),
            read,
            get_spend,
        ),
        McpTool(
            "inbox",
            "Read the inbox",
            "Everything waiting for a person across the fleet, newest first: held tool "
            "calls (decide with decide_approval and the item's subjectId), tickets' "
            "questions (answer_ticket), agent-mode questions, budget alerts and spend "
            "alarms; each with its kind, agent, createdAt, summary and subjectId.",
            {
                "agent": {**AGENT, "description": "Only this agent's items (id or name)."},
                "kind": {
                    "type": "string",
                    "enum": list(inbox.SOURCES),
                    "description": "Only items of this kind.",
                },
                "limit": _int("At most this many items.", 1, 1000, 100),
            },
            (),
            read,
            list_inbox,
        ),
    ]
    return {tool.name: tool for tool in found}


TOOLS: dict[str, McpTool] = _tools()
"""Every tool, by name, in the order tools/list gives them."""
