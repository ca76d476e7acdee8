"""One MCP tool as an Action, and what its result becomes.

The tool's input JSON Schema is the action's `parameters` (a schema that is no JSON
Schema leaves the tool out, logged with the server's and the tool's name). A result's
text blocks become the action's `text`, its structuredContent is kept as `structured`,
images, audio and resources are described (kind, MIME type, size, URI): the model reads
text only. A result with `isError` is a failed ActionResult. What the model gets is
capped like any recorded text (`[agent] max_event_bytes`, opencrab.core.record_cap).
A call not answered within the table's `call_timeout_secs` fails, naming the server and
that key. `read_only` follows the tool's annotations (readOnlyHint and not
destructiveHint), which the `unsafe` approval policy reads (core/approvals.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from typing import Any, Protocol

import jsonschema
from mcp import ClientSession, types

from opencrab.actions.base import Action, ActionContext, ActionResult
from opencrab.config.mcp import McpServerConfig
from opencrab.core.record_cap import cut_text
from opencrab.llm.types import ToolDefinition

log = logging.getLogger(__name__)


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
        return await self.call(args, ctx.settings.agent.max_event_bytes)

    async def call(self, args: dict[str, Any], max_bytes: int) -> ActionResult:
        """Call the tool with checked `args`; its result capped at `max_bytes` of text."""
        server = self.source.server
        timeout = self.source.config.call_timeout_secs
        session = self.source.session
        if session is None:
            return ActionResult.fail(
                f"MCP server {server!r} is not connected ({self.source.state}"
                + (f": {self.source.last_error}" if self.source.last_error else "")
                + f"); {self.tool_name} was not called"
            )
        try:
            async with asyncio.timeout(timeout):
                result = await session.call_tool(self.tool_name, args, read_timeout_seconds=timeout)
        except TimeoutError:
            return ActionResult.fail(_late(server, self.tool_name, timeout))
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            if "timed out" in message.lower():
                return ActionResult.fail(_late(server, self.tool_name, timeout))
            return ActionResult.fail(
                f"MCP server {server!r}: calling {self.tool_name} failed: {message}"
            )
        return tool_result(server, self.tool_name, result, max_bytes)


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
    server: str, tool: str, result: types.CallToolResult, max_bytes: int
) -> ActionResult:
    """The ActionResult of one tools/call result (see the module docstring)."""
    texts: list[str] = []
    others: list[dict[str, Any]] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
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
    if result.is_error:
        reason = text or "no message"
        return ActionResult(
            success=False,
            data=data,
            error=f"MCP server {server!r}: {tool} reported an error: {reason[:2000]}",
        )
    return ActionResult.ok(data)


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
