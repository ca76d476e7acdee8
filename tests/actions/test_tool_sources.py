"""The registry is the union of the static actions and what each tool source offers now,
under `<namespace>__<tool>`; a source's change replaces its part at once."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from opencrab.actions.base import ActionCallError, ActionRegistry
from opencrab.ext import Action, ActionContext, ActionResult
from tests.fakes.shelf_plugin import Label, Shelf


class Static(Action):
    name = "static_echo"
    description = "A static action."

    async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        return ActionResult.ok()


def named(name: str, parameters: dict[str, Any] | None = None) -> Action:
    """An action built at run time (as an MCP tool is): its name is its definition's."""
    attributes: dict[str, Any] = {"name": name, "description": f"The {name} tool."}
    if parameters is not None:
        attributes["parameters"] = parameters
    cls = type(f"Tool_{len(name)}", (Label,), attributes)
    return cls()  # type: ignore[no-any-return]


async def test_a_source_adds_its_tools_under_its_namespace_and_a_change_replaces_them() -> None:
    registry = ActionRegistry([Static()])
    shelf = Shelf("shelf", [])
    registry.attach(shelf)
    assert registry.names() == ["static_echo"]  # not started: it offers nothing yet
    before = registry.version

    await shelf.offer([shelf.count, Label()])
    assert shelf.version == 1
    assert registry.version > before
    assert registry.names() == ["shelf__count", "shelf__label", "static_echo"]
    [definition] = registry.definitions(["shelf__count", "count", "nothing"])
    assert definition.name == "shelf__count"  # what the model sees
    assert definition.parameters == shelf.count.parameters
    assert registry.validate("shelf__count", {"item": "jam"}, {"shelf__count"}) is shelf.count
    assert shelf.count.name == "count"  # the action itself keeps its own name

    await shelf.offer([Label()])
    assert registry.names() == ["shelf__label", "static_echo"]
    with pytest.raises(ActionCallError) as refused:
        registry.validate("shelf__count", {"item": "jam"}, {"shelf__count", "shelf__label"})
    assert "'shelf__count' is not offered now: its tool source 'shelf' does not list it" in (
        refused.value.reason
    )
    assert "a grant of it stays" in refused.value.reason
    assert refused.value.reason.endswith("the actions you can call are: shelf__label")
    with pytest.raises(ActionCallError, match="unknown action 'elsewhere__count'"):
        registry.validate("elsewhere__count", {})

    registry.detach(shelf)
    assert registry.names() == ["static_echo"]
    await shelf.offer([shelf.count])  # no longer heard
    assert registry.names() == ["static_echo"]
    assert registry.source_of("shelf__count") is None


async def test_a_tool_the_model_could_not_be_offered_is_left_out_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Clash(Action):
        name = "shelf__label"
        description = "A static action in the shelf's namespace."

        async def execute(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
            return ActionResult.ok("static")

    registry = ActionRegistry([Clash()])
    shelf = Shelf("shelf", [])
    registry.attach(shelf)
    caplog.set_level(logging.WARNING)
    await shelf.offer(
        [
            shelf.count,
            Label(),  # shelf__label: a static action has that name
            named("has space"),
            named("x" * 60),  # shelf__ + 60 is over 64
            named("odd", {"type": "object", "properties": {"n": {"type": "nonsense"}}}),
            named("fine"),
        ]
    )
    assert registry.names() == ["shelf__count", "shelf__fine", "shelf__label"]
    assert isinstance(registry.get("shelf__label"), Clash)  # the static one stays
    said = caplog.text
    assert "tool 'label' left out: 'shelf__label' is taken" in said
    assert "'shelf__has space' is not 1 to 64 letters" in said
    assert f"tool {'x' * 60!r} left out" in said
    assert "tool 'odd' left out: its parameters are no JSON Schema" in said


def test_namespaces_are_checked_and_never_overlap() -> None:
    with pytest.raises(ValueError, match="namespace 'my shelf'"):
        Shelf("my shelf", [])
    with pytest.raises(ValueError, match="namespace ''"):
        Shelf("", [])
    registry = ActionRegistry()
    registry.attach(Shelf("mcp__files", []))
    for clash in ("mcp__files", "mcp", "mcp__files__docs"):
        with pytest.raises(ValueError, match=f"{clash!r} clashes with 'mcp__files'"):
            registry.attach(Shelf(clash, []))
    registry.attach(Shelf("mcp__filesystem", []))  # a longer name, not inside it
    assert [s.namespace for s in registry.sources()] == ["mcp__files", "mcp__filesystem"]
    assert registry.source_of("mcp__filesystem__read").namespace == "mcp__filesystem"  # type: ignore[union-attr]
