"""Issue 33: the turn loop stays one readable module (core/engine.py at most 500 lines)."""

from __future__ import annotations

from pathlib import Path

import opencrab.core.engine as engine

MAX_LINES = 500


def test_the_engine_module_is_at_most_500_lines() -> None:
    lines = Path(engine.__file__).read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, (
        f"core/engine.py has {lines} lines (at most {MAX_LINES}): move a part of the turn "
        "beside it (core/turn_*.py, core/recorder.py)"
    )
