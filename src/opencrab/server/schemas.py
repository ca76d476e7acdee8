"""Response schemas shared by every router (`ApiModel`, the camelCase base, is the
reports' own: opencrab.reports.model)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from opencrab.reports.model import ApiModel as ApiModel


class ErrorResponse(BaseModel):
    """Every error: a machine-readable code and a human-readable message."""

    error: str = Field(examples=["not_found"])
    message: str = Field(examples=["trace 3f0c… has no events"])
    line: int | None = Field(
        default=None,
        description="For an error in submitted text (invalid_skill_file): its 1-based line.",
        examples=[4],
    )


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries documenting the error shape for `statuses`."""
    descriptions = {
        400: "Invalid request (a missing or wrong field, parameter or body)",
        401: "Missing or invalid bearer token",
        404: "Not found",
        409: "Conflict",
        429: "Too many requests, or an LLM budget (the agent's, the fleet's) is spent",
        500: "Internal error",
        502: "The model's provider failed (its error in the message)",
        504: "The model did not answer within [agent] turn_timeout_secs",
    }
    return {
        status: {"model": ErrorResponse, "description": descriptions.get(status, "Error")}
        for status in statuses
    }


class ApiInput(ApiModel):
    """A request body: unknown fields are refused with a 400 that names them."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


PERIOD_PATTERN = r"^(hour|day|week|month|all|[1-9][0-9]{0,3}[hdw])$"
Period = Annotated[
    str,
    Query(
        pattern=PERIOD_PATTERN,
        description="hour, day, week, month (30 days), all, or a count like 24h, 7d, 4w.",
    ),
]
"""A `?period=` parameter (see opencrab.llm.metrics.period_start)."""


MAX_SQL_INTEGER = 2**63 - 1
"""The largest integer a database column holds (SQLite INTEGER, PostgreSQL BIGINT)."""

AfterId = Annotated[
    int,
    Query(alias="afterId", ge=0, le=MAX_SQL_INTEGER, description="Only rows with a larger id."),
]
"""An `?afterId=` parameter: past the database's integers it is a 400, not an overflow."""

Offset = Annotated[int, Query(ge=0, le=1_000_000_000, description="Rows to skip.")]
"""An `?offset=` parameter, bounded like every integer the API takes."""
