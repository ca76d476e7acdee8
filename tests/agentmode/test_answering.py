"""Reading a CLI's menu off its screen and naming a choice in it: Claude Code's
start-up question "Do you want to use this API key?" has no numbers (number keys do
nothing there; Enter takes the marked "No"), so an answer picks a choice by its number
or its text and the cursor is moved to it (the real CLI: test_credentials_real_clis.py)."""

from __future__ import annotations

from opencrab.agentmode.answering import chosen
from opencrab.agentmode.clis import CLAUDE_CODE, match_screen

KEY_QUESTION = """
────────────────────────────────────────────────────────────────
  Detected a custom API key in your environment

  ANTHROPIC_API_KEY: sk-ant-...crab-test-0123456789

  Do you want to use this API key?

    Yes
  ❯ No (recommended)

  Enter to confirm · Esc to cancel
"""

PERMISSION = """
 Bash command
   rm -rf build
 Do you want to proceed?
 ❯ 1. Yes
   2. Yes, and don't ask again for rm commands in /repo
   3. No, and tell Claude what to do differently (esc)
"""


def test_the_api_key_question_is_an_unnumbered_menu_with_no_as_its_default() -> None:
    menu = match_screen(CLAUDE_CODE, KEY_QUESTION, "Say hello")
    assert menu is not None
    assert (menu.status, menu.question) == ("WaitingInput", "Do you want to use this API key?")
    assert menu.options == ("Yes", "No (recommended)")
    assert (menu.numbered, menu.selected) == (False, 1)
    assert [chosen(menu, text) for text in ("1", "2", "yes", " YES ", "No", "3", "maybe")] == [
        0, 1, 0, 0, 1, None, None,
    ]  # fmt: skip


def test_a_permission_menu_stays_numbered() -> None:
    menu = match_screen(CLAUDE_CODE, PERMISSION, "Clean up")
    assert menu is not None
    assert menu.question == "Do you want to proceed?"
    assert menu.numbered
    assert menu.selected == 0
    assert menu.options[2].startswith("No, and tell Claude")
