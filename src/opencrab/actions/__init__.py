"""Agent actions: the registry and the built-in actions of seed 001's dispatcher list."""

from opencrab.actions.base import (
    Action,
    ActionContext,
    ActionRegistry,
    ActionResult,
    SideEffect,
    TurnState,
    default_registry,
)

__all__ = [
    "Action",
    "ActionContext",
    "ActionRegistry",
    "ActionResult",
    "SideEffect",
    "TurnState",
    "default_registry",
]
