"""An imported session's NormalizedMessages (seed 003) as the items its page shows.

A tool_call and the tool_result naming the same `call_id` become one item (the call's
arguments and its output side by side, JSON indented); reasoning that came encrypted is
an item saying so, with the SHA-256 of what was stored; injected context (environment,
AGENTS.md, system reminders, developer and system messages) is marked to be shown
collapsed; session headers and meta lines (token counts, turn starts) are left out:
the session's facts and its trace show them. A text segment is the allow-listed HTML
seed 003 defines; it is cleaned against that allow-list again before it is shown as
HTML (`segment_html`), since a stored line may come from a hostile file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import nh3
from markupsafe import Markup

from opencrab.dashboard.event_rows import pretty
from opencrab.importers.common import ALLOWED_TAGS


@dataclass
class Item:
    """One thing the transcript page shows. kind: message, tool, reasoning."""

    kind: str
    id: str
    line: int  # 1-based, as the file has it (the page's anchor `line-N`)
    timestamp: str
    role: str
    texts: list[Markup] = field(default_factory=list)  # segments' HTML (segment_html)
    images: int = 0
    injected: str | None = None  # what context was injected (collapsed), or None
    name: str = ""
    arguments: str = ""
    arguments_json: bool = False
    output: str | None = None
    output_json: bool = False
    output_line: int | None = None
    failed: bool = False
    encrypted_sha256: str | None = None
    summary: list[str] = field(default_factory=list)


def segment_html(text: Any) -> Markup:
    """A text segment's HTML, cleaned against seed 003's allow-list (links: http, https
    and mailto only), to show as the HTML it is: `&amp;&amp;` reads `&&`."""
    cleaned = nh3.clean(
        str(text or ""),
        tags=ALLOWED_TAGS,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return Markup(cleaned)  # noqa: S704 - cleaned by nh3 against the allow-list above


def _json_text(parsed: Any, raw: Any) -> tuple[str, bool]:
    """Text to show for a tool's arguments or output, and whether it is JSON."""
    value = parsed
    if value is None and isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return raw, False
        if not isinstance(value, (dict, list)):
            return raw, False
    elif value is None:
        value = raw
    if value is None:
        return "", False
    if isinstance(value, str):
        return value, False
    return pretty(value), True


def _line(message: dict[str, Any]) -> int:
    return int(message["raw"].get("line_index", 0)) + 1


def build_items(messages: list[dict[str, Any]]) -> list[Item]:
    """The page's items for messages in file order."""
    items: list[Item] = []
    calls: dict[str, Item] = {}
    for m in messages:
        source_type, role, raw = m["source_type"], m["role"], m["raw"]
        meta = m.get("metadata") or {}
        base = Item("message", m["id"], _line(m), m["timestamp"], role)
        if raw.get("payload_type") == "reasoning" or meta.get("event_kind") == "reasoning":
            if raw.get("encrypted_sha256") or meta.get("summary") or m["segments"]:
                base.kind = "reasoning"
                base.encrypted_sha256 = raw.get("encrypted_sha256")
                base.summary = [str(s) for s in meta.get("summary") or []]
                base.texts = [segment_html(s["text"]) for s in m["segments"] if s.get("text")]
                items.append(base)
            continue
        call = m.get("tool_call") or {}
        if source_type == "tool_call":
            base.kind, base.name = "tool", str(call.get("name") or "tool")
            arguments = call.get("arguments")
            parsed = call.get("arguments_json")
            if arguments is None and call.get("input") is not None:
                arguments, parsed = call.get("input"), call.get("input_json")
            base.arguments, base.arguments_json = _json_text(parsed, arguments)
            items.append(base)
            if call.get("call_id"):
                calls[str(call["call_id"])] = base
            continue
        if source_type == "tool_result":
            joined = calls.get(str(call.get("call_id")))
            output, output_json = _json_text(call.get("output_json"), call.get("output"))
            if joined is not None and joined.output is None:
                joined.output, joined.output_json = output, output_json
                joined.output_line = base.line
                joined.failed = call.get("status") in ("failed", "error") or bool(
                    meta.get("is_error")
                )
                continue
            base.kind, base.name = "tool", str(call.get("name") or "tool result")
            base.output, base.output_json = output, output_json
            items.append(base)
            continue
        if source_type in ("session", "meta") or not m["segments"]:
            continue
        base.texts = [segment_html(s.get("text")) for s in m["segments"] if s.get("type") == "text"]
        base.images = sum(1 for s in m["segments"] if s.get("type") == "image")
        injected = meta.get("injected")
        if injected or role == "system":
            base.injected = str(injected or "system message")
        items.append(base)
    return items
