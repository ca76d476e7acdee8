"""`[a2a]`: A2A 1.0 (Agent2Agent); `[a2a.remotes.<name>]` tables are remote agents used as
tools (opencrab.config.a2a_remotes)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from opencrab.config.a2a_remotes import A2aRemoteConfig, remote_name


class A2aSection(BaseModel):
    """`[a2a]`: the remote A2A agents whose skills agents may call."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    remotes: dict[Annotated[str, AfterValidator(remote_name)], A2aRemoteConfig] = Field(
        default_factory=dict
    )
