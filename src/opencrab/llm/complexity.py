"""The `complexity` of an LLM call (seed 001 `llm_usage_metrics.complexity`).

simple, medium or complex, from the request itself so every call gets one without asking
the model: what is asked (every message but the system prompt, which is the same in every
turn of an agent) and how many tool rounds it already took.

- complex: three or more tool rounds (assistant messages that called tools), or at least
  COMPLEX_TOKENS tokens of conversation;
- simple: no tool round and under SIMPLE_TOKENS tokens;
- medium: everything else.

A caller that knows better sets `CallInfo.complexity` itself.
"""

from __future__ import annotations

from typing import Literal

from opencrab.llm.types import ChatRequest

Complexity = Literal["simple", "medium", "complex"]
SIMPLE_TOKENS = 500
COMPLEX_TOKENS = 4000
COMPLEX_TOOL_ROUNDS = 3


def estimate_complexity(request: ChatRequest) -> Complexity:
    """simple, medium or complex by the module docstring's rules."""
    rounds = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
    chars = sum(len(m.text) for m in request.messages if m.role != "system")
    tokens = chars // 4  # the usual ~4 characters a token; only the order of size matters
    if rounds >= COMPLEX_TOOL_ROUNDS or tokens >= COMPLEX_TOKENS:
        return "complex"
    if rounds == 0 and tokens < SIMPLE_TOKENS:
        return "simple"
    return "medium"
