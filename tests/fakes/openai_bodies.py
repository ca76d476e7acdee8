"""OpenAI Chat Completions bodies as the API sends them, for the fake servers' replies."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.llm_server import Reply

CHAT = "/v1/chat/completions"


def completion(
    message: dict[str, Any],
    *,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
    model: str = "gpt-5-mini-2025-08-07",
) -> dict[str, Any]:
    """A chat.completion body as OpenAI sends it."""
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, **message},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": usage or {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        "system_fingerprint": "fp_1",
    }


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A chat.completion.chunk; without delta and finish it is the usage-only last chunk."""
    choices = []
    if delta is not None or finish is not None:
        choices = [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
    return {
        "id": "chatcmpl-str",
        "object": "chat.completion.chunk",
        "created": 1_760_000_000,
        "model": "gpt-5-mini-2025-08-07",
        "choices": choices,
        "usage": usage,
    }


def tool_delta(
    index: int, arguments: str, *, call_id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """One streamed tool-call fragment: id, type and name only on the first of an index."""
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        call |= {"id": call_id, "type": "function"}
        call["function"]["name"] = name
    return {"tool_calls": [call]}


def call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """One tool call in an assistant message (arguments as JSON text)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def tool_reply(*calls: dict[str, Any], content: str | None = None) -> Reply:
    """A completion that calls `calls` (finish_reason tool_calls), as a fake reply."""
    return Reply(
        json=completion({"content": content, "tool_calls": list(calls)}, finish="tool_calls")
    )
