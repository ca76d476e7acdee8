"""Workspace browser (seed 001 "5. ワークスペースブラウザ"): `/agents/{name}/workspace`.

`?path=` selects a folder (its files in a table) or a file (its preview: text with line
numbers, Markdown rendered safely, images, skill files highlighted); `&edit=true`
opens a text file, or a new one, in an editor. The tree beside it shows the folders on
the way to the selection opened, the others load their entries when opened
(`/agents/{name}/workspace/tree?path=`, an HTMX fragment). Reading goes through the
same Workspace jail the REST routes use (server/api/workspace.py), so a path with `..`
gets the API's own error; saving, uploading (picker or drag-and-drop), downloading and
deleting go through those routes from the browser (static/js/workspace.js).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from opencrab.core.agent import Agent
from opencrab.core.workspace import FileEntry, Usage, Workspace
from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.pages.workspace_view import (
    PREVIEW_BYTES,
    MarkdownLinks,
    Preview,
    View,
    api_url,
    build_preview,
    human_size,
    page_url,
)
from opencrab.dashboard.render import fragment, render
from opencrab.errors import NotFoundError, WorkspaceError
from opencrab.offload import run_blocking

router = APIRouter()

TREE_LIMIT = 200  # entries of one folder in the tree; the rest are in the folder's table
PAGE_SIZE = 200  # rows of a folder's table per page

PathQuery = Annotated[
    str, Query(max_length=1024, description="A folder or file in the workspace; empty: the root.")
]


@dataclass
class TreeNode:
    """One entry of the tree; a folder's `children` are None until it is opened."""

    entry: FileEntry
    children: list[TreeNode] | None = None
    more: int = 0  # entries of this folder not shown in the tree
    current: bool = False


@dataclass
class WorkspacePage:
    """Everything the page shows; `kind` says which main view."""

    path: str  # the selection, as given when it could not be read
    kind: Literal["folder", "file", "new", "error"]
    usage: Usage
    tree: list[TreeNode] = field(default_factory=list)
    tree_more: int = 0
    entry: FileEntry | None = None
    entries: list[FileEntry] = field(default_factory=list)
    total: int = 0
    page: int = 1
    preview: Preview | None = None
    edit: bool = False
    error: str = ""
    status: int = 200

    @property
    def folder(self) -> str:
        """The folder uploads and new files go to: the selection, or the file's folder."""
        if self.kind == "folder":
            return self.path
        return posixpath.dirname(self.path) if self.kind in ("file", "new") else ""

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


class Listings:
    """Each folder listed once per page view."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.seen: dict[str, list[FileEntry]] = {}

    def __call__(self, folder: str) -> list[FileEntry]:
        if folder not in self.seen:
            self.seen[folder] = self.ws.list(folder)
        return self.seen[folder]

    def find(self, path: str) -> FileEntry | None:
        """The entry at `path` (not the root), or None when it does not exist."""
        folder, name = posixpath.split(path)
        try:
            return next((e for e in self(folder) if e.name == name), None)
        except NotFoundError:
            return None


def build_tree(listings: Listings, folder: str, selected: str) -> tuple[list[TreeNode], int]:
    """The entries of `folder`, with the folders on the way to `selected` opened."""
    entries = listings(folder)
    shown = entries[:TREE_LIMIT]
    on_way = [e for e in entries[TREE_LIMIT:] if _contains(e.path, selected)]
    nodes = []
    for entry in shown + on_way:
        node = TreeNode(entry, current=entry.path == selected)
        if entry.is_dir and _contains(entry.path, selected):
            node.children, node.more = build_tree(listings, entry.path, selected)
        nodes.append(node)
    return nodes, len(entries) - len(shown) - len(on_way)


def _contains(folder: str, path: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def load_page(
    ws: Workspace,
    agent_id: str,
    agent_name: str,
    raw: str,
    *,
    view: View | None,
    edit: bool,
    page: int,
) -> WorkspacePage:
    """Read what the page shows of the selection `raw` (blocking: run it off the loop)."""
    state = WorkspacePage(path=raw, kind="error", usage=Usage(0, 0))
    listings = Listings(ws)
    try:
        path = "/".join(ws.check(raw, allow_root=True))
        state.path = path
        entry = listings.find(path) if path else None
        if not path or (entry is not None and entry.is_dir):
            state.kind = "folder"
            entries = listings(path)
            state.total = len(entries)
            state.page = min(page, state.pages)
            state.entries = entries[(state.page - 1) * PAGE_SIZE : state.page * PAGE_SIZE]
        elif entry is not None:
            state.kind, state.entry = "file", entry
            data = ws.read_bytes(path) if entry.size <= PREVIEW_BYTES else None
            links = MarkdownLinks(agent_id, agent_name, posixpath.dirname(path))
            state.preview = build_preview(entry, data, view, links)
            state.edit = edit and state.preview.editable
        elif edit:
            ws.resolve(path)  # no symlink on the way
            state.kind = "new"
        else:
            raise NotFoundError(f"no file or folder {path!r} in your workspace")
    except (WorkspaceError, NotFoundError) as exc:
        state.kind, state.error = "error", str(exc)
        state.status = 404 if isinstance(exc, NotFoundError) else 400
    state.usage = ws.usage()
    selected = state.path if state.kind != "error" else ""
    try:
        state.tree, state.tree_more = build_tree(listings, "", selected)
    except NotFoundError:  # a folder on the way went away meanwhile: the root alone
        state.tree, state.tree_more = build_tree(Listings(ws), "", "")
    return state


def _context(agent: Agent, ws: Workspace) -> dict[str, Any]:
    """What every workspace template needs to build addresses and show sizes."""
    return {
        "agent": agent,
        "quota": ws.max_size_bytes,
        "max_files": ws.max_files,
        "size": human_size,
        "page_url": lambda path="", **params: page_url(agent.name, path, **params),
        "api_url": lambda path: api_url(agent.id, path),
        "tree_url": lambda path: f"{page_url(agent.name)}/tree?path={quote(path, safe='/')}",
        "parent": posixpath.dirname,
    }


@router.get("/agents/{name}/workspace", response_class=HTMLResponse)
async def workspace_page(
    agent: PageAgent,
    request: Request,
    path: PathQuery = "",
    view: Annotated[View | None, Query(description="Markdown: rendered or source.")] = None,
    edit: Annotated[bool, Query(description="Open the text file in the editor.")] = False,
    page: Annotated[int, Query(ge=1, le=100_000, description="A page of a folder.")] = 1,
) -> HTMLResponse:
    """An agent's workspace: the tree, and the selected folder or file."""
    ws = Workspace.for_agent(request.app.state.settings, agent.id)
    state = await run_blocking(
        load_page, ws, agent.id, agent.name, path, view=view, edit=edit, page=page
    )
    return render(
        request,
        "workspace.html",
        title=f"Workspace · {agent.name}",
        status=state.status,
        tab="workspace",
        ws=state,
        **_context(agent, ws),
    )


@router.get("/agents/{name}/workspace/tree", response_class=HTMLResponse)
async def workspace_tree(agent: PageAgent, request: Request, path: PathQuery = "") -> HTMLResponse:
    """One folder's entries as a tree list (an HTMX fragment, when a folder is opened)."""
    ws = Workspace.for_agent(request.app.state.settings, agent.id)
    nodes, more = await run_blocking(build_tree, Listings(ws), path, "")
    return fragment(
        request,
        "_workspace_tree.html",
        nodes=nodes,
        more=more,
        folder=path,
        **_context(agent, ws),
    )
