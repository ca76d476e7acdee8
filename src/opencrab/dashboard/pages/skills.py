"""Skills (seed 001 "2. スキル管理"): switch standard skills, inspect and write the others.

`/agents/{name}/skills` lists the standard skills with their switches and the acquired
ones (learned by the agent, or written here) with their use and effectiveness; a
skill's page shows its text, its numbers and its version history; the editor writes a
skill as a skill file (YAML frontmatter and Markdown). Pages read through the same
SkillManager the REST routes use (server/api/skills.py); every change the page makes is
a call to those routes from static/js/skills.js.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse

from opencrab.actions.base import ActionRegistry
from opencrab.core.agent import Agent
from opencrab.core.permissions import callable_actions
from opencrab.core.skills import Skill, SkillManager
from opencrab.core.tools import granted_tool_names
from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.render import render
from opencrab.errors import ConflictError
from opencrab.offload import run_blocking
from opencrab.prompts import Language

router = APIRouter()

SkillRef = Annotated[str, Path(min_length=1, max_length=200)]

NEW_SKILL: dict[Language, str] = {
    "en": """---
name: my-skill
description: What this skill is for, in one sentence
situation_pattern: When it applies
# actions the agent may already call, e.g. [send_speech]
actions: []
---

# My skill

What to do, step by step.
""",
    "ja": """---
name: 新しいスキル
description: このスキルが何のためのものかを一文で
situation_pattern: このスキルを使う場面
# すでに呼べるアクションだけを書けます（例: [send_speech]）
actions: []
---

# 新しいスキル

何をどうするかを手順で書きます。
""",
    "zh": """---
name: 新技能
description: 用一句话说明这个技能的用途
situation_pattern: 适用的场景
# 只能写智能体已经可以调用的动作（例如 [send_speech]）
actions: []
---

# 新技能

按步骤写下该怎么做。
""",
}
"""The editor's starting text for a new skill, in the agent's language."""


def _manager(request: Request, agent: Agent) -> SkillManager:
    manager: SkillManager = request.app.state.runtime.engine.skills_for(agent)
    return manager


def _nameable_actions(request: Request, agent: Agent, manager: SkillManager) -> list[str]:
    """The actions a skill written for this agent may name (core/permissions.py)."""
    registry: ActionRegistry = request.app.state.runtime.registry
    granted = granted_tool_names(manager.db, agent.id)
    allowed = callable_actions(manager.list(), granted, agent.role)
    return sorted(name for name in allowed if name in registry)


@router.get("/agents/{name}/skills", response_class=HTMLResponse)
async def skills_page(agent: PageAgent, request: Request) -> HTMLResponse:
    """The agent's standard skills (with switches) and its acquired ones."""
    manager = await run_blocking(_manager, request, agent)
    skills = await run_blocking(manager.list)
    return render(
        request,
        "skills.html",
        title=f"Skills · {agent.name}",
        agent=agent,
        tab="skills",
        standard=[s for s in skills if s.source == "standard"],
        acquired=[s for s in skills if s.source != "standard"],
    )


@router.get("/agents/{name}/skills/new", response_class=HTMLResponse)
async def new_skill_page(agent: PageAgent, request: Request) -> HTMLResponse:
    """The editor, for a skill of the operator's own."""
    return await _editor(request, agent, None, NEW_SKILL[agent.language])


@router.get("/agents/{name}/skills/{skill}", response_class=HTMLResponse)
async def skill_page(agent: PageAgent, skill: SkillRef, request: Request) -> HTMLResponse:
    """One skill: its text, source, use, effectiveness and version history."""
    manager = await run_blocking(_manager, request, agent)
    found: Skill = await run_blocking(manager.get, skill)
    versions = await run_blocking(manager.versions, found.id)
    return render(
        request,
        "skill_detail.html",
        title=f"{found.name} · Skills · {agent.name}",
        agent=agent,
        tab="skills",
        skill=found,
        versions=versions,
    )


@router.get("/agents/{name}/skills/{skill}/edit", response_class=HTMLResponse)
async def edit_skill_page(agent: PageAgent, skill: SkillRef, request: Request) -> HTMLResponse:
    """The editor, on an acquired skill's current text (a standard skill: 409 page)."""
    manager = await run_blocking(_manager, request, agent)
    found: Skill = await run_blocking(manager.get, skill)
    if found.source == "standard":
        raise ConflictError(
            f"{found.name!r} is a standard skill: it is edited in its file "
            f"({found.file_path}); here it can only be switched on or off"
        )
    return await _editor(request, agent, found, found.markdown())


async def _editor(request: Request, agent: Agent, skill: Skill | None, text: str) -> HTMLResponse:
    manager = await run_blocking(_manager, request, agent)
    nameable = await run_blocking(_nameable_actions, request, agent, manager)
    context: dict[str, Any] = {"agent": agent, "tab": "skills", "skill": skill, "text": text}
    title = f"Edit {skill.name}" if skill else "New skill"
    return render(
        request,
        "skill_edit.html",
        title=f"{title} · Skills · {agent.name}",
        nameable=nameable,
        **context,
    )
