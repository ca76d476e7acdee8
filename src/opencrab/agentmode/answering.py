"""Typing a user's answer into a waiting sub-agent's pane.

A free-text answer is pasted (bracketed paste) and sent with its own Enter
(`TmuxServer.send_text`). A coding CLI's menu is different. Claude Code's permission
menu "Do you want to proceed? ❯ 1. Yes  2. …  3. No" ignores pasted text, and Enter
picks the highlighted choice, so a pasted "3" followed by Enter would say Yes: when the
pane shows a numbered menu (the profile's screen pattern, `clis.match_screen`) and the
answer is a choice number, the number is pressed as a key, which selects that choice at
once; no Enter follows (it would reach whatever the CLI shows next, perhaps the next
menu). A menu without numbers (Claude Code's "Do you want to use this API key?  Yes
/ ❯ No (recommended)") ignores number keys too: there the answer names a choice by its
number (1 is the first) or by the start of its text ("yes"), and the cursor is moved
from the marked choice to it with the arrow keys, then Enter confirms it.
"""

from __future__ import annotations

import re

from opencrab.agentmode.clis import Profile, ScreenMatch, match_screen
from opencrab.agentmode.tmux import PaneEnded, TmuxError, TmuxServer

CHOICE = re.compile(r"^\s*([1-9])\s*$")


async def answer_in_pane(
    tmux: TmuxServer, task_id: str, pane_id: str, profile: Profile, text: str, prompt: str
) -> None:
    """`type_answer` into a task's live pane; PaneEnded when the pane is gone or the
    program in it exited (then nothing is typed)."""
    try:
        if (await tmux.pane_state(pane_id)).dead:
            raise PaneEnded(
                f"{task_id} has ended: the program in its tmux pane {pane_id} exited "
                "(nothing was typed)"
            )
        await type_answer(tmux, pane_id, profile, text, prompt)
    except TmuxError as error:
        raise PaneEnded(
            f"{task_id} has ended: its tmux pane {pane_id} is gone (nothing was typed)"
        ) from error


async def type_answer(
    tmux: TmuxServer, pane_id: str, profile: Profile, text: str, prompt: str = ""
) -> str:
    """Send `text` to the pane: a numbered menu's choice as its key ("key"), an
    unnumbered menu's choice by arrow keys and Enter ("menu"), else pasted with Enter
    ("paste"). `prompt` is the task's prompt (never read as a menu)."""
    menu = match_screen(profile, await tmux.capture(pane_id), prompt) if profile.screen else None
    choice = CHOICE.match(text)
    if menu is not None and menu.numbered and choice is not None:
        await tmux.press_keys(pane_id, choice[1])
        return "key"
    target = None if menu is None or menu.numbered else chosen(menu, text)
    if menu is not None and target is not None:
        moves = target - (menu.selected or 0)
        arrow = "Down" if moves > 0 else "Up"
        await tmux.press_named_keys(pane_id, *([arrow] * abs(moves)), "Enter")
        return "menu"
    await tmux.send_text(pane_id, text)
    return "paste"


def chosen(menu: ScreenMatch, text: str) -> int | None:
    """The index of the choice `text` names in an unnumbered menu: its number (1 is the
    first), or the one choice whose text starts with it (case and spacing ignored)."""
    choice = CHOICE.match(text)
    if choice is not None:
        number = int(choice[1])
        return number - 1 if number <= len(menu.options) else None
    wanted = " ".join(text.split()).casefold()
    if not wanted:
        return None
    starts = [n for n, o in enumerate(menu.options) if o.casefold().startswith(wanted)]
    return starts[0] if len(starts) == 1 else None
