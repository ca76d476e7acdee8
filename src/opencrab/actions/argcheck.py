"""A quick yes for tool arguments that plainly fit their action's schema.

jsonschema's validators walk a schema keyword by keyword through Python-level machinery
(about 40-80 µs for `{"content": "..."}` against send_speech's schema), which an agent
turn pays for every action it runs. Most actions' schemas are flat: an object of scalar
properties with types, lengths, bounds and string enums. For such a schema `quick_check`
compiles a plain function that says True only when every constraint certainly holds;
anything else (a failed constraint, a value it is unsure of such as 1.0 for an integer,
a schema with other keywords) goes to the full validator, which gives the verdict and
the error messages. So it can only save time, never accept what jsonschema refuses
(tests/actions compares the two on every registered action).

Example:
    check = quick_check({"type": "object", "properties": {"n": {"type": "integer"}}})
    check({"n": 3})    # True: valid
    check({"n": "3"})  # False: ask jsonschema
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

QuickCheck = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment"})
_SCALAR_KEYWORDS = frozenset(
    {"type", "minLength", "maxLength", "minimum", "maximum", "enum"} | _ANNOTATIONS
)
_OBJECT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "$schema"} | _ANNOTATIONS
)


def quick_check(schema: Mapping[str, Any]) -> QuickCheck | None:
    """A function saying True for arguments that certainly fit `schema`, or None when the
    schema is not a flat object of scalar properties (the full validator always runs)."""
    if not isinstance(schema, Mapping) or not schema.keys() <= _OBJECT_KEYWORDS:
        return None
    if schema.get("type") != "object" or "draft-03" in str(schema.get("$schema", "")):
        return None  # draft 3 spells `required` otherwise
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    closed = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    if closed not in (True, False) or not all(isinstance(k, str) for k in required):
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, spec in properties.items():
        check = _scalar(spec)
        if check is None:
            return None
        checks[name] = check
    needed = tuple(required)

    def fits(arguments: Any) -> bool:
        if type(arguments) is not dict:
            return False
        for name in needed:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            check = checks.get(name)
            if check is None:
                if closed is False:
                    return False
            elif not check(value):
                return False
        return True

    return fits


def _scalar(spec: Any) -> Callable[[Any], bool] | None:
    """A property's check, or None for a schema other than one scalar type's."""
    if not isinstance(spec, Mapping) or not spec.keys() <= _SCALAR_KEYWORDS:
        return None
    kind = spec.get("type")
    low, high = spec.get("minimum"), spec.get("maximum")
    short, long = spec.get("minLength"), spec.get("maxLength")
    enum = spec.get("enum")
    if kind == "string":
        if low is not None or high is not None:
            return None
        if not all(v is None or type(v) is int for v in (short, long)):
            return None
        if enum is not None and not (isinstance(enum, list) and all(type(v) is str for v in enum)):
            return None
        choices = None if enum is None else frozenset(enum)
        least = short or 0

        def string(value: Any) -> bool:
            if type(value) is not str:
                return False
            size = len(value)
            if size < least or (long is not None and size > long):
                return False
            return choices is None or value in choices

        return string
    if short is not None or long is not None or enum is not None:
        return None
    if not all(v is None or type(v) in (int, float) for v in (low, high)):
        return None
    if kind == "integer":
        allowed: tuple[type, ...] = (int,)  # 1.0 is an integer to JSON Schema: ask it
    elif kind == "number":
        allowed = (int, float)
    elif kind == "boolean":
        if low is not None or high is not None:
            return None
        return lambda value: type(value) is bool
    else:
        return None

    def number(value: Any) -> bool:
        if type(value) not in allowed or value != value:  # NaN: ask jsonschema
            return False
        return (low is None or value >= low) and (high is None or value <= high)

    return number
