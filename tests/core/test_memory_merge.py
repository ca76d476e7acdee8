"""Duplicate curated memories are merged, not piled up (core/memory.py `remember`), on
SQLite and PostgreSQL: the older memory keeps its id and first time, its time is
updated and its count goes up; what says something else is kept apart."""

from __future__ import annotations

import asyncio

import pytest

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MemoryManager, says_the_same
from opencrab.errors import ValidationError
from opencrab.offload import run_blocking
from opencrab.store import Database


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user's cat is called Tama.", "the user's cat is called tama"),
        ("The user's cat is called Tama.", "The user’s cat is called  Tama!"),
        ("The user's cat is called Tama.", "The users cat is called Tama"),
        ("ユーザーの猫の名前はタマ。", "ユーザーの猫の名前はタマ"),
        ("ユーザーの猫の名前はタマです", "ユーザーの猫の名前はタマです。"),
        ("Ｙｕｉ prefers green tea", "yui prefers green tea"),  # full-width letters
        (
            "We decided to ship the beta release on Friday the 4th",
            "We decided to ship the beta release on Friday, the 4th.",
        ),
    ],
)
def test_the_same_said_differently_is_the_same(old: str, new: str) -> None:
    assert says_the_same(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user's cat is called Tama.", "The user's dog is called Pochi."),
        ("Meet at 3 pm on Friday", "Meet at 4 pm on Friday"),  # a changed number
        ("ユーザーの猫の名前はタマ", "ユーザーの犬の名前はポチ"),
        ("Yui prefers green tea", "Yui prefers black coffee"),
        ("...", "!!!"),  # nothing left once normalised
    ],
)
def test_something_else_is_not_the_same(old: str, new: str) -> None:
    assert not says_the_same(old, new)


@pytest.fixture
def memory(any_db: Database, settings: Settings) -> MemoryManager:
    return MemoryManager(any_db, AgentStore(any_db, settings).create(AgentCreate(name="a")).id)


def test_a_duplicate_is_merged_into_the_older_memory(memory: MemoryManager) -> None:
    first, merged = memory.remember("facts", "The user's cat is called Tama.")
    assert not merged
    assert first.times_seen == 1
    assert first.created_at == first.updated_at
    again, merged = memory.remember("facts", "the user's cat is called tama")
    assert merged
    assert (again.id, again.created_at, again.times_seen) == (first.id, first.created_at, 2)
    assert again.updated_at > first.updated_at
    assert again.content == "The user's cat is called Tama."  # not longer: the older text kept
    longer, merged = memory.remember("facts", "The user's cat is called Tama!!")
    assert merged
    assert (longer.id, longer.times_seen) == (first.id, 3)
    assert longer.content == "The user's cat is called Tama!!"  # the longer text kept
    # the same in another category, and something else, are memories of their own
    other, merged = memory.remember("people", "The user's cat is called Tama.")
    assert not merged
    assert other.id != first.id
    memory.remember("facts", "The user's dog is called Pochi.")
    assert sorted((m.category, m.times_seen) for m in memory.list_curated()) == [
        ("facts", 1),
        ("facts", 3),
        ("people", 1),
    ]


def test_adding_a_memory_merges_and_editing_one_does_not(memory: MemoryManager) -> None:
    kept = memory.save_curated("core", "I keep tidy notes")
    same = memory.save_curated("core", "I keep tidy notes.")
    assert (same.id, same.times_seen) == (kept.id, 2)
    edited = memory.save_curated("core", "I keep tidy notes", id=kept.id)  # an edit is an edit
    assert (edited.id, edited.times_seen) == (kept.id, 2)
    assert len(memory.list_curated()) == 1
    with pytest.raises(ValidationError, match="empty"):
        memory.remember("core", "  ")
    with pytest.raises(ValidationError, match="category"):
        memory.remember("", "x")


async def test_writers_at_once_keep_one_memory(memory: MemoryManager) -> None:
    said = ["Yui prefers green tea", "yui prefers green tea.", "Yui prefers green tea!"] * 4
    await asyncio.gather(*(run_blocking(memory.remember, "facts", text) for text in said))
    [kept] = memory.list_curated()
    assert kept.times_seen == len(said)
