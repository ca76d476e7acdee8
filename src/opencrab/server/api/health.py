"""`GET /api/health`: liveness, always open."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, FastAPI
from pydantic import BaseModel

from opencrab import __version__
from opencrab.plugins import hookimpl

router = APIRouter(prefix="/api", tags=["Health"])


class Health(BaseModel):
    status: Literal["ok"]
    version: str


@router.get("/health", operation_id="health")
def health() -> Health:
    """The server is up; returns its version."""
    return Health(status="ok", version=__version__)


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
