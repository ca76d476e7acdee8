"""A remote A2A agent built on the official a2a-sdk server: its Starlette routes (Agent
Card, JSON-RPC at `/`, HTTP+JSON under `/rest`) over the SDK's request handler and task
store, with a small AgentExecutor that answers by the message's first word:

- `echo <text>`: a message back, "echo: <text>", whose metadata gives `costUsd` 0.25;
- `slow <text>`: a task, working until the test sets `release`, then completed with an
  artifact holding "done: <text>" and a small PNG file sent as bytes;
- `colour`: a task that asks for input ("Which colour?"); the answer completes it with
  "you chose <answer>";
- `hang`: nothing at all until the test sets `release` (then the task fails);
- anything else: a task that fails, saying "no skill for that".

`card_description` is read on every card request (change it to see a refresh),
`interface_url` is where the card says the agent is served, and every
Authorization header the agent is sent is kept in `authorizations`.

Example:
    remote = RemoteAgent(port)
    with serve_in_thread(remote.app(), port):
        ...  # [a2a.remotes.echo] url = remote.url
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from a2a.helpers.proto_helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00"
    b"\x00\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe"
    b"\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82"
)


class RemoteAgent:
    """The remote agent and what the test sees of it (see the module docstring)."""

    DESCRIPTION = "Says things back, and works on slow jobs."

    def __init__(self, port: int, *, binding: str = "JSONRPC") -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.binding = binding
        self.interface_url = self.url  # where the card says it is served
        self.card_description = self.DESCRIPTION
        self.release = threading.Event()
        self.authorizations: list[str] = []
        self.hanging = 0  # calls of `hang` waiting now

    def card(self) -> AgentCard:
        interfaces = {
            "JSONRPC": AgentInterface(
                url=self.interface_url, protocol_binding="JSONRPC", protocol_version="1.0"
            ),
            "HTTP+JSON": AgentInterface(
                url=f"{self.interface_url}/rest",
                protocol_binding="HTTP+JSON",
                protocol_version="1.0",
            ),
        }
        first = interfaces.pop(self.binding)
        return AgentCard(
            name="Echo crab",
            description=self.card_description,
            version="1.0.0",
            supported_interfaces=[first, *interfaces.values()],
            capabilities=AgentCapabilities(streaming=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain", "image/png"],
            skills=[
                AgentSkill(
                    id="echo",
                    name="Echo",
                    description="Repeats what it is told.",
                    tags=["echo"],
                    examples=["echo hello"],
                ),
                AgentSkill(
                    id="slow",
                    name="Slow work",
                    description="Works on a job for a while, then hands over a report.",
                    tags=["work"],
                ),
            ],
        )

    def app(self) -> Any:
        card = self.card()
        handler = DefaultRequestHandler(
            agent_executor=_Executor(self), task_store=InMemoryTaskStore(), agent_card=card
        )

        async def current(_: AgentCard) -> AgentCard:
            fresh = self.card()
            fresh.description = self.card_description
            return fresh

        routes = [
            *create_agent_card_routes(card, card_modifier=current),
            *create_jsonrpc_routes(handler, rpc_url="/"),
            *create_rest_routes(handler, path_prefix="/rest"),
        ]
        inner = Starlette(routes=routes)

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                for name, value in scope["headers"]:
                    if name == b"authorization":
                        self.authorizations.append(value.decode())
            await inner(scope, receive, send)

        return app


class _Executor(AgentExecutor):
    def __init__(self, remote: RemoteAgent) -> None:
        self.remote = remote

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        word, _, rest = text.partition(" ")
        task = context.current_task
        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.complete(self._says(f"you chose {text}", context))
            return
        if word == "echo":
            reply = new_text_message(
                f"echo: {rest}", context_id=context.context_id, role=Role.ROLE_AGENT
            )
            reply.metadata.update({"costUsd": 0.25})
            await event_queue.enqueue_event(reply)
            return
        if word == "hang":
            self.remote.hanging += 1
            try:
                while not self.remote.release.is_set():  # until the test ends
                    await asyncio.sleep(0.01)
            finally:
                self.remote.hanging -= 1
        assert context.task_id is not None
        assert context.context_id is not None
        await event_queue.enqueue_event(
            Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message] if context.message else [],
            )
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if word == "slow":
            await updater.start_work(self._says("on it", context))
            while not self.remote.release.is_set():
                await asyncio.sleep(0.01)
            await updater.add_artifact(
                [
                    Part(text=f"done: {rest}"),
                    Part(raw=PNG, media_type="image/png", filename="chart.png"),
                ],
                name="report",
            )
            await updater.complete()
        elif word == "colour":
            await updater.requires_input(self._says("Which colour?", context))
        else:
            await updater.failed(self._says("no skill for that", context))

    def _says(self, text: str, context: RequestContext) -> Message:
        return new_text_message(
            text, context_id=context.context_id, task_id=context.task_id, role=Role.ROLE_AGENT
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()
