"""`[mcp.servers.<name>]`: the MCP servers whose tools agents may call (opencrab.mcp.client).

A server is either a stdio one (`command`, `args`, `env`; it runs in bubblewrap like
execute_command, with `read_paths` readable, a scratch folder writable and network only
when `network = true`) or a streamable HTTP one (`url`, `headers`, a bearer token read
from the variable `bearer_token_env`; behind the SSRF guard unless `allow_private = true`).
Its tools reach the model as `mcp__<name>__<tool>`.

Example:
    [mcp.servers.files]
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "/mcp"]

    [mcp.servers.tracker]
    url = "https://tracker.example.org/mcp"
    bearer_token_env = "TRACKER_TOKEN"
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

SERVER_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,39}")
"""A server's name: it becomes the namespace `mcp__<name>`, so no `__` inside it."""

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

STDIO_KEYS = ("args", "env", "read_paths", "network")
HTTP_KEYS = ("headers", "bearer_token_env", "allow_private")


def _server_name(name: str) -> str:
    if not SERVER_NAME.fullmatch(name):
        raise ValueError(
            f"server name {name!r}: use 1 to 40 letters, digits, '-' or single '_' "
            "(it becomes the tool namespace mcp__<name>)"
        )
    return name


class McpServerConfig(BaseModel):
    """One `[mcp.servers.<name>]` table: a stdio server (`command`) or an HTTP one (`url`)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # stdio: the program and its arguments, the variables it gets (nothing else of the
    # server's environment but PATH, HOME and LANG), what it may read (its installation:
    # a virtualenv, node_modules…), and whether it may use the network
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    read_paths: list[str] = Field(default_factory=list)
    network: bool = False
    # streamable HTTP: the endpoint, extra headers, the variable holding a bearer token,
    # and whether private, loopback and link-local addresses may be reached
    url: str = Field(default="", pattern=r"^(https?://.+)?$")
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token_env: str = ""
    allow_private: bool = False
    # a call not answered in this time fails, naming the server; connecting and listing
    # tools has its own limit
    call_timeout_secs: float = Field(default=60.0, gt=0, le=3600)
    start_timeout_secs: float = Field(default=30.0, gt=0, le=600)

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command else "http"

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError(
                "set either command (a stdio server) or url (a streamable HTTP server)"
                + (", not both" if self.command else "")
            )
        given = self.model_fields_set
        wrong = HTTP_KEYS if self.command else STDIO_KEYS
        for key in wrong:
            if key in given:
                kind = "an HTTP server (url)" if key in HTTP_KEYS else "a stdio server (command)"
                raise ValueError(f"{key} is a setting of {kind}; this server has the other kind")
        if self.bearer_token_env and not ENV_NAME.fullmatch(self.bearer_token_env):
            raise ValueError(f"bearer_token_env {self.bearer_token_env!r} is no variable name")
        return self


class McpSection(BaseModel):
    """`[mcp]`: `[mcp.servers.<name>]` tables, one per MCP server whose tools agents use."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    servers: dict[Annotated[str, AfterValidator(_server_name)], McpServerConfig] = Field(
        default_factory=dict
    )
