"""Response schemas shared by every router."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorResponse(BaseModel):
    """Every error: a machine-readable code and a human-readable message."""

    error: str = Field(examples=["not_found"])
    message: str = Field(examples=["trace 3f0c… has no events"])


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries documenting the error shape for `statuses`."""
    descriptions = {
        400: "Bad request",
        401: "Missing or invalid bearer token",
        404: "Not found",
        409: "Conflict",
        422: "Invalid input",
        500: "Internal error",
    }
    return {
        status: {"model": ErrorResponse, "description": descriptions.get(status, "Error")}
        for status in statuses
    }
