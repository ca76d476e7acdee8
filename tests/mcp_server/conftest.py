"""A runtime on the test's database (no model: these tools call none) and one agent."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from opencrab.config import Settings
from opencrab.core.agent import Agent, AgentCreate
from opencrab.core.runtime import Runtime
from opencrab.store import Database


@pytest.fixture
async def runtime(settings: Settings, db: Database) -> AsyncIterator[Runtime]:
    async with Runtime.open(settings, db=db) as rt:
        yield rt


@pytest.fixture
def agent(runtime: Runtime) -> Agent:
    return runtime.agents.create(AgentCreate(name="aki", prompt="You keep notes."))
