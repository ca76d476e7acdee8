"""An agent's skills (seed 001 `/api/agents/{id}/skills…`).

Standard skills come from skill files and can only be switched on or off here; skills
the agent learned (or that an operator adds) can be edited and deleted. A learned skill
may name only actions the agent may already call (core/permissions.py): others give 400.
A skill is named in the path by its id or its name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Body, FastAPI, Path, Request, Response
from pydantic import Field

from opencrab.actions.base import ActionRegistry
from opencrab.core.agent import Agent
from opencrab.core.permissions import check_learned_actions
from opencrab.core.runtime import Runtime
from opencrab.core.skills import Skill, SkillManager, SkillSource
from opencrab.plugins import hookimpl
from opencrab.server.deps import AgentDep
from opencrab.server.schemas import ApiInput, ApiModel, error_responses

router = APIRouter(prefix="/api", tags=["Skills"])

SkillRef = Annotated[
    str, Path(alias="skill_id", min_length=1, max_length=200, description="Skill id or name.")
]
ActionName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]


class SkillResponse(ApiModel):
    id: str
    name: str
    description: str
    version: int
    actions: list[str]
    guidance: str
    situation_pattern: str
    source: SkillSource
    source_context: str | None = None
    file_path: str | None = None
    usage_count: int
    effectiveness: float | None = None
    is_active: bool
    last_used_at: datetime | None = None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, skill: Skill) -> SkillResponse:
        return cls.model_validate(skill.model_dump())


class AddSkillRequest(ApiInput):
    name: str = Field(min_length=1, max_length=100)
    description: str = Field(min_length=1, max_length=2_000)
    guidance: str = Field(min_length=1, max_length=20_000)
    situation_pattern: str = Field(default="", max_length=2_000)
    source: Literal["experience", "peer", "research", "reflection"] = "experience"
    source_context: str | None = Field(default=None, max_length=2_000)
    actions: list[ActionName] = Field(default_factory=list, max_length=64)


class UpdateSkillRequest(ApiInput):
    description: str | None = Field(default=None, min_length=1, max_length=2_000)
    guidance: str | None = Field(default=None, min_length=1, max_length=20_000)
    situation_pattern: str | None = Field(default=None, max_length=2_000)
    actions: list[ActionName] | None = Field(default=None, max_length=64)


class ToggleSkillRequest(ApiInput):
    active: bool | None = Field(
        default=None, description="On or off; left out, the skill is flipped."
    )


def _skills(request: Request, agent: Agent) -> SkillManager:
    runtime: Runtime = request.app.state.runtime
    return runtime.engine.skills_for(agent)


def _registry(request: Request) -> ActionRegistry:
    runtime: Runtime = request.app.state.runtime
    return runtime.registry


@router.get(
    "/agents/{id}/skills",
    operation_id="listSkills",
    response_model=list[SkillResponse],
    responses=error_responses(400, 404),
)
def list_skills(agent: AgentDep, request: Request, active: bool | None = None) -> list[Skill]:
    """The agent's skills, standard ones first; `active=true` lists only those switched on."""
    skills = _skills(request, agent).list(active_only=bool(active))
    if active is False:
        skills = [s for s in skills if not s.is_active]
    return skills


@router.post(
    "/agents/{id}/skills",
    operation_id="addSkill",
    status_code=201,
    response_model=SkillResponse,
    responses=error_responses(400, 404, 409),
)
def add_skill(agent: AgentDep, body: AddSkillRequest, request: Request) -> Skill:
    """Teach the agent a skill; a name it already learned is refined (its version goes up).

    A standard skill's name is refused with 409; an action the agent may not call, 400.
    """
    skills = _skills(request, agent)
    check_learned_actions(body.actions, agent, skills, _registry(request))
    return skills.acquire(
        name=body.name,
        description=body.description,
        guidance=body.guidance,
        source=body.source,
        situation_pattern=body.situation_pattern,
        source_context=body.source_context,
        actions=body.actions,
    )


@router.get(
    "/agents/{id}/skills/{skill_id}",
    operation_id="getSkill",
    response_model=SkillResponse,
    responses=error_responses(400, 404),
)
def get_skill(agent: AgentDep, skill: SkillRef, request: Request) -> Skill:
    """One skill, by id or name."""
    return _skills(request, agent).get(skill)


@router.put(
    "/agents/{id}/skills/{skill_id}",
    operation_id="updateSkill",
    response_model=SkillResponse,
    responses=error_responses(400, 404, 409),
)
def update_skill(
    agent: AgentDep, skill: SkillRef, body: UpdateSkillRequest, request: Request
) -> Skill:
    """Edit a learned skill (its version goes up); standard skills give 409."""
    skills = _skills(request, agent)
    if body.actions is not None:
        check_learned_actions(body.actions, agent, skills, _registry(request))
    return skills.update(
        skill,
        description=body.description,
        guidance=body.guidance,
        situation_pattern=body.situation_pattern,
        actions=body.actions,
    )


@router.delete(
    "/agents/{id}/skills/{skill_id}",
    operation_id="deleteSkill",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 404, 409),
)
def delete_skill(agent: AgentDep, skill: SkillRef, request: Request) -> Response:
    """Forget a learned skill; a standard skill gives 409 (switch it off instead)."""
    _skills(request, agent).delete(skill)
    return Response(status_code=204)


@router.post(
    "/agents/{id}/skills/{skill_id}/toggle",
    operation_id="toggleSkill",
    response_model=SkillResponse,
    responses=error_responses(400, 404),
)
def toggle_skill(
    agent: AgentDep,
    skill: SkillRef,
    request: Request,
    body: Annotated[ToggleSkillRequest | None, Body()] = None,
) -> Skill:
    """Switch a skill on or off (`{"active": false}`), or flip it with no body."""
    return _skills(request, agent).toggle(skill, None if body is None else body.active)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
