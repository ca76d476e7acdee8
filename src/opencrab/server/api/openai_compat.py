"""An OpenAI-compatible endpoint: any OpenAI client can talk to an agent.

`GET /v1/models` lists the agents (the model id is the agent's name);
`POST /v1/chat/completions` runs one agent turn with the last user message, plain or
streamed (server-sent `chat.completion.chunk`s, then `data: [DONE]`), with `usage`
summed over the turn's LLM calls. `max_completion_tokens` (or the older `max_tokens`)
caps each of the turn's model calls; `finish_reason` is `length` when the reply was cut
there. Off by default: `[gateway.openai_compat] enabled = true`.

OpenAI clients resend the whole conversation each time; the agent keeps its own
history, so a request continues the session whose transcript the request's earlier
messages match (a hash kept in the session's context), or the session named by the
`X-OpenCrab-Session` header; otherwise a new session starts. A turn that ended on a
call held for a person's approval answers with what waits and where to decide it; once
decided, the agent's answer is stored in that session (core/approval_followups.py), and
the conversation goes on from the notice as the client holds it. The agent's own persona
is its system prompt: system messages in the request are not sent to the model.
Every error under `/v1` uses OpenAI's shape, `{"error": {"message", "type", "param",
"code"}}` — request validation, unknown routes and a missing token included (see
server/errors.py), so OpenAI's clients show the reason.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal
from uuid import uuid4

from fastapi import APIRouter, FastAPI, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from opencrab.core.agent import Agent
from opencrab.core.runtime import Runtime
from opencrab.core.sessions import mark_session, marked_chat_session
from opencrab.core.steps import LlmReplied, Spoke, TextDelta, TurnFailed, TurnResult
from opencrab.errors import NotFoundError
from opencrab.messages import RestSource, Sender, message_problem
from opencrab.plugins import hookimpl
from opencrab.server.deps import RuntimeDep
from opencrab.server.errors import openai_error_body

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "\n".join(p.text for p in self.content if p.type == "text" and p.text)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """The fields OpenCrab uses; other OpenAI parameters are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200, description="An agent's name or id.")
    messages: list[ChatMessage] = Field(min_length=1, max_length=10_000)
    max_tokens: int | None = Field(default=None, ge=1, description="Deprecated by OpenAI.")
    max_completion_tokens: int | None = Field(
        default=None, ge=1, description="The most tokens each model call may write."
    )
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(default=None, max_length=200)


class OpenAiErrorDetail(BaseModel):
    message: str
    type: str = Field(examples=["invalid_request_error"])
    param: str | None
    code: str | None


class OpenAiErrorResponse(BaseModel):
    """OpenAI's error shape, which every `/v1` error has."""

    error: OpenAiErrorDetail


def _documented(description: str) -> dict[str, Any]:
    return {"model": OpenAiErrorResponse, "description": description}


class OpenAiError(Exception):
    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ):
        super().__init__(message)
        self.status, self.param, self.code = status, param, code

    def response(self) -> JSONResponse:
        body = openai_error_body(self.status, str(self), param=self.param, code=self.code)
        return JSONResponse(body, status_code=self.status)


@router.get(
    "/models",
    operation_id="listOpenAiModels",
    responses={400: _documented("Invalid request (OpenAI error shape)")},
)
def list_models(runtime: RuntimeDep) -> dict[str, Any]:
    """The agents, as OpenAI models (id = agent name)."""
    return {
        "object": "list",
        "data": [
            {
                "id": agent.name,
                "object": "model",
                "created": int(agent.created_at.timestamp()),
                "owned_by": "opencrab",
            }
            for agent in runtime.agents.list()
        ],
    }


@router.post(
    "/chat/completions",
    operation_id="createChatCompletion",
    responses={
        200: {
            "description": "A chat.completion object, or an SSE stream of chunks.",
            "content": {"text/event-stream": {}},
        },
        400: _documented("Invalid request (OpenAI error shape)"),
        404: _documented("No such agent (OpenAI error shape)"),
        502: _documented("The model failed (OpenAI error shape)"),
    },
)
async def chat_completions(
    body: ChatCompletionRequest,
    runtime: RuntimeDep,
    session_header: Annotated[str | None, Header(alias="X-OpenCrab-Session")] = None,
) -> Any:
    """One agent turn for the conversation's last user message."""
    try:
        agent = runtime.agents.get(body.model)
    except NotFoundError:
        return OpenAiError(
            404,
            f"The model {body.model!r} does not exist",
            param="model",
            code="model_not_found",
        ).response()
    last = body.messages[-1]
    if last.role != "user":
        return OpenAiError(
            400, "the last message must be a user message", param="messages"
        ).response()
    text = last.text()
    problem = message_problem(text)
    if problem is not None:
        return OpenAiError(400, problem, param="messages").response()
    prior = [m for m in body.messages[:-1] if m.role in ("user", "assistant")]
    session_id = session_header or _continued_session(runtime, agent, prior)
    completion_id = f"chatcmpl-{uuid4().hex}"
    created = int(time.time())
    steps = runtime.turns.chat_steps(
        agent,
        text,
        session_id=session_id,
        source=RestSource(request_id=completion_id),
        sender=Sender(id=body.user or "openai-client"),
        stream=body.stream,
        max_tokens=body.max_completion_tokens or body.max_tokens,
    )
    if not body.stream:
        turn = _Turn()
        async for step in steps:
            turn.see(step)
        result = turn.finish(runtime, agent, prior, text)
        if result.error is not None and result.reply is None:
            return OpenAiError(502, result.error.message, code=result.error.error).response()
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": agent.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": turn.content()},
                    "finish_reason": turn.finish_reason(),
                    "logprobs": None,
                }
            ],
            "usage": turn.usage(),
            "system_fingerprint": None,
        }
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return StreamingResponse(
        _stream(runtime, agent, steps, prior, text, completion_id, created, include_usage),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache"},
    )


async def _stream(
    runtime: Runtime,
    agent: Agent,
    steps: AsyncIterator[Any],
    prior: list[ChatMessage],
    text: str,
    completion_id: str,
    created: int,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": agent.name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            **extra,
        }
        return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"

    turn = _Turn()
    yield chunk({"role": "assistant", "content": ""})
    streamed = False
    async for step in steps:
        turn.see(step)
        if isinstance(step, TextDelta) and step.text:
            streamed = True
            yield chunk({"content": step.text})
        elif isinstance(step, Spoke) and not streamed:
            yield chunk({"content": step.text})
        elif isinstance(step, TurnFailed) and turn.reply is None:
            yield chunk({"content": f"[error: {step.message}]"})
    turn.finish(runtime, agent, prior, text)
    if turn.waiting is not None:
        yield chunk({"content": ("\n\n" if turn.reply else "") + turn.waiting})
    yield chunk({}, turn.finish_reason())
    if include_usage:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": agent.name,
            "choices": [],
            "usage": turn.usage(),
        }
        yield b"data: " + json.dumps(body).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


class _Turn:
    """Collects a turn's steps: the reply, the token counts, the result, whether cut."""

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0
        self.reply: str | None = None
        self.result: TurnResult | None = None
        self.last_finish: str | None = None  # of the latest model call
        self.cut = False  # the reply came from a call stopped at max_tokens
        self.waiting: str | None = None  # a held call: what waits, where to decide it

    def see(self, step: Any) -> None:
        if isinstance(step, LlmReplied):
            self.input_tokens += step.input_tokens
            self.output_tokens += step.output_tokens
            self.last_finish = step.finish_reason
        elif isinstance(step, Spoke):
            self.reply = step.text
            self.cut = self.last_finish == "length"
        elif isinstance(step, TurnResult):
            self.result = step

    def finish_reason(self) -> str:
        """`length` when the reply (or, with none, the last call) was cut; else `stop`."""
        if self.cut or (self.reply is None and self.last_finish == "length"):
            return "length"
        return "stop"

    def content(self) -> str:
        """What the client is answered: the reply, and the notice of a held call."""
        parts = [t for t in (self.result and self.result.reply, self.waiting) if t]
        return "\n\n".join(parts)

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.input_tokens,
            "completion_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
        }

    def finish(
        self, runtime: Runtime, agent: Agent, prior: list[ChatMessage], text: str
    ) -> TurnResult:
        """Remember how the conversation continues, so the next request finds the session."""
        assert self.result is not None
        if self.result.approval_id is not None:
            self.waiting = runtime.approvals.notice(self.result.approval_id)
        after = [*_pairs(prior), ("user", text), ("assistant", self.content())]
        mark_session(runtime.db, self.result.session_id, MARKER, _digest(agent.id, after))
        return self.result


MARKER = ("openai_compat", "next")
"""Where a chat session's context keeps the digest of the conversation it continues as."""


def _pairs(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role, m.text()) for m in messages]


def _digest(agent_id: str, messages: list[tuple[str, str]]) -> str:
    data = json.dumps([agent_id, messages], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


def _continued_session(runtime: Runtime, agent: Agent, prior: list[ChatMessage]) -> str | None:
    """The active chat session this conversation continues, if the agent has one."""
    if not prior:
        return None
    key = _digest(agent.id, _pairs(prior))
    return marked_chat_session(runtime.db, agent.id, MARKER, key)


@hookimpl
def register_routes(app: FastAPI) -> None:
    settings = app.state.settings
    if not settings.gateway.openai_compat.enabled:
        return
    app.include_router(router)

    @app.exception_handler(OpenAiError)
    async def _openai_error(_: Request, exc: OpenAiError) -> JSONResponse:
        return exc.response()
