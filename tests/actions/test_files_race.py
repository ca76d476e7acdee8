"""The workspace jail under a symlink race (issue 31 §2): a folder swapped for a link out.

A hostile process (tests/fakes/swapper.py) exchanges the workspace folder `d` with a
symlink `l` to a host folder holding a secret, as fast as it can, while the model's
file tools run in a loop on `d/…`: read_file, write_file, search_code, ws_list,
ws_mkdir and ws_delete. Nothing outside may be read, listed, written or deleted: the
host folder is the same at the end, and no answer carries its secret or its names.
Both ways of resolving a path are raced: openat2 and the O_NOFOLLOW walk.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from itertools import count
from pathlib import Path

from opencrab.actions.base import ActionContext
from tests.actions.conftest import Call
from tests.fakes.swapper import Swapper

RACE_SECS = 3.0  # the unjailed code leaked within half a second here
SECRET = "HOST-SECRET-31"
HOST_NAMES = {"secret.txt", "host-only.txt", "victim.txt"}


def host_tree(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
        for p in folder.rglob("*")
    }


async def test_a_folder_swapped_for_a_symlink_never_leads_outside(
    call: Call, ctx: ActionContext, tmp_path: Path, jail_mode: str
) -> None:
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "host-only.txt").write_text(f"{SECRET}\n")
    (outside / "victim.txt").write_text("the host's own file\n")
    before = host_tree(outside)
    ws = ctx.workspace
    ws.write("d/secret.txt", "inside\n")
    os.symlink(outside, ws.root / "l")

    leaks: list[str] = []
    done: dict[str, int] = {}
    numbers = count()
    deadline = time.monotonic() + RACE_SECS

    async def loop(name: str, step: Callable[[], Awaitable[None]]) -> None:
        runs = 0
        while time.monotonic() < deadline:
            await step()
            runs += 1
        done[name] = runs

    async def read() -> None:
        result = await call("read_file", path="d/secret.txt")
        if result.success and SECRET in result.data["content"]:
            leaks.append("read_file read the host's secret")

    async def write() -> None:
        await call("write_file", path=f"d/w-{next(numbers)}.txt", content="planted")

    async def search() -> None:
        result = await call("search_code", pattern=SECRET, literal=True)
        assert result.success, result.error
        if result.data["matches"]:
            leaks.append(f"search_code found {result.data['matches'][0]}")

    async def listing() -> None:
        result = await call("ws_list", path="d")
        names = {e["name"] for e in result.data["entries"]} if result.success else set()
        if names & {"host-only.txt", "victim.txt"}:
            leaks.append(f"ws_list listed the host's folder: {sorted(names)}")

    async def make_folder() -> None:
        await call("ws_mkdir", path=f"d/m-{next(numbers)}")

    async def delete() -> None:
        await call("ws_delete", path="d/victim.txt")

    with Swapper(ws.root / "d", ws.root / "l") as swapper:
        await asyncio.gather(
            loop("read", read),
            loop("write", write),
            loop("search", search),
            loop("list", listing),
            loop("mkdir", make_folder),
            loop("delete", delete),
        )
    assert swapper.swaps > 100, "the race was not run"
    assert all(done.values()), done
    assert leaks == []
    after = host_tree(outside)
    assert after == before, f"written or deleted outside: {set(after) ^ set(before)}"
