"""search_code's engine: a regex or literal search over a workspace, in a child process.

Python's `re` holds the GIL while it compiles a pattern and while it backtracks, so a
hostile pattern in the server's process would stall every client. The pattern is
therefore compiled and run in a child interpreter (opencrab.actions.search_worker) that
is killed at `[tools] search_timeout_secs`, and is refused over MAX_PATTERN_CHARS; the
event loop only waits. The files it searches are listed here through the Workspace jail
(no symlinks followed, only regular files), the child opens each one beneath the
workspace root through no symlink (skipping those over `search_max_file_bytes`), and
the matches it returns are capped in number and bytes.

Example:
    found = await search_workspace(workspace, settings.tools, "def \\w+", path="src")
    found["matches"][0]   # {"file": "src/app.py", "line": 3, "text": "def main():"}
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

from opencrab.config.models import ToolsSection
from opencrab.core.workspace import Workspace
from opencrab.errors import NotFoundError, ValidationError
from opencrab.offload import run_blocking

MAX_LINE_CHARS = 400  # of one matching line, in a result
MAX_FILES = 20_000  # listed for one search (a workspace holds 10,000 by default)
MAX_PATTERN_CHARS = 1000  # what search_code's schema takes, held here for every caller


class SearchTimeout(ValidationError):
    """A search ran past its deadline and was stopped (usually a backtracking pattern)."""


@cache
def _worker_source() -> str:
    return (Path(__file__).with_name("search_worker.py")).read_text(encoding="utf-8")


def list_files(workspace: Workspace, path: str) -> list[str]:
    """The workspace-relative files below `path` (a folder or one file), by name."""
    if not workspace.check(path, allow_root=True):
        found = workspace.walk()  # the root (none yet in a new agent's workspace)
    else:
        entry = workspace.entry(path)
        if entry is None:
            raise NotFoundError(f"no file or folder {path!r} in your workspace")
        if not entry.is_dir:
            return [entry.path]
        found = workspace.walk(entry.path)
    return sorted(e.path for e in itertools.islice(found, MAX_FILES))


async def search_workspace(
    workspace: Workspace,
    limits: ToolsSection,
    pattern: str,
    *,
    path: str = "",
    literal: bool = False,
    ignore_case: bool = False,
) -> dict[str, Any]:
    """Matches of `pattern` in the workspace below `path`, capped; see the module docstring."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValidationError(
            f"pattern is {len(pattern)} characters long, over the limit of "
            f"{MAX_PATTERN_CHARS}; search for a shorter one"
        )
    files = await run_blocking(list_files, workspace, path)
    request = {
        "root": str(workspace.root),
        "files": files,
        "pattern": pattern,
        "literal": literal,
        "ignore_case": ignore_case,
        "max_matches": limits.search_max_matches,
        "max_output_bytes": limits.search_max_output_bytes,
        "max_file_bytes": limits.search_max_file_bytes,
        "max_line_chars": MAX_LINE_CHARS,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-c",
        _worker_source(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
    )
    try:
        async with asyncio.timeout(limits.search_timeout_secs):
            out, err = await process.communicate(json.dumps(request).encode("utf-8"))
    except TimeoutError:
        raise SearchTimeout(
            f"the search took longer than {limits.search_timeout_secs:g} s and was stopped; "
            "the pattern probably backtracks badly (nested repeats like (a+)+) or is too "
            'complex to compile: simplify it, search a smaller path, or pass "literal": true'
        ) from None
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    if process.returncode != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise ValidationError(f"the search failed: {last[0][:300]}")
    found: dict[str, Any] = json.loads(out)
    if "invalid" in found:
        raise ValidationError(_invalid_pattern(found["invalid"]))
    found["files_listed"] = len(files)
    return found


def _invalid_pattern(reason: str | None) -> str:
    if reason is None:
        return "pattern is nested too deeply to compile"
    return (
        f"pattern is not a valid regular expression: {reason}; escape special characters "
        'or pass "literal": true'
    )
