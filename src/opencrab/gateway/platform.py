"""What the chat-platform gateways (Slack, Telegram, LINE, a plugin's) share.

- `PlatformConfig`: the common keys of their `[gateway.<name>]` tables: the allow-lists
  (nobody is answered until allowed), the agent per channel, the typing indicator.
- `split_text`: a long reply in pieces under the platform's limit, cut at a paragraph, a
  line, a sentence's end (English and CJK), a space, in that order of preference.
- `Connection`: a gateway's link to its platform kept up with exponential backoff; its
  `state` is what the dashboard shows, and a platform that cannot be reached affects
  nothing but its own gateway.
- `Button`, `buttons_for` and `press`: the buttons of a message that asks a person
  (approve / deny a held call; answer a ticket's question), carried as short ids a
  platform can echo back (Telegram's callback data holds 64 bytes), and what pressing
  one does; `question_of` and `answer_question` for the answer a platform then collects
  (a reply, a form) and hands to the ticket.

A platform gateway is one module (its SDK, its wire format) plus its config model; it
marks its messages with a `ChatSource` and uses these pieces for the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from opencrab.errors import OpenCrabError
from opencrab.gateway.base import GatewayConfig
from opencrab.messages import OutgoingMessage
from opencrab.offload import run_blocking

log = logging.getLogger(__name__)

ANYONE = "*"


class PlatformConfig(GatewayConfig):
    """The keys every chat-platform gateway's table has besides its own.

    A message is answered only when its sender is in `allow_users` or its channel in
    `allow_channels` ("*" in either allows everyone / every channel); both empty: nobody.
    `channel_agents` binds a channel (the platform's id) to an agent (name or id); other
    channels go to `agent` (or the only agent there is)."""

    enabled: bool = False
    agent: str | None = None
    channel_agents: dict[str, str] = Field(default_factory=dict)
    allow_users: list[str] = Field(default_factory=list)
    allow_channels: list[str] = Field(default_factory=list)
    typing: bool = True  # show "typing…" while a turn runs, where the platform can
    max_concurrent: int = Field(default=8, ge=1, le=256)  # turns at once on this gateway
    # the message rule of rate: one sender's messages in one conversation, per minute
    messages_per_minute: int | None = Field(default=20, ge=1, le=10_000)

    def allows(self, user: str, channel: str) -> bool:
        """Whether a message from `user` in `channel` may reach an agent."""
        users, channels = self.allow_users, self.allow_channels
        return ANYONE in users or user in users or ANYONE in channels or channel in channels

    def agent_of(self, channel: str) -> str | None:
        """The agent bound to `channel` (name or id); None: the gateway's `agent`."""
        return self.channel_agents.get(channel, self.agent)


# ---------------------------------------------------------------------- splitting
_PARAGRAPH = re.compile(r"\n\s*\n")
_LINE = re.compile(r"\n")
# a sentence ends at . ! ? (then a space) or at a CJK full stop / ! / ? (no space needed)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_SPACE = re.compile(r"\s+")


def split_text(text: str, limit: int, *, measure: Callable[[str], int] = len) -> list[str]:
    """`text` in pieces of at most `limit` (as `measure` counts: characters, UTF-16 units,
    bytes), each cut at the best boundary in its second half: a blank line, a line break,
    a sentence's end, a space; else exactly at the limit. Pieces are stripped; none is
    empty."""
    if limit < 1:
        raise ValueError("a piece holds at least one unit")
    pieces: list[str] = []
    rest = text.strip()
    while rest:
        if measure(rest) <= limit:
            pieces.append(rest)
            break
        fits = _longest_prefix(rest, limit, measure)
        head = rest[:fits]
        cut = fits
        for boundary in (_PARAGRAPH, _LINE, _SENTENCE, _SPACE):
            ends = [m.start() for m in boundary.finditer(head) if m.start() >= fits // 2]
            if ends:
                cut = ends[-1]
                break
        piece = rest[:cut].strip()
        if piece:
            pieces.append(piece)
        rest = rest[cut:].strip()
    return pieces


def _longest_prefix(text: str, limit: int, measure: Callable[[str], int]) -> int:
    """The length of the longest prefix of `text` that `measure` puts at most `limit`
    (at least 1, so that a piece always advances)."""
    low, high = 1, len(text)
    while low < high:  # measure is monotone in the prefix's length
        middle = (low + high + 1) // 2
        if measure(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


# ---------------------------------------------------------------------- the link
State = Literal["starting", "connected", "retrying", "stopped"]


@dataclass
class ConnectionState:
    """What the dashboard shows of a gateway's link to its platform."""

    state: State = "starting"
    since: float = field(default_factory=time.time)
    attempts: int = 0  # failed attempts in a row
    error: str | None = None  # the last failure, without secrets
    retry_in: float | None = None  # seconds until the next attempt, while retrying

    def as_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "since": self.since,
            "attempts": self.attempts,
            "error": self.error,
            "retryIn": self.retry_in,
        }


class Connection:
    """Keeps `session()` running: it connects and serves until the link drops (returns
    or raises); each failure waits `first`, then twice as long up to `cap`, before the
    next try (a link that stayed up for `cap` seconds starts again from `first`).

    `start()` returns at once: a platform that is down never holds up the server."""

    def __init__(
        self,
        name: str,
        session: Callable[[], Awaitable[None]],
        *,
        connected: Callable[[], bool] | None = None,
        first: float = 1.0,
        cap: float = 60.0,
        scrub: Callable[[str], str] = lambda text: text,
    ) -> None:
        self.name = name
        self._session = session
        self._connected = connected
        self.first, self.cap = first, cap
        self._scrub = scrub
        self.state = ConnectionState()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._keep(), name=f"gateway-{self.name}")

    def mark_connected(self) -> None:
        """Called by the session once the platform accepted it."""
        self._set("connected", attempts=0, error=None, retry_in=None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._set("stopped", retry_in=None)

    async def _keep(self) -> None:
        delay = self.first
        while True:
            began = time.monotonic()
            try:
                await self._session()
                error = "the platform closed the connection"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure of the link: try again later
                error = self._scrub(_describe(exc))
                log.warning("gateway %s: %s; retrying", self.name, error)
            if time.monotonic() - began >= self.cap:
                delay = self.first  # it was up a good while: a fresh start
            self._set("retrying", attempts=self.state.attempts + 1, error=error, retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.cap)

    def _set(self, state: State, **changes: Any) -> None:
        if state != self.state.state:
            self.state.since = time.time()
        self.state.state = state
        for key, value in changes.items():
            setattr(self.state, key, value)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# ---------------------------------------------------------------------- buttons
@dataclass(frozen=True)
class Button:
    """A button: its label and the short id the platform echoes back when pressed."""

    label: str
    id: str


APPROVAL_METADATA = "approval"  # OutgoingMessage.metadata key: {"id": ..., "tool": ...}
_PRESS = re.compile(r"^ap:(?P<id>[0-9a-fA-F-]{1,40}):(?P<verdict>[yn])$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_QUESTION = re.compile(r"^tq:(?P<session>[0-9a-fA-F-]{36})$")


INBOX_METADATA = "inbox"  # the inbox's notice: [{"kind", "subjectId", "summary"}, …]
MAX_BUTTONS = 10  # buttons on one message, at most


def buttons_for(message: OutgoingMessage, *, questions: bool = False) -> list[Button]:
    """The buttons a message that asks a person offers: approve and deny for a held call
    (a turn's answer) or for each approval among an inbox notice's items, and with
    `questions` (a gateway that can take the answer: `question_of`, `answer_question`)
    an Answer button per ticket question among them; none for other messages. Each id is
    at most 45 ASCII characters; at most MAX_BUTTONS buttons."""
    held = message.metadata.get(APPROVAL_METADATA)
    if isinstance(held, dict) and isinstance(held.get("id"), str):
        return _verdicts(held["id"], "")
    buttons: list[Button] = []
    waiting = message.metadata.get(INBOX_METADATA)
    approvals = [
        item
        for item in (waiting if isinstance(waiting, list) else [])
        if isinstance(item, dict)
        and item.get("kind") == "approval"
        and isinstance(item.get("subjectId"), str)
    ]
    for number, item in enumerate(approvals, 1):
        suffix = f" #{number}" if len(approvals) > 1 else ""
        buttons += _verdicts(item["subjectId"], suffix)
    asked = [
        item
        for item in (waiting if isinstance(waiting, list) and questions else [])
        if isinstance(item, dict)
        and item.get("kind") == "ticket_question"
        and isinstance(item.get("subjectId"), str)
        and _UUID.match(item["subjectId"])
    ]
    for number, item in enumerate(asked, 1):
        suffix = f" #{number}" if len(asked) > 1 else ""
        buttons.append(Button(f"Answer question{suffix}", f"tq:{item['subjectId']}"))
    return buttons[:MAX_BUTTONS]


def _verdicts(approval: str, suffix: str) -> list[Button]:
    return [
        Button(f"Approve{suffix}", f"ap:{approval}:y"),
        Button(f"Deny{suffix}", f"ap:{approval}:n"),
    ]


async def press(runtime: Any, choice_id: str, *, by: str) -> str:
    """Do what the button `choice_id` says, as the person `by` (their platform name);
    returns the line to show them. A choice that is not ours, or an approval decided
    already, says so instead of raising."""
    pressed = _PRESS.match(choice_id)
    if pressed is None:
        return "That button is not one of mine."
    approve = pressed["verdict"] == "y"
    try:
        await runtime.approvals.decide(pressed["id"], approve=approve, by=by[:100] or "person")
    except OpenCrabError as exc:
        return f"Not done: {exc}"
    return "Approved: the call runs." if approve else "Denied: the agent is told."


def question_of(choice_id: str) -> str | None:
    """The ticket session whose question the button `choice_id` answers; None when it is
    no question's button."""
    asked = _QUESTION.match(choice_id)
    return asked["session"] if asked is not None and _UUID.match(asked["session"]) else None


async def answer_question(runtime: Any, session_id: str, text: str, *, by: str) -> tuple[bool, str]:
    """Give `text`, the person `by`'s answer, to the ticket session `session_id` (a
    suspended ticket resumes); returns whether it was taken and the line to show them.
    An answer the message rules refuse, or a ticket that no longer takes one, says so
    instead of raising."""
    from opencrab.tickets.service import answer_ticket_session  # only when answering

    try:
        await run_blocking(
            answer_ticket_session,
            runtime.db,
            session_id,
            text,
            sender_id=by[:100] or "person",
            sender_name=by[:100] or None,
        )
    except OpenCrabError as exc:
        return False, f"Not sent: {exc}"
    return True, "Answer sent: the ticket goes on."
