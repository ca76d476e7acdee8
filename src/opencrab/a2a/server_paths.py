"""Where the A2A server answers (opencrab.a2a.server), without the SDK: the bearer check
(opencrab.server.auth) lets the Agent Cards through whether or not the `a2a` extra is
installed."""

from __future__ import annotations

PREFIX = "/a2a"
"""Each published agent's endpoint is `/a2a/{agent}` (by name or id)."""
CARD_PATH = "/.well-known/agent-card.json"
"""The card's path, at the root (the default agent) and under each agent's endpoint."""


def is_card_path(path: str) -> bool:
    """Whether `path` is an Agent Card: served without a token, as A2A discovery needs
    (a card names the scheme a caller authenticates with)."""
    if path == CARD_PATH:
        return True
    if not (path.startswith(PREFIX + "/") and path.endswith(CARD_PATH)):
        return False
    ref = path[len(PREFIX) + 1 : -len(CARD_PATH)]
    return bool(ref) and "/" not in ref
