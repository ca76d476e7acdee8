"""Seed 002's file tools: read_file, write_file and search_code, inside the workspace jail.

read_file and write_file are ws_read and ws_write under the seed's names and schemas (the
same Workspace rules: no `..`, absolute paths, symlinks or NUL bytes; the size quota and
file cap). search_code searches the workspace for a regular expression or a literal
string (opencrab.actions.code_search): each match with its file and line, capped in
count and bytes, in a child process stopped at its deadline.
"""

from __future__ import annotations

from typing import Any, ClassVar

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.actions.code_search import MAX_PATTERN_CHARS, search_workspace
from opencrab.actions.workspace import PATH, WsRead, WsWrite, object_schema
from opencrab.plugins import hookimpl


class ReadFile(WsRead):
    name = "read_file"
    description = "Read a text file of your workspace (seed tool; path relative to its root)."
    parameters: ClassVar[dict[str, Any]] = object_schema(["path"], path=PATH)


class WriteFile(WsWrite):
    name = "write_file"
    description = (
        "Write a text file of your workspace (seed tool): creates or overwrites it, and "
        "creates its parent folders."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["path", "content"], path=PATH, content={"type": "string"}
    )


class SearchCode(Action):
    name = "search_code"
    description = (
        "Search the files of your workspace for a regular expression (Python syntax) or, "
        "with literal: true, a plain string; returns each matching line with its file and "
        "line number (results are capped: narrow the path or pattern when truncated)."
    )
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["pattern"],
        pattern={"type": "string", "minLength": 1, "maxLength": MAX_PATTERN_CHARS},
        path={
            **PATH,
            "minLength": 0,
            "default": "",
            "description": "A folder or file relative to the workspace root; empty: all of it.",
        },
        literal={"type": "boolean", "default": False, "description": "Match the text as is."},
        ignore_case={"type": "boolean", "default": False},
    )

    store_only = True  # reads: changes nothing at all

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        found = await search_workspace(
            ctx.workspace,
            ctx.settings.tools,
            args["pattern"],
            path=args.get("path", ""),
            literal=args.get("literal", False),
            ignore_case=args.get("ignore_case", False),
        )
        return ActionResult.ok({"pattern": args["pattern"], **found})


@hookimpl
def register_actions(register: Any) -> None:
    for action in (ReadFile(), WriteFile(), SearchCode()):
        register(action)
