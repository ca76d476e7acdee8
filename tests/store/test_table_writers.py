"""Every table has one writer (docs/architecture.md, "Storage seam"): the module the
architecture names for it, and no other.

The writers are found by reading the source, not by running it: every module of the
package is parsed, the names it binds to the table objects of store/tables.py (and the
modules it re-exports) are
followed (imported under any name, `from opencrab.store import tables` then
`tables.<name>`, or a local `table = <name>`), and a module writes a table when it calls
the table's `insert()`, `update()` or `delete()`, hands the table to a statement builder
(`sa.insert(t)`, a dialect's `insert(t)`) or to one of the store's writing helpers
(WRITING_HELPERS), or holds SQL text that inserts into, updates or deletes from it.
Alembic's revisions (store/migrations/) change the schema and backfill what a new column
or table needs before the application runs; they are not the application's writers and
are left out. There is no allow-list: a second writer fails this test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import opencrab

PACKAGE = Path(opencrab.__file__).parent
ARCHITECTURE = PACKAGE.parent.parent / "docs" / "architecture.md"

WRITING_HELPERS = {
    "bulk_insert": "store/bulk.py",
    "upsert": "store/dialects/__init__.py",
    "accumulate": "store/dialects/__init__.py",
    "save_secret_settings": "store/secret_settings.py",
}
"""The store's helpers that write the table they are given, and where each is defined."""
STATEMENTS = {"insert", "update", "delete"}
"""`<table>.insert()`, `sa.insert(<table>)`, `postgresql.insert(<table>)`, …"""
RAW_SQL = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+\"?(\w+)", re.IGNORECASE)


TABLE_FILES = ("tables.py", "tables_ops.py", "tables_imports.py")
"""Where the table objects are defined (store/tables.py re-exports the other two's)."""
TABLE_MODULES = {f"opencrab.store.{name.removesuffix('.py')}" for name in TABLE_FILES}


def table_names() -> set[str]:
    """The names of the table objects the table modules define (`x = sa.Table(...)`)."""
    names: set[str] = set()
    for file in TABLE_FILES:
        tree = ast.parse((PACKAGE / "store" / file).read_text(encoding="utf-8"))
        names |= {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) in ("sa.Table", "Table")
            for target in node.targets
            if isinstance(target, ast.Name)
        }
    return names


TABLES = table_names()


def _writes(tree: ast.Module) -> set[str]:
    """The tables a parsed module writes (see the module docstring)."""
    # local name -> the tables it may stand for (a local alias, e.g. `table`, may be
    # given a different table in each function: it counts as each of them)
    named: dict[str, set[str]] = {}
    modules: set[str] = set()  # local names of opencrab.store.tables itself
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in TABLE_MODULES:
            for alias in node.names:
                if alias.name in TABLES:
                    named.setdefault(alias.asname or alias.name, set()).add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module == "opencrab.store":
            for alias in node.names:
                if f"opencrab.store.{alias.name}" in TABLE_MODULES:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name in TABLE_MODULES)

    def tables_of(node: ast.expr) -> set[str]:
        if isinstance(node, ast.Name):
            return named.get(node.id, set())
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) in modules:
            return {node.attr} & TABLES
        return set()

    for node in ast.walk(tree):  # `table = llm_settings_audit`, then `table.insert()`
        if isinstance(node, ast.Assign) and (found := tables_of(node.value)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    named.setdefault(target.id, set()).update(found)
    written: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in STATEMENTS:
                written |= tables_of(func.value)
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in STATEMENTS or name in WRITING_HELPERS:
                for given in [*node.args, *(k.value for k in node.keywords)]:
                    written |= tables_of(given)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            written.update(t for t in RAW_SQL.findall(node.value) if t in TABLES)
    return written


def writers_in_the_code() -> dict[str, set[str]]:
    """Table -> the modules (paths under the package) that write it."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module.startswith("store/migrations/"):
            continue
        for table in _writes(ast.parse(path.read_text(encoding="utf-8"))):
            found.setdefault(table, set()).add(module)
    return found


def writers_in_the_architecture() -> dict[str, list[str]]:
    """Table -> the writer modules docs/architecture.md names for it (its "Storage seam"
    list: one `| `store/<module>` | table, table, … |` row per writer)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    seam = text[text.index("## Storage seam") :]
    seam = seam[: seam.index("\n## ")]
    named: dict[str, list[str]] = {}
    for module, tables in re.findall(r"^\| `(store/[\w/]+\.py)` \| ([\w, ]+) \|$", seam, re.M):
        for table in tables.split(","):
            named.setdefault(table.strip(), []).append(module)
    return named


def test_the_architecture_names_one_writer_for_every_table() -> None:
    named = writers_in_the_architecture()
    assert set(named) == TABLES, (
        f"tables without a writer in docs/architecture.md: {sorted(TABLES - set(named))}; "
        f"named there but not tables: {sorted(set(named) - TABLES)}"
    )
    assert {t: m for t, m in named.items() if len(m) != 1} == {}


def test_each_table_is_written_only_by_the_module_the_architecture_names() -> None:
    named = {table: {modules[0]} for table, modules in writers_in_the_architecture().items()}
    found = writers_in_the_code()
    wrong = {
        table: sorted(found.get(table, set()))
        for table in sorted(TABLES)
        if found.get(table, set()) != named.get(table)
    }
    assert wrong == {}, (
        f"writers found in the code that docs/architecture.md does not name: {wrong}"
    )


def test_the_writing_helpers_are_where_this_test_looks_for_them() -> None:
    """The helpers this test counts as writing exist (a renamed one would hide writers)."""
    for helper, module in WRITING_HELPERS.items():
        tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert helper in defined, f"{helper} is no longer defined in {module}"


def test_a_second_writer_is_found_however_it_writes() -> None:
    """The reading finds each way a module can write a table (what the other tests rely on)."""
    source = """
import sqlalchemy as sa
from opencrab.store import tables as t
from opencrab.store.bulk import bulk_insert
from opencrab.store.dialects import upsert
from opencrab.store.secret_settings import save_secret_settings
from opencrab.store.tables import agents as people
from opencrab.store.tables import events, leases, sessions, skills, soul, steps, tools

def write(conn, rows):
    conn.execute(people.update().values(name="x"))
    conn.execute(sa.insert(tools).values(name="x"))
    conn.execute(t.tickets.delete())
    bulk_insert(conn, events, ("id",), rows)
    conn.execute(upsert(conn.dialect, skills, ("name",), name="x"))
    save_secret_settings(conn, t.gateway_settings, "x", {}, None, {}, "local")
    table = steps
    conn.execute(table.insert())

def elsewhere(conn):
    table = soul
    conn.execute(table.update())
    conn.exec_driver_sql('UPDATE "memory_curated" SET content = 1')

def read(conn):
    return conn.execute(sa.select(sessions).join(leases)).all()
"""
    assert _writes(ast.parse(source)) == {
        "agents",
        "tools",
        "tickets",
        "events",
        "skills",
        "gateway_settings",
        "steps",
        "soul",
        "memory_curated",
    }
