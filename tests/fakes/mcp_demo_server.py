"""A real MCP server (the official SDK's MCPServer) for the MCP client's tests.

Run as `python mcp_demo_server.py` it speaks stdio; as `python mcp_demo_server.py http
PORT` streamable HTTP on 127.0.0.1:PORT (path /mcp). Its tools:

- add(a, b): a + b, annotated read-only;
- wipe(): annotated destructive (its call is counted, never harmful);
- read_path(path): the text of a file (to show what the sandbox lets it read);
- reach(port): whether it can connect to 127.0.0.1:PORT (its box's network or ours);
- environment(): the variables the server runs with;
- authorization(): the Authorization header of the HTTP request that called it;
- picture(): a caption, a real 2×2 PNG and a PDF embedded as a blob resource;
  forged(): an "image/png" that is text, an SVG (no image a model is shown) and a
  PNG over the 5 MiB an attachment may have;
- grow(): adds a tool `extra` and announces notifications/tools/list_changed;
- hang(): never answers; huge(): a 3 MB text; garble(): prints a line that is no
  JSON-RPC on stdout, then answers; crash(): the process exits at once;
- broken: a tool whose input schema is no JSON Schema;
- with DEMO_TWIN=1 in its environment it lists `add` a second time (another text).
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct
import sys
import zlib
from typing import Any

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("demo")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def wipe() -> str:
    """Pretend to wipe everything."""
    return "wiped"


@server.tool()
def read_path(path: str) -> str:
    """The text of the file at `path` (an error result saying why it cannot)."""
    try:
        with open(path) as file:
            return file.read()
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from exc


@server.tool()
def reach(port: int) -> str:
    """Whether a TCP connection to 127.0.0.1:`port` is made ("connected"), or why not."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            return "connected"
    except OSError as exc:
        return f"not connected: {exc.strerror or exc}"


@server.tool()
def environment() -> dict[str, str]:
    """The server's environment variables."""
    return dict(os.environ)


@server.tool()
def authorization(ctx: Context) -> str:
    """The Authorization header of the HTTP request that called it ("" over stdio)."""
    request = ctx.request_context.request
    return "" if request is None else str(request.headers.get("authorization", ""))


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `extra` and say the list changed."""

    def extra() -> str:
        """A tool added while the server runs."""
        return "extra!"

    server.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
async def hang() -> str:
    """Never answer."""
    await asyncio.Event().wait()
    return "never"


def red_png() -> bytes:
    """A real 2×2 red PNG (signature, IHDR, IDAT, IEND)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PDF = b"%PDF-1.4\n% a tiny document\n%%EOF\n"


@server.tool()
def picture() -> list[types.ContentBlock]:
    """A caption, a red PNG and a PDF."""
    return [
        types.TextContent(type="text", text="a red dot"),
        types.ImageContent(
            type="image", data=base64.b64encode(red_png()).decode(), mime_type="image/png"
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri="file:///report.pdf",
                mime_type="application/pdf",
                blob=base64.b64encode(PDF).decode(),
            ),
        ),
    ]


@server.tool()
def forged() -> list[types.ContentBlock]:
    """An "image/png" whose bytes are text, an SVG, and a PNG of more than 5 MiB."""
    enormous = b"\x89PNG\r\n\x1a\n" + bytes(5 * 1024 * 1024)
    return [
        types.ImageContent(
            type="image", data=base64.b64encode(b"<html>hi</html>").decode(), mime_type="image/png"
        ),
        types.ImageContent(
            type="image", data=base64.b64encode(b"<svg/>").decode(), mime_type="image/svg+xml"
        ),
        types.ImageContent(
            type="image", data=base64.b64encode(enormous).decode(), mime_type="image/png"
        ),
    ]


@server.tool()
def huge() -> str:
    """A very long text."""
    return "x" * 3_000_000


@server.tool()
def garble() -> str:
    """Print something that is no JSON-RPC on stdout, then answer."""
    os.write(1, b"this is not JSON-RPC at all\n")
    return "garbled"


@server.tool()
def crash() -> str:
    """Exit at once."""
    os._exit(3)


@server.tool()
def broken(x: int) -> int:
    """A tool whose schema the client refuses."""
    return x


server._tool_manager.get_tool("broken").parameters = {
    "type": "object",
    "properties": {"x": {"type": "frobnicate"}},
}

if os.environ.get("DEMO_TWIN") == "1":
    _listed = server._tool_manager.list_tools

    def _with_twin() -> list[Any]:
        tools = _listed()
        (first,) = [t for t in tools if t.name == "add"]
        return [*tools, first.model_copy(update={"description": "The twin of add."})]

    server._tool_manager.list_tools = _with_twin  # type: ignore[method-assign]


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
