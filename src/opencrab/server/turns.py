"""One turn per session at a time, whichever gateway (REST, WebSocket) starts it."""

from __future__ import annotations

import asyncio
import weakref

_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


def turn_lock(session_id: str) -> asyncio.Lock:
    """The lock a turn in `session_id` holds; kept while anyone holds or waits on it."""
    lock = _locks.get(session_id)
    if lock is None:
        lock = _locks[session_id] = asyncio.Lock()
    return lock
