"""A sub-agent's screen as its last sign of life: `Starting` until the CLI shows it is
up, and `IdleTimeout` completion (seed 004) for a CLI that sends no signal.

A sub-agent is Starting from the moment its pane opens until the CLI shows it is up:
its first signal (any hook or notify, read by the watch loop), or the first text on its
screen. While it starts the watch loop reads its pane at every round; once it runs, at
most every SCREEN_EVERY_SECS.

Idle never decides alone: a sub-agent completes by IdleTimeout only when (1) its CLI
has sent no signal of its own in this run (a CLI with hooks or notify reports its end
itself; the runner's own record of an answer does not count), (2) its program is still
alive (an exit is ProcessExit), (3) its screen has not changed for `[agent_mode]
idle_timeout_secs` (0: never), and (4) the screen shows none of the profile's questions
(a question is WaitingInput, never a completion).

    seen = await look(tmux, item, agent, idle_secs=600)
    if seen is not None: ...   # Running (it is up) or Completed (IdleTimeout)
"""

from __future__ import annotations

import hashlib
import time

from opencrab.agentmode import clis
from opencrab.agentmode.clis import Observation
from opencrab.agentmode.launching import SCREEN_EVERY_SECS, SCREEN_LINES, Watched
from opencrab.agentmode.model import SubAgent, SubAgentStatus
from opencrab.agentmode.tmux import TmuxError, TmuxServer

RUNNER_SOURCE = "opencrab"
"""The signal source the runner itself records (an answer typed into the pane)."""


def own_signals(item: Watched) -> int:
    """How many signals the CLI itself sent (the runner's own records left out)."""
    return sum(1 for s in item.signals if s.source != RUNNER_SOURCE)


async def look(
    tmux: TmuxServer,
    item: Watched,
    agent: SubAgent | None,
    *,
    idle_secs: float,
    now: float | None = None,
) -> Observation | None:
    """Read the pane when it is due: Running once a Starting CLI shows text, Completed
    (IdleTimeout) once a silent CLI's screen stayed the same for `idle_secs`; else None."""
    if agent is None or item.exit_status is not None:
        return None
    starting = agent.status is SubAgentStatus.STARTING
    if not starting and agent.status is not SubAgentStatus.RUNNING:
        return None
    if not starting and (idle_secs <= 0 or own_signals(item)):
        return None  # nothing to decide from the screen
    now = time.monotonic() if now is None else now
    if not starting and now - item.looked_at < SCREEN_EVERY_SECS:
        return None
    item.looked_at = now
    try:
        screen = await tmux.capture(item.pane_id, SCREEN_LINES)
    except TmuxError:
        return None  # the pane's end is for the exit check
    digest = hashlib.sha256(screen.encode("utf-8", "replace")).hexdigest()
    if digest != item.screen_digest:
        item.screen_digest = digest
        item.quiet_since = now
    if starting:
        return Observation("Running") if screen.strip() or item.signals else None
    if own_signals(item) or now - item.quiet_since < idle_secs:
        return None
    if clis.match_screen(item.profile, screen, item.prompt) is not None:
        return None  # a question on the screen: the user's turn, not the end
    return Observation(
        "Completed",
        "IdleTimeout",
        detail={"quiet_secs": f"{now - item.quiet_since:.0f}"},
    )
