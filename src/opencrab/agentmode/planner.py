"""The master agent's plan: a request becomes a task DAG (issue 22 §2).

The master agent is an OpenCrab agent (`[agent_mode] master_agent`): its IDENTITY, SOUL
and prompt head the system message, followed by the planning instruction in its
language with the plan's JSON Schema. The call goes through the LLM router with the
agent's model for `thinking` (metrics row, task type `agent_mode_plan`, daily budget
checked first, cut off at `[agent] turn_timeout_secs`).

The reply must be one JSON object (a ```json fence is tolerated) whose tasks pass
seed 004's rules (`validation.plan_problems`). An invalid reply is answered with the
problems and asked again, `[agent_mode] plan_retries` times; then the whole request
becomes one task. Every message (the system prompt, the request, each reply, each
correction, the fallback note) is recorded in the session's Conversation.

Example:
    outcome = await plan_request(router, agent, "認証機能を実装して", conversation,
                                 repository=repo, settings=settings)
    outcome.tasks, outcome.fell_back
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticError

from opencrab.agentmode.model import Conversation, MessageRole, WorktreeStrategy
from opencrab.agentmode.validation import PlannedTask, plan_problems, task_id
from opencrab.config import Settings
from opencrab.core.agent import Agent
from opencrab.core.context import ContextSections, prompt_section
from opencrab.core.deadline import TurnDeadline
from opencrab.core.llm_config import agent_model
from opencrab.llm.router import CallInfo, LlmRouter
from opencrab.llm.types import ChatRequest, Message
from opencrab.prompts import prompts

TASK_TYPE = "agent_mode_plan"
PURPOSE = "thinking"
MAX_REPLY_TOKENS = 4000
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class PlanTaskDoc(BaseModel):
    """One task as the model writes it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="task-001, task-002, … in order")
    name: str = Field(min_length=1, max_length=200, description="a short title")
    description: str = Field(description="what the coding agent must do, in full")
    dependencies: list[str] = Field(default_factory=list, description="ids it waits for")
    worktree_strategy: Literal["New", "Shared"] = "New"


class PlanDoc(BaseModel):
    """The plan as the model writes it."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[PlanTaskDoc] = Field(min_length=1)


PLAN_SCHEMA: dict[str, Any] = PlanDoc.model_json_schema()
"""The JSON Schema the model is asked to follow."""


@dataclass
class PlanOutcome:
    """The tasks planned, how many model calls it took, and whether it fell back."""

    tasks: list[PlannedTask]
    attempts: int
    fell_back: bool
    problems: list[list[str]] = field(default_factory=list)  # of each refused reply


def parse_plan(text: str, *, max_tasks: int) -> tuple[list[PlannedTask], list[str]]:
    """The tasks of a reply, or the problems that make it invalid (never both)."""
    body = text.strip()
    fenced = _FENCE.search(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return [], [f"the reply is not one JSON object ({exc.msg} at line {exc.lineno})"]
    try:
        doc = PlanDoc.model_validate(data)
    except PydanticError as exc:
        return [], [
            f"{'.'.join(str(p) for p in err['loc']) or 'reply'}: {err['msg']}"
            for err in exc.errors()[:10]
        ]
    tasks = [
        PlannedTask(
            id=t.id,
            name=t.name.strip(),
            description=t.description.strip(),
            dependencies=tuple(t.dependencies),
            worktree_strategy=WorktreeStrategy(t.worktree_strategy),
        )
        for t in doc.tasks
    ]
    problems = plan_problems(tasks)
    if len(tasks) > max_tasks:
        problems.append(f"the plan has {len(tasks)} tasks; at most {max_tasks} are allowed")
    return ([], problems) if problems else (tasks, [])


def fallback_plan(request: str) -> list[PlannedTask]:
    """The whole request as one task (when no valid plan came)."""
    first_line = next((line.strip() for line in request.splitlines() if line.strip()), "")
    name = first_line[:80] or task_id(1)
    return [PlannedTask(id=task_id(1), name=name, description=request.strip())]


def system_prompt(agent: Agent, repository: Path, max_tasks: int) -> str:
    """The master agent's persona followed by the planning instruction and schema."""
    language = agent.language
    instruction = prompts(language).render(
        "agent_mode_plan_system",
        repository=str(repository),
        max_tasks=str(max_tasks),
        schema=json.dumps(PLAN_SCHEMA, ensure_ascii=False),
    )
    return ContextSections(
        identity=agent.identity.build_context(language),
        soul=agent.soul.build_context(language),
        prompt=prompt_section(agent.prompt, language),
        language=language,
        instruction=instruction,
    ).render()


async def plan_request(
    router: LlmRouter,
    agent: Agent,
    request: str,
    conversation: Conversation,
    *,
    repository: Path,
    settings: Settings,
) -> PlanOutcome:
    """Ask the master agent for a plan of `request`, retrying with the problems shown;
    every message is appended to `conversation` (see the module docstring)."""
    texts = prompts(agent.language)
    config = settings.agent_mode
    system = system_prompt(agent, repository, config.max_tasks)
    conversation.add(MessageRole.SYSTEM, system)
    conversation.add(MessageRole.USER, request)
    history = [Message.system(system), Message.user(request)]
    model = agent_model(agent.llm_config, PURPOSE, {}, {})
    info = CallInfo(purpose=PURPOSE, task_type=TASK_TYPE, agent_id=agent.id)
    refused: list[list[str]] = []
    attempts = config.plan_retries + 1
    for attempt in range(1, attempts + 1):
        deadline = TurnDeadline(settings.agent.turn_timeout_secs)
        deadline.start()
        chat = ChatRequest(model=model, messages=list(history), max_tokens=MAX_REPLY_TOKENS)
        reply = await deadline.bound(router.chat(chat, info))
        conversation.add(MessageRole.ASSISTANT, reply.text)
        tasks, problems = parse_plan(reply.text, max_tasks=config.max_tasks)
        if not problems:
            return PlanOutcome(tasks, attempt, fell_back=False, problems=refused)
        refused.append(problems)
        if attempt == attempts:
            break
        correction = texts.render(
            "agent_mode_plan_retry", problems="\n".join(f"- {p}" for p in problems)
        )
        conversation.add(MessageRole.SYSTEM, correction)
        history += [Message.assistant(reply.text), Message.user(correction)]
    conversation.add(
        MessageRole.SYSTEM, texts.render("agent_mode_plan_fallback", attempts=str(attempts))
    )
    return PlanOutcome(fallback_plan(request), attempts, fell_back=True, problems=refused)
