"""The agent-mode orchestrator: runs a session's task DAG as coding CLIs in tmux panes.

`start(session, cli)` records how tasks are started (`runstate.RunState`) and begins a
watch loop for the session (one asyncio task). Every `poll_secs` (200 ms) the loop:

1. reloads the session file when another process changed it (the CLI's `pause`,
   `cancel`, `answer`, … while `opencrab up` runs the session);
2. checks each running sub-agent cheaply: its signals file's size (hooks / notify append
   there, `signals.py`) and whether the CLI's own pid is still alive (`/proc`); only on a
   change does it read the new signals or ask tmux for the pane's exit status, then maps
   them with `clis.observe` (signals first, pane exit next); a CLI whose questions send
   no signal (Codex's approvals) has its pane read for one every SCREEN_EVERY_SECS
   while it is silent (`launching.screen_question`, never on text echoed from the prompt);
   a sub-agent is Starting until its first signal or screen text, and one whose CLI sends
   no signal at all completes by IdleTimeout after `[agent_mode] idle_timeout_secs` of an
   unchanged screen without a question (`idle.py`) —
   WaitingInput keeps the question for the user (`answer` types the reply
   into the pane); Completed shows the task Completed at once and delivers in the
   background (`deliver.py`: the CLI ended, its pane kept for `output`; commit, diff
   against the start branch, pull request or local branch, transcript import; again at
   `close`); dependants start only after that delivery; Error fails it with the reason;
3. while the session is Active, moves Pending tasks whose dependencies all completed to
   Ready and starts Ready ones up to `[agent_mode] parallelism`: a New task gets a
   worktree on its planned branch (`validation.plan_branches`) from the start branch,
   with its dependencies' branches merged; a Shared task reuses its first dependency's
   worktree (never two tasks in one worktree at once). Starting (`launching.py`) runs
   in the background too, so a slow `git worktree add` never delays watching. Each
   sub-agent has its own HOME and signal dir under
   `{data_dir}/agent-mode/{session}/{task}`; its pane carries the labels `session` and
   `task`, so a restarted runner finds it again.
4. ends the session: Completed when every task completed; Failed when a task failed and
   nothing can run any more (the failed task's dependants stay Pending, so `retry` lets
   them go on).

Control: `pause` stops starting tasks (running sub-agents go on to their end and are
still watched); `resume` re-attaches after a restart (a Running task whose pane or
worktree is gone fails with the reason); `cancel` ends every pane's process tree and
cancels the tasks (the session becomes Failed: the seed has no cancelled session);
`retry` puts a failed task back to Pending; `cleanup` removes the worktrees and branches
of finished tasks unless that loses unmerged, unpushed work (refusals are reported), and
reports orphaned panes and worktrees (removed only with `orphans=True`).

Credentials: each CLI talks to the provider OpenCrab is configured with (`endpoints`
given for its type, else `credentials`, which reads OpenCrab's LLM settings when each
task starts: `credentials.py`); a CLI whose provider has no usable key is refused at
`start` and fails a task that starts without one, saying what to set.

Leases: given a LeaseKeeper, a session is watched only while this process holds its
`agent-mode:<id>` lease (store.leases; renewed meanwhile), so of the processes sharing
a data directory (`opencrab up`, `opencrab worker`: the panes are on its tmux socket)
exactly one watches each session; `claim_free` (called now and then by every role,
opencrab.process) takes up the started sessions nobody watches, such as a dead
process's once its lease expired, re-attaching to their panes.

Transcripts are imported with the master agent's id (`agent_id`), so a session's coding
spend shows under the agent that planned it. `listeners(session_id, task_id)` are called
after every change (the server forwards them to WebSocket clients).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from opencrab.agentmode import clis, deliver, idle, worktrees
from opencrab.agentmode.answering import answer_in_pane
from opencrab.agentmode.cleanup import CleanupReport, clean_session, find_orphans
from opencrab.agentmode.clis import Endpoint, Observation, Profile
from opencrab.agentmode.credentials import SubAgentCredentials
from opencrab.agentmode.launching import (
    Opened,
    Watched,
    current_branch,
    ensure_worktree,
    open_sub_agent,
    pid_alive,
    record_started,
    screen_question,
    task_prompt,
)
from opencrab.agentmode.model import (
    AgentSession,
    CompletionSource,
    MessageRole,
    SessionStatus,
    SubAgentStatus,
    Task,
    TaskResult,
    TaskStatus,
    utcnow,
)
from opencrab.agentmode.runstate import RunFiles, RunState
from opencrab.agentmode.service import AgentModeService
from opencrab.agentmode.signals import read_signals, record, signals_path
from opencrab.agentmode.states import fail_task, move_session, move_task
from opencrab.agentmode.tmux import TmuxError, TmuxServer
from opencrab.agentmode.validation import plan_branches
from opencrab.core.agent import AgentStore
from opencrab.errors import ConflictError, NotFoundError, ValidationError
from opencrab.offload import run_blocking
from opencrab.store.lease_keeper import LeaseKeeper
from opencrab.store.leases import agent_mode_key

log = logging.getLogger(__name__)

POLL_SECS = 0.2
CLIS_BIN = Path(__file__).resolve().parents[3] / "clis" / "node_modules" / ".bin"
Listener = Callable[[str, str | None], None]


class AgentModeRunner:
    """Runs agent-mode sessions: starts, watches, answers, pauses, resumes, cancels."""

    def __init__(
        self,
        service: AgentModeService,
        tmux: TmuxServer,
        *,
        data_dir: Path | None = None,
        endpoints: Mapping[str, Endpoint] | None = None,
        credentials: SubAgentCredentials | None = None,
        agent_id: str | None = None,
        search: Sequence[str | os.PathLike[str]] = (CLIS_BIN,),
        poll_secs: float = POLL_SECS,
        extra_env: Mapping[str, str] | None = None,
        leases: LeaseKeeper | None = None,
    ) -> None:
        self.service = service
        self.leases = leases  # a session is watched only under its lease (None: always)
        self.tmux = tmux
        root = data_dir if data_dir is not None else service.settings.data_dir
        self.runs = RunFiles(Path(root) / "agent-mode")
        self.endpoints = dict(endpoints or {})  # agent type -> the model it talks to
        self.credentials = credentials  # else: OpenCrab's LLM settings, read at each start
        self.agent_id = agent_id
        self.search = list(search)
        self.poll_secs = poll_secs
        self.extra_env = dict(extra_env or {})
        self.listeners: list[Listener] = []
        self._loops: dict[str, asyncio.Task[None]] = {}
        self._watched: dict[str, dict[str, Watched]] = {}
        self._sessions: dict[str, AgentSession] = {}
        self._mtimes: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._launching: dict[str, set[str]] = {}  # tasks whose sub-agent is being started
        self._delivering: dict[str, set[str]] = {}  # completed tasks whose work is delivered
        self._imported: set[tuple[str, str]] = set()  # imported again at close (incremental)
        self._starts: set[asyncio.Task[None]] = set()
        self._ended: dict[str, int] = {}  # watched here to an end: its file's mtime then

    # ------------------------------------------------------------ persistence
    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._locks.setdefault(session_id, asyncio.Lock())

    def _load(self, session_id: str) -> AgentSession:
        session = self.service.get(session_id)
        self._sessions[session_id] = session
        self._mtimes[session_id] = self._mtime(session_id)
        return session

    def _mtime(self, session_id: str) -> int:
        try:
            return self.service.files.path_for(session_id).stat().st_mtime_ns
        except OSError:
            return 0

    def _save(self, session: AgentSession, task_id: str | None = None) -> None:
        session.updated_at = utcnow()
        self.service.save(session)
        self._sessions[session.id] = session
        self._mtimes[session.id] = self._mtime(session.id)
        for listener in self.listeners:
            try:
                listener(session.id, task_id)
            except Exception:  # a listener never stops the runner
                log.exception("agent-mode listener failed")

    def _state(self, session_id: str) -> RunState:
        state = self.runs.load(session_id)
        if state is None:
            raise ConflictError(f"session {session_id} has not been started")
        return state

    def current(self, session_id: str) -> AgentSession | None:
        """The session as the runner last loaded or saved it (no file read), or None."""
        return self._sessions.get(session_id)

    def endpoint_for(self, profile: Profile) -> Endpoint | None:
        """The model `profile`'s CLI talks to: the endpoint given for its type, else
        OpenCrab's configured provider (`credentials.py`; ValidationError naming what to
        set when it has no usable key), else None."""
        given = self.endpoints.get(profile.agent_type)
        if given is not None or self.credentials is None:
            return given
        return self.credentials.endpoint(profile.agent_type)

    def run_state(self, session_id: str) -> RunState | None:
        """The session's run state (CLI, branches, questions, outcomes), None before start."""
        return self.runs.load(session_id)

    # ------------------------------------------------------------ start
    async def start(
        self,
        session_id: str,
        cli: str = "claude",
        command: Sequence[str] | str | None = None,
        *,
        full_auto: bool = True,
    ) -> AgentSession:
        """Start running the session's tasks with the coding CLI `cli` (`command` is the
        program for `other`, or replaces the CLI's executable); its lease is taken first,
        so this process watches it."""
        profile = clis.profile_for(cli)
        argv = clis.launch_command(profile, command, self.search)  # refused early
        await run_blocking(self.endpoint_for, profile)  # no key: refused before anything
        async with self._lock(session_id):
            session = self._load(session_id)
            if self.runs.load(session_id) is not None:
                raise ConflictError(f"session {session_id} was started already: use resume")
            if session.status is not SessionStatus.ACTIVE:
                raise ConflictError(f"session {session_id} is {session.status.value}")
            if not session.tasks:
                raise ConflictError(f"session {session_id} has no tasks")
            key = agent_mode_key(session_id)
            if self.leases is not None and not await self.leases.acquire(key):
                raise ConflictError(f"session {session_id} is being started by another process")
            try:
                await self._run_state(session, profile.agent_type, argv, full_auto)
            except BaseException:
                if self.leases is not None:
                    await self.leases.release(key)
                raise
        self._ensure_loop(session_id)
        return session

    async def _run_state(
        self, session: AgentSession, cli: str, argv: list[str], full_auto: bool
    ) -> None:
        """Record how the session's tasks start (its RunState) and say so in it."""
        repo = Path(session.repository_path)
        start_branch = await current_branch(repo)
        async with worktrees.repo_lock(repo):  # one session at a time claims branches
            state = RunState(
                cli=cli,
                command=argv or None,
                start_branch=start_branch,
                full_auto=full_auto,
                branches=plan_branches(session.tasks, await self._branches_taken(repo)),
            )
            self.runs.save(session.id, state)
        session.conversation.add(
            MessageRole.SYSTEM, f"Started with {cli} from branch {start_branch}."
        )
        self._save(session)

    async def _branches_taken(self, repo: Path) -> set[str]:
        """The repository's branches, and those other started sessions on it will make
        (a task waiting for its dependencies has no branch yet)."""
        taken = set((await worktrees.git(repo, "branch", "--format=%(refname:short)")).split())
        for row in self.service.list(repository=repo, limit=10_000):
            state = self.runs.load(row.id)
            if state is not None:
                taken.update(state.branches.values())
        return taken

    def _ensure_loop(self, session_id: str) -> None:
        self._ended.pop(session_id, None)
        loop = self._loops.get(session_id)
        if loop is None or loop.done():
            self._loops[session_id] = asyncio.create_task(
                self._claimed(session_id), name=f"agent-mode-{session_id}"
            )

    async def _claimed(self, session_id: str) -> None:
        """Watch the session while this process holds its `agent-mode:<id>` lease (with
        no `leases`, always); another process holding it watches it instead."""
        key = agent_mode_key(session_id)
        if self.leases is not None and not await self.leases.acquire(key):
            return
        try:
            await self._watch(session_id, key)
        finally:
            if self.leases is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.leases.release(key))

    async def _watch(self, session_id: str, key: str) -> None:
        while True:
            if self.leases is not None and not self.leases.holds(key):
                log.warning("agent-mode session %s: its lease was lost", session_id)
                return  # its renewals stalled: another process may watch it now
            try:
                more = await self.step(session_id)
            except NotFoundError:
                return  # the session file was deleted
            except Exception:
                log.exception("agent-mode session %s: watch step failed", session_id)
                more = True
            if not more:
                self._ended[session_id] = self._mtime(session_id)
                return
            await asyncio.sleep(self.poll_secs)

    async def wait(self, session_id: str) -> AgentSession:
        """Wait until the session's watch loop ends (the session finished or was stopped)."""
        loop = self._loops.get(session_id)
        if loop is not None:
            await loop
        return self._sessions.get(session_id) or self._load(session_id)

    # ------------------------------------------------------------ one watch step
    async def step(self, session_id: str) -> bool:
        """Observe running sub-agents, finish or fail them, start ready tasks; False once
        nothing is running and the session will not start more without the user."""
        async with self._lock(session_id):
            session = self._sessions.get(session_id)
            if session is None or self._mtime(session_id) != self._mtimes.get(session_id):
                session = self._load(session_id)
            state = self._state(session_id)
            watched = self._watched.setdefault(session_id, {})
            for task in session.tasks:
                if task.status is TaskStatus.RUNNING and task.id not in watched:
                    await self._attach(session, state, task)
            for task_id in [t for t in watched if session.task(t) is None]:
                del watched[task_id]
            for task_id, item in list(watched.items()):
                current = session.task(task_id)
                if current is None or current.status is not TaskStatus.RUNNING:
                    del watched[task_id]
                    continue
                await self._check(session, state, current, item)
            if session.status is SessionStatus.ACTIVE:
                await self._schedule(session, state)
                self._conclude(session)
            running = any(t.status is TaskStatus.RUNNING for t in session.tasks)
            running = running or bool(self._launching.get(session_id))
            running = running or bool(self._delivering.get(session_id))
            return running or (
                session.status is SessionStatus.ACTIVE
                and any(t.status in (TaskStatus.PENDING, TaskStatus.READY) for t in session.tasks)
                and self._can_progress(session)
            )

    def _can_progress(self, session: AgentSession) -> bool:
        done = {t.id for t in session.tasks if t.status is TaskStatus.COMPLETED}
        return any(
            t.status in (TaskStatus.PENDING, TaskStatus.READY)
            and all(d in done for d in t.dependencies)
            for t in session.tasks
        ) or any(t.status is TaskStatus.RUNNING for t in session.tasks)

    async def _attach(self, session: AgentSession, state: RunState, task: Task) -> None:
        """Follow a Running task found in the file (a restart): its pane by labels."""
        agent = task.sub_agent
        panes = {p.pane_id: p for p in await self.tmux.list_panes()}
        pane = panes.get(agent.pane_id) if agent is not None else None
        labelled = pane is not None and pane.labels.get("session") == session.id
        if agent is None or pane is None or not labelled or pane.labels.get("task") != task.id:
            self._fail(session, task, "its tmux pane is gone (the sub-agent did not survive)")
            return
        branch = state.branches.get(task.id, "")
        missing = await worktrees.worktree_missing(session.repository_path, branch)
        if missing is not None:
            await self._end_pane(agent.pane_id)
            self._fail(session, task, missing)
            return
        profile = clis.profile_for(state.cli)
        signal_dir = self.runs.task_dir(session.id, task.id) / "signals"
        item = Watched(task.id, agent.pane_id, agent.pid, signal_dir, profile, "")
        item.prompt = task_prompt(session, task)
        self._watched[session.id][task.id] = item

    async def _check(
        self, session: AgentSession, state: RunState, task: Task, item: Watched
    ) -> None:
        changed = False
        try:
            size = signals_path(item.signal_dir).stat().st_size
        except OSError:
            size = 0
        if size != item.size:
            found, item.offset = read_signals(item.signal_dir, item.offset)
            item.signals += found
            item.size = size
            item.screen_at = time.monotonic()  # it spoke: its screen can wait
            changed = True
        if item.exit_status is None and not pid_alive(item.pid):
            try:
                pane = await self.tmux.pane_state(item.pane_id)
            except TmuxError:
                self._fail(session, task, "its tmux pane is gone")
                return
            if not pane.dead:
                return  # the exit is not recorded yet: next round
            item.exit_status = (
                pane.exit_status if pane.exit_status is not None else 128 + (pane.exit_signal or 0)
            )
            changed = True
        if not changed:
            asked = await screen_question(self.tmux, item, task.sub_agent)
            if asked is None:
                idle_secs = self.service.settings.agent_mode.idle_timeout_secs
                asked = await idle.look(self.tmux, item, task.sub_agent, idle_secs=idle_secs)
            if asked is not None:
                await self._apply(session, state, task, item, asked)
            return
        seen = clis.observe(item.signals, item.exit_status, prompt=item.prompt)
        await self._apply(session, state, task, item, seen)

    async def _apply(
        self,
        session: AgentSession,
        state: RunState,
        task: Task,
        item: Watched,
        seen: Observation,
    ) -> None:
        agent = task.sub_agent
        assert agent is not None
        if seen.status == "WaitingInput":
            question = seen.question or "waiting for input"
            if state.questions.get(task.id) != question or agent.status is not (
                SubAgentStatus.WAITING_INPUT
            ):
                state.questions[task.id] = question
                self.runs.save(session.id, state)
                agent.status = SubAgentStatus.WAITING_INPUT
                self._save(session, task.id)
        elif seen.status == "Running":
            if agent.status is not SubAgentStatus.RUNNING:
                agent.status = SubAgentStatus.RUNNING
                self._save(session, task.id)
        elif seen.status == "Completed":
            await self._complete(session, state, task, seen)
        else:
            reason = seen.detail.get("reason") or (
                f"the sub-agent exited with status {seen.detail.get('exit_status', '?')}"
            )
            await self._end_pane(agent.pane_id)
            agent.completion_source = CompletionSource(seen.source or "ProcessExit")
            self._fail(session, task, reason)

    async def _complete(
        self, session: AgentSession, state: RunState, task: Task, seen: Observation
    ) -> None:
        """Show the task Completed at once; its delivery (end the CLI, commit, diff, pull
        request, transcript import) runs in the background. Its dependants count it as
        done, and the session as finished, only once that delivery is over."""
        agent = task.sub_agent
        assert agent is not None
        now = utcnow()
        summary = seen.summary or f"{task.name}: finished ({seen.source or 'ProcessExit'})"
        agent.status = SubAgentStatus.COMPLETED
        agent.completed_at = now
        agent.completion_source = CompletionSource(seen.source or "ProcessExit")
        task.result = TaskResult(success=True, summary=summary, pull_request=None, error=None)
        move_task(task, TaskStatus.COMPLETED, now)
        self._watched.get(session.id, {}).pop(task.id, None)
        self._save(session, task.id)
        self._delivering.setdefault(session.id, set()).add(task.id)
        job = asyncio.create_task(self._deliver(session.id, task.id, agent.pane_id, summary))
        self._starts.add(job)
        job.add_done_callback(self._starts.discard)

    async def _deliver(self, session_id: str, task_id: str, pane_id: str, summary: str) -> None:
        try:
            await self._end_pane(pane_id)  # a CLI waits at its prompt after a Stop hook
            async with self._lock(session_id):
                session = self._sessions.get(session_id) or self._load(session_id)
                task = self._task(session, task_id)
                state = self._state(session_id)
                assert task.assigned_worktree is not None
                path = Path(task.assigned_worktree.path)
                branch = task.assigned_worktree.branch_name
                repo = Path(session.repository_path)
                name = task.name
            patch = self.runs.task_dir(session_id, task_id) / "diff.patch"
            outcome, pull_request = await deliver.deliver_work(
                repo, path, branch, state.start_branch, (task_id, name), summary, patch
            )
            outcome.imported_files = await self._import(session_id, task_id, state)
            self._imported.add((session_id, task_id))
            async with self._lock(session_id):
                state = self._state(session_id)
                state.outcomes[task_id] = outcome
                state.questions.pop(task_id, None)
                self.runs.save(session_id, state)
                session = self._sessions.get(session_id) or self._load(session_id)
                task = self._task(session, task_id)
                if pull_request is not None and task.result is not None:
                    task.result = task.result.model_copy(update={"pull_request": pull_request})
                self._save(session, task_id)
        finally:
            self._delivering.get(session_id, set()).discard(task_id)

    async def _import(self, session_id: str, task_id: str, state: RunState) -> int:
        profile = clis.profile_for(state.cli)
        if profile.transcripts is None:
            return 0
        home = self.runs.task_dir(session_id, task_id) / "home"
        try:
            return await deliver.import_transcripts(
                self.service.db, profile.importer, home / profile.transcripts, self._agent_id()
            )
        except Exception:
            log.exception("agent-mode %s %s: importing the transcript failed", session_id, task_id)
            return 0

    def _agent_id(self) -> str | None:
        """The agent imported usage is recorded under: the one given, else the master
        agent (`[agent_mode] master_agent`) when it exists (it planned the session)."""
        if self.agent_id is None:
            store = AgentStore(self.service.db, self.service.settings)
            with contextlib.suppress(NotFoundError):
                self.agent_id = store.get(self.service.settings.agent_mode.master_agent).id
        return self.agent_id

    def _fail(self, session: AgentSession, task: Task, reason: str) -> None:
        fail_task(session, task, reason)
        self._watched.get(session.id, {}).pop(task.id, None)
        self._save(session, task.id)

    async def _end_pane(self, pane_id: str) -> None:
        with contextlib.suppress(TmuxError):
            await self.tmux.terminate(pane_id, grace=3.0)

    # ------------------------------------------------------------ scheduling
    async def _schedule(self, session: AgentSession, state: RunState) -> None:
        delivering = self._delivering.get(session.id, set())
        done = {
            t.id
            for t in session.tasks
            if t.status is TaskStatus.COMPLETED and t.id not in delivering
        }
        for task in session.tasks:
            if task.status is TaskStatus.PENDING and all(d in done for d in task.dependencies):
                move_task(task, TaskStatus.READY)
                self._save(session, task.id)
        limit = self.service.settings.agent_mode.parallelism
        launching = self._launching.setdefault(session.id, set())
        for task in session.tasks:
            if task.status is not TaskStatus.READY or task.id in launching:
                continue
            active = [str(t.id) for t in session.tasks if t.status is TaskStatus.RUNNING]
            active += sorted(launching)
            if len(active) >= limit:
                return
            if state.branches.get(task.id) in {state.branches.get(t) for t in active}:
                continue  # a Shared worktree is in use: after the task in it
            launching.add(task.id)
            started = asyncio.create_task(self._start_task(session.id, task.id))
            self._starts.add(started)
            started.add_done_callback(self._starts.discard)

    async def settled(self, session_id: str) -> None:
        """Wait for the session's sub-agents being started and results being delivered."""
        while self._launching.get(session_id) or self._delivering.get(session_id):
            await asyncio.gather(*self._starts, return_exceptions=True)

    async def _start_task(self, session_id: str, task_id: str) -> None:
        """Start one Ready task's sub-agent; the slow parts run without the lock."""
        try:
            async with self._lock(session_id):
                session = self._sessions.get(session_id) or self._load(session_id)
                task = session.task(task_id)
                if task is None or task.status is not TaskStatus.READY:
                    return
                task = task.model_copy(deep=True)
                known = [w.model_copy(deep=True) for w in session.worktrees]
                state = self._state(session_id)
                prompt = task_prompt(session, task)
                repo = Path(session.repository_path)
            try:
                ref, created = await ensure_worktree(repo, state, task, known)
            except Exception as error:
                await self._not_started(session_id, task_id, f"its worktree: {error}")
                return
            try:
                endpoint = await run_blocking(self.endpoint_for, clis.profile_for(state.cli))
                opened = await open_sub_agent(
                    self.tmux,
                    self.runs.task_dir(session_id, task_id),
                    session_id,
                    task,
                    prompt,
                    state,
                    ref,
                    created,
                    search=self.search,
                    endpoint=endpoint,
                    extra_env=self.extra_env,
                )
            except Exception as error:
                await self._not_started(session_id, task_id, f"its sub-agent: {error}")
                return
            await self._started(session_id, task_id, opened, prompt)
        finally:
            self._launching.get(session_id, set()).discard(task_id)

    async def _not_started(self, session_id: str, task_id: str, reason: str) -> None:
        async with self._lock(session_id):
            session = self._sessions.get(session_id) or self._load(session_id)
            task = session.task(task_id)
            if task is not None and task.status is TaskStatus.READY:
                move_task(task, TaskStatus.RUNNING)
                self._fail(session, task, f"could not start: {reason}")

    async def _started(self, session_id: str, task_id: str, opened: Opened, prompt: str) -> None:
        async with self._lock(session_id):
            session = self._sessions.get(session_id) or self._load(session_id)
            task = session.task(task_id)
            if task is None or task.status is not TaskStatus.READY:
                await self._end_pane(opened.pane.pane_id)  # cancelled while it started
                return
            item = record_started(session, task, opened, prompt)
            self._watched.setdefault(session_id, {})[task_id] = item
            self._save(session, task_id)

    def _conclude(self, session: AgentSession) -> None:
        if self._delivering.get(session.id):
            return  # a finished task's work is still being delivered
        statuses = [t.status for t in session.tasks]
        if all(s is TaskStatus.COMPLETED for s in statuses):
            move_session(session, SessionStatus.COMPLETED)
            session.conversation.add(MessageRole.SYSTEM, "Every task completed.")
            self._save(session)
        elif any(s is TaskStatus.FAILED for s in statuses) and not self._can_progress(session):
            move_session(session, SessionStatus.FAILED)
            failed = ", ".join(t.id for t in session.tasks if t.status is TaskStatus.FAILED)
            session.conversation.add(MessageRole.SYSTEM, f"Stopped: {failed} failed.")
            self._save(session)

    # ------------------------------------------------------------ control
    def _task(self, session: AgentSession, task_id: str) -> Task:
        task = session.task(task_id)
        if task is None:
            raise NotFoundError(f"session {session.id} has no task {task_id}")
        return task

    async def answer(self, session_id: str, task_id: str, text: str) -> None:
        """Type `text` into the task's pane (its question's answer; a menu's choice number
        as its key, `answering.py`) and mark it Running; PaneEnded (409) when the pane is
        gone or its program ended (the watch then ends the task)."""
        if not text.strip():
            raise ValidationError("the answer is empty")
        async with self._lock(session_id):
            session = self._load(session_id)
            task = self._task(session, task_id)
            if task.status is not TaskStatus.RUNNING or task.sub_agent is None:
                raise ConflictError(f"{task_id} is {task.status.value}, not running")
            state = self._state(session_id)
            profile = clis.profile_for(state.cli)
            prompt = task_prompt(session, task)
            await answer_in_pane(self.tmux, task_id, task.sub_agent.pane_id, profile, text, prompt)
            signal_dir = self.runs.task_dir(session_id, task_id) / "signals"
            record(signal_dir, "opencrab", '{"hook_event_name": "UserPromptSubmit"}')
            state.questions.pop(task_id, None)
            self.runs.save(session_id, state)
            task.sub_agent.status = SubAgentStatus.RUNNING
            self._save(session, task_id)

    async def output(self, session_id: str, task_id: str, lines: int = 200) -> str:
        """The task's pane output (its last `lines` lines)."""
        session = self.service.get(session_id)
        task = self._task(session, task_id)
        if task.sub_agent is None:
            raise ConflictError(f"{task_id} has not started")
        try:
            return await self.tmux.capture(task.sub_agent.pane_id, lines)
        except TmuxError as error:
            raise NotFoundError(f"the pane of {task_id} is gone: {error}") from error

    async def pause(self, session_id: str) -> AgentSession:
        """Start no more tasks; running sub-agents go on and are still watched."""
        async with self._lock(session_id):
            session = self._load(session_id)
            move_session(session, SessionStatus.PAUSED)
            session.conversation.add(MessageRole.SYSTEM, "Paused.")
            self._save(session)
            return session

    async def resume(self, session_id: str) -> AgentSession:
        """Paused (or Failed) → Active, re-attach to live panes, go on starting tasks."""
        async with self._lock(session_id):
            session = self._load(session_id)
            self._state(session_id)
            if session.status is not SessionStatus.ACTIVE:
                move_session(session, SessionStatus.ACTIVE)
                session.conversation.add(MessageRole.SYSTEM, "Resumed.")
                self._save(session)
        self._ensure_loop(session_id)
        return session

    async def cancel(self, session_id: str) -> AgentSession:
        """End every running sub-agent's process tree; unfinished tasks become Cancelled
        and their questions are dropped."""
        async with self._lock(session_id):
            session = self._load(session_id)
            for task in session.tasks:
                if task.status is TaskStatus.RUNNING and task.sub_agent is not None:
                    await self._end_pane(task.sub_agent.pane_id)
                    task.sub_agent.status = SubAgentStatus.ERROR
                    task.sub_agent.completed_at = utcnow()
                if task.status in (TaskStatus.PENDING, TaskStatus.READY, TaskStatus.RUNNING):
                    move_task(task, TaskStatus.CANCELLED)
            state = self.runs.load(session_id)
            if state is not None and state.questions:  # nobody is asking any more
                state.questions.clear()
                self.runs.save(session_id, state)
            self._watched.pop(session_id, None)
            if session.status in (SessionStatus.ACTIVE, SessionStatus.PAUSED):
                if session.status is SessionStatus.PAUSED:
                    move_session(session, SessionStatus.ACTIVE)
                move_session(session, SessionStatus.FAILED)
            session.conversation.add(MessageRole.SYSTEM, "Cancelled.")
            self._save(session)
        loop = self._loops.pop(session_id, None)
        if loop is not None and loop is not asyncio.current_task():
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        return session

    async def retry(self, session_id: str, task_id: str) -> AgentSession:
        """Put a failed task back to Pending (the session back to Active) and go on."""
        async with self._lock(session_id):
            session = self._load(session_id)
            task = self._task(session, task_id)
            move_task(task, TaskStatus.PENDING)
            task.sub_agent = None
            if session.status is SessionStatus.FAILED:
                move_session(session, SessionStatus.ACTIVE)
            session.conversation.add(MessageRole.SYSTEM, f"Retrying {task_id}.")
            self._save(session, task_id)
        if self.runs.load(session_id) is not None:
            self._ensure_loop(session_id)
        return session

    async def claim_free(self) -> list[str]:
        """Watch the started Active or Paused sessions no process watches (after a
        restart, or once a dead process's lease expired; never one nobody started, nor one
        this runner watched to its end, unless its file changed since); their ids."""
        rows = [
            row
            for status in (SessionStatus.ACTIVE, SessionStatus.PAUSED)
            for row in await run_blocking(self.service.list, status=status, limit=1000)
        ]
        claimed: list[str] = []
        for row in rows:
            loop = self._loops.get(row.id)
            if loop is not None and not loop.done():
                continue
            if self._ended.get(row.id) == self._mtime(row.id):
                continue
            if self.runs.load(row.id) is None:
                continue
            if self.leases is not None and not await self.leases.acquire(agent_mode_key(row.id)):
                continue  # another process watches it
            self._ensure_loop(row.id)
            claimed.append(row.id)
        return claimed

    async def close(self) -> None:
        """Stop watching (sub-agents keep running in their panes; `resume` finds them);
        transcripts of finished tasks are imported once more (lines a CLI wrote late)."""
        await asyncio.gather(*self._starts, return_exceptions=True)
        for session_id, task_id in sorted(self._imported):
            state = self.runs.load(session_id)
            if state is not None:
                await self._import(session_id, task_id, state)
        self._imported.clear()
        loops = list(self._loops.values())
        self._loops.clear()
        for loop in loops:
            loop.cancel()
        for loop in loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        self._watched.clear()

    # ------------------------------------------------------------ cleanup
    async def cleanup(
        self, session_id: str, *, force: bool = False, orphans: bool = False
    ) -> CleanupReport:
        """Remove finished tasks' worktrees and branches (refusing unmerged, unpushed work
        unless `force`); find orphaned panes and worktrees (removed with `orphans`)."""
        async with self._lock(session_id):
            session = self._load(session_id)
            state = self._state(session_id)
            report = await clean_session(session, state, self.tmux, force=force)
            if report.removed:
                self._save(session)
        await find_orphans(self.service, self.tmux, session, report, remove=orphans, force=force)
        return report
