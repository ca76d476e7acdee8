"""Per-agent switches for the seed tools that reach outside the workspace.

execute_command, http_request and fetch_webpage are off for every agent until an operator
switches them on for it (`PUT /api/agents/{id}/tool-settings` with
`{"executeCommand": true}` …); granting the tool (`toolIds`) only offers it. The
switches are read when the tool runs, so switching one off takes effect at the next call.

`approvals` says which tools' calls wait for a person first, per tool:
`{"approvals": {"execute_command": "always", "http_request": "unsafe"}}` — `never` (every
tool's default), `always`, or `unsafe`: only calls that may change something outside the
store (execute_command, write_file, http_request other than GET, a tool of a tool source
unless it is marked read-only, as an MCP tool with readOnlyHint and no destructiveHint);
opencrab.core.approvals holds such calls back and runs them once a person approves.

Example:
    save_tool_settings(db, agent_id, ToolSettings(http_request=True))
    await require_enabled(ctx, "http_request")   # ToolDisabled for execute_command
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from opencrab.errors import OpenCrabError
from opencrab.offload import run_blocking
from opencrab.store.repositories import tool_settings as repository

if TYPE_CHECKING:
    from opencrab.actions.base import ActionContext
    from opencrab.store import Database

GatedTool = Literal["execute_command", "http_request", "fetch_webpage"]
ApprovalPolicy = Literal["never", "always", "unsafe"]
ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,100}$")]
MAX_APPROVAL_RULES = 200


class ToolDisabled(OpenCrabError):
    """A gated seed tool was called by an agent that does not have it switched on."""


class ToolSettings(BaseModel):
    """Which gated seed tools an agent may use (all off by default) and which tools' calls
    wait for a person's approval (none by default)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    execute_command: bool = False
    http_request: bool = False
    fetch_webpage: bool = False
    approvals: dict[ToolName, ApprovalPolicy] = Field(
        default_factory=dict,
        max_length=MAX_APPROVAL_RULES,
        description="Per tool: never (default), always, or unsafe (calls that may change "
        "something outside the store) — such calls wait for a person's approval.",
    )

    def approval_policy(self, tool: str) -> ApprovalPolicy:
        """The tool's approval policy (`never` unless set)."""
        return self.approvals.get(tool, "never")


def load_tool_settings(db: Database, agent_id: str) -> ToolSettings:
    """The agent's switches (all off when none were ever stored)."""
    return ToolSettings.model_validate(repository.load(db, agent_id))


def save_tool_settings(db: Database, agent_id: str, settings: ToolSettings) -> None:
    """Store the agent's switches, replacing what was there."""
    repository.save(db, agent_id, settings.model_dump())


async def require_enabled(ctx: ActionContext, tool: GatedTool) -> None:
    """ToolDisabled unless `tool` is switched on for the calling agent."""
    settings = await run_blocking(load_tool_settings, ctx.db, ctx.agent_id)
    if not getattr(settings, tool):
        raise ToolDisabled(
            f"{tool} is switched off for this agent; only an operator can switch it on "
            f'(PUT /api/agents/{{id}}/tool-settings with {{"{to_camel(tool)}": true}})'
        )
