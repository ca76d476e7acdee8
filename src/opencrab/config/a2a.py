"""`[a2a]`: OpenCrab's agents served to other agents over A2A 1.0 (opencrab.a2a.server).

`enabled` left out means on when the REST gateway listens on a loopback address and off
otherwise (a server on the network publishes nothing over A2A until told to);
`enabled = true` or `false` decides either way. `publish` names the agents served (names
or ids; `"*"` for every agent); each gets its card at
`/a2a/{agent}/.well-known/agent-card.json` and its endpoint at `/a2a/{agent}`.
`default_agent` is the one `/.well-known/agent-card.json` describes (empty: the first
published agent by name). A message whose metadata says `{"opencrab": {"ticket": true}}`
becomes a ticket; `message/send` waits up to `ticket_wait_secs` for it to finish or ask a
person before answering with the task as it stands, and a stream looks at it every
`poll_secs`. `[a2a.remotes.<name>]` tables are remote agents used as tools
(opencrab.config.a2a_remotes, opencrab.a2a.client).

Example:
    [a2a]
    publish = ["aki", "reviewer"]
    default_agent = "aki"
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from opencrab.config.a2a_remotes import A2aRemoteConfig, remote_name

MAX_PUBLISHED = 1000


def loopback_host(host: str) -> bool:
    """Whether `host` (a bind address) is localhost or a loopback address."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


class A2aSection(BaseModel):
    """`[a2a]`: which agents are served over A2A, how ticket tasks are followed, and the
    remote agents used as tools."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool | None = None  # None: on when the REST gateway binds a loopback address
    publish: list[str] = Field(default_factory=lambda: ["*"], max_length=MAX_PUBLISHED)
    default_agent: str = Field(default="", max_length=200)
    ticket_wait_secs: float = Field(default=60.0, ge=0, le=3600)
    poll_secs: float = Field(default=0.5, gt=0, le=60)
    # remote A2A agents whose one tool, a2a__<name>__ask, agents may be granted
    remotes: dict[Annotated[str, AfterValidator(remote_name)], A2aRemoteConfig] = Field(
        default_factory=dict
    )

    @field_validator("publish")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        names = [name.strip() for name in value]
        for name in names:
            if not name or len(name) > 200:
                raise ValueError("publish lists agent names or ids (1 to 200 characters) or '*'")
        return names

    def serves(self, rest_host: str) -> bool:
        """Whether the A2A routes are served by a REST gateway bound to `rest_host`."""
        return loopback_host(rest_host) if self.enabled is None else self.enabled

    def publishes(self, agent_id: str, agent_name: str) -> bool:
        """Whether the agent (its id and name) is published."""
        return "*" in self.publish or agent_id in self.publish or agent_name in self.publish
