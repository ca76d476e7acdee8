"""Persona preview (`POST /api/agents/{id}/preview`): a sample answer with an unsaved persona.

The persona editor sends what it holds (soul, identity, prompt, language; each optional,
the stored one when left out) with a sample message; the agent's model answers once,
with the system prompt a real turn would build. Nothing is stored but the call's
metrics row (see opencrab.core.preview). Invalid persona values are 400 naming the field
(`soul.personality.openness: …`); a spent budget 429; a provider failure 502; the
turn's deadline passing 504.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI
from pydantic import Field

from opencrab.core.agent import MAX_PROMPT_CHARS
from opencrab.core.identity import Identity
from opencrab.core.preview import PersonaDraft, preview_persona
from opencrab.core.soul import Soul
from opencrab.messages import MessageText
from opencrab.plugins import hookimpl
from opencrab.prompts import Language
from opencrab.server.deps import AgentDep, RuntimeDep
from opencrab.server.schemas import ApiInput, ApiModel, error_responses

router = APIRouter(prefix="/api", tags=["Agents"])


class PreviewRequest(ApiInput):
    message: MessageText = Field(description="The sample message the agent answers.")
    soul: Soul | None = Field(default=None, description="The edited persona; left out: stored.")
    identity: Identity | None = Field(default=None, description="The edited identity.")
    prompt: str | None = Field(
        default=None, min_length=1, max_length=MAX_PROMPT_CHARS, description="Edited prompt."
    )
    language: Language | None = Field(default=None, description="en, ja or zh.")


class PreviewAction(ApiModel):
    name: str
    arguments: Any = Field(description="The arguments the model gave (the action is not run).")


class PreviewUsage(ApiModel):
    input_tokens: int
    output_tokens: int


class PreviewResponse(ApiModel):
    reply: str | None = Field(
        description="What the agent says: its plain answer or its speech action's text."
    )
    thought: str | None = Field(description="Text it wrote beside action calls (inner voice).")
    actions: list[PreviewAction] = Field(description="Other actions it chose; none was run.")
    provider: str
    model: str
    usage: PreviewUsage
    cost_usd: float | None = None
    latency_ms: int | None = None
    system_prompt: str = Field(description="The system prompt the model was given.")


@router.post(
    "/agents/{id}/preview",
    operation_id="previewPersona",
    response_model=PreviewResponse,
    responses=error_responses(400, 404, 429, 502, 504),
)
async def preview(agent: AgentDep, body: PreviewRequest, runtime: RuntimeDep) -> PreviewResponse:
    """The agent's answer to a sample message with an edited, unsaved persona (one model
    call; no session, message or event is stored)."""
    draft = PersonaDraft(
        soul=body.soul, identity=body.identity, prompt=body.prompt, language=body.language
    )
    shown = await preview_persona(runtime.engine, agent, draft, body.message)
    response = shown.response
    return PreviewResponse(
        reply=shown.reply,
        thought=shown.thought,
        actions=[PreviewAction(name=a.name, arguments=a.arguments) for a in shown.actions],
        provider=response.provider,
        model=response.model,
        usage=PreviewUsage(
            input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens
        ),
        cost_usd=response.cost_usd,
        latency_ms=response.latency_ms,
        system_prompt=shown.system_prompt,
    )


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
