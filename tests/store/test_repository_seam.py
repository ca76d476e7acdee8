"""The storage seam (issue 19): modules that moved their SQL into the sessions, memory and
heartbeat repositories import neither the table definitions nor SQLAlchemy's statement
builders again."""

from __future__ import annotations

import ast
from pathlib import Path

import opencrab

PACKAGE = Path(opencrab.__file__).parent

THROUGH_REPOSITORIES = (
    "core/sessions.py",
    "core/memory.py",
    "core/discussion.py",
    "core/heartbeat.py",
    "core/runtime.py",
    "server/api/openai_compat.py",
    "actions/speech.py",
)
"""Modules whose data access goes through store/repositories only."""

TABLE_MODULES = (
    "opencrab.store.tables",
    "opencrab.store.tables_ops",
    "opencrab.store.tables_imports",
    "opencrab.store.table_base",
)
"""The table definitions (store/tables.py re-exports the other modules' tables)."""
FORBIDDEN = (*TABLE_MODULES, "opencrab.store.prepared", "opencrab.store.bulk")
SQL = {"sqlalchemy", "sqlalchemy.sql", "sqlalchemy.sql.expression"}
"""Building statements needs these; passing a caller's transaction on (`Connection`) does
not."""


def _imports(path: Path) -> set[str]:
    """Every module `path` imports (at any level), `from a import b` counted as a and a.b."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_modules_use_repositories_not_tables_or_sql() -> None:
    offenders = {
        module: sorted(
            name for name in _imports(PACKAGE / module) if name.startswith(FORBIDDEN) or name in SQL
        )
        for module in THROUGH_REPOSITORIES
    }
    offenders = {module: names for module, names in offenders.items() if names}
    assert not offenders, f"table definitions or SQL outside the repositories: {offenders}"


def test_the_table_definitions_are_imported_by_the_repositories() -> None:
    """The repositories this seam added are where the tables are used."""
    for name in ("sessions.py", "memory.py", "heartbeats.py"):
        assert "opencrab.store.tables" in _imports(PACKAGE / "store" / "repositories" / name)


TABLE_OWNERS = ("store/repositories/", "store/dialects/", "store/migrations/")
"""Where the table definitions may be imported (docs/architecture.md, "Storage seam"), besides
the table modules themselves and store/leases.py, the lease table's repository."""
TABLE_FILES = tuple(m.removeprefix("opencrab.").replace(".", "/") + ".py" for m in TABLE_MODULES)


def test_no_module_outside_the_repositories_imports_the_table_definitions() -> None:
    """Outside store/ nothing imports the tables or the prepared-statement helper; inside
    it, only the repositories, dialects, migrations and the lease repository do."""
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        imported = _imports(path)
        tables = set(TABLE_MODULES) & imported
        if name.startswith("store/"):
            owner = name.startswith(TABLE_OWNERS) or name in ("store/leases.py", *TABLE_FILES)
            if tables and not owner:
                outside.append(name)
        elif tables or "opencrab.store.prepared" in imported:
            outside.append(name)
    assert not outside, f"table definitions imported outside the repositories: {outside}"
    # the rule is not vacuous: the repositories do import them
    assert "opencrab.store.tables" in _imports(PACKAGE / "store/repositories/sessions.py")


def test_the_seam_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def late() -> None:\n    from opencrab.store import tables\n", encoding="utf-8"
    )
    assert "opencrab.store.tables" in _imports(probe)
    probe.write_text("import opencrab.store.prepared as p\n", encoding="utf-8")
    assert "opencrab.store.prepared" in _imports(probe)
