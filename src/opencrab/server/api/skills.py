"""An agent's skills (seed 001 `/api/agents/{id}/skills…`).

Standard skills come from skill files and can only be switched on or off here; skills
the agent learned (or that an operator adds) can be edited and deleted. A learned skill
may name only actions the agent may already call (core/permissions.py): others give 400.
A skill is named in the path by its id or its name.

A skill can be sent as fields or as `markdown`, the text of a skill file (YAML
frontmatter: name, description, version, situation_pattern, actions; the body is the
guidance); every skill is also returned as `markdown`. A mistake in that text is a 400
`invalid_skill_file` whose message starts "line N:" and whose `line` is N. Each version
of a skill's text is kept: `GET …/skills/{skill_id}/versions`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Body, FastAPI, Path, Request, Response
from pydantic import Field

from opencrab.actions.base import ActionRegistry
from opencrab.core.agent import Agent
from opencrab.core.permissions import check_learned_actions, check_skill_file_actions
from opencrab.core.runtime import Runtime
from opencrab.core.skill_files import MAX_SKILL_FILE_BYTES, SkillDoc, parse_skill_text
from opencrab.core.skill_versions import SkillChange, SkillVersion
from opencrab.core.skills import Skill, SkillManager, SkillSource
from opencrab.errors import ConflictError, SkillFileError, ValidationError
from opencrab.plugins import hookimpl
from opencrab.server.deps import AgentDep
from opencrab.server.schemas import ApiInput, ApiModel, error_responses

router = APIRouter(prefix="/api", tags=["Skills"])

SkillRef = Annotated[
    str, Path(alias="skill_id", min_length=1, max_length=200, description="Skill id or name.")
]
ActionName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
Markdown = Annotated[
    str | None,
    Field(
        default=None,
        min_length=1,
        max_length=MAX_SKILL_FILE_BYTES,
        description="The skill as a skill file: YAML frontmatter, then the guidance.",
        examples=["---\nname: ask-why\ndescription: Ask for reasons\n---\nAsk why first."],
    ),
]
CONTENT_FIELDS = ("name", "description", "guidance", "situation_pattern", "actions")


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
    recent_scores: list[float] = Field(
        description="The effectiveness scores of the latest turns that used it, oldest first."
    )
    is_active: bool
    last_used_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    markdown: str = Field(description="The skill as a skill file (what `markdown` takes).")

    @classmethod
    def of(cls, skill: Skill) -> SkillResponse:
        return cls.model_validate({**skill.model_dump(), "markdown": skill.markdown()})


class SkillVersionResponse(ApiModel):
    version: int
    name: str
    description: str
    situation_pattern: str
    guidance: str
    actions: list[str]
    source: SkillSource
    source_context: str | None = None
    change: SkillChange = Field(
        description="What made this version: created, refined (learned again), edited, "
        "file (its standard file changed) or recorded (kept when histories began)."
    )
    created_at: datetime
    markdown: str

    @classmethod
    def of(cls, version: SkillVersion) -> SkillVersionResponse:
        return cls.model_validate({**version.model_dump(), "markdown": version.markdown()})


class AddSkillRequest(ApiInput):
    """Either `markdown`, or `name`, `description` and `guidance` (and the optional fields)."""

    markdown: Markdown
    name: str | None = Field(default=None, min_length=1, max_length=100)
    description: str | None = Field(default=None, min_length=1, max_length=2_000)
    guidance: str | None = Field(default=None, min_length=1, max_length=20_000)
    situation_pattern: str = Field(default="", max_length=2_000)
    source: Literal["experience", "peer", "research", "reflection"] = "experience"
    source_context: str | None = Field(default=None, max_length=2_000)
    actions: list[ActionName] = Field(default_factory=list, max_length=64)


class UpdateSkillRequest(ApiInput):
    """Fields to change, or `markdown`: the whole skill again (its name stays; a `version`
    in it must be the skill's current one, else 409: it changed since it was read)."""

    markdown: Markdown
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


def _only_markdown(body: AddSkillRequest | UpdateSkillRequest) -> None:
    """Markdown is the whole skill: fields beside it would contradict it."""
    both = [name for name in CONTENT_FIELDS if name in body.model_fields_set]
    if body.markdown is not None and both:
        raise ValidationError(
            f"markdown: give the skill either as markdown or as fields, not both "
            f"(also given: {', '.join(both)})"
        )


def _parse(markdown: str, *, strict_name: bool) -> SkillDoc:
    return parse_skill_text(markdown, "", strict_name=strict_name)


@router.get(
    "/agents/{id}/skills",
    operation_id="listSkills",
    response_model=list[SkillResponse],
    responses=error_responses(400, 404),
)
def list_skills(
    agent: AgentDep, request: Request, active: bool | None = None
) -> list[SkillResponse]:
    """The agent's skills, standard ones first; `active=true` lists only those switched on."""
    skills = _skills(request, agent).list(active_only=bool(active))
    if active is False:
        skills = [s for s in skills if not s.is_active]
    return [SkillResponse.of(s) for s in skills]


@router.post(
    "/agents/{id}/skills",
    operation_id="addSkill",
    status_code=201,
    response_model=SkillResponse,
    responses=error_responses(400, 404, 409),
)
def add_skill(agent: AgentDep, body: AddSkillRequest, request: Request) -> SkillResponse:
    """Teach the agent a skill; a name it already learned is refined (its version goes up).

    Give `markdown` (a skill file; its `version` is not used, the server numbers
    versions) or `name`, `description` and `guidance`. A standard skill's name is refused
    with 409; an action the agent may not call, 400 (at its line, in markdown).
    """
    _only_markdown(body)
    skills = _skills(request, agent)
    if body.markdown is not None:
        doc = _parse(body.markdown, strict_name=True)
        check_skill_file_actions(doc, agent, skills, _registry(request))
        name, description, guidance = doc.name, doc.description, doc.guidance
        situation, actions = doc.situation_pattern, list(doc.actions)
    else:
        if body.name is None or body.description is None or body.guidance is None:
            missing = next(f for f in ("name", "description", "guidance") if not getattr(body, f))
            raise ValidationError(f"{missing}: required (or give the skill as markdown)")
        name, description, guidance = body.name, body.description, body.guidance
        situation, actions = body.situation_pattern, body.actions
        check_learned_actions(actions, agent, skills, _registry(request))
    return SkillResponse.of(
        skills.acquire(
            name=name,
            description=description,
            guidance=guidance,
            source=body.source,
            situation_pattern=situation,
            source_context=body.source_context,
            actions=actions,
        )
    )


@router.get(
    "/agents/{id}/skills/{skill_id}",
    operation_id="getSkill",
    response_model=SkillResponse,
    responses=error_responses(400, 404),
)
def get_skill(agent: AgentDep, skill: SkillRef, request: Request) -> SkillResponse:
    """One skill, by id or name."""
    return SkillResponse.of(_skills(request, agent).get(skill))


@router.get(
    "/agents/{id}/skills/{skill_id}/versions",
    operation_id="listSkillVersions",
    response_model=list[SkillVersionResponse],
    responses=error_responses(400, 404),
)
def list_skill_versions(
    agent: AgentDep, skill: SkillRef, request: Request
) -> list[SkillVersionResponse]:
    """The kept versions of a skill's text (the newest 50), newest first."""
    return [SkillVersionResponse.of(v) for v in _skills(request, agent).versions(skill)]


@router.put(
    "/agents/{id}/skills/{skill_id}",
    operation_id="updateSkill",
    response_model=SkillResponse,
    responses=error_responses(400, 404, 409),
)
def update_skill(
    agent: AgentDep, skill: SkillRef, body: UpdateSkillRequest, request: Request
) -> SkillResponse:
    """Edit a learned skill (its version goes up); standard skills give 409.

    With `markdown`, the whole skill is replaced by that text; its name must stay, and a
    `version` in it that is not the current one gives 409 (the skill changed meanwhile).
    """
    _only_markdown(body)
    skills = _skills(request, agent)
    if body.markdown is None:
        if body.actions is not None:
            check_learned_actions(body.actions, agent, skills, _registry(request))
        updated = skills.update(
            skill,
            description=body.description,
            guidance=body.guidance,
            situation_pattern=body.situation_pattern,
            actions=body.actions,
        )
        return SkillResponse.of(updated)
    current = skills.get(skill)
    if current.source == "standard":
        raise ConflictError(f"{current.name!r} is a standard skill; edit its file instead")
    doc = _parse(body.markdown, strict_name=False)
    if doc.name != current.name:
        raise SkillFileError(
            "",
            doc.line_of("name"),
            f"the name cannot change here (it is {current.name!r}); to use another name, "
            "add a new skill and delete this one",
        )
    check_skill_file_actions(doc, agent, skills, _registry(request))
    updated = skills.update(
        current.id,
        description=doc.description,
        guidance=doc.guidance,
        situation_pattern=doc.situation_pattern,
        actions=doc.actions,
        expected_version=doc.version if doc.line_of("version") else None,
    )
    return SkillResponse.of(updated)


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
) -> SkillResponse:
    """Switch a skill on or off (`{"active": false}`), or flip it with no body."""
    toggled = _skills(request, agent).toggle(skill, None if body is None else body.active)
    return SkillResponse.of(toggled)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
