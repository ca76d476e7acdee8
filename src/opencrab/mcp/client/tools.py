"""One MCP tool as an Action, and what its result becomes.

The tool's input JSON Schema is the action's `parameters` (a schema that is no JSON
Schema leaves the tool out, logged with the server's and the tool's name). A result's
text blocks become the action's `text`, its structuredContent is kept as `structured`.
An image, and a resource embedded as bytes (a blob), becomes an attachment: stored in
the agent's workspace as `mcp/<server>/<tool>-<id>.<ext>` (a file_written side effect)
and named in `content` with its path, MIME type and size; at most
MAX_ATTACHMENT_BYTES each, an image only as PNG, JPEG, GIF or WebP whose bytes are
what its MIME type says (else left out, saying why). The model is shown a stored image
where its provider takes images in a tool result (ActionResult.images); audio, links
and text resources are described (kind, MIME type, size, URI, the text's start).
A result with `isError` is a failed ActionResult. What the model gets is
capped like any recorded text (`[agent] max_event_bytes`, opencrab.core.record_cap).
A call not answered within the table's `call_timeout_secs` fails, naming the server and
that key; one still running at the turn's deadline (`[agent] turn_timeout_secs`) is cut
off there, saying so. `read_only` follows the tool's annotations (readOnlyHint and not
destructiveHint), which the `unsafe` approval policy reads (core/approvals.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import mimetypes
import re
import uuid
from typing import Any, Protocol

import jsonschema
from mcp import ClientSession, types

from opencrab.actions.base import Action, ActionContext, ActionResult, SideEffect
from opencrab.config.mcp import McpServerConfig
from opencrab.core.record_cap import cut_text
from opencrab.core.workspace import Workspace
from opencrab.errors import WorkspaceError
from opencrab.llm.types import ToolDefinition
from opencrab.offload import run_blocking

log = logging.getLogger(__name__)

MAX_ATTACHMENT_BYTES = 5 * 1024 * 1024  # Anthropic's own limit for one image
MAX_ATTACHMENTS = 20  # per result; more are described, not stored
# the image types a model is shown, each with how its bytes begin and its extension
IMAGE_TYPES: dict[str, tuple[tuple[bytes, ...], str]] = {
    "image/png": ((b"\x89PNG\r\n\x1a\n",), ".png"),
    "image/jpeg": ((b"\xff\xd8\xff",), ".jpg"),
    "image/gif": ((b"GIF87a", b"GIF89a"), ".gif"),
    "image/webp": ((b"RIFF",), ".webp"),  # and WEBP at offset 8, checked below
}


class Server(Protocol):
    """What a tool needs of its server's source (opencrab.mcp.client.source)."""

    @property
    def server(self) -> str: ...
    @property
    def config(self) -> McpServerConfig: ...
    @property
    def session(self) -> ClientSession | None: ...  # None while it is not connected
    @property
    def state(self) -> str: ...
    @property
    def last_error(self) -> str | None: ...


class McpTool(Action):
    """A tool of an MCP server: `execute` calls it through the source's session."""

    name = "mcp_tool"  # each instance answers `definition()` with the tool's own name
    description = "A tool of an MCP server."

    def __init__(self, source: Server, tool: types.Tool) -> None:
        self.source = source
        self.tool_name = tool.name
        self.text = tool.description or tool.title or f"{tool.name} (MCP server {source.server})"
        self.schema = dict(tool.input_schema)
        hints = tool.annotations
        self.read_only = bool(
            hints is not None and hints.read_only_hint and not hints.destructive_hint
        )
        self.annotations: dict[str, Any] = (
            {} if hints is None else hints.model_dump(by_alias=True, exclude_none=True)
        )
        """The tool's annotations as the server sent them (readOnlyHint, destructiveHint…)."""

    def definition(self) -> ToolDefinition:
        return ToolDefinition(name=self.tool_name, description=self.text, parameters=self.schema)

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        return await self.call(
            args, ctx.settings.agent.max_event_bytes, ctx.workspace, ctx.turn.deadline
        )

    async def call(
        self,
        args: dict[str, Any],
        max_bytes: int,
        workspace: Workspace | None = None,
        deadline: float | None = None,
    ) -> ActionResult:
        """Call the tool with checked `args`; its result capped at `max_bytes` of text, its
        images and blobs stored in `workspace` (described only without one: the MCP page's
        test call). A turn's `deadline` (the event loop's time) cuts the call off when it
        comes before the table's call timeout."""
        server = self.source.server
        timeout = self.source.config.call_timeout_secs
        session = self.source.session
        if session is None:
            return ActionResult.fail(
                f"MCP server {server!r} is not connected ({self.source.state}"
                + (f": {self.source.last_error}" if self.source.last_error else "")
                + f"); {self.tool_name} was not called"
            )
        until = asyncio.get_running_loop().time() + timeout
        by_deadline = deadline is not None and deadline <= until
        try:
            async with asyncio.timeout_at(until if deadline is None else min(deadline, until)):
                result = await session.call_tool(self.tool_name, args, read_timeout_seconds=timeout)
        except TimeoutError:
            if by_deadline:
                return ActionResult.fail(
                    f"MCP server {server!r}: {self.tool_name} was cut off by the turn's "
                    "deadline ([agent] turn_timeout_secs) before it answered"
                )
            return ActionResult.fail(_late(server, self.tool_name, timeout))
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            if "timed out" in message.lower():
                return ActionResult.fail(_late(server, self.tool_name, timeout))
            return ActionResult.fail(
                f"MCP server {server!r}: calling {self.tool_name} failed: {message}"
            )
        if workspace is None or all(isinstance(b, types.TextContent) for b in result.content):
            return tool_result(server, self.tool_name, result, max_bytes)
        keeper = Attachments(workspace, server, self.tool_name)
        return await run_blocking(tool_result, server, self.tool_name, result, max_bytes, keeper)


def _late(server: str, tool: str, timeout: float) -> str:
    return (
        f"MCP server {server!r} did not answer {tool} within {timeout:g} s "
        f"([mcp.servers.{server}] call_timeout_secs)"
    )


def checked_schema(server: str, tool: types.Tool) -> bool:
    """Whether the tool's input schema is a JSON Schema (else logged, naming both)."""
    schema = tool.input_schema
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        log.error(
            "MCP server %s: tool %r left out: its input schema is no JSON Schema: %s",
            server,
            tool.name,
            exc.message,
        )
        return False
    return True


def tool_result(
    server: str,
    tool: str,
    result: types.CallToolResult,
    max_bytes: int,
    keeper: Attachments | None = None,
) -> ActionResult:
    """The ActionResult of one tools/call result (see the module docstring); without a
    `keeper` (no workspace) images and blobs are described, not stored. Blocking when
    `keeper` stores something."""
    texts: list[str] = []
    others: list[dict[str, Any]] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif keeper is not None and _bytes_of(block) is not None:
            others.append(keeper.keep(block))
        else:
            others.append(_described(block))
    data: dict[str, Any] = {}
    text, full = cut_text("\n".join(texts), max_bytes)
    if texts:
        data["text"] = text
    if full is not None:
        data["cut"] = {"text": full}
    if result.structured_content is not None:
        encoded = json.dumps(result.structured_content, ensure_ascii=False, default=str)
        if len(encoded.encode()) <= max_bytes:
            data["structured"] = result.structured_content
        else:
            data["structured_cut"] = f"structuredContent of {len(encoded.encode())} bytes left out"
    if others:
        data["content"] = others[:50]
    effects = keeper.effects if keeper is not None else []
    images = keeper.images if keeper is not None else []
    if result.is_error:
        reason = text or "no message"
        return ActionResult(
            success=False,
            data=data,
            error=f"MCP server {server!r}: {tool} reported an error: {reason[:2000]}",
            side_effects=effects,
        )
    return ActionResult(success=True, data=data, side_effects=effects, images=images)


def _bytes_of(block: Any) -> tuple[str, str] | None:
    """(MIME type, base64 data) of an image or an embedded blob resource, else None."""
    if isinstance(block, types.ImageContent):
        return block.mime_type, block.data
    if isinstance(block, types.EmbeddedResource) and isinstance(
        block.resource, types.BlobResourceContents
    ):
        return block.resource.mime_type or "application/octet-stream", block.resource.blob
    return None


class Attachments:
    """Stores one result's images and blobs in the agent's workspace (see the module
    docstring); `effects` are the files written, `images` the data URLs to show."""

    def __init__(self, workspace: Workspace, server: str, tool: str) -> None:
        self.workspace = workspace
        self.folder = f"mcp/{_safe(server)}"
        self.stem = _safe(tool)
        self.effects: list[SideEffect] = []
        self.images: list[str] = []

    def keep(self, block: Any) -> dict[str, Any]:
        """What the model reads of `block`: where it was stored, or why it was not."""
        found = _bytes_of(block)
        assert found is not None
        mime, encoded = found
        mime = mime.split(";")[0].strip().lower()
        image = isinstance(block, types.ImageContent) or mime.startswith("image/")
        described: dict[str, Any] = {"type": "image" if image else "resource", "mime_type": mime}
        if isinstance(block, types.EmbeddedResource):
            described["uri"] = str(block.resource.uri)
        if len(encoded) > MAX_ATTACHMENT_BYTES * 4 // 3 + 4:  # judged before decoding
            described["bytes"] = len(encoded.rstrip("=")) * 3 // 4
            return described | {"error": f"left out: over {MAX_ATTACHMENT_BYTES} bytes"}
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return described | {"error": "left out: its data is not base64"}
        described["bytes"] = len(raw)
        if len(raw) > MAX_ATTACHMENT_BYTES:
            return described | {"error": f"left out: over {MAX_ATTACHMENT_BYTES} bytes"}
        if len(self.effects) >= MAX_ATTACHMENTS:
            return described | {"error": f"left out: over {MAX_ATTACHMENTS} attachments"}
        if image:
            problem = _image_problem(mime, raw)
            if problem:
                return described | {"error": f"left out: {problem}"}
            extension = IMAGE_TYPES[mime][1]
        else:
            extension = mimetypes.guess_extension(mime) or ".bin"
        path = f"{self.folder}/{self.stem}-{uuid.uuid4().hex[:12]}{extension}"
        try:
            self.workspace.write(path, raw)
        except WorkspaceError as exc:  # the quota, most likely
            return described | {"error": f"left out: {exc}"}
        self.effects.append(SideEffect(type="file_written", path=path))
        if image:
            self.images.append(f"data:{mime};base64,{base64.b64encode(raw).decode()}")
        return described | {"path": path}


def _image_problem(mime: str, raw: bytes) -> str | None:
    """Why `raw` is not shown as an image of type `mime` (None when it is one)."""
    if mime not in IMAGE_TYPES:
        return f"{mime} is no image type a model is shown ({', '.join(IMAGE_TYPES)})"
    starts, _ = IMAGE_TYPES[mime]
    if not raw.startswith(starts) or (mime == "image/webp" and raw[8:12] != b"WEBP"):
        return f"its bytes are no {mime}"
    return None


def _safe(name: str) -> str:
    """A server's or tool's name as one safe file-name part."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".")[:64] or "tool"


def _described(block: Any) -> dict[str, Any]:
    """A non-text content block as the model reads it: what it is, not its bytes."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return {"type": kind, "mime_type": block.mime_type, "bytes": _decoded_size(block.data)}
    if isinstance(block, types.ResourceLink):
        return {"type": "resource_link", "uri": str(block.uri), "name": block.name}
    if isinstance(block, types.EmbeddedResource):
        inner = block.resource
        described: dict[str, Any] = {"type": "resource", "uri": str(inner.uri)}
        if isinstance(inner, types.TextResourceContents):
            described["text"] = inner.text[:4000]
        return described
    return {"type": str(getattr(block, "type", "unknown"))}


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)
