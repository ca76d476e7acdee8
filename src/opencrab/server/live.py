"""Live events: new AgentEvents fanned out to WebSocket clients, without blocking agents.

One `EventHub` per server tails the events table by seq (one indexed query per wake-up
however many clients listen) and hands each new event, serialised once, to the clients
subscribed to its trace. It wakes when this process writes a turn step (`nudge`), when
the database says another process committed events (PostgreSQL: LISTEN/NOTIFY), and
otherwise every `poll_secs`, so events written by other processes (the CLI, a second
server or a worker on the same database) arrive too.

No row is skipped, even where rows commit out of seq order (PostgreSQL takes a seq when
a row is inserted, not when it commits): a seq below the highest one read that no row
has yet is asked for again at every look until it turns up or the dialect's
`gap_secs` pass (opencrab.store.dialects.LiveTail). Such a late row is delivered after
rows with higher seqs.

Every client has a bounded outbox. Offering never waits: a client whose outbox is full
is too slow and is dropped (closed with 4429), so one stalled browser tab cannot hold up
an agent or the other clients. Unsubscribing and dropping remove every reference.

A session with no events of its own (an agent-mode session) is `watch`ed instead: its
followers get only what is `announce`d for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from opencrab.event_log import row_json
from opencrab.offload import run_blocking
from opencrab.store import Database
from opencrab.store.dialects import LiveTail, live_tail
from opencrab.store.repositories import event_feed

log = logging.getLogger(__name__)

OUTBOX_SIZE = 1024  # messages a client may have waiting before it counts as too slow
BATCH = 1000  # events read per query
SLOW_CLIENT = 4429  # close code for a client that cannot keep up
MAX_GAPS = 10_000  # missing seqs looked for at once (the newest are kept)


def event_message(session_id: str, event_json: str, agent_id: str | None, seq: int) -> str:
    """The `event` message a subscriber receives (the event's JSON is embedded as is).

    In a discussion every participant has its own trace; `agentId` says whose it is.
    `seq` is the event's place in the log: subscribing again with `afterSeq` set to the
    last one received sends exactly what came after it.
    """
    who = "" if agent_id is None else f',"agentId":"{agent_id}"'
    return f'{{"type":"event","sessionId":"{session_id}"{who},"seq":{seq},"event":{event_json}}}'


def read_events(
    db: Database,
    traces: Iterable[str],
    *,
    after_seq: int = 0,
    before_seq: int | None = None,
    newest: bool = False,
    limit: int = 10_000,
) -> list[tuple[int, str, bytes]]:
    """Stored events of the traces with after_seq < seq < before_seq, oldest first, as
    (seq, trace, seed-form JSON): the first `limit` of them, or the last when `newest`."""
    rows = event_feed.read_events(
        db, traces, after_seq=after_seq, before_seq=before_seq, newest=newest, limit=limit
    )
    return [(row.seq, str(row.trace_id), row_json(row)) for row in rows]


@dataclass(eq=False)
class Client:
    """One connection's outbox; `closed` is set when it was dropped or went away."""

    name: str = "client"
    outbox: asyncio.Queue[str] = field(default_factory=lambda: asyncio.Queue(maxsize=OUTBOX_SIZE))
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    close_code: int | None = None
    close_reason: str = ""
    traces: dict[str, str] = field(default_factory=dict)  # trace id -> session id
    speakers: dict[str, str] = field(default_factory=dict)  # trace id -> its agent's id
    watching: set[str] = field(default_factory=set)  # sessions followed by notices only

    def offer(self, message: str) -> bool:
        """Queue a message without waiting; a full outbox drops the client."""
        if self.closed.is_set():
            return False
        try:
            self.outbox.put_nowait(message)
        except asyncio.QueueFull:
            self.drop(SLOW_CLIENT, f"too slow: {OUTBOX_SIZE} messages were waiting")
            return False
        return True

    def drop(self, code: int, reason: str) -> None:
        if not self.closed.is_set():
            self.close_code, self.close_reason = code, reason
            self.closed.set()


class EventHub:
    """See the module docstring. `run()` until `stop()`; subscribe clients by trace."""

    def __init__(
        self,
        db: Database,
        *,
        poll_secs: float = 0.25,
        tail: LiveTail | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.poll_secs = poll_secs
        self.tail = tail if tail is not None else live_tail(db.dialect)
        self.clock = clock
        self.last_seq = 0
        self.gaps: dict[int, float] = {}  # seq below last_seq not seen yet -> noticed when
        self._by_trace: dict[str, set[Client]] = {}
        self._watchers: dict[str, set[Client]] = {}  # session id -> clients (notices only)
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._notes: list[tuple[str, str]] = []  # (session, message) to send after events
        self.delivered = 0
        self.dropped = 0

    # ------------------------------------------------------------ subscribers
    async def subscribe(
        self,
        client: Client,
        session_id: str,
        traces: Iterable[str],
        speakers: dict[str, str] | None = None,
    ) -> int:
        """Send `client` the traces' new events; returns the last event seq already seen.

        Events up to the returned seq are history (read them from the store); every
        later one is delivered live. `speakers` names the agent of a trace (discussions).
        A hub nobody followed until now first reads where the log ends, off the event
        loop; the client is registered together with the seq it is given, in one step of
        the loop, so no event falls between its history and its live feed.
        """
        if not self._by_trace:  # idle until now: start from the present
            top, missing = await run_blocking(event_feed.last_seqs, self.db, self.tail.gap_window)
            if not self._by_trace:  # (else another client started the feed meanwhile)
                self.last_seq = top
                self.gaps = dict.fromkeys(missing, self.clock())
        self._attach(client, session_id, traces, speakers or {})
        return self.last_seq

    def _attach(
        self, client: Client, session_id: str, traces: Iterable[str], speakers: dict[str, str]
    ) -> None:
        for trace in traces:
            client.traces[trace] = session_id
            self._by_trace.setdefault(trace, set()).add(client)
        for trace, agent_id in speakers.items():
            client.speakers[trace] = agent_id

    def watch(self, client: Client, session_id: str) -> None:
        """Send `client` what is announced for `session_id` (a session without events)."""
        client.watching.add(session_id)
        self._watchers.setdefault(session_id, set()).add(client)

    def follow(self, session_id: str, trace: str, agent_id: str) -> None:
        """Every client following `session_id` also gets `trace` (an agent that joined)."""
        for client in {c for listeners in self._by_trace.values() for c in listeners}:
            if session_id in client.traces.values():
                self._attach(client, session_id, [trace], {trace: agent_id})

    def announce(self, session_id: str, message: str) -> None:
        """Send a message to every client following `session_id`, after the events
        written before it (at the next look, which this triggers)."""
        self._notes.append((session_id, message))
        self.nudge()

    def _send_notes(self) -> None:
        notes, self._notes = self._notes, []
        clients = {c for listeners in self._by_trace.values() for c in listeners}
        for session_id, message in notes:
            following = {c for c in clients if session_id in c.traces.values()}
            for client in following | self._watchers.get(session_id, set()):
                if not client.offer(message):
                    self.dropped += 1
                    self.unsubscribe(client)

    def unsubscribe(self, client: Client, session_id: str | None = None) -> None:
        """Stop one session's events (all of them when `session_id` is None)."""
        for watched in list(client.watching):
            if session_id is None or watched == session_id:
                client.watching.discard(watched)
                watchers = self._watchers.get(watched)
                if watchers is not None:
                    watchers.discard(client)
                    if not watchers:
                        del self._watchers[watched]
        for trace, session in list(client.traces.items()):
            if session_id is not None and session != session_id:
                continue
            del client.traces[trace]
            client.speakers.pop(trace, None)
            listeners = self._by_trace.get(trace)
            if listeners is not None:
                listeners.discard(client)
                if not listeners:
                    del self._by_trace[trace]

    @property
    def client_count(self) -> int:
        listening = [*self._by_trace.values(), *self._watchers.values()]
        return len({c for listeners in listening for c in listeners})

    # ------------------------------------------------------------ the loop
    def nudge(self) -> None:
        """Something was written: look now instead of at the next poll."""
        self._wake.set()

    async def run(self) -> None:
        """Deliver new events at every wake-up until `stop()` (listening where the
        database can tell of other processes' commits)."""
        listen = self.tail.listen
        listener = (
            asyncio.create_task(
                listen(self.db.url.render_as_string(hide_password=False), self.nudge),
                name="live-events-listen",
            )
            if listen is not None
            else None
        )
        try:
            while not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_secs)
                self._wake.clear()
                if not self._by_trace:
                    self._send_notes()  # no events to read: only watchers' notices
                else:
                    try:
                        await self.deliver_new()
                    except Exception:  # the feed must outlive a bad read
                        log.exception("live event feed: reading new events failed")
        finally:
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    async def deliver_new(self) -> int:
        """Hand every event written since the last look to its subscribers."""
        sent = 0
        while True:
            rows = await asyncio.to_thread(
                event_feed.rows_after, self.db, self.last_seq, missing=list(self.gaps), limit=BATCH
            )
            for row in rows:
                if self.gaps.pop(row.seq, None) is None:
                    if row.seq <= self.last_seq:
                        continue  # everyone left and came back while this was read
                    self._note_gaps(row.seq)
                    self.last_seq = row.seq
                listeners = self._by_trace.get(str(row.trace_id))
                if not listeners:
                    continue
                body = row_json(row).decode()
                framed: dict[tuple[str, str | None], str] = {}  # shared by clients alike
                trace = str(row.trace_id)
                for client in list(listeners):
                    key = (client.traces.get(trace, ""), client.speakers.get(trace))
                    message = framed.get(key)
                    if message is None:
                        message = framed[key] = event_message(key[0], body, key[1], row.seq)
                    if client.offer(message):
                        sent += 1
                    else:
                        self.dropped += 1
                        self.unsubscribe(client)
            if len(rows) < BATCH:
                break
        self._forget_old_gaps()
        self._send_notes()
        self.delivered += sent
        return sent

    def _note_gaps(self, seq: int) -> None:
        """Remember the seqs between the last one read and `seq` (a row read now): rows
        taking them may still commit (see LiveTail)."""
        if self.tail.gap_secs <= 0 or seq <= self.last_seq + 1:
            return
        now = self.clock()
        for missing in range(max(self.last_seq + 1, seq - MAX_GAPS), seq):
            self.gaps[missing] = now

    def _forget_old_gaps(self) -> None:
        """Give up on seqs missing for longer than the dialect's `gap_secs` (rolled back),
        and keep at most MAX_GAPS of the newest."""
        if not self.gaps:
            return
        oldest = self.clock() - self.tail.gap_secs
        kept = sorted(seq for seq, since in self.gaps.items() if since >= oldest)
        self.gaps = {seq: self.gaps[seq] for seq in kept[-MAX_GAPS:]}

    def history(
        self, traces: Iterable[str], *, after_seq: int, upto_seq: int, limit: int = 10_000
    ) -> list[tuple[int, str, bytes]]:
        """Stored events of the traces with after_seq < seq <= upto_seq: (seq, trace, json)."""
        return read_events(
            self.db, traces, after_seq=after_seq, before_seq=upto_seq + 1, limit=limit
        )
