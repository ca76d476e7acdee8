"""OpenCrab's agents served over A2A 1.0, on the official a2a-sdk's JSON-RPC and HTTP+JSON
routes (issue 36, section 1).

Every published agent (`[a2a] publish`, opencrab.config.a2a) has

- its Agent Card at `/a2a/{agent}/.well-known/agent-card.json` (the agent by name or
  id): its name, its description (else its persona's role), a skill per active OpenCrab
  skill, the bearer scheme of the REST API's tokens and its two bindings;
- its endpoint at `/a2a/{agent}`: JSON-RPC 2.0 on POST there, HTTP+JSON below it
  (`/a2a/{agent}/message:send`, `/a2a/{agent}/tasks/{id}`, …).

`/.well-known/agent-card.json` is the card of `[a2a] default_agent` (else the first
published agent by name), whose extension `urn:opencrab:a2a:agents` lists every published
agent's card. The cards are open (discovery comes before authentication: a card names its
scheme); everything else passes the REST API's guards in the app's middleware: the Host
and cross-site check, the bearer token, the body limits.

`OpenCrabRequestHandler` is the SDK's RequestHandler over the turn service and tickets:

- `message/send` of a plain message runs a chat turn (core/turns.py, as
  `POST /api/sessions/{id}/messages` does) in the session of its contextId (a UUID is the
  session's id; any other contextId names a session of its own for this agent, derived
  from it) and answers the agent's reply as a Message; a turn that fails (a budget
  refused it, the model failed) answers a `failed` Task whose status names why.
  Streaming gives a `working` Task, a status update per tool the agent ran, and a final
  `completed` (or `failed`) update carrying the reply.
- A message whose metadata (or the request's) says `{"opencrab": {"ticket": true}}`
  starts a ticket (opencrab.a2a.server_tasks): the task IS the ticket, so tasks/get,
  tasks/list, tasks/cancel and a restart all read the ticket. `opencrab.params` (an
  object) becomes the ticket's params (its limits: maxTurns, maxWallSecs, maxCostUsd).
  A follow-up message naming the task answers the ticket's question.
- Scopes as the REST routes: sending and canceling need `chat`, reading needs `read`.

Example:
    endpoint = A2aEndpoint(settings.a2a)
    app.router.routes.extend(endpoint.routes())
    async with endpoint.serving(runtime):
        ...  # serve
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC
from typing import Any, TypeVar
from urllib.parse import quote

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import ServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    ContentTypeNotSupportedError,
    DeleteTaskPushNotificationConfigRequest,
    ExtendedAgentCardNotConfiguredError,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    HTTPAuthSecurityScheme,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    PushNotificationNotSupportedError,
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from opencrab import __version__
from opencrab.a2a import server_tasks as tasks
from opencrab.a2a.server_paths import CARD_PATH, PREFIX
from opencrab.auth import ApiToken, Scope
from opencrab.config.a2a import A2aSection
from opencrab.core.agent import Agent
from opencrab.core.runtime import Runtime
from opencrab.core.steps import ActionDone, Spoke, TurnResult, TurnStarted
from opencrab.errors import NotFoundError, OpenCrabError, TicketStateError, ValidationError
from opencrab.messages import RestSource, Sender, check_message
from opencrab.offload import run_blocking
from opencrab.store.repositories import a2a_tasks as repo
from opencrab.store.repositories.a2a_tasks import A2aTaskRow

T = TypeVar("T")

AGENTS_EXTENSION = "urn:opencrab:a2a:agents"
"""The default card's extension listing every published agent's card (params.agents)."""
SCHEME = "bearerAuth"
PROTOCOL_VERSION = "1.0"
CONTEXT_NAMESPACE = uuid.UUID("6f1d2c57-3a0e-4f7e-9a55-a2a0c0ffee36")
"""Derives a session id from a contextId that is no UUID (uuid5 of agent id and it)."""
TEXT = "text/plain"
PAGE_SIZE = 50
LISTED_STATES: dict[int, tuple[str, bool | None]] = {
    TaskState.TASK_STATE_SUBMITTED: ("pending", None),
    TaskState.TASK_STATE_WORKING: ("running", None),
    TaskState.TASK_STATE_INPUT_REQUIRED: ("suspended", None),
    TaskState.TASK_STATE_COMPLETED: ("completed", None),
    TaskState.TASK_STATE_FAILED: ("failed", False),
    TaskState.TASK_STATE_CANCELED: ("failed", True),
}
"""tasks/list's status filter as the ticket's status (and whether it was canceled)."""


def wants_ticket(request: SendMessageRequest) -> bool:
    """Whether the message asks for long work: `{"opencrab": {"ticket": true}}` in the
    message's metadata or the request's."""
    return _opencrab_meta(request).get("ticket") is True


def _opencrab_meta(request: SendMessageRequest) -> dict[str, Any]:
    for holder in (request.message.metadata, request.metadata):
        found = MessageToDict(holder).get("opencrab")
        if isinstance(found, dict):
            return found
    return {}


def message_text(message: Message) -> str:
    """The message's text (its text parts and its data parts as JSON, in order), checked
    by the message rules (ContentTypeNotSupportedError naming a file or URL part)."""
    texts: list[str] = []
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(json.dumps(MessageToDict(part.data), ensure_ascii=False))
        else:
            raise ContentTypeNotSupportedError(
                message=f"this agent reads text and data parts; part {index} is {kind or 'empty'}"
            )
    if not texts:
        raise ContentTypeNotSupportedError(message="the message has no parts")
    try:
        return check_message("\n".join(texts))
    except ValidationError as error:
        raise InvalidParamsError(message=str(error)) from None


def session_of(agent: Agent, context_id: str) -> str:
    """The OpenCrab session of a contextId: itself when it is a UUID, else one derived
    from the agent and it (the same contextId always reaches the same session)."""
    try:
        return str(uuid.UUID(context_id))
    except ValueError:
        return str(uuid.uuid5(CONTEXT_NAMESPACE, f"{agent.id}:{context_id}"))


def persona_line(agent: Agent) -> str:
    """What the card says of an agent without a description: its persona's name, job and
    organization, and the start of its prompt."""
    who = agent.soul.persona_name
    work = ", ".join(x for x in (agent.identity.job_title, agent.identity.organization) if x)
    line = f"{who} ({work})" if work else who
    prompt = " ".join(agent.prompt.split())
    if prompt:
        line += f": {prompt[:300]}"
    return line


class A2aCallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context with the agent reference of the path and the API token."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["agent_ref"] = request.path_params.get("agent", "")
        context.state["api_token"] = request.scope.get("state", {}).get("api_token")
        return context


def _a2a_errors(call: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """OpenCrab's errors as A2A errors naming the problem."""

    async def wrapped(*args: Any, **kwargs: Any) -> T:
        try:
            return await call(*args, **kwargs)
        except A2AError:
            raise
        except NotFoundError as error:
            raise TaskNotFoundError(message=str(error)) from None
        except ValidationError as error:
            raise InvalidParamsError(message=str(error)) from None
        except OpenCrabError as error:
            raise InternalError(message=f"{error.code}: {error}") from None

    wrapped.__name__ = call.__name__
    wrapped.__doc__ = call.__doc__
    return wrapped


class OpenCrabRequestHandler(RequestHandler):
    """The SDK's request handler over the turn service and tickets (module docstring)."""

    def __init__(self, endpoint: A2aEndpoint) -> None:
        self.endpoint = endpoint

    # ------------------------------------------------------------ who and what
    @property
    def runtime(self) -> Runtime:
        return self.endpoint.runtime()

    @property
    def config(self) -> A2aSection:
        return self.endpoint.config

    def _agent(self, context: ServerCallContext) -> Agent:
        agent = self.endpoint.published(str(context.state.get("agent_ref", "")))
        if agent is None:  # the route checked it; deleted or unpublished since
            raise InvalidParamsError(message="no such published agent")
        return agent

    @staticmethod
    def _allow(context: ServerCallContext, needed: Scope, doing: str) -> None:
        token: ApiToken | None = context.state.get("api_token")
        if token is not None and not token.scope.covers(needed):
            raise InvalidRequestError(
                message=f"this token's scope is '{token.scope}'; {doing} needs '{needed}' "
                f"(a token for it: `opencrab token create NAME --scope {needed}`)"
            )

    @staticmethod
    def _caller(context: ServerCallContext) -> str:
        token: ApiToken | None = context.state.get("api_token")
        return "a2a" if token is None else f"a2a:{token.name}"

    async def _row(self, task_id: str, agent: Agent) -> A2aTaskRow:
        try:
            return await run_blocking(tasks.find_task, self.runtime, task_id, agent)
        except (NotFoundError, ValidationError):
            raise TaskNotFoundError(message=f"agent {agent.name} has no task {task_id}") from None

    # ------------------------------------------------------------ messages
    @validate_request_params
    @_a2a_errors
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        agent = self._agent(context)
        self._allow(context, Scope.chat, "sending a message")
        text = message_text(params.message)
        row = await self._task_of(params, agent, text, context)
        if row is not None:
            if params.configuration.return_immediately:
                return (await run_blocking(tasks.read_task, self.runtime, row)).task
            return await tasks.settle(
                self.runtime,
                row,
                poll_secs=self.config.poll_secs,
                wait_secs=self.config.ticket_wait_secs,
            )
        final: Task | Message | None = None
        async for event in self._turn(params, agent, text, context, stream=False):
            if isinstance(event, Message):
                final = event
            elif isinstance(event, TaskStatusUpdateEvent) and event.status.state in tasks.FINAL:
                final = Task(id=event.task_id, context_id=event.context_id, status=event.status)
        if final is None:
            raise InternalError(message="the turn ended without a result")
        return final

    @validate_request_params
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncIterator[Event]:
        try:
            agent = self._agent(context)
            self._allow(context, Scope.chat, "sending a message")
            text = message_text(params.message)
            row = await _a2a_errors(self._task_of)(params, agent, text, context)
            if row is not None:
                async for event in tasks.follow(self.runtime, row, poll_secs=self.config.poll_secs):
                    yield event
                return
            async for turn_event in self._turn(params, agent, text, context, stream=True):
                yield turn_event
        except A2AError:
            raise
        except NotFoundError as error:
            raise TaskNotFoundError(message=str(error)) from None
        except ValidationError as error:
            raise InvalidParamsError(message=str(error)) from None

    async def _task_of(
        self, params: SendMessageRequest, agent: Agent, text: str, context: ServerCallContext
    ) -> A2aTaskRow | None:
        """The ticket-backed task the message goes to: the one it names (the message
        answers it), a new one when it asks for a ticket, else None (a plain turn)."""
        message = params.message
        if message.task_id:
            row = await self._row(message.task_id, agent)
            if message.context_id and message.context_id != row.context_id:
                raise InvalidParamsError(
                    message=f"task {row.ticket_id} is in context {row.context_id}, "
                    f"not {message.context_id}"
                )
            try:
                await tasks.answer_task(self.runtime, row, text, self._caller(context))
            except TicketStateError as error:
                raise InvalidParamsError(message=str(error)) from None
            except ValidationError as error:  # a finished ticket's session
                raise InvalidParamsError(message=f"task {row.ticket_id} is over: {error}") from None
            return row
        if not wants_ticket(params):
            return None
        ticket_params = _opencrab_meta(params).get("params", {})
        if not isinstance(ticket_params, dict):
            raise InvalidParamsError(message="metadata opencrab.params must be an object")
        context_id = message.context_id or str(uuid.uuid4())
        return await run_blocking(
            tasks.start_task,
            self.runtime,
            agent,
            text,
            context_id=context_id,
            params=ticket_params,
        )

    async def _turn(
        self,
        params: SendMessageRequest,
        agent: Agent,
        text: str,
        context: ServerCallContext,
        *,
        stream: bool,
    ) -> AsyncIterator[Event]:
        """A chat turn in the context's session: (streaming) a working Task and a status
        update per tool run, then the reply as a Message, or (streaming, or when the turn
        failed) a final status update."""
        context_id = params.message.context_id or str(uuid.uuid4())
        session_id = session_of(agent, context_id)
        token: ApiToken | None = context.state.get("api_token")
        sender = Sender(id=self._caller(context), name=None if token is None else token.name)
        task_id = ""
        reply: str | None = None
        reply_id = ""
        result: TurnResult | None = None
        async for step in self.runtime.turns.chat_steps(
            agent,
            text,
            session_id=session_id,
            source=RestSource(request_id=params.message.message_id or str(uuid.uuid4())),
            sender=sender,
            create=True,
            wait_busy=True,
        ):
            if isinstance(step, TurnStarted):
                task_id = step.trace_id
                if stream:
                    yield Task(
                        id=task_id,
                        context_id=context_id,
                        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
                    )
            elif isinstance(step, ActionDone) and stream:
                outcome = "done" if step.result.success else "failed"
                yield TaskStatusUpdateEvent(
                    task_id=task_id,
                    context_id=context_id,
                    status=TaskStatus(
                        state=TaskState.TASK_STATE_WORKING,
                        message=tasks.text_message(
                            f"ran {step.name}: {outcome}",
                            Role.ROLE_AGENT,
                            context_id=context_id,
                            task_id=task_id,
                        ),
                    ),
                )
            elif isinstance(step, Spoke):
                reply = step.text
                reply_id = step.event_id
            elif isinstance(step, TurnResult):
                result = step
        if result is None:
            raise InternalError(message="the turn ended without a result")
        task_id = task_id or result.trace_id
        if result.error is not None:
            why = f"{result.error.error}: {result.error.message}"
            yield TaskStatusUpdateEvent(
                task_id=task_id,
                context_id=context_id,
                status=TaskStatus(
                    state=TaskState.TASK_STATE_FAILED,
                    message=tasks.text_message(
                        why, Role.ROLE_AGENT, context_id=context_id, task_id=task_id
                    ),
                ),
            )
            return
        answer = tasks.text_message(
            reply or "", Role.ROLE_AGENT, context_id=context_id, message_id=reply_id
        )
        if not stream:
            yield answer
            return
        answer.task_id = task_id
        yield TaskStatusUpdateEvent(
            task_id=task_id,
            context_id=context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=answer),
        )

    # ------------------------------------------------------------ tasks
    @validate_request_params
    @_a2a_errors
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        agent = self._agent(context)
        self._allow(context, Scope.read, "reading a task")
        row = await self._row(params.id, agent)
        history = params.history_length if params.HasField("history_length") else None
        found = await run_blocking(tasks.read_task, self.runtime, row, history=history)
        return found.task

    @validate_request_params
    @_a2a_errors
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        agent = self._agent(context)
        self._allow(context, Scope.read, "listing tasks")
        size = params.page_size if params.HasField("page_size") else PAGE_SIZE
        if not 1 <= size <= 100:
            raise InvalidParamsError(message=f"pageSize must be 1 to 100, not {size}")
        try:
            offset = int(params.page_token or "0")
        except ValueError:
            raise InvalidParamsError(message="pageToken is not one this server gave") from None
        if offset < 0:
            raise InvalidParamsError(message="pageToken is not one this server gave")
        history = params.history_length if params.HasField("history_length") else 0
        ticket_status, canceled = LISTED_STATES.get(params.status, (None, None))
        if params.status and ticket_status is None:
            raise InvalidParamsError(
                message=f"no task of this server is ever {TaskState.Name(params.status)}"
            )
        after = (
            params.status_timestamp_after.ToDatetime(tzinfo=UTC)
            if params.HasField("status_timestamp_after")
            else None
        )

        def read() -> tuple[list[Task], int]:
            with self.runtime.db.read() as conn:
                rows, total = repo.tasks(
                    conn,
                    agent.id,
                    context_id=params.context_id or None,
                    ticket_status=ticket_status,
                    canceled=canceled,
                    updated_after=after,
                    limit=size,
                    offset=offset,
                )
            found = [tasks.read_task(self.runtime, r, history=history).task for r in rows]
            return found, total

        listed, total = await run_blocking(read)
        if not params.include_artifacts:
            for task in listed:
                del task.artifacts[:]
        response = ListTasksResponse(tasks=listed, page_size=size, total_size=total)
        if offset + size < total:
            response.next_page_token = str(offset + size)
        return response

    @validate_request_params
    @_a2a_errors
    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        agent = self._agent(context)
        self._allow(context, Scope.chat, "canceling a task")
        row = await self._row(params.id, agent)
        try:
            await run_blocking(tasks.cancel_task, self.runtime, row, self._caller(context))
        except TicketStateError as error:
            raise TaskNotCancelableError(message=str(error)) from None
        row = await self._row(params.id, agent)
        return (await run_blocking(tasks.read_task, self.runtime, row)).task

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncIterator[Event]:
        agent = self._agent(context)
        self._allow(context, Scope.read, "following a task")
        row = await self._row(params.id, agent)
        async for event in tasks.follow(self.runtime, row, poll_secs=self.config.poll_secs):
            yield event

    # ------------------------------------------------------------ not offered
    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(
            message="OpenCrab sends no push notifications; stream or poll tasks/get"
        )

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(message="OpenCrab sends no push notifications")

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError(message="OpenCrab sends no push notifications")

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError(message="OpenCrab sends no push notifications")

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError(
            message="OpenCrab's cards are public and complete: there is no extended card"
        )


class A2aEndpoint:
    """The A2A routes of the app, over the runtime while `serving` (module docstring)."""

    def __init__(self, config: A2aSection) -> None:
        self.config = config
        self._runtime: Runtime | None = None
        self.handler = OpenCrabRequestHandler(self)

    @asynccontextmanager
    async def serving(self, runtime: Runtime) -> AsyncIterator[None]:
        """Serve over `runtime` (the app's lifespan holds this)."""
        self._runtime = runtime
        try:
            yield
        finally:
            self._runtime = None

    def runtime(self) -> Runtime:
        if self._runtime is None:
            raise InternalError(message="the A2A server is not running")
        return self._runtime

    # ------------------------------------------------------------ agents and cards
    def published(self, ref: str) -> Agent | None:
        """The published agent `ref` names (by name or id), else None."""
        if not ref or self._runtime is None:
            return None
        try:
            agent = self._runtime.agents.get(ref)
        except (NotFoundError, ValidationError):
            return None
        return agent if self.config.publishes(agent.id, agent.name) else None

    def published_agents(self) -> list[Agent]:
        """Every published agent, by name."""
        agents = self.runtime().agents.list()
        found = [a for a in agents if self.config.publishes(a.id, a.name)]
        return sorted(found, key=lambda a: a.name)

    def default_agent(self) -> Agent | None:
        """The agent `/.well-known/agent-card.json` describes."""
        if self.config.default_agent:
            return self.published(self.config.default_agent)
        agents = self.published_agents()
        return agents[0] if agents else None

    def card(self, agent: Agent, base_url: str) -> AgentCard:
        """The agent's Agent Card, its endpoint under `base_url`."""
        url = f"{base_url}{PREFIX}/{quote(agent.name, safe='')}"
        skills = self.runtime().engine.skills_for(agent).get_active_skills()
        description = agent.description or persona_line(agent)
        return AgentCard(
            name=agent.name,
            description=description,
            version=__version__,
            supported_interfaces=[
                AgentInterface(url=url, protocol_binding=b, protocol_version=PROTOCOL_VERSION)
                for b in ("JSONRPC", "HTTP+JSON")
            ],
            capabilities=AgentCapabilities(streaming=True, push_notifications=False),
            security_schemes={
                SCHEME: SecurityScheme(
                    http_auth_security_scheme=HTTPAuthSecurityScheme(
                        scheme="bearer",
                        bearer_format="OpenCrab API token (opencrab token create NAME)",
                        description="The same bearer tokens as OpenCrab's REST API; "
                        "sending needs scope chat, reading scope read.",
                    )
                )
            },
            security_requirements=[SecurityRequirement(schemes={SCHEME: StringList()})],
            default_input_modes=[TEXT, "application/json"],
            default_output_modes=[TEXT],
            skills=[
                AgentSkill(
                    id=skill.name,
                    name=skill.name,
                    description=skill.description or skill.name,
                    tags=["opencrab", str(skill.source)],
                )
                for skill in skills
            ],
        )

    def default_card(self, base_url: str) -> AgentCard | None:
        """The default agent's card, listing every published agent's card."""
        agent = self.default_agent()
        if agent is None:
            return None
        card = self.card(agent, base_url)
        others = [
            {"name": a.name, "cardUrl": f"{base_url}{PREFIX}/{quote(a.name, safe='')}{CARD_PATH}"}
            for a in self.published_agents()
        ]
        extension = AgentExtension(
            uri=AGENTS_EXTENSION,
            description="Every agent this OpenCrab server publishes over A2A, with its card",
            required=False,
        )
        extension.params.update({"agents": others})
        card.capabilities.extensions.append(extension)
        return card

    # ------------------------------------------------------------ routes
    def routes(self) -> list[BaseRoute]:
        """The card routes, the JSON-RPC route and the HTTP+JSON routes (the SDK's), each
        behind the check that the path names a published agent."""
        builder: ServerCallContextBuilder = A2aCallContextBuilder()
        endpoint = f"{PREFIX}/{{agent}}"
        sdk: list[BaseRoute] = [
            *create_jsonrpc_routes(self.handler, rpc_url=endpoint, context_builder=builder),
            *create_rest_routes(self.handler, context_builder=builder, path_prefix=endpoint),
        ]
        found: list[BaseRoute] = [
            Route(CARD_PATH, self._default_card, methods=["GET"]),
            Route(f"{endpoint}{CARD_PATH}", self._agent_card, methods=["GET"]),
        ]
        for route in sdk:
            if isinstance(route, Route):  # not the SDK's `/{tenant}` mount: one tenant here
                found.append(
                    Route(
                        route.path,
                        self._checked(route.endpoint, jsonrpc=route.path == endpoint),
                        methods=route.methods,
                    )
                )
        return found

    def _checked(
        self, endpoint: Callable[[Request], Awaitable[Response]], *, jsonrpc: bool
    ) -> Callable[[Request], Awaitable[Response]]:
        async def checked(request: Request) -> Response:
            refused = self._refusal(request, jsonrpc=jsonrpc)
            if refused is not None:
                return refused
            try:  # read here (Starlette keeps it for the SDK): the app's body limit
                await request.body()
            except HTTPException as error:  # over the limit: 413 naming it, either binding
                if jsonrpc:
                    problem = {"code": -32600, "message": str(error.detail)}
                    body = {"jsonrpc": "2.0", "id": None, "error": problem}
                    return JSONResponse(body, status_code=error.status_code)
                return _http_error(error.status_code, "INVALID_ARGUMENT", str(error.detail))
            return await endpoint(request)

        return checked

    def _refusal(self, request: Request, *, jsonrpc: bool) -> Response | None:
        """404 (JSON-RPC's error shape on the JSON-RPC route) when the path names no
        published agent; 503 before the runtime is open."""
        if self._runtime is None:
            return _http_error(503, "UNAVAILABLE", "the A2A server is not running")
        ref = request.path_params.get("agent", "")
        if self.published(ref) is not None:
            return None
        message = f"no published agent {ref[:200]!r} (agents are named by name or id)"
        if jsonrpc:
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": message}}
            return JSONResponse(body, status_code=404)
        return _http_error(404, "NOT_FOUND", message)

    async def _agent_card(self, request: Request) -> Response:
        refused = self._refusal(request, jsonrpc=False)
        if refused is not None:
            return refused
        agent = self.published(request.path_params["agent"])
        assert agent is not None
        card = await run_blocking(self.card, agent, _base(request))
        return JSONResponse(agent_card_to_dict(card))

    async def _default_card(self, request: Request) -> Response:
        if self._runtime is None:
            return _http_error(503, "UNAVAILABLE", "the A2A server is not running")
        card = await run_blocking(self.default_card, _base(request))
        if card is None:
            return _http_error(
                404, "NOT_FOUND", "no agent is published over A2A ([a2a] publish, default_agent)"
            )
        return JSONResponse(agent_card_to_dict(card))


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _http_error(status: int, code: str, message: str) -> JSONResponse:
    """An error in the HTTP+JSON binding's shape (google.rpc.Status)."""
    return JSONResponse(
        {"error": {"code": status, "status": code, "message": message}}, status_code=status
    )
