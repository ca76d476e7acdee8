"""Run an agent behind a chat gateway: receive, one session per conversation, reply.

`start_chat_gateways` runs every gateway the `register_gateways` plugin hook offers a
server (each built from its `[gateway.<name>]` table with the runtime; None means off):
Discord is one, a Slack or LINE plugin another. Any `ChatGateway` gets the same loop:
each incoming message runs a turn of the gateway's agent in the session of its
conversation (a stable id derived from the gateway, the conversation key and the agent),
one turn per session at a time and at most `max_concurrent` turns at once; the reply goes
back to the conversation it came from. A message the message rules refuse (no text, too
long) runs no turn and is answered with the rule; a failed turn is answered with a short
apology naming the error, never a stack trace. A turn that ended on a call held for a
person's approval is answered with what waits and where to decide it; once it is decided
(through any server), the answer of the turn that continues the chat
(core/approval_followups.py), run by whichever process claimed it, is sent to the same
conversation, as a follow-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from opencrab.config.gateways import registered_gateways
from opencrab.core.agent import Agent
from opencrab.core.approval_followups import FollowUpOutcome, Watcher
from opencrab.core.runtime import Runtime
from opencrab.core.steps import TurnResult, step_from_json
from opencrab.errors import ConfigError, OpenCrabError, ValidationError
from opencrab.gateway.base import Gateway
from opencrab.gateway.platform import APPROVAL_METADATA
from opencrab.gateway.registry import build_gateway
from opencrab.gateway.settings import effective_config
from opencrab.messages import (
    ChatSource,
    IncomingMessage,
    MessageContent,
    MessageTarget,
    OutgoingMessage,
    check_message,
    session_for,
)
from opencrab.offload import run_blocking

log = logging.getLogger(__name__)


class ChatGateway(Gateway):
    """A gateway whose messages belong to conversations (channels, chats, threads).

    A running one is also an outlet (`runtime.outlets[name]`): an agent's heartbeat home
    and the budget alerts' outlet are (gateway, channel) pairs written through it. A
    plugin's gateway marks its messages with a `ChatSource` (its name, the conversation)
    and the defaults below read it."""

    def conversation_key(self, message: IncomingMessage) -> str:
        """What identifies the message's conversation on the platform (a `ChatSource`'s
        conversation, unless the gateway overrides this)."""
        source = message.source
        if not isinstance(source, ChatSource):
            raise TypeError(f"{self.name}: a {source.kind} message has no conversation here")
        return source.conversation

    def reply_target(self, message: IncomingMessage) -> MessageTarget:
        """Where the answer to `message` goes (a `ChatSource`'s channel, unless the gateway
        overrides this)."""
        source = message.source
        if not isinstance(source, ChatSource):
            raise TypeError(f"{self.name}: a {source.kind} message has no channel here")
        return MessageTarget(gateway=self.name, channel_id=source.reply_channel)

    def agent(self) -> str | None:
        """The agent (name or id) configured to answer; None: the only agent there is."""
        return None

    def agent_for_message(self, message: IncomingMessage) -> str | None:
        """The agent (name or id) that answers `message` (a channel bound to its own
        agent, say); `agent()` unless the gateway overrides this."""
        return self.agent()

    def finished(self, message: IncomingMessage) -> None:
        """Called once `message` is dealt with (answered, refused, or its turn failed):
        a gateway stops its typing indicator here. Does nothing unless overridden."""

    def max_concurrent(self) -> int:
        """How many turns this gateway runs at once."""
        return int(getattr(self.config(), "max_concurrent", 8))


class GatewayRunner:
    """Feeds a gateway's messages to an agent; `run()` until cancelled."""

    def __init__(
        self, gateway: ChatGateway, runtime: Runtime, agent: Agent, *, max_concurrent: int = 8
    ) -> None:
        self.gateway = gateway
        self.runtime = runtime
        self.agent = agent  # the gateway's own; a message may name another (agent_for_message)
        self._agents: dict[str, Agent] = {}
        per_minute = getattr(gateway.config(), "messages_per_minute", None)
        self._rate = SenderRate(per_minute)
        self._slots = asyncio.Semaphore(max_concurrent)
        self._tasks: set[asyncio.Task[None]] = set()
        self.watchers: list[Watcher] = []  # the follow-ups its conversations wait for

    async def run(self) -> None:
        try:
            while True:
                message = await self.gateway.receive()
                await self._slots.acquire()
                task = asyncio.create_task(self._answer(message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            for watcher in self.watchers:
                self.runtime.approvals.follow_ups.unwatch(watcher)
            for task in list(self._tasks):
                task.cancel()

    async def handle(self, message: IncomingMessage) -> str | None:
        """Run the turn for one message and send the reply; returns what was sent."""
        metadata: dict[str, Any] = {}
        try:
            agent = await self._agent_of(message)
            session_id = session_for(
                self.gateway.name, self.gateway.conversation_key(message), agent.id
            )
            check_message(message.content.text)  # before the session: a refusal stores nothing
            result = await self.runtime.turns.run(agent, message, session_id=session_id)
            text = await self._answer_of(result, message, metadata)
        except ValidationError as exc:
            text = f"Sorry, I could not answer that: {exc}."
        except OpenCrabError as exc:
            log.warning("%s: turn failed: %s", self.gateway.name, exc)
            text = f"Sorry, I could not answer that ({exc.code})."
        return await self._send(text, message, metadata)

    async def _agent_of(self, message: IncomingMessage) -> Agent:
        named = self.gateway.agent_for_message(message)
        if not named or named == self.gateway.agent():
            return self.agent
        if named not in self._agents:
            self._agents[named] = await run_blocking(
                agent_for, self.runtime, named, self.gateway.name
            )
        return self._agents[named]

    async def _answer_of(
        self, result: TurnResult, message: IncomingMessage, metadata: dict[str, Any]
    ) -> str | None:
        """What a turn's result says in the conversation (a held call: where to decide it,
        and `metadata["approval"]` for a gateway that offers buttons)."""
        text = result.reply
        if result.approval_id is not None:
            watcher = self.follow_up(message)
            self.watchers.append(watcher)
            self.runtime.approvals.follow_ups.watch(result.approval_id, watcher)
            notice = await run_blocking(self.runtime.approvals.notice, result.approval_id)
            text = f"{text}\n\n{notice}" if text else notice
            metadata[APPROVAL_METADATA] = {"id": result.approval_id}
        elif result.error is not None and not text:
            text = f"Sorry, I could not answer that ({result.error.error})."
        return text

    async def _send(
        self, text: str | None, message: IncomingMessage, metadata: dict[str, Any]
    ) -> str | None:
        if not text:
            return None
        await self.gateway.send(
            OutgoingMessage(
                content=MessageContent(text=text),
                target=self.gateway.reply_target(message),
                reply_to=message.id,
                metadata=metadata,
            )
        )
        return text

    def follow_up(self, message: IncomingMessage) -> Watcher:
        """A follow-up watcher: the answer of the turn continuing a chat held here goes to
        the conversation the held turn came from."""

        def told(outcome: FollowUpOutcome) -> None:
            self.watchers.remove(told)
            if not outcome.steps:
                return  # dropped: the session ended meanwhile
            result = step_from_json(outcome.steps[-1])
            assert isinstance(result, TurnResult)
            task = asyncio.create_task(self._follow(result, message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return told

    async def _follow(self, result: TurnResult, message: IncomingMessage) -> None:
        metadata: dict[str, Any] = {}
        try:
            await self._send(await self._answer_of(result, message, metadata), message, metadata)
        except Exception:
            log.exception("%s: could not send the follow-up to %s", self.gateway.name, message.id)

    async def _answer(self, message: IncomingMessage) -> None:
        try:
            refusal = self._rate.refusal(message)
            if refusal is None:
                await self.handle(message)
            elif refusal:
                await self._send(refusal, message, {})
        except Exception:
            log.exception("%s: could not answer message %s", self.gateway.name, message.id)
        finally:
            self._slots.release()
            try:
                self.gateway.finished(message)
            except Exception:
                log.exception("%s: finishing message %s failed", self.gateway.name, message.id)


class SenderRate:
    """The message rate rule: at most `per_minute` messages from one sender in one
    conversation in any 60 s (None: no limit). The first message over it is answered
    with the rule, the next ones in that minute get no answer at all (a flood is not
    echoed back)."""

    WINDOW = 60.0

    def __init__(self, per_minute: int | None, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self._seen: dict[tuple[str, str], deque[float]] = {}
        self._told: dict[tuple[str, str], float] = {}

    def refusal(self, message: IncomingMessage) -> str | None:
        """None when `message` may run a turn; else what to answer ("" for nothing)."""
        if self.per_minute is None:
            return None
        source = message.source
        conversation = source.conversation if isinstance(source, ChatSource) else source.kind
        key = (conversation, message.sender.id)
        now = self.clock()
        times = self._seen.setdefault(key, deque())
        while times and now - times[0] >= self.WINDOW:
            times.popleft()
        if len(self._seen) > 10_000:  # forget the senders quiet for a minute
            for quiet in [k for k, t in self._seen.items() if not t or now - t[-1] >= self.WINDOW]:
                if quiet != key:
                    self._seen.pop(quiet, None)
                    self._told.pop(quiet, None)
        if len(times) < self.per_minute:
            times.append(now)
            return None
        if now - self._told.get(key, -self.WINDOW) < self.WINDOW:
            return ""
        self._told[key] = now
        return (
            f"Slow down: at most {self.per_minute} message{'s' if self.per_minute != 1 else ''} "
            "a minute here. "
            "This one was not passed on; try again in a minute."
        )


def agent_for(runtime: Runtime, configured: str | None, gateway: str) -> Agent:
    """The agent a gateway talks to: the configured one, or the only agent there is."""
    if configured:
        return runtime.agents.get(configured)
    agents = runtime.agents.list()
    if len(agents) != 1:
        raise ConfigError(
            f"gateway.{gateway}.agent is not set and there are {len(agents)} agents: "
            "name the one that answers",
            key=f"gateway.{gateway}.agent",
        )
    return agents[0]


class ChatGateways:
    """The chat gateways running in this process, by name: started together, and each
    rebuilt on its own (`restart`) with its current settings (the config file's table
    and the dashboard's, opencrab.gateway.settings) while the others keep running."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.running: dict[str, tuple[ChatGateway, asyncio.Task[None]]] = {}
        self.errors: dict[str, str] = {}  # a gateway's last failure to (re)start
        self._lock = asyncio.Lock()

    async def start_all(self) -> None:
        """Connect every registered, enabled chat gateway and start answering. When one
        cannot start (bad config, no agent to answer, a failed login) the ones started
        before it are stopped and the error raised."""
        try:
            names = list(registered_gateways())
            for name in names:
                gateway = await self._build(name)
                if gateway is not None:
                    await self._start(gateway)
        except BaseException:
            await self.stop_all()
            raise

    async def restart(self, name: str) -> ChatGateway | None:
        """Rebuild gateway `name` from its current settings and reconnect it (None: it is
        off now). A setting that cannot build a gateway raises before the running one is
        touched; one that fails to connect leaves it stopped, the failure in `errors`."""
        async with self._lock:
            try:
                gateway = await self._build(name)
            except OpenCrabError as exc:
                self.errors[name] = str(exc)
                raise
            await self.stop(name)
            self.errors.pop(name, None)
            if gateway is None:
                return None
            try:
                await self._start(gateway)
            except OpenCrabError as exc:
                self.errors[name] = str(exc)
                raise
            return gateway

    async def stop(self, name: str) -> None:
        """Stop answering on gateway `name` and disconnect it (nothing when not running)."""
        found = self.running.pop(name, None)
        if found is None:
            return
        gateway, task = found
        if self.runtime.outlets.get(name) is gateway:
            del self.runtime.outlets[name]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await gateway.disconnect()

    async def stop_all(self) -> None:
        for name in list(self.running):
            await self.stop(name)

    def started(self) -> list[tuple[ChatGateway, asyncio.Task[None]]]:
        return list(self.running.values())

    async def _build(self, name: str) -> ChatGateway | None:
        config = await run_blocking(effective_config, self.runtime, name)
        gateway = build_gateway(name, self.runtime, config=config)
        if gateway is None:
            return None
        if not isinstance(gateway, ChatGateway):
            raise ConfigError(
                f"the gateway {name!r} is not a ChatGateway (conversations and reply "
                "targets), so a server cannot answer it; its plugin should return one, "
                "or None when there is no server to run",
                key=f"gateway.{name}",
            )
        return gateway

    async def _start(self, gateway: ChatGateway) -> None:
        agent = await run_blocking(agent_for, self.runtime, gateway.agent(), gateway.name)
        await gateway.connect()
        self.runtime.outlets[gateway.name] = gateway  # the heartbeat speaks in home channels
        most = gateway.max_concurrent()
        runner = GatewayRunner(gateway, self.runtime, agent, max_concurrent=most)
        task = asyncio.create_task(runner.run(), name=gateway.name)
        self.running[gateway.name] = (gateway, task)


async def start_chat_gateways(runtime: Runtime) -> list[tuple[ChatGateway, asyncio.Task[None]]]:
    """Connect every registered, enabled chat gateway and start answering (see
    `ChatGateways.start_all`); stop them with `stop_chat_gateways`."""
    gateways = ChatGateways(runtime)
    await gateways.start_all()
    return gateways.started()


async def stop_chat_gateways(started: list[tuple[ChatGateway, asyncio.Task[None]]]) -> None:
    """Stop answering and disconnect the gateways `start_chat_gateways` started."""
    for gateway, task in started:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await gateway.disconnect()
