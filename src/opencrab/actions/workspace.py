"""Workspace actions (seed 001 workspace-management skill): ws_read … ws_mkdir.

Paths are relative to the agent's workspace root; the Workspace jail refuses anything
that would leave it (`..`, absolute paths, symlinks out, NUL bytes) and enforces the
size quota. Refusals come back to the model as error results. The file work runs in a
worker thread (opencrab.offload), so a reply full of writes never stalls the event loop.
"""

from __future__ import annotations

from typing import Any, ClassVar

from opencrab.actions.base import Action, ActionContext, ActionResult, SideEffect
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl

MAX_READ_CHARS = 200_000  # what one ws_read returns to the model; longer files are cut
PATH = {
    "type": "string",
    "minLength": 1,
    "maxLength": 1024,
    "description": "Path relative to the workspace root, e.g. notes/today.md",
}


def object_schema(required: list[str], **properties: Any) -> dict[str, Any]:
    """A closed JSON Schema object with these required names and properties."""
    return {
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": False,
    }


class WsRead(Action):
    name = "ws_read"
    description = "Read a text file of your workspace."
    parameters: ClassVar[dict[str, Any]] = object_schema(["path"], path=PATH)

    store_only = True  # reads: changes nothing at all

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        content = await run_blocking(ctx.workspace.read, args["path"])
        cut = len(content) > MAX_READ_CHARS
        return ActionResult.ok(
            {
                "path": args["path"],
                "content": content[:MAX_READ_CHARS],
                "truncated": cut,
                "characters": len(content),
            }
        )


class WsWrite(Action):
    name = "ws_write"
    description = "Write a file of your workspace (overwrites; parent folders are created)."
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["path", "content"], path=PATH, content={"type": "string"}
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        written = await run_blocking(ctx.workspace.write, args["path"], args["content"])
        return ActionResult.ok(
            {"path": args["path"], "bytes": written},
            SideEffect(type="file_written", path=args["path"]),
        )


class WsEdit(Action):
    name = "ws_edit"
    description = "Replace one unique occurrence of old_string with new_string in a file."
    parameters: ClassVar[dict[str, Any]] = object_schema(
        ["path", "old_string", "new_string"],
        path=PATH,
        old_string={"type": "string", "minLength": 1, "description": "Must occur exactly once."},
        new_string={"type": "string"},
    )

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        size = await run_blocking(
            ctx.workspace.edit, args["path"], args["old_string"], args["new_string"]
        )
        return ActionResult.ok(
            {"path": args["path"], "edited": True, "bytes": size},
            SideEffect(type="file_written", path=args["path"]),
        )


class WsList(Action):
    name = "ws_list"
    description = "List a folder of your workspace (the root when path is empty)."
    parameters: ClassVar[dict[str, Any]] = object_schema(
        [], path={**PATH, "minLength": 0, "default": ""}
    )

    store_only = True  # reads: changes nothing at all

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        entries = await run_blocking(ctx.workspace.list, args.get("path", ""))
        return ActionResult.ok(
            {
                "path": args.get("path", ""),
                "entries": [
                    {"name": e.name, "path": e.path, "is_dir": e.is_dir, "size": e.size}
                    for e in entries
                ],
            }
        )


class WsDelete(Action):
    name = "ws_delete"
    description = "Delete a file or folder (with its contents) of your workspace."
    parameters: ClassVar[dict[str, Any]] = object_schema(["path"], path=PATH)

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await run_blocking(ctx.workspace.delete, args["path"])
        return ActionResult.ok({"path": args["path"], "deleted": True})


class WsMkdir(Action):
    name = "ws_mkdir"
    description = "Create a folder (and its parents) in your workspace."
    parameters: ClassVar[dict[str, Any]] = object_schema(["path"], path=PATH)

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        await run_blocking(ctx.workspace.mkdir, args["path"])
        return ActionResult.ok({"path": args["path"], "created": True})


@hookimpl
def register_actions(register: Any) -> None:
    for action in (WsRead(), WsWrite(), WsEdit(), WsList(), WsDelete(), WsMkdir()):
        register(action)
