"""Discussions (seed 001 `sessions`, `agent_sessions`): agents talking with each other.

A discussion is a `sessions` row of kind "discussion" with a theme, a mode, a phase, a
turn counter and `max_turns`; each participant has an `agent_sessions` row (when it last
spoke, whether it declared done). Every participant keeps its own AgentEvent trace in
the shared session, so its history holds its own turns and the prompts it was given.

Two modes:
- autonomous: no facilitator. Whose turn it is follows the heartbeat's rules: nobody
  speaks twice in a row, an agent may pass (send_noreact), and the discussion ends when
  every participant declared done or after `max_turns` turns. On the server the
  heartbeat drives it; `run` drives the same turns back to back (the CLI's `discuss`).
- facilitated: a facilitator agent opens each round with broadcast_guidance (which may
  move the phase: divergent → convergent → conclusion) and the participants answer in
  turn; it ends when the facilitator declares done, everyone else did, or at max_turns.

What was said is the session's `messages`, each naming its speaker: the agents' speeches
and what people post into a running discussion (`post`, seed 001 "介入機能（メンター指示）"),
which every participant sees in its next prompt. An agent can `join` a running one. A
`DiscussionRunner` drives discussions started over REST or the WebSocket, claimed by
lease, in whichever process (server or worker) holds it.

A participant's call held for a person's approval (core/approvals.py) ends its turn; the
discussion then waits (`waiting`: `run` takes no turn, the heartbeat leaves it alone)
until the call is decided and the follow-up (core/approval_followups.py), run by
whichever process claims it, has finished that participant's turn from the call's
result (`continue_turn`); then it goes on as it would have.

Example:
    d = Discussion.create(db, theme="週休3日制", participants=[a.id, b.id], max_turns=8)
    outcome = await d.run(runtime)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from uuid import NAMESPACE_OID, UUID, uuid4, uuid5

from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.sessions import Said, insert_messages
from opencrab.errors import ConflictError, NotFoundError, ValidationError
from opencrab.event_log import EventLog
from opencrab.events import UserEvent, UserPayload
from opencrab.messages import IncomingMessage, InternalSource, Sender, check_message
from opencrab.offload import run_blocking
from opencrab.prompts import prompts
from opencrab.store import Database
from opencrab.store.leases import discussion_key
from opencrab.store.repositories import approvals as approvals_repo
from opencrab.store.repositories import sessions as repo
from opencrab.store.repositories.approvals import FollowUpOutcome
from opencrab.store.repositories.sessions import DiscussionRow

if TYPE_CHECKING:
    from opencrab.core.agent import Agent
    from opencrab.core.runtime_view import RuntimeView
    from opencrab.core.steps import EngineStep
    from opencrab.core.turns import HeldSession

Mode = Literal["autonomous", "facilitated"]
MODES = ("autonomous", "facilitated")
PHASES = ("divergent", "convergent", "conclusion")
DEFAULT_MAX_TURNS = 12
MAX_PARTICIPANTS = 16
RUNNER = "runner"  # context key: a DiscussionRunner drives this discussion
SEEN = "seen_messages"  # context key: per agent, the last message id its prompt showed
# what a turn ended with when the agent said something: a speech action or a plain answer
SPOKEN = frozenset({"send_speech", "broadcast_guidance", "message"})
TRANSCRIPT_LINES = 30  # at most this many earlier speeches go into one prompt
WAIT_POLL_SECS = 0.5  # how often a discussion waiting for a decision looks again

log = logging.getLogger(__name__)


@dataclass
class Speech:
    """One message of the discussion: an agent's speech, or a person's post (`person`)."""

    log_id: int  # the message's id: later speeches have higher ones
    speaker_id: str
    speaker: str
    text: str
    person: bool = False


@dataclass
class TurnOutcome:
    """One participant's turn in a discussion."""

    agent_id: str
    agent: str
    turn_number: int
    spoke: str | None
    action: str | None  # what ended the turn: send_speech, send_noreact, declare_done, …
    error: str | None = None
    approval_id: str | None = None  # action "approval": the call waiting for a person

    def as_json(self) -> dict[str, Any]:
        return {
            "agentId": self.agent_id,
            "agent": self.agent,
            "turn": self.turn_number,
            "spoke": self.spoke,
            "action": self.action,
            "error": self.error,
        }


@dataclass
class DiscussionOutcome:
    session_id: str
    theme: str
    mode: str
    status: str
    ended_by: str  # all_done, facilitator_done, max_turns, silence, errors
    turns: list[TurnOutcome] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "theme": self.theme,
            "mode": self.mode,
            "status": self.status,
            "endedBy": self.ended_by,
            "turns": [t.as_json() for t in self.turns],
        }


class Discussion:
    """A discussion session; `take_turn` runs one participant, `run` runs to the end."""

    def __init__(self, db: Database, row: DiscussionRow) -> None:
        self.db = db
        self.id = str(row.id)
        self.theme: str = row.theme
        self.mode: str = row.mode or "autonomous"
        self.phase: str = row.phase or PHASES[0]
        self.status: str = row.status
        self.turn_number: int = row.turn_number or 0
        self.max_turns: int | None = row.max_turns
        self.participants: list[str] = [str(p) for p in row.participant_ids_json or []]
        self.facilitator_id: str | None = (
            str(row.facilitator_id) if row.facilitator_id is not None else None
        )
        self.context: dict[str, Any] = dict(row.context or {})
        self.created_at: datetime = row.created_at
        self.updated_at: datetime = row.updated_at

    # ------------------------------------------------------------ create / load
    @classmethod
    def create(
        cls,
        db: Database,
        *,
        theme: str,
        participants: Sequence[str],
        mode: str = "autonomous",
        facilitator_id: str | None = None,
        max_turns: int | None = DEFAULT_MAX_TURNS,
    ) -> Discussion:
        theme = theme.strip()
        if not theme:
            raise ValidationError("a discussion needs a theme")
        if mode not in MODES:
            raise ValidationError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        ids = list(dict.fromkeys(str(p) for p in participants))
        if facilitator_id is not None:
            ids = [p for p in ids if p != facilitator_id]
        if mode == "autonomous" and len(ids) < 2:
            raise ValidationError("an autonomous discussion needs at least two participants")
        if mode == "facilitated" and (facilitator_id is None or not ids):
            raise ValidationError("a facilitated discussion needs a facilitator and participants")
        if len(ids) > MAX_PARTICIPANTS:
            raise ValidationError(f"at most {MAX_PARTICIPANTS} participants")
        if max_turns is not None and max_turns < 1:
            raise ValidationError("max_turns must be at least 1")
        session_id = str(uuid4())
        repo.create_discussion(
            db,
            session_id,
            theme=theme,
            mode=mode,
            phase=PHASES[0],
            participants=ids,
            facilitator_id=facilitator_id,
            max_turns=max_turns,
        )
        return cls.load(db, session_id)

    @classmethod
    def load(cls, db: Database, session_id: str) -> Discussion:
        row = repo.get_discussion(db, str(session_id))
        if row is None:
            raise NotFoundError(f"no discussion {session_id}")
        return cls(db, row)

    def refresh(self) -> None:
        fresh = Discussion.load(self.db, self.id)
        self.__dict__.update(fresh.__dict__)

    # ------------------------------------------------------------ state
    def trace_for(self, agent_id: str) -> str:
        """The participant's own trace within the discussion (stable per agent)."""
        return str(uuid5(NAMESPACE_OID, f"{self.id}/{agent_id}"))

    def done_declared(self) -> dict[str, bool]:
        """Whether each participant declared itself done, by agent id."""
        return repo.done_declared(self.db, self.id)

    def speeches(self, *, after: int = 0, limit: int = TRANSCRIPT_LINES) -> list[Speech]:
        """What was said (agents' speeches, people's posts), oldest first, with speakers."""
        rows = repo.latest_spoken(self.db, self.id, after=after, limit=limit)
        return [
            Speech(
                r.id,
                str(r.speaker_id or ""),
                r.speaker_name or str(r.speaker_id or "?"),
                r.content,
                person=r.role == "user",
            )
            for r in reversed(rows)
        ]

    def transcript(self, *, after: int = 0, limit: int = 1000) -> list[Any]:
        """The discussion's messages as stored (see core.sessions.session_messages)."""
        from opencrab.core.sessions import session_messages

        return session_messages(self.db, self.id, after_id=after, limit=limit)

    def last_speaker(self) -> str | None:
        latest = self.speeches(limit=1)
        return latest[0].speaker_id if latest else None

    def ended_by(self) -> str | None:
        """Why the discussion is over, or None while it goes on."""
        done = self.done_declared()
        if self.facilitator_id is not None and done.get(self.facilitator_id):
            return "facilitator_done"
        if self.participants and all(done.get(p) for p in self.participants):
            return "all_done"
        if self.max_turns is not None and self.turn_number >= self.max_turns:
            return "max_turns"
        return None

    @property
    def everyone(self) -> list[str]:
        """The participants and the facilitator."""
        return [*self.participants, *([self.facilitator_id] if self.facilitator_id else [])]

    def post(self, text: str, *, sender_id: str, sender_name: str | None = None) -> Speech:
        """A person says something in the running discussion; everyone hears it next turn.

        Stored as a `user` message naming the sender, a UserEvent in the discussion's own
        trace (live followers see it) and a speech line in every participant's memory.
        """
        check_message(text)
        text = text.strip()
        self.refresh()
        if self.status != "active":
            raise ConflictError(f"discussion {self.id} is {self.status}; it takes no posts")
        name = sender_name or sender_id
        events = EventLog(self.db)
        with self.db.write() as conn:
            event = UserEvent(
                id=uuid4(),
                trace_id=UUID(self.id),
                parent_id=events.last_id(self.id, conn=conn),
                timestamp=datetime.now(UTC),
                content=UserPayload(text=text),
                metadata={"source": "discussion", "sender": sender_id, "sender_name": name},
            )
            events.append_many([event], conn=conn)
            insert_messages(conn, self.id, [Said("user", text, str(event.id), sender_id, name)])
            line = SessionLog(
                session_id=self.id,
                log_type="speech",
                content=text,
                speaker_id=sender_id,
                turn_number=self.turn_number or None,
                metadata={"sender_name": name, "mentor": True},
                event_id=str(event.id),
            )
            for agent_id in self.everyone:
                MemoryManager(self.db, agent_id).append_session_logs([line], conn=conn)
            repo.touch_in(conn, self.id)
        latest = self.speeches(limit=1)
        return latest[-1]

    def join(self, agent_id: str) -> None:
        """Add an agent to the running discussion; it speaks from the next round on."""
        self.refresh()
        if self.status != "active":
            raise ConflictError(f"discussion {self.id} is {self.status}; nobody can join")
        if agent_id in self.everyone:
            raise ConflictError(f"that agent already takes part in discussion {self.id}")
        if len(self.participants) >= MAX_PARTICIPANTS:
            raise ValidationError(f"at most {MAX_PARTICIPANTS} participants")
        repo.add_participant(self.db, self.id, agent_id)
        self.refresh()

    def stop(self) -> None:
        """End the discussion now (ended_by "stopped")."""
        self.refresh()
        if self.status != "active":
            raise ConflictError(f"discussion {self.id} is {self.status} already")
        self.finish("stopped")

    def finish(self, reason: str) -> None:
        """End the discussion, noting why in its context (`ended_by`)."""
        repo.update_context(
            self.db, self.id, lambda context: {**context, "ended_by": reason}, status="completed"
        )
        self.status = "completed"

    # ------------------------------------------------------------ turns
    def prompt_for(self, agent: Agent) -> str:
        """The message a participant gets: theme, phase, turn, and what is new to it."""
        seen = int((self.context.get(SEEN) or {}).get(agent.id, 0))
        new = [s for s in self.speeches(after=seen) if s.speaker_id != agent.id]
        facilitating = agent.id == self.facilitator_id
        turn = self.turn_number + 1
        limit = f"/{self.max_turns}" if self.max_turns else ""
        texts = prompts(agent.language)
        lines = [
            texts.render(
                "discussion_header",
                theme=self.theme,
                mode=self.mode,
                phase=self.phase,
                turn=turn,
                limit=limit,
            )
        ]
        if new:
            lines.append(texts["discussion_new_speeches" if seen else "discussion_all_speeches"])
            mentor = texts["discussion_mentor"]
            lines += [f"- {mentor if s.person else ''}{s.speaker}: {s.text}" for s in new]
        elif not seen:
            lines.append(texts["discussion_nobody_yet"])
        else:
            lines.append(texts["discussion_nothing_new"])
        if facilitating:
            lines.append(texts.render("discussion_facilitator", phases=" → ".join(PHASES)))
        else:
            lines.append(texts["discussion_your_turn"])
        return "\n".join(lines)

    async def take_turn(self, runtime: RuntimeView, agent: Agent) -> TurnOutcome:
        """Run one turn of `agent` through the turn service and advance the turn counter,
        both while holding the session (one turn at a time, whoever drives it)."""
        async with runtime.turns.hold(agent, self.id, kind="discussion") as held:
            return await self._take_turn(held, agent)

    async def _take_turn(self, held: HeldSession, agent: Agent) -> TurnOutcome:
        self.refresh()
        if self.status != "active":
            raise ValidationError(f"discussion {self.id} is {self.status}")
        if agent.id not in self.everyone:
            raise ValidationError(f"{agent.name} does not take part in discussion {self.id}")
        turn = self.turn_number + 1
        text = self.prompt_for(agent)
        top_seen = max((s.log_id for s in self.speeches(limit=1)), default=0)
        message = IncomingMessage.text(
            text,
            source=InternalSource(origin="discussion"),
            sender=Sender(id="discussion", name="discussion"),
        )
        result = await held.run(
            message,
            trace_id=self.trace_for(agent.id),
            task_type="discussion",
            turn_number=turn,
            purpose="conversation",
        )

        def saw(context: dict[str, Any]) -> dict[str, Any]:
            return {**context, SEEN: {**(context.get(SEEN) or {}), agent.id: top_seen}}

        repo.update_context(self.db, self.id, saw, next_turn=True)
        self.refresh()
        for wrote in held.service.on_write:  # the turn counter moved
            wrote()
        spoke = result.reply if result.stopped_by in SPOKEN else None
        return TurnOutcome(
            agent_id=agent.id,
            agent=agent.name,
            turn_number=turn,
            spoke=spoke,
            action=result.stopped_by,
            error=None if result.error is None else f"{result.error.error}: {result.error.message}",
            approval_id=result.approval_id,
        )

    async def continue_turn(
        self, runtime: RuntimeView, agent: Agent, message: IncomingMessage, trace_id: str
    ) -> list[EngineStep]:
        """Finish `agent`'s turn whose call was held, once a person decided it
        (core/approval_followups.py): one more turn in its trace with `message`, under the
        held turn's number (that turn counted already); its steps."""
        async with runtime.turns.hold(agent, self.id, kind="discussion", wait_busy=True) as held:
            self.refresh()
            top_seen = max((s.log_id for s in self.speeches(limit=1)), default=0)
            steps = [
                step
                async for step in held.steps(
                    message,
                    trace_id=trace_id,
                    task_type="discussion",
                    turn_number=self.turn_number or None,
                    purpose="conversation",
                )
            ]

            def saw(context: dict[str, Any]) -> dict[str, Any]:
                return {**context, SEEN: {**(context.get(SEEN) or {}), agent.id: top_seen}}

            repo.update_context(self.db, self.id, saw)
            for wrote in held.service.on_write:
                wrote()
        return steps

    def waiting(self) -> bool:
        """True while a participant's call waits for a person, or the turn continuing it
        after the decision has not run yet (the discussion waits meanwhile)."""
        with self.db.read() as conn:
            return approvals_repo.session_waiting(conn, self.id)

    async def wait_for_decision(self, approval_id: str | None = None) -> dict[str, Any] | None:
        """Wait while the discussion waits (`waiting`) and is active; then the result
        (step_json of its TurnResult) of the turn that continued the call `approval_id`,
        when one ran."""
        while await run_blocking(self.waiting):
            await asyncio.sleep(WAIT_POLL_SECS)
            await run_blocking(self.refresh)
            if self.status != "active":
                return None
        if approval_id is None:
            return None

        def answered() -> FollowUpOutcome | None:
            with self.db.read() as conn:
                return approvals_repo.answered(conn, [approval_id]).get(approval_id)

        found = await run_blocking(answered)
        return found.steps[-1] if found is not None and found.steps else None

    def next_speakers(self) -> list[str]:
        """Autonomous turn-taking: who may speak next, least recently heard first.

        Nobody who declared done, and not the last speaker while anyone else may speak.
        """
        done = self.done_declared()
        open_ = [p for p in self.participants if not done.get(p)]
        last = self.last_speaker()
        candidates = [p for p in open_ if p != last] or open_
        heard: dict[str, int] = {}
        for speech in self.speeches(limit=200):
            heard[speech.speaker_id] = speech.log_id
        return sorted(candidates, key=lambda p: (heard.get(p, 0), self.participants.index(p)))

    async def run(
        self,
        runtime: RuntimeView,
        *,
        on_turn: Callable[[TurnOutcome], Awaitable[None] | None] | None = None,
        held: Callable[[], bool] = lambda: True,
    ) -> DiscussionOutcome:
        """Run turns back to back until the discussion ends; returns what happened.

        `held` is asked before every turn (a runner: whether it still holds the
        discussion's lease); False returns at once, the discussion still active."""
        outcome = DiscussionOutcome(self.id, self.theme, self.mode, self.status, "")
        quiet = 0  # turns in a row without a speech
        failures = 0
        while True:
            self.refresh()
            if self.status != "active":  # ended from outside (stopped)
                outcome.status = self.status
                outcome.ended_by = str(self.context.get("ended_by") or self.status)
                return outcome
            reason = self.ended_by()
            if reason is None and quiet >= 2 * max(1, len(self.participants)):
                reason = "silence"
            if reason is None and failures >= max(2, len(self.participants)):
                reason = "errors"
            if reason is not None:
                self.finish(reason)
                outcome.status, outcome.ended_by = self.status, reason
                return outcome
            await self.wait_for_decision()  # a call held before (a restarted runner)
            if self.status != "active":
                continue  # stopped meanwhile: said so at the top
            for agent_id in self._round():
                if not held():
                    return outcome
                agent = runtime.agents.get(agent_id)
                turn: TurnOutcome | None = await self.take_turn(runtime, agent)
                while turn is not None:
                    outcome.turns.append(turn)
                    quiet = 0 if turn.spoke else quiet + 1
                    failures = failures + 1 if turn.error else 0
                    if on_turn is not None:
                        maybe = on_turn(turn)
                        if maybe is not None:
                            await maybe
                    # a held call: the discussion waits for the decision and the turn
                    # that continues it (core/approval_followups.py), then goes on
                    turn = await self._continued(agent, turn)
                if self.status != "active" or self.ended_by() is not None:
                    break

    async def _continued(self, agent: Agent, turn: TurnOutcome) -> TurnOutcome | None:
        """After a turn that held a call: the turn continuing it, once decided and run."""
        if turn.approval_id is None:
            return None
        result = await self.wait_for_decision(turn.approval_id)
        await run_blocking(self.refresh)
        if result is None:
            return None
        stopped = result.get("stoppedBy")
        return TurnOutcome(
            agent_id=agent.id,
            agent=agent.name,
            turn_number=turn.turn_number,
            spoke=result.get("reply") if stopped in SPOKEN else None,
            action=stopped,
            error=result.get("error"),
            approval_id=result.get("approvalId"),
        )

    def _round(self) -> list[str]:
        """Who takes the next turn(s)."""
        if self.mode == "facilitated" and self.facilitator_id is not None:
            done = self.done_declared()
            return [self.facilitator_id, *(p for p in self.participants if not done.get(p))]
        upcoming = self.next_speakers()
        return upcoming[:1]


Listener = Callable[[str, dict[str, Any]], None]
"""Hears a running discussion: (session id, {"type": "discussion.turn" or ".ended", …})."""


class DiscussionRunner:
    """A process's discussions: each one it claims runs in its own task to the end.

    Discussions a runner drives are marked in their context (`runner`), so the heartbeat
    leaves them alone. Each is claimed through its `discussion:<id>` lease (store.leases;
    renewed while it runs, by the runtime's LeaseKeeper): `start` claims a new one here,
    and `claim_free` (every role of the process calls it now and then: opencrab.process)
    claims the marked, active ones no process holds — after a restart, or once a dead
    process's lease expired. So any process may run a discussion and none runs one twice;
    a runner that loses the lease (its renewals stalled) stops before the next turn.
    Listeners hear every turn and the end (the server passes them to the WebSocket).

    Example:
        runner = DiscussionRunner(runtime)
        discussion = await runner.start(Discussion.create(db, theme="…", participants=[a, b]))
        await runner.close()
    """

    def __init__(self, runtime: RuntimeView) -> None:
        self.runtime = runtime
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.listeners: list[Listener] = []

    async def start(self, discussion: Discussion) -> Discussion:
        """Run `discussion` here in the background (once; starting it again changes
        nothing): its lease is taken before it is marked, so no other process's
        `claim_free` can run it first."""
        if discussion.id not in self.tasks:
            await self._claim(discussion.id)
            repo.update_context(
                discussion.db, discussion.id, lambda context: {**context, RUNNER: True}
            )
        discussion.refresh()
        return discussion

    def running(self, session_id: str) -> bool:
        """Whether this process drives the discussion now."""
        return session_id in self.tasks

    async def claim_free(self) -> list[str]:
        """Claim and start the active discussions a runner drove that no process holds
        (after a restart, or a dead process's); their ids."""
        rows = await run_blocking(repo.active_discussions, self.runtime.db)
        claimed: list[str] = []
        for session_id, context in rows:
            ours = session_id in self.tasks
            if context.get(RUNNER) and not ours and await self._claim(session_id):
                claimed.append(session_id)
        return claimed

    async def _claim(self, session_id: str) -> bool:
        if not await self.runtime.leases.acquire(discussion_key(session_id)):
            return False  # another process drives it
        if session_id in self.tasks:  # claimed meanwhile by this process
            return True
        task = asyncio.create_task(self._run(session_id), name=f"discussion-{session_id}")
        self.tasks[session_id] = task
        task.add_done_callback(lambda _: self.tasks.pop(session_id, None))
        return True

    async def stop(self, session_id: str) -> None:
        """End a discussion now; a turn under way here is cancelled (and kept,
        interrupted). One driven by another process stops before its next turn."""
        Discussion.load(self.runtime.db, session_id).stop()
        task = self.tasks.get(session_id)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        """Stop driving (the discussions stay active; their leases are let go of, so
        another process, or the next start, goes on with them)."""
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _tell(self, session_id: str, message: dict[str, Any]) -> None:
        for listener in list(self.listeners):
            try:
                listener(session_id, message)
            except Exception:
                log.exception("discussion listener failed")

    async def _run(self, session_id: str) -> None:
        key = discussion_key(session_id)
        try:
            await self._drive(session_id, key)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.runtime.leases.release(key))

    async def _drive(self, session_id: str, key: str) -> None:
        def told(turn: TurnOutcome) -> None:
            self._tell(session_id, {"type": "discussion.turn", **turn.as_json()})

        try:
            discussion = Discussion.load(self.runtime.db, session_id)
            outcome = await discussion.run(
                self.runtime, on_turn=told, held=lambda: self.runtime.leases.holds(key)
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("discussion %s failed", session_id)
            with contextlib.suppress(Exception):
                Discussion.load(self.runtime.db, session_id).finish("errors")
            self._tell(
                session_id,
                {
                    "type": "discussion.ended",
                    "endedBy": "errors",
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )
            return
        if outcome.status == "active":  # the lease was lost: another process goes on
            log.warning("discussion %s: its lease was lost; left to its new holder", session_id)
            return
        self._tell(session_id, {"type": "discussion.ended", "endedBy": outcome.ended_by})
