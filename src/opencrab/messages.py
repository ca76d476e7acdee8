"""The platform-independent message form of seed 001 ("Gateway Trait"): what every way in
and out of an agent speaks, and the rules a user message follows.

Every gateway (REST, WebSocket, `/v1`, CLI, Discord, …) turns what it receives into an
`IncomingMessage` whose `source` says where it came from (`MessageSource`, a tagged union
on `kind`; a plugin's gateway uses `ChatSource`: its name and the conversation) and sends
`OutgoingMessage`s back to a `MessageTarget`; an `Outlet` (gateway, channel) names a
place core code writes to without naming the gateway (heartbeat homes, budget alerts).
The core builds and reads these too (heartbeats and discussions speak as an
`InternalSource`), so they live at the bottom of the layer picture, beside events.py; the
`Gateway` interface and the adapters are in `opencrab.gateway`.

Example:
    message = IncomingMessage.text("hi", source=CliSource(session_id="s1"))
    reply = OutgoingMessage(
        content=MessageContent(text="hello"),
        target=MessageTarget(gateway="cli", session_id="s1"),
        reply_to=message.id,
    )
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Protocol
from uuid import NAMESPACE_URL, uuid4, uuid5

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from opencrab.errors import ValidationError

# ---------------------------------------------------------------- the message rules
MAX_MESSAGE_CHARS = 100_000
"""The longest message a user may send an agent, through any gateway."""


def message_problem(text: str) -> str | None:
    """Why `text` cannot be sent to an agent (empty or blank, too long); None when it can.

    The one set of rules for user messages: REST, WebSocket, `/v1`, the CLI and Discord
    refuse what this refuses, and the turn service checks it again for any caller.
    """
    if not text.strip():
        return "the message is empty or only whitespace"
    if len(text) > MAX_MESSAGE_CHARS:
        return f"the message has {len(text):,} characters; the limit is {MAX_MESSAGE_CHARS:,}"
    return None


def check_message(text: str) -> str:
    """`text` unchanged when it follows the message rules; ValidationError naming the rule."""
    problem = message_problem(text)
    if problem is not None:
        raise ValidationError(problem)
    return text


def _follows_rules(text: str) -> str:
    problem = message_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


MessageText = Annotated[
    str,
    Field(json_schema_extra={"minLength": 1, "maxLength": MAX_MESSAGE_CHARS, "pattern": r"\S"}),
    AfterValidator(_follows_rules),
]
"""A request field holding a user message: documented and checked by the message rules."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- MessageSource
class RestSource(_Model):
    kind: Literal["rest"] = "rest"
    request_id: str


class WebSocketSource(_Model):
    kind: Literal["websocket"] = "websocket"
    connection_id: str


class DiscordSource(_Model):
    kind: Literal["discord"] = "discord"
    guild_id: str
    channel_id: str


class CliSource(_Model):
    kind: Literal["cli"] = "cli"
    session_id: str


class SlackSource(_Model):
    kind: Literal["slack"] = "slack"
    workspace_id: str
    channel_id: str


class LineSource(_Model):
    kind: Literal["line"] = "line"
    user_id: str


class ChatSource(_Model):
    """A message from any chat gateway, a plugin's included: the gateway's name, the
    conversation it belongs to, and the channel its reply goes to (the conversation's own
    id when None). The named sources above stay as they are stored."""

    kind: Literal["chat"] = "chat"
    gateway: str = Field(min_length=1, max_length=100)
    conversation: str = Field(min_length=1, max_length=500)
    channel_id: str | None = Field(default=None, min_length=1, max_length=500)

    @property
    def reply_channel(self) -> str:
        """Where an answer in this conversation goes."""
        return self.channel_id or self.conversation


class InternalSource(_Model):
    """Messages OpenCrab makes itself: heartbeats, discussion turns, facilitator guidance."""

    kind: Literal["internal"] = "internal"
    origin: str  # "heartbeat", "discussion", …


MessageSource = Annotated[
    RestSource
    | WebSocketSource
    | DiscordSource
    | CliSource
    | SlackSource
    | LineSource
    | ChatSource
    | InternalSource,
    Field(discriminator="kind"),
]


# ---------------------------------------------------------------- content and parties
class Attachment(_Model):
    url: str
    content_type: str | None = None
    name: str | None = None


class MessageContent(_Model):
    text: str = ""
    attachments: list[Attachment] = Field(default_factory=list)


class Sender(_Model):
    id: str
    name: str | None = None
    is_bot: bool = False


class Channel(_Model):
    id: str
    name: str | None = None


class MessageTarget(_Model):
    """Where a reply goes: a channel of a gateway, or a session."""

    gateway: str
    channel_id: str | None = None
    session_id: str | None = None


class IncomingMessage(_Model):
    """A message received by any gateway, platform-independent."""

    id: str = Field(default_factory=lambda: str(uuid4()))
    source: MessageSource
    content: MessageContent
    sender: Sender = Field(default_factory=lambda: Sender(id="user"))
    channel: Channel | None = None
    timestamp: datetime = Field(default_factory=lambda: datetime.now(UTC))
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def text(cls, text: str, *, source: Any, sender: Sender | None = None) -> IncomingMessage:
        return cls(
            source=source,
            content=MessageContent(text=text),
            sender=sender or Sender(id="user"),
        )


class OutgoingMessage(_Model):
    """A reply or spontaneous message to send through a gateway."""

    content: MessageContent
    target: MessageTarget
    reply_to: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Outlet(_Model):
    """A named place to write to: a channel of a gateway (an agent's heartbeat home, where
    budget alerts go). Core code names no gateway: it hands the message to the running
    gateway called `gateway`, which knows what `channel` means on its platform."""

    gateway: str = Field(min_length=1, max_length=100)
    channel: str = Field(min_length=1, max_length=500)

    def target(self) -> MessageTarget:
        """The target of a message written here."""
        return MessageTarget(gateway=self.gateway, channel_id=self.channel)


class MessageOutlet(Protocol):
    """Something that delivers an `OutgoingMessage`: a running gateway, as the core sees it."""

    async def send(self, message: OutgoingMessage) -> None:
        """Deliver a message to its target."""


def session_for(gateway: str, conversation: str, agent_id: str) -> str:
    """The session id of a gateway conversation with an agent: the same every time."""
    return str(uuid5(NAMESPACE_URL, f"opencrab:{gateway}:{conversation}:{agent_id}"))
