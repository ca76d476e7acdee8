"""read_file, write_file and search_code: the workspace jail, the seed's schemas, caps."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opencrab.actions.base import ActionContext, default_registry
from tests.actions.conftest import Call

SEED_SCHEMAS = {  # seed 002 "Initial Data": each tool's properties and their types
    "read_file": {"path": "string"},
    "write_file": {"path": "string", "content": "string"},
    "execute_command": {"command": "string"},
    "search_code": {"pattern": "string", "path": "string"},
    "http_request": {"url": "string", "method": "string"},
    "fetch_webpage": {"url": "string"},
}


def test_the_six_seed_tools_are_actions_with_the_seeds_properties() -> None:
    registry = default_registry()
    for name, properties in SEED_SCHEMAS.items():
        action = registry.get(name)
        assert action is not None, name
        schema = action.parameters
        assert schema["type"] == "object"
        for prop, kind in properties.items():
            assert schema["properties"][prop]["type"] == kind, (name, prop)


async def test_write_then_read_inside_the_workspace(call: Call, ctx: ActionContext) -> None:
    wrote = await call("write_file", path="notes/a.md", content="héllo\n")
    assert wrote.success, wrote.error
    assert (ctx.workspace.root / "notes" / "a.md").read_text(encoding="utf-8") == "héllo\n"
    read = await call("read_file", path="notes/a.md")
    assert read.data["content"] == "héllo\n"


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("../escape.txt", "'..'"),
        ("/etc/passwd", "absolute"),
        ("a/\x00b", "NUL"),
        ("C:/x", "drive"),
    ],
)
async def test_paths_that_leave_the_workspace_are_refused(
    call: Call, ctx: ActionContext, path: str, words: str
) -> None:
    for name, extra in (("read_file", {}), ("write_file", {"content": "x"})):
        result = await call(name, path=path, **extra)
        assert not result.success
        assert words in (result.error or "")
    assert not (ctx.workspace.root.parent / "escape.txt").exists()


async def test_a_symlink_out_of_the_workspace_is_refused(
    call: Call, ctx: ActionContext, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    ctx.workspace.root.mkdir(parents=True)
    os.symlink(secret, ctx.workspace.root / "link.txt")
    os.symlink(tmp_path, ctx.workspace.root / "outside")
    for path in ("link.txt", "outside/secret.txt"):
        result = await call("read_file", path=path)
        assert not result.success
        assert "symbolic link" in (result.error or "")
    wrote = await call("write_file", path="outside/new.txt", content="x")
    assert not wrote.success
    assert not (tmp_path / "new.txt").exists()
    found = await call("search_code", pattern="secret", literal=True)
    assert found.success
    assert found.data["matches"] == []  # links are never followed by a search either


async def test_write_file_keeps_to_the_quota(call: Call, ctx: ActionContext) -> None:
    ctx.workspace.max_size_bytes = 100
    result = await call("write_file", path="big.txt", content="x" * 101)
    assert not result.success
    assert "quota" in (result.error or "")
    assert not (ctx.workspace.root / "big.txt").exists()


async def test_arguments_are_checked_against_the_schema(call: Call) -> None:
    missing = await call("write_file", path="a.txt")
    assert not missing.success
    assert "'content' is a required property" in (missing.error or "")
    wrong = await call("search_code", pattern=3)
    assert "pattern: 3 is not of type 'string'" in (wrong.error or "")
    extra = await call("read_file", path="a", mode="rb")
    assert "Additional properties are not allowed ('mode'" in (extra.error or "")


# ------------------------------------------------------------------ search_code
def _tree(ctx: ActionContext) -> None:
    ws = ctx.workspace
    ws.write("src/app.py", "import os\n\ndef main():\n    return os.getcwd()\n")
    ws.write("src/util.py", "def helper(x):\n    return x  # Main helper\n")
    ws.write("docs/readme.md", "Run main() to start.\n")
    ws.write("bin/blob.bin", b"def main\x00\x01\x02")


async def test_search_code_finds_file_and_line(call: Call, ctx: ActionContext) -> None:
    _tree(ctx)
    result = await call("search_code", pattern=r"def \w+\(")
    assert result.success, result.error
    assert result.data["matches"] == [
        {"file": "src/app.py", "line": 3, "text": "def main():"},
        {"file": "src/util.py", "line": 1, "text": "def helper(x):"},
    ]
    assert result.data["truncated"] is False
    assert result.data["files_skipped"] == 1  # the binary file


async def test_search_code_literal_case_and_path(call: Call, ctx: ActionContext) -> None:
    _tree(ctx)
    literal = await call("search_code", pattern="main()", literal=True)
    assert [(m["file"], m["line"]) for m in literal.data["matches"]] == [
        ("docs/readme.md", 1),
        ("src/app.py", 3),
    ]
    folded = await call("search_code", pattern="main", ignore_case=True, path="src/util.py")
    assert [m["text"] for m in folded.data["matches"]] == ["    return x  # Main helper"]
    nowhere = await call("search_code", pattern="x", path="missing")
    assert "no file or folder 'missing'" in (nowhere.error or "")
    escape = await call("search_code", pattern="x", path="../..")
    assert not escape.success


async def test_search_code_caps_matches_and_bytes(call: Call, ctx: ActionContext) -> None:
    ctx.workspace.write("many.txt", "hit\n" * 500)
    ctx.settings.tools.search_max_matches = 7
    capped = await call("search_code", pattern="hit")
    assert len(capped.data["matches"]) == 7
    assert capped.data["truncated"] is True
    ctx.settings.tools.search_max_matches = 10_000
    ctx.workspace.write("wide.txt", ("y" * 300 + "\n") * 400)
    ctx.settings.tools.search_max_output_bytes = 2048
    wide = await call("search_code", pattern="y+", path="wide.txt")
    assert wide.data["truncated"] is True
    assert len(json.dumps(wide.data["matches"]).encode()) <= 2048


async def test_a_bad_regex_is_a_clear_error(call: Call, ctx: ActionContext) -> None:
    ctx.workspace.write("a.txt", "x")
    result = await call("search_code", pattern="(unclosed")
    assert not result.success
    assert "not a valid regular expression" in (result.error or "")
    assert "literal" in (result.error or "")


async def test_a_pathological_regex_is_stopped_with_an_error(
    call: Call, ctx: ActionContext
) -> None:
    ctx.workspace.write("a.txt", "a" * 64 + "!\n")
    ctx.settings.tools.search_timeout_secs = 1
    result = await call("search_code", pattern="^(a+)+$")
    assert not result.success
    assert "took longer than 1 s" in (result.error or "")
    # the server is still there: the next search answers
    fine = await call("search_code", pattern="a!", literal=True)
    assert fine.data["matches"][0]["line"] == 1
