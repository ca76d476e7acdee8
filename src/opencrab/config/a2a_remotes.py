"""`[a2a.remotes.<name>]`: remote A2A agents whose skills agents may call as tools
(opencrab.a2a.client).

A remote is reached at `url`, where its Agent Card is read (`<url>/.well-known/agent-card.json`,
or `card_path`); a bearer token, when it wants one, comes from the variable `token_env`
or, encrypted with the key of the dashboard's API keys, from `token_encrypted` (what
`opencrab a2a-remotes encrypt-token` prints). Every connection goes through the SSRF
guard unless `allow_private = true`. The model sees it as the tool `a2a__<name>__ask`,
granted per agent like any tool.

Example:
    [a2a.remotes.research]
    url = "https://agents.example.org/a2a/research"
    token_env = "RESEARCH_TOKEN"
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

REMOTE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,39}")
"""A remote's name: it becomes the namespace `a2a__<name>`, so no `__` inside it."""

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def remote_name(name: str) -> str:
    """`name` when it may name a remote, else ValueError saying why."""
    if not REMOTE_NAME.fullmatch(name):
        raise ValueError(
            f"remote name {name!r}: use 1 to 40 letters, digits, '-' or single '_' "
            "(it becomes the tool namespace a2a__<name>)"
        )
    return name


class A2aRemoteConfig(BaseModel):
    """One `[a2a.remotes.<name>]` table: a remote A2A agent (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # the agent's base URL (its interfaces are those its card names) and its card's path
    url: str = Field(pattern=r"^https?://[^\s/?#]+[^\s]*$", max_length=2000)
    card_path: str = Field(default="/.well-known/agent-card.json", pattern=r"^/\S*$")
    # the bearer token: the variable holding it, or it encrypted (never both)
    token_env: str = ""
    token_encrypted: str = ""
    # private, loopback and link-local addresses reachable (the SSRF guard off)
    allow_private: bool = False
    # the binding used when the card offers both (it decides when "auto")
    binding: Literal["auto", "JSONRPC", "HTTP+JSON"] = "auto"
    # one call waits this long for the remote's answer, then hands back the task to poll
    # (a turn's own deadline cuts it sooner)
    wait_secs: float = Field(default=120.0, gt=0, le=3600)
    # the card is read again this often, and after a call that could not reach the remote
    refresh_secs: float = Field(default=600.0, gt=0, le=86_400)
    # connecting and reading the card give up after this long
    connect_timeout_secs: float = Field(default=10.0, gt=0, le=600)

    @model_validator(mode="after")
    def _one_token(self) -> A2aRemoteConfig:
        if self.token_env and not ENV_NAME.fullmatch(self.token_env):
            raise ValueError(f"token_env {self.token_env!r} is no variable name")
        if self.token_env and self.token_encrypted:
            raise ValueError("set token_env or token_encrypted, not both")
        return self
