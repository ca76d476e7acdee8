"""The child process of search_code: searches the files it is given, nothing else.

It is run as `python -I -c <this file's text>` (only the standard library), reads one
JSON request on stdin and writes one JSON answer on stdout. The pattern is compiled
here, not in the server: a pattern that takes long to compile, or backtracks without
end, only ever stalls this process, which the parent kills at its deadline
(opencrab.actions.code_search).

Each file is opened beneath the root's descriptor, every folder on the way with
O_NOFOLLOW | O_DIRECTORY relative to the one before and the file with O_NOFOLLOW
relative to its folder: a folder swapped for a symlink after the parent listed it
cannot lead the search outside (the open fails and the file is skipped).

Request: {"root", "files": [relative paths], "pattern", "literal", "ignore_case",
"max_matches", "max_output_bytes", "max_file_bytes", "max_line_chars"}.
Answer: {"matches": [{"file", "line", "text"}], "truncated", "files_searched",
"files_skipped"}, or {"invalid": the compiler's message, or null when the pattern is
nested too deeply} for a pattern that does not compile.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from typing import Any

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW


def _open_beneath(root_fd: int, relative: str) -> int:
    """A descriptor of the file `relative` below `root_fd`, through no symlink (OSError)."""
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise OSError(f"not a plain relative path: {relative!r}")
    folder = root_fd
    try:
        for part in parts[:-1]:
            step = os.open(part, _FOLDER, dir_fd=folder)
            if folder != root_fd:
                os.close(folder)
            folder = step
        return os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=folder)
    finally:
        if folder != root_fd:
            os.close(folder)


def _read(root_fd: int, relative: str, max_bytes: int) -> bytes | None:
    """The file's bytes, or None for what is not searched (link, too big, binary, gone)."""
    try:
        fd = _open_beneath(root_fd, relative)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes or b"\x00" in data[:8192]:
        return None
    return data


def search(request: dict[str, Any]) -> dict[str, Any]:
    """Run one search request (see the module docstring)."""
    pattern = request["pattern"]
    if request.get("literal"):
        pattern = re.escape(pattern)
    try:
        compiled = re.compile(pattern, re.IGNORECASE if request.get("ignore_case") else 0)
    except re.error as exc:
        return {"invalid": str(exc)}
    except RecursionError:
        return {"invalid": None}
    if not request["files"]:
        return _search(compiled, request, -1)  # nothing to open (a new, empty workspace)
    root_fd = os.open(request["root"], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _search(compiled, request, root_fd)
    finally:
        os.close(root_fd)


def _search(compiled: re.Pattern[str], request: dict[str, Any], root_fd: int) -> dict[str, Any]:
    max_line = int(request["max_line_chars"])
    matches: list[dict[str, Any]] = []
    size = searched = skipped = 0
    truncated = False
    for relative in request["files"]:
        data = _read(root_fd, relative, int(request["max_file_bytes"]))
        if data is None:
            skipped += 1
            continue
        searched += 1
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if compiled.search(line) is None:
                continue
            match = {"file": relative, "line": number, "text": line[:max_line]}
            size += len(json.dumps(match, ensure_ascii=False).encode("utf-8"))
            if len(matches) >= request["max_matches"] or size > request["max_output_bytes"]:
                truncated = True
                break
            matches.append(match)
        if truncated:
            break
    return {
        "matches": matches,
        "truncated": truncated,
        "files_searched": searched,
        "files_skipped": skipped,
    }


def main() -> None:
    """Read the request from stdin, write the answer to stdout."""
    request = json.loads(sys.stdin.buffer.read())
    json.dump(search(request), sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
