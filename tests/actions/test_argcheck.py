"""The quick argument check (actions/argcheck.py) never says yes where jsonschema says no,
and says yes to plainly valid arguments of flat schemas (the registry's fast path)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from opencrab.actions.argcheck import quick_check
from opencrab.actions.base import ActionCallError, default_registry

WRONG = [None, True, False, 0, 1, -1, 1.0, 2.5, float("nan"), float("inf"), "", "x", [], {}]
EXTRA_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "x": {"type": "number", "minimum": -1.5, "maximum": 2},
            "b": {"type": "boolean"},
            "e": {"type": "string", "enum": ["a", "b"]},
            "s": {"type": "string", "minLength": 2, "maxLength": 3, "description": "d"},
        },
        "required": ["n", "b"],
    },
    {"type": "object", "properties": {"s": {"type": "string"}}, "additionalProperties": False},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
]


def _valid_value(spec: dict[str, Any]) -> Any:
    kind = spec.get("type")
    if "enum" in spec:
        return spec["enum"][0]
    if kind == "string":
        return "y" * max(1, spec.get("minLength", 0))
    if kind in ("integer", "number"):
        return spec.get("minimum", 0)
    if kind == "boolean":
        return True
    return None


def _variants(schema: dict[str, Any]) -> list[Any]:
    """Arguments near the schema's edges: valid ones, each property broken in turn,
    required ones missing, extra ones added, and no object at all."""
    properties = schema.get("properties", {})
    base = {name: _valid_value(spec) for name, spec in properties.items()}
    out: list[Any] = [base, {}, None, [], "text", {**base, "extra": 1}]
    for name, spec in properties.items():
        values = list(WRONG)
        for bound in ("minLength", "maxLength"):
            if bound in spec:
                values += [
                    "y" * max(0, spec[bound] - 1),
                    "y" * spec[bound],
                    "y" * (spec[bound] + 1),
                ]
        for bound in ("minimum", "maximum"):
            if bound in spec:
                values += [spec[bound] - 1, spec[bound], spec[bound] + 1, spec[bound] + 0.5]
        values += [*spec.get("enum", []), "not one of them"]
        out += [{**base, name: value} for value in values]
        out.append({k: v for k, v in base.items() if k != name})
    return out


def _schemas() -> list[tuple[str, dict[str, Any]]]:
    registry = default_registry()
    found = [(name, registry._entries[name].definition.parameters) for name in registry.names()]
    return found + [(f"extra{i}", schema) for i, schema in enumerate(EXTRA_SCHEMAS)]


@pytest.mark.parametrize(("name", "schema"), _schemas(), ids=[n for n, _ in _schemas()])
def test_a_quick_yes_is_always_jsonschemas_yes(name: str, schema: dict[str, Any]) -> None:
    check = quick_check(schema)
    if check is None:
        return  # not a flat schema: the full validator runs alone
    validator = jsonschema.validators.validator_for(schema)(schema)
    said_yes = 0
    for arguments in _variants(schema):
        if check(arguments):
            said_yes += 1
            assert validator.is_valid(arguments), (name, arguments)
    assert said_yes, f"{name}: the quick check never said yes"


def test_flat_schemas_of_the_registry_get_a_quick_check() -> None:
    registry = default_registry()
    quick = [name for name in registry.names() if registry._entries[name].quick is not None]
    assert {"send_speech", "generate_inner_voice"} <= set(quick)
    assert len(quick) >= len(registry.names()) // 2


def test_what_it_is_unsure_of_goes_to_jsonschema() -> None:
    registry = default_registry()
    assert registry.validate("send_speech", {"content": "hi"}).name == "send_speech"
    with pytest.raises(ActionCallError, match="Additional properties"):  # jsonschema's own words
        registry.validate("send_speech", {"content": "hi", "loud": True})
    with pytest.raises(ActionCallError, match=r"too short|should be non-empty"):
        registry.validate("send_speech", {"content": ""})
    nested = {"type": "object", "properties": {"o": {"type": "object"}}}
    assert quick_check(nested) is None
    assert (
        quick_check({"type": "object", "properties": {"p": {"type": "string", "pattern": "a"}}})
        is None
    )
