"""Agents (seed 001 `Agent`, seed 002 `agents`): the stored aggregate and its store.

An agent is one `agents` row (name, description, prompt, language, LLM config with its
daily budget, heartbeat config) with its `soul` and `identity` rows and granted tools. The
memory, skills and workspace hang off its id and are opened where they are used. An agent
without a language of its own follows the server's `[agent] language`. The rows are read
and written through store/repositories/agents.py (agent, soul, identity) and tools.py
(grants); today's spend through agent_stats.py.

Example:
    store = AgentStore(db, settings)
    agent = store.create(AgentCreate(name="aki", prompt="You help with research."))
    store.get("aki").soul.build_context("en")
    store.check_budget(agent)          # BudgetExceeded when a budget is spent (core/budgets)
"""

from __future__ import annotations

import builtins
import json
import tomllib
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast
from uuid import UUID, uuid4

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from sqlalchemy.engine import Connection

from opencrab.config import Settings
from opencrab.core.budgets import Budgets, CostCap
from opencrab.core.identity import AgentRole, Identity
from opencrab.core.llm_config import AgentLlmConfig
from opencrab.core.soul import Soul
from opencrab.errors import ConflictError, NameTaken, NotFoundError, ValidationError
from opencrab.messages import Outlet, session_for
from opencrab.prompts import Language
from opencrab.store import Database
from opencrab.store.repositories import agent_stats
from opencrab.store.repositories import agents as repo
from opencrab.store.repositories import tools as tools_repo
from opencrab.store.repositories.agents import AgentRow, IdentityRow, SoulRow
from opencrab.store.repositories.budgets import AlertRow
from opencrab.store.repositories.tickets import count_agent_tickets

MAX_NAME = 100
MAX_PROMPT_CHARS = 100_000


class _Home(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True
    )  # API JSON: camelCase

    every_secs: int = Field(
        default=3600, ge=60, le=7 * 86_400, description="At most one heartbeat speech per …"
    )


class SessionHome(_Home):
    """An agent's home conversation that is one of its chat sessions."""

    gateway: Literal["session"]
    session_id: UUID

    def session_for(self, agent_id: str) -> str:
        """The id of the session the home conversation is stored in."""
        return str(self.session_id)


class ChannelHome(_Home):
    """An agent's home conversation on a chat gateway: the gateway's name, the channel
    the heartbeat's speech is sent to, and the conversation whose session stores it (the
    channel's own when None; a gateway keying conversations by server and channel uses
    "<server id>/<channel id>").

    A home in the form from before homes were (gateway, channel) pairs, `{"gateway": …,
    "guildId": …, "channelId": …}` (an API request, a persona file; stored rows were
    rewritten by revision 0029), reads as that conversation, "<guild id>/<channel id>"."""

    gateway: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    channel_id: str = Field(min_length=1, max_length=500)
    conversation: str | None = Field(default=None, min_length=1, max_length=500)

    @field_validator("gateway")
    @classmethod
    def _not_a_session(cls, value: str) -> str:
        if value == "session":
            raise ValueError("a session home has a sessionId")
        return value

    @model_validator(mode="before")
    @classmethod
    def _stored_guild(cls, data: Any) -> Any:
        if isinstance(data, dict):
            guild = data.get("guildId", data.get("guild_id"))
            if guild is not None and not data.get("conversation"):
                data = {k: v for k, v in data.items() if k not in ("guildId", "guild_id")}
                channel = data.get("channelId", data.get("channel_id"))
                data["conversation"] = f"{guild}/{channel}"
        return data

    def outlet(self) -> Outlet:
        """Where the heartbeat's speech is written."""
        return Outlet(gateway=self.gateway, channel=self.channel_id)

    def session_for(self, agent_id: str) -> str:
        """The id of the session the home conversation is stored in: the one the gateway
        keeps for the conversation (opencrab.messages.session_for)."""
        return session_for(self.gateway, self.conversation or self.channel_id, agent_id)


HomeConversation = SessionHome | ChannelHome
"""Where an agent may speak on its heartbeat outside discussions."""


class HeartbeatConfig(BaseModel):
    """Seed `HeartbeatConfig`: a prime interval keeps agents from ticking in step.

    `home`, when set, is where the heartbeat may speak besides the agent's discussions.
    """

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True
    )  # API JSON: camelCase

    interval_secs: int = Field(default=29, ge=1, le=86_400)
    enabled: bool = True
    home: HomeConversation | None = None


def _check_name(value: str) -> str:
    value = value.strip()
    if not value or len(value) > MAX_NAME:
        raise ValueError(f"name must be 1 to {MAX_NAME} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("name must not contain control characters")
    try:
        UUID(value)
    except ValueError:
        return value
    raise ValueError("name must not be a UUID (agents are looked up by name or id)")


class AgentCreate(BaseModel):
    """What `create` needs; everything but the name has a default."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str | None = None
    prompt: str = Field(default="", max_length=MAX_PROMPT_CHARS)
    language: Language | None = None  # default: the server's [agent] language
    soul: Soul | None = None  # default: persona named after the agent, balanced traits
    identity: Identity | None = None  # default: named after the agent, Discussant
    llm: AgentLlmConfig | None = None
    heartbeat: HeartbeatConfig | None = None
    tool_ids: list[str] | None = None  # seed 002 `toolIds`: tools granted beyond skills

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return _check_name(value)


class AgentUpdate(BaseModel):
    """A partial update; fields left None are kept."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str | None = None
    prompt: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    language: Language | None = None
    soul: Soul | None = None
    identity: Identity | None = None
    llm: AgentLlmConfig | None = None
    heartbeat: HeartbeatConfig | None = None
    tool_ids: list[str] | None = None  # replaces the granted tools when given

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str | None) -> str | None:
        return None if value is None else _check_name(value)


class Agent(BaseModel):
    id: str
    name: str
    description: str | None = None
    prompt: str = ""
    language: Language  # its own, or the server's [agent] language
    soul: Soul
    identity: Identity
    llm_config: AgentLlmConfig
    heartbeat: HeartbeatConfig
    tool_ids: list[str] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime

    @property
    def role(self) -> AgentRole:
        return self.identity.role

    def summary(self) -> dict[str, Any]:
        """The list view: no persona details."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "role": self.identity.role.stored(),
            "language": self.language,
            "heartbeat": self.heartbeat.model_dump(exclude_none=True),
            "createdAt": self.created_at.isoformat(),
        }


class AgentStore:
    """Create, load, update and delete agents; budgets."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    # ------------------------------------------------------------ create
    def create(self, spec: AgentCreate) -> Agent:
        now = datetime.now(UTC)
        agent_id = str(uuid4())
        persona = spec.soul or Soul(persona_name=spec.name)
        who = spec.identity or Identity(name=spec.name)
        llm = spec.llm or AgentLlmConfig.from_settings(self.settings)
        beat = spec.heartbeat or HeartbeatConfig(
            interval_secs=self.settings.agent.heartbeat_interval_secs
        )
        with self.db.write() as conn:
            self._refuse_taken_name(conn, spec.name)
            repo.insert_agent(
                conn,
                AgentRow(
                    id=agent_id,
                    name=spec.name,
                    description=spec.description,
                    prompt=spec.prompt,
                    language=spec.language,
                    llm_config=llm.model_dump(mode="json"),
                    heartbeat=beat.model_dump(mode="json", exclude_none=True),
                    created_at=now,
                    updated_at=now,
                ),
            )
            self._write_soul(conn, agent_id, persona, now)
            self._write_identity(conn, agent_id, who, now)
            if spec.tool_ids:
                self._write_tools(conn, agent_id, spec.tool_ids)
        return self.get(agent_id)

    # ------------------------------------------------------------ read
    def get(self, name_or_id: str) -> Agent:
        """An agent by id or by name; NotFoundError names what was asked for."""
        with self.db.read() as conn:
            agent_id = repo.agent_key(name_or_id)
            if agent_id is not None:  # its soul, identity and grants go with the row's read
                repo.queue_parts(conn, agent_id)
                tools_repo.queue_granted_tool_ids(conn, agent_id)
            row = repo.find_agent(conn, name_or_id)
            if row is None:
                raise NotFoundError(f"no agent {name_or_id!r}")
            return self._load(conn, row)

    def list(self) -> list[Agent]:
        """Every agent, oldest first (four queries, however many agents there are)."""
        with self.db.read() as conn:
            rows = repo.all_agents(conn)
            souls = repo.all_souls(conn)
            identities = repo.all_identities(conn)
            tools = tools_repo.all_grants(conn)
        return [
            self._agent(row, souls.get(row.id), identities.get(row.id), tools.get(row.id, []))
            for row in rows
        ]

    def summaries(self) -> builtins.list[tuple[str, str, str | None]]:
        """(id, name, description) of every agent, oldest first: one indexed read."""
        with self.db.read() as conn:
            return [(a.id, a.name, a.description) for a in repo.agent_summaries(conn)]

    def names(self) -> dict[str, tuple[str, str]]:
        """Every agent's (name, language) by id: one read, for pages naming many agents."""
        default = self.settings.agent.language
        with self.db.read() as conn:
            return {
                agent_id: (name, language or default)
                for agent_id, (name, language) in repo.agent_names(conn).items()
            }

    def _load(self, conn: Connection, row: AgentRow) -> Agent:
        s = repo.soul_of(conn, row.id)
        i = repo.identity_of(conn, row.id)
        return self._agent(row, s, i, tools_repo.granted_tool_ids(conn, row.id))

    def _agent(
        self,
        row: AgentRow,
        s: SoulRow | None,
        i: IdentityRow | None,
        tools: builtins.list[str],
    ) -> Agent:
        return Agent(
            id=row.id,
            name=row.name,
            description=row.description,
            prompt=row.prompt,
            language=cast(Language, row.language or self.settings.agent.language),
            soul=_soul_of(s, row.name),
            identity=_identity_of(i, row.name),
            llm_config=AgentLlmConfig.model_validate(row.llm_config or {}),
            heartbeat=HeartbeatConfig.model_validate(
                row.heartbeat or {"interval_secs": self.settings.agent.heartbeat_interval_secs}
            ),
            tool_ids=tools,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    # ------------------------------------------------------------ update / delete
    def update(self, name_or_id: str, change: AgentUpdate) -> Agent:
        agent = self.get(name_or_id)
        now = datetime.now(UTC)
        values: dict[str, Any] = {}
        if change.name is not None and change.name != agent.name:
            values["name"] = change.name
        if change.description is not None:
            values["description"] = change.description
        if change.prompt is not None:
            values["prompt"] = change.prompt
        if change.language is not None:
            values["language"] = change.language
        if change.llm is not None:
            values["llm_config"] = change.llm.model_dump(mode="json")
        if change.heartbeat is not None:
            values["heartbeat"] = change.heartbeat.model_dump(mode="json", exclude_none=True)
        with self.db.write() as conn:
            if "name" in values:
                self._refuse_taken_name(conn, values["name"])
            repo.update_agent(conn, agent.id, updated_at=now, **values)
            if change.soul is not None:
                self._write_soul(conn, agent.id, change.soul, now)
            if change.identity is not None:
                self._write_identity(conn, agent.id, change.identity, now)
            if change.tool_ids is not None:
                self._write_tools(conn, agent.id, change.tool_ids)
        return self.get(agent.id)

    def save_soul(self, agent_id: str, persona: Soul) -> None:
        with self.db.write() as conn:
            self._write_soul(conn, agent_id, persona, datetime.now(UTC))

    def save_identity(self, agent_id: str, who: Identity) -> None:
        with self.db.write() as conn:
            self._write_identity(conn, agent_id, who, datetime.now(UTC))

    def save_llm_config(self, agent_id: str, config: AgentLlmConfig) -> None:
        with self.db.write() as conn:
            done = repo.update_agent(
                conn, str(agent_id), updated_at=_now(), llm_config=config.model_dump(mode="json")
            )
        if done == 0:
            raise NotFoundError(f"no agent {agent_id!r}")

    def delete(self, name_or_id: str) -> Agent:
        """Delete the agent and everything keyed by it (cascades); returns what was deleted.

        Its workspace folder is left on disk for the operator to archive or remove. An
        agent with tickets is kept (ConflictError): its tickets are deleted first.
        """
        agent = self.get(name_or_id)
        with self.db.write() as conn:
            held = count_agent_tickets(conn, agent.id)
            if held:
                noun = "ticket" if held == 1 else "tickets"
                raise ConflictError(
                    f"agent {agent.name!r} has {held} {noun}; delete them first "
                    "(DELETE /api/tickets/{id})"
                )
            repo.delete_agent(conn, agent.id)
        return agent

    @staticmethod
    def _write_tools(conn: Connection, agent_id: str, tool_ids: Iterable[str]) -> None:
        """Grant exactly `tool_ids`; unknown ids are refused, naming each one."""
        wanted = list(dict.fromkeys(str(t) for t in tool_ids))
        known = tools_repo.known_tool_ids(conn, wanted)
        unknown = [t for t in wanted if t not in known]
        if unknown:
            raise ValidationError(f"unknown tool ids: {', '.join(unknown)}")
        tools_repo.replace_grants(conn, agent_id, wanted)

    def _refuse_taken_name(self, conn: Connection, name: str) -> None:
        taken = repo.agent_id_named(conn, name)
        if taken is not None:
            raise NameTaken(f"an agent named {name!r} already exists ({taken})")

    @staticmethod
    def _write_soul(conn: Connection, agent_id: str, persona: Soul, now: datetime) -> None:
        row = SoulRow(
            persona_name=persona.persona_name,
            social_style=persona.social_style.model_dump(),
            personality=persona.personality.model_dump(),
            thinking_style=persona.thinking_style.model_dump(),
            custom_traits=persona.custom_traits,
        )
        repo.save_soul(conn, agent_id, row, now)

    @staticmethod
    def _write_identity(conn: Connection, agent_id: str, who: Identity, now: datetime) -> None:
        row = IdentityRow(
            name=who.name,
            role=who.role.stored(),
            job_title=who.job_title,
            organization=who.organization,
            image_url=who.image_url,
            metadata=who.metadata,
        )
        repo.save_identity(conn, agent_id, row, now)

    # ------------------------------------------------------------ budget
    def spent_today(self, agent_id: str) -> float:
        """USD spent by the agent's LLM calls since 00:00 UTC."""
        midnight = _now().replace(hour=0, minute=0, second=0, microsecond=0)
        with self.db.read() as conn:
            return agent_stats.spent_since(conn, str(agent_id), midnight)

    def check_budget(self, agent: Agent, cap: CostCap | None = None) -> builtins.list[AlertRow]:
        """Raise BudgetExceeded when a cap of the agent, the fleet or `cap` is spent
        (core/budgets.py); the budget alerts newly reached are returned."""
        return Budgets(self.db, self.settings).check(agent, cap)


def _now() -> datetime:
    return datetime.now(UTC)


def _soul_of(row: SoulRow | None, name: str) -> Soul:
    if row is None:
        return Soul(persona_name=name)
    return Soul.model_validate(
        {
            "persona_name": row.persona_name,
            "social_style": row.social_style,
            "personality": row.personality,
            "thinking_style": row.thinking_style,
            "custom_traits": row.custom_traits,
        }
    )


def _identity_of(row: IdentityRow | None, name: str) -> Identity:
    if row is None:
        return Identity(name=name)
    return Identity(
        name=row.name,
        role=AgentRole.parse(row.role),
        job_title=row.job_title,
        organization=row.organization,
        image_url=row.image_url,
        metadata=row.metadata,
    )


# ------------------------------------------------------------------ persona files
def load_persona(path: Path, *, name: str | None = None) -> AgentCreate:
    """An AgentCreate from a TOML, YAML or JSON persona file (by its suffix).

    Keys: name, description, prompt, language, soul, identity, llm, heartbeat (as
    AgentCreate);
    `name` given here wins over the file's. Errors name the file and every key that is
    wrong (all of them, not only the first).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"{path}: cannot read the persona file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ValidationError(f"{path}: the persona file is not UTF-8 text") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ValidationError(f"{path}: persona files are .toml, .yaml, .yml or .json")
    except (tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ValidationError(f"{path}: not valid {suffix[1:].upper()}: {exc}") from None
    except RecursionError:  # the parsers recurse once per level
        raise ValidationError(
            f"{path}: lists or tables nested too deeply for a persona file"
        ) from None
    if not isinstance(data, dict):
        raise ValidationError(f"{path}: the persona must be a table/mapping of keys")
    if name is not None:
        data["name"] = name
    if "name" not in data:
        raise ValidationError(f"{path}: no name; give --name or a `name` key")
    try:
        return AgentCreate.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ValidationError(f"{path}: {problems}") from None
