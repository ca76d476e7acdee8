"""A remote A2A agent as one tool, `a2a__<remote>__ask`, and what its answers become.

The tool's description is the remote's card: its name, description and skills (each
with its description and examples). Its arguments are `message`, `task_id` and
`context_id`:

- `message` alone sends a new message (`context_id` continues the remote's conversation);
- `message` with `task_id` answers a task that asked for input (`input-required`);
- `task_id` alone polls a task: how far it is, and its answer once it has one.

A call sends the message (asking for the first answer at once) and polls the task until
it completes, fails, asks for input or `wait_secs` pass; a task still working then comes
back with its `task_id` and `state` and a note to call again with the task id. The turn's
deadline (`[agent] turn_timeout_secs`) cuts a call sooner: it fails, saying so, and the
turn ends. A remote that cannot be reached is a failed call naming it and why (its card
is read again soon); an error the remote answers with (a task it does not know) is a
failed call with its words. A task that failed, was rejected or canceled, or wants
authentication, is a failed call with the remote's own words.

The model reads `agent`, `state`, `task_id`, `context_id`, `text` (the reply, or the
task's status message and its artifacts' text) and `artifacts`: each artifact's name
and its text, data (JSON) and files; a file sent as bytes is stored in the agent's
workspace as `a2a/<remote>/<name>-<id>.<ext>` (a file_written side effect, at most
MAX_FILE_BYTES), a file sent as a URL is named by it. The text is capped like any
recorded text (`[agent] max_event_bytes`).

The call's tool_result event records `remote`, `latency_ms` (from sending to the last
answer) and `cost_usd`: the remote's own figure when its task or message metadata gives
one (`cost_usd` or `costUsd`, a number), else 0.
"""

from __future__ import annotations

import asyncio
import json
import math
import mimetypes
import re
import time
import uuid
from collections.abc import Iterable
from typing import Any, Protocol

import httpx
from a2a.client import A2AClientError, Client, ClientCallContext
from a2a.types import (
    AgentCard,
    Artifact,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

from opencrab.actions.base import Action, ActionContext, ActionResult, SideEffect
from opencrab.actions.net_guard import AddressRefused
from opencrab.config.a2a_remotes import A2aRemoteConfig
from opencrab.core.record_cap import cut_text
from opencrab.core.workspace import Workspace
from opencrab.errors import WorkspaceError
from opencrab.llm.types import ToolDefinition
from opencrab.offload import run_blocking

MAX_DESCRIPTION = 4000  # characters of the card shown as the tool's description
MAX_SKILLS = 30
MAX_MESSAGE_CHARS = 100_000
MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_FILES = 20  # per answer; more are described, not stored
MAX_LISTED = 50  # files and artifacts listed in one answer (their text is read whole)
FIRST_POLL_SECS = 0.02
MAX_POLL_SECS = 1.0
ID_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"

STATES: dict[int, str] = {
    TaskState.TASK_STATE_SUBMITTED: "submitted",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
"""Task states as A2A names them on the wire."""
SETTLED = frozenset(
    {"completed", "failed", "canceled", "rejected", "input-required", "auth-required"}
)
"""States a call stops polling at: the task ended, or waits for someone."""
FAILED = frozenset({"failed", "canceled", "rejected", "auth-required"})

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_MESSAGE_CHARS,
            "description": "What you say to the remote agent (omit it to poll a task).",
        },
        "task_id": {
            "type": "string",
            "pattern": ID_PATTERN,
            "description": "A task the remote answered with earlier: poll it (no message) "
            "or answer its question (with message).",
        },
        "context_id": {
            "type": "string",
            "pattern": ID_PATTERN,
            "description": "The remote's conversation to go on in (from an earlier answer).",
        },
    },
    "additionalProperties": False,
}


class Remote(Protocol):
    """What the tool needs of its remote's source (opencrab.a2a.client_source)."""

    @property
    def remote(self) -> str: ...
    @property
    def config(self) -> A2aRemoteConfig: ...
    @property
    def card(self) -> AgentCard | None: ...
    @property
    def client(self) -> Client | None: ...  # None until a card was read
    @property
    def state(self) -> str: ...
    @property
    def last_error(self) -> str | None: ...
    def refresh_soon(self) -> None: ...


class RemoteAgentTool(Action):
    """The remote agent's one tool (see the module docstring)."""

    name = "ask"
    description = "Ask a remote A2A agent."
    parameters = PARAMETERS

    def __init__(self, source: Remote, card: AgentCard) -> None:
        self.source = source
        self.text = describe(source.remote, card)

    def definition(self) -> ToolDefinition:
        return ToolDefinition(name=self.name, description=self.text, parameters=PARAMETERS)

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        message, task_id = args.get("message"), args.get("task_id")
        if message is None and task_id is None:
            return ActionResult.fail(
                "give a message (to send one) or a task_id (to poll that task), or both "
                "(to answer a task that asked for input)"
            )
        call = _Call(self.source, ctx)
        return await call.run(message, task_id, args.get("context_id"))


class _Call:
    """One call of the tool: send or poll, wait, and shape the answer."""

    def __init__(self, source: Remote, ctx: ActionContext) -> None:
        self.source = source
        self.ctx = ctx
        self.remote = source.remote
        self.task: Task | None = None
        self.reply: Message | None = None
        self.began = time.monotonic()

    async def run(
        self, message: str | None, task_id: str | None, context_id: str | None
    ) -> ActionResult:
        client = self.source.client
        if client is None:
            why = f": {self.source.last_error}" if self.source.last_error else ""
            return self._fail(f"is not reachable now ({self.source.state}{why}); nothing was sent")
        loop = asyncio.get_running_loop()
        until = loop.time() + self.source.config.wait_secs
        deadline = self.ctx.turn.deadline
        by_deadline = deadline is not None and deadline <= until
        scope = asyncio.timeout_at(deadline if by_deadline and deadline is not None else until)
        context = ClientCallContext(timeout=self.source.config.wait_secs)
        try:
            async with scope:
                if message is not None:
                    sent = Message(
                        message_id=uuid.uuid4().hex,
                        role=Role.ROLE_USER,
                        parts=[Part(text=message)],
                        task_id=task_id or "",
                        context_id=context_id or "",
                    )
                    async for answer in client.send_message(
                        SendMessageRequest(message=sent), context=context
                    ):
                        if answer.HasField("message"):
                            self.reply = answer.message
                        elif answer.HasField("task"):
                            self.task = answer.task
                else:
                    assert task_id is not None
                    self.task = await client.get_task(GetTaskRequest(id=task_id), context=context)
                pause = FIRST_POLL_SECS
                while self.task is not None and state_of(self.task) not in SETTLED:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, MAX_POLL_SECS)
                    self.task = await client.get_task(
                        GetTaskRequest(id=self.task.id), context=context
                    )
        except TimeoutError:
            if not scope.expired():
                self.source.refresh_soon()
                return self._fail("did not answer in time (its connection timed out)")
            if by_deadline:
                going = "" if self.task is None else f"; its task {self.task.id} goes on there"
                return self._fail(
                    "was cut off by the turn's deadline ([agent] turn_timeout_secs) before "
                    f"it answered{going}"
                )
            if self.task is None:
                wait = self.source.config.wait_secs
                return self._fail(
                    f"did not answer within {wait:g} s ([a2a.remotes.{self.remote}] wait_secs)"
                )
        except AddressRefused as exc:
            return self._fail(
                f"is refused: {exc}; or set allow_private = true in [a2a.remotes.{self.remote}]"
            )
        except (A2AClientError, httpx.HTTPError, OSError) as exc:
            self.source.refresh_soon()  # moved, or down: its card is read again
            return self._fail(f"could not be reached: {_said(exc)}")
        except A2AError as exc:  # an answer: the remote's own error
            return self._fail(f"refused the call: {_said(exc)}")
        return await self._answer()

    async def _answer(self) -> ActionResult:
        """The answer the model reads, with its files stored (see the module docstring)."""
        card = self.source.card
        data: dict[str, Any] = {"agent": card.name if card is not None else self.remote}
        parts: list[Part] = []
        artifacts: list[Artifact] = []
        metadata: list[Any] = []
        if self.reply is not None:
            data["state"] = "replied"
            if self.reply.context_id:
                data["context_id"] = self.reply.context_id
            parts = list(self.reply.parts)
            metadata.append(self.reply.metadata)
        elif self.task is not None:
            state = state_of(self.task)
            data |= {"state": state, "task_id": self.task.id}
            if self.task.context_id:
                data["context_id"] = self.task.context_id
            if self.task.status.HasField("message"):
                parts = list(self.task.status.message.parts)
                metadata.append(self.task.status.message.metadata)
            artifacts = list(self.task.artifacts)
            metadata.append(self.task.metadata)
            if state not in SETTLED:
                data["next"] = (
                    "The remote agent is still working on it: call this tool again with "
                    "this task_id (and no message) to see how it is going."
                )
            elif state == "input-required":
                data["next"] = (
                    "The remote agent asks for input (its text): answer by calling this tool "
                    "again with this task_id and your message."
                )
        else:
            return self._fail("answered with neither a message nor a task")
        keeper = _Files(self.ctx.workspace, self.remote)
        texts, files = await run_blocking(keeper.read, parts)
        described = []
        for artifact in artifacts:
            own_texts, own_files = await run_blocking(keeper.read, artifact.parts)
            texts += own_texts
            described.append(
                {"name": artifact.name or artifact.artifact_id}
                | ({"text": "\n".join(own_texts)} if own_texts else {})
                | ({"files": own_files} if own_files else {})
            )
        text, full = cut_text("\n".join(texts), self.ctx.settings.agent.max_event_bytes)
        data["text"] = text
        if full is not None:
            data["cut"] = {"text": full}
        if files:
            data["files"] = files[:MAX_LISTED]
        if described:
            data["artifacts"] = [_without_text(a) for a in described[:MAX_LISTED]]
        facts = {
            "remote": self.remote,
            "latency_ms": round((time.monotonic() - self.began) * 1000),
            "cost_usd": cost_of(metadata),
        }
        state = data["state"]
        if state in FAILED:
            return ActionResult(
                success=False,
                data=data,
                error=f"remote agent {self.remote!r}: the task is {state}: "
                f"{text[:2000] or 'no message'}",
                side_effects=keeper.effects,
                metadata=facts,
            )
        return ActionResult(success=True, data=data, side_effects=keeper.effects, metadata=facts)

    def _fail(self, what: str) -> ActionResult:
        where = f"remote agent {self.remote!r} ({self.source.config.url})"
        result = ActionResult.fail(f"{where} {what}")
        result.metadata = {
            "remote": self.remote,
            "latency_ms": round((time.monotonic() - self.began) * 1000),
            "cost_usd": 0.0,
        }
        return result


def _without_text(artifact: dict[str, Any]) -> dict[str, Any]:
    """An artifact as listed beside `text` (which already holds its text)."""
    return {k: v for k, v in artifact.items() if k != "text"} | (
        {"has_text": True} if "text" in artifact else {}
    )


def _said(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def state_of(task: Task) -> str:
    """The task's state as A2A names it ("working", "completed"…)."""
    return STATES.get(task.status.state, "unknown")


def cost_of(metadata: Iterable[Any]) -> float:
    """The remote's own cost figure in one of these metadata Structs (the first), else 0."""
    for struct in metadata:
        found = MessageToDict(struct) if struct is not None else {}
        for key in ("cost_usd", "costUsd"):
            value = found.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if math.isfinite(value) and value >= 0:
                return float(value)
    return 0.0


def describe(remote: str, card: AgentCard) -> str:
    """The tool's description: the card's name, description and skills, then how to call."""
    lines = [f"Ask the remote agent {card.name or remote} (A2A)."]
    if card.description:
        lines.append(card.description.strip())
    if card.skills:
        lines.append("Its skills:")
        for skill in list(card.skills)[:MAX_SKILLS]:
            line = f"- {skill.name or skill.id}"
            if skill.description:
                line += f": {skill.description.strip()}"
            if skill.examples:
                line += " (e.g. " + "; ".join(list(skill.examples)[:3]) + ")"
            lines.append(line)
    how = (
        "Send `message`; you get its reply. When it answers with a task still working, "
        "call again with that `task_id` and no message to poll it; when it asks for input, "
        "answer with `message` and the same `task_id`. `context_id` goes on in an earlier "
        "conversation."
    )
    text = "\n".join(lines)
    room = MAX_DESCRIPTION - len(how) - 1
    if len(text) > room:
        text = text[: room - 1] + "…"
    return f"{text}\n{how}"


class _Files:
    """Reads an answer's parts: text, data as JSON, files stored in the workspace."""

    def __init__(self, workspace: Workspace, remote: str) -> None:
        self.workspace = workspace
        self.folder = f"a2a/{_safe(remote)}"
        self.effects: list[SideEffect] = []

    def read(self, parts: Iterable[Part]) -> tuple[list[str], list[dict[str, Any]]]:
        """The parts' texts and the files described. Blocking: it writes files."""
        texts: list[str] = []
        files: list[dict[str, Any]] = []
        for part in parts:
            kind = part.WhichOneof("content")
            if kind == "text":
                texts.append(part.text)
            elif kind == "data":
                texts.append(json.dumps(MessageToDict(part.data), ensure_ascii=False))
            elif kind == "url":
                files.append(_file(part) | {"url": part.url})
            elif kind == "raw":
                files.append(self.keep(part))
        return texts, files

    def keep(self, part: Part) -> dict[str, Any]:
        described = _file(part) | {"bytes": len(part.raw)}
        if len(part.raw) > MAX_FILE_BYTES:
            return described | {"error": f"left out: over {MAX_FILE_BYTES} bytes"}
        if len(self.effects) >= MAX_FILES:
            return described | {"error": f"left out: over {MAX_FILES} files"}
        stem = _safe(part.filename.rsplit(".", 1)[0]) if part.filename else "file"
        extension = (
            mimetypes.guess_extension(part.media_type.split(";")[0].strip())
            if part.media_type
            else None
        )
        if extension is None and "." in part.filename:
            extension = "." + _safe(part.filename.rsplit(".", 1)[1])[:10]
        path = f"{self.folder}/{stem}-{uuid.uuid4().hex[:12]}{extension or '.bin'}"
        try:
            self.workspace.write(path, part.raw)
        except WorkspaceError as exc:
            return described | {"error": f"left out: {exc}"}
        self.effects.append(SideEffect(type="file_written", path=path))
        return described | {"path": path}


def _file(part: Part) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if part.filename:
        found["filename"] = part.filename[:200]
    if part.media_type:
        found["media_type"] = part.media_type[:100]
    return found


def _safe(name: str) -> str:
    """A name as one safe file-name part."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".")[:64] or "file"
