"""Typing a user's answer into a waiting sub-agent's pane.

A free-text answer is pasted (bracketed paste) and sent with its own Enter
(`TmuxServer.send_text`). A coding CLI's permission menu is different: Claude Code's
"Do you want to proceed? ❯ 1. Yes  2. …  3. No" ignores pasted text, and Enter picks
the highlighted choice, so a pasted "3" followed by Enter would say Yes. When the pane
shows such a menu (the profile's screen pattern, `clis.match_screen`) and the answer
is a choice number, the number is pressed as a key, which selects that choice at once;
no Enter follows (it would reach whatever the CLI shows next, perhaps the next menu).
"""

from __future__ import annotations

import re

from opencrab.agentmode.clis import Profile, match_screen
from opencrab.agentmode.tmux import TmuxServer

CHOICE = re.compile(r"^\s*([1-9])\s*$")


async def type_answer(
    tmux: TmuxServer, pane_id: str, profile: Profile, text: str, prompt: str = ""
) -> str:
    """Send `text` to the pane: a menu choice as its key, else pasted with Enter; returns
    how it went ("key" or "paste"). `prompt` is the task's prompt (never read as a menu)."""
    choice = CHOICE.match(text)
    if choice is not None:
        screen = await tmux.capture(pane_id)
        if match_screen(profile, screen, prompt) is not None:
            await tmux.press_keys(pane_id, choice[1])
            return "key"
    await tmux.send_text(pane_id, text)
    return "paste"
