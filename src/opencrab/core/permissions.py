"""Which actions an agent may call; a model can never widen that itself.

The operator decides what an agent may do: the actions named by its switched-on standard
skills (skill files: OpenCrab's, plugins', `{data_dir}/skills/`), the tools granted to it
(`agent_tools`) and the actions on its own mind every agent has. A learned skill (from
experience, a peer, research or reflection, or added over REST) is a manual, not a
permission: it may name only actions the agent already may call, and the actions it
names never add to them, so a skill switched off stays off. Facilitator-only actions are
for agents whose role is facilitator, whatever a skill file or a grant says.

Example:
    allowed = callable_actions(skills.get_active_skills(), granted, agent.role)
    check_learned_actions(["ws_write"], agent, skills, registry)
    # ValidationError: … ws_write ('workspace-management', which is switched off) …
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from typing import TYPE_CHECKING

from opencrab.core.identity import AgentRole
from opencrab.core.skill_files import SkillDoc
from opencrab.core.skills import Skill, SkillManager
from opencrab.core.tools import granted_tool_names
from opencrab.errors import SkillFileError, ValidationError

if TYPE_CHECKING:
    from opencrab.core.agent import Agent

FACILITATOR_ACTIONS = frozenset({"broadcast_guidance"})
CORE_ACTIONS = frozenset({"generate_inner_voice", "update_impression"})


def callable_actions(skills: Iterable[Skill], granted: Iterable[str], role: AgentRole) -> set[str]:
    """The actions an agent with these skills, granted tools and role may call."""
    allowed = {a for s in skills if s.is_active and s.source == "standard" for a in s.actions}
    allowed |= set(granted) | CORE_ACTIONS
    if role == AgentRole.facilitator():
        return allowed | FACILITATOR_ACTIONS
    return allowed - FACILITATOR_ACTIONS


def refused_actions(
    names: Iterable[str],
    skills: Sequence[Skill],
    granted: Iterable[str],
    role: AgentRole,
    known: Container[str],
) -> dict[str, str]:
    """Each of `names` a learned skill may not name, with why (empty when all may).

    `skills` are all the agent's skills, switched off ones included (to say which).
    """
    allowed = callable_actions(skills, granted, role)
    refused: dict[str, str] = {}
    for name in dict.fromkeys(names):
        if name not in known:
            refused[name] = "no such action"
        elif name in FACILITATOR_ACTIONS and role != AgentRole.facilitator():
            refused[name] = "facilitators only"
        elif name not in allowed:
            off = [
                s.name
                for s in skills
                if s.source == "standard" and not s.is_active and name in s.actions
            ]
            refused[name] = (
                f"{', '.join(repr(n) for n in off)}, which is switched off"
                if off
                else "no active skill or granted tool of the agent offers it"
            )
    return refused


def check_learned_actions(
    names: Sequence[str], agent: Agent, skills: SkillManager, known: Container[str]
) -> None:
    """Raise ValidationError naming each of `names` a learned skill may not name, and why."""
    refused = _refused(names, agent, skills, known)
    if refused:
        raise ValidationError(_refusal(refused))


def check_skill_file_actions(
    doc: SkillDoc, agent: Agent, skills: SkillManager, known: Container[str]
) -> None:
    """`check_learned_actions` for a skill file's text: SkillFileError at the first
    refused action's line (the file's name is the doc's `file_path`)."""
    refused = _refused(doc.actions, agent, skills, known)
    if refused:
        line = doc.line_of(f"action:{next(iter(refused))}")
        raise SkillFileError(doc.file_path, line, _refusal(refused))


def _refused(
    names: Sequence[str], agent: Agent, skills: SkillManager, known: Container[str]
) -> dict[str, str]:
    if not names:
        return {}
    granted = granted_tool_names(skills.db, agent.id)
    return refused_actions(names, skills.list(), granted, agent.role, known)


def _refusal(refused: dict[str, str]) -> str:
    listed = "; ".join(f"{name} ({why})" for name, why in refused.items())
    return (
        "a learned skill may name only actions the agent may already call; not these: "
        f"{listed}. Nothing was stored: leave them out (only the operator can switch a "
        "skill on or grant a tool)"
    )
