"""Seed 002's OpenAPI document (tests/fixtures/seed002/openapi.yaml) as a response checker.

    contract = SeedContract.load()
    contract.check("getTicket", response)   # status documented, body matches its schema

A response's status must be one the operation documents, and its JSON body must match
the documented schema: `$ref`s (schemas and shared responses) are inlined and OpenAPI
3.0's `nullable: true` becomes JSON Schema's `null` type, then jsonschema validates,
checking `uuid` and `date-time` formats too.
"""

from __future__ import annotations

import copy
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SEED_DOCUMENT = Path(__file__).parent.parent / "fixtures" / "seed002" / "openapi.yaml"
METHODS = ("get", "put", "post", "delete", "patch")

FORMATS = jsonschema.FormatChecker(["uuid"])


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    """RFC 3339: a date, a time and an offset (Z or ±hh:mm)."""
    if not isinstance(value, str):
        return True
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return "T" in value.upper() and parsed.tzinfo is not None


def _inline(node: Any, document: dict[str, Any]) -> Any:
    """`node` with every `$ref` replaced by what it points to and `nullable` made JSON Schema."""
    if isinstance(node, list):
        return [_inline(item, document) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return _inline(target, document)
    out = {key: _inline(value, document) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


class SeedContract:
    """The operations of seed 002's document, by operationId."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.operations: dict[str, tuple[str, str, dict[str, Any]]] = {}
        for path, item in document["paths"].items():
            for method in METHODS:
                if method in item:
                    operation = item[method]
                    self.operations[operation["operationId"]] = (method, path, operation)

    @classmethod
    @cache
    def load(cls) -> SeedContract:
        """The document as copied from the seed."""
        return cls(yaml.safe_load(SEED_DOCUMENT.read_text(encoding="utf-8")))

    def raw(self) -> dict[str, Any]:
        """A copy of the whole document, for schemathesis."""
        return copy.deepcopy(self.document)

    def schema_of(self, operation_id: str, status: int) -> dict[str, Any] | None:
        """The JSON Schema of the operation's `status` response (None: no body documented);
        AssertionError when the operation does not document `status`."""
        _method, _path, operation = self.operations[operation_id]
        responses = operation["responses"]
        assert str(status) in responses, (
            f"{operation_id} answered {status}; the seed documents {sorted(responses)}"
        )
        response = _inline(responses[str(status)], self.document)
        content = response.get("content", {}).get("application/json")
        return None if content is None else dict(content["schema"])

    def check(self, operation_id: str, response: Any) -> Any:
        """The response's JSON after checking its status and body against the seed."""
        schema = self.schema_of(operation_id, response.status_code)
        if response.status_code == 204:
            assert not response.content, f"{operation_id} 204 with a body"
            return None
        if schema is None:  # documented by a description only (an error: our shape)
            return response.json()
        body = response.json()
        jsonschema.validate(body, schema, format_checker=FORMATS)
        return body
