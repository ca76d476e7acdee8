"""The layer picture holds: no module of opencrab imports one above its layer.

"Layers" in docs/architecture.md, top to bottom:

    4  process.py  cli/  server/  dashboard/  gateway/
    3  reports/  tickets/  schedules/  agentmode/  importers/  mcp/  telemetry/  inbox/  a2a/
    2  core/  actions/
    1  llm/  events.py  messages.py
    0  store/  config/  errors.py

Modules the picture does not name sit where what they are puts them: `plugins.py` (the
hook specifications, imported by every layer), `prompts/`, `instance.py` and `offload.py`
beside config and errors; `auth.py` (the api_tokens store) beside store; `event_log.py`
(the AgentEvent log) beside events.py; `__main__` with the CLI.

Every import counts: at module level, inside functions, under `if TYPE_CHECKING:`.

And no two modules import each other, however far round (`test_no_import_cycle`): a
function-local import or one under TYPE_CHECKING hides a cycle from Python, not from
the reader, so those count here too. What an import names is the module that holds
what it takes: `import opencrab.a.b` and `from opencrab.a import b` (b a module) name
opencrab.a.b; `from opencrab.a import Name` names opencrab.a, the package's `__init__`.
The parent packages Python runs first are not counted: every submodule's import runs
them, so they order nothing, and a package `__init__` that re-exports its submodules
would otherwise be in a cycle with each of them. Only a module that takes a name from
its own package's `__init__` while that `__init__` imports it is a cycle.

Adapters are thin (architecture.md, Adapters): a dashboard page never imports a route
module, and a route module neither opens a transaction nor imports a repository; both call
the middle floor (reports/, tickets/, agentmode/, core/).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import opencrab

PACKAGE = Path(opencrab.__file__).parent

TOP, MIDDLE, CORE, LLM, BOTTOM = 4, 3, 2, 1, 0
LAYERS: dict[str, int] = {
    "cli": TOP,
    "server": TOP,
    "dashboard": TOP,
    "gateway": TOP,
    "__main__": TOP,
    "ext": TOP,  # the plugin authors' import path: re-exports from every layer
    "reports": MIDDLE,
    "process": TOP,  # the one assembly of background services, per role
    "tickets": MIDDLE,
    "schedules": MIDDLE,  # an agent's cron, interval and one-shot jobs (issue 37)
    "agentmode": MIDDLE,
    "importers": MIDDLE,
    "mcp": MIDDLE,  # protocols: MCP servers as tool sources, OpenCrab as one
    "telemetry": MIDDLE,  # protocols: OpenTelemetry export of turns, calls and work
    "inbox": MIDDLE,  # notifications of what waits for a person
    "a2a": MIDDLE,  # protocols: A2A 1.0, OpenCrab's agents served to agents, remote agents as tools
    "core": CORE,
    "actions": CORE,
    "llm": LLM,
    "events": LLM,
    "messages": LLM,
    "event_log": LLM,
    "store": BOTTOM,
    "config": BOTTOM,
    "errors": BOTTOM,
    "plugins": BOTTOM,
    "prompts": BOTTOM,
    "instance": BOTTOM,
    "offload": BOTTOM,
    "auth": BOTTOM,
    "__init__": BOTTOM,  # the package itself: its version
}

ALLOWED: dict[tuple[str, str], str] = {}
"""Upward imports still to remove, (importer, imported) -> why it is still there.

Empty: keep it so. An entry here is a debt of issue 19, named with its reason.
"""


def is_module(name: str) -> bool:
    """Whether the dotted `name` is a module or package of opencrab (not a name such as
    opencrab.__version__)."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_name(f"{path.name}.py").is_file() or (path / "__init__.py").is_file()


def module_name(path: Path) -> str:
    """The dotted module name of a source file of the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The layer of an opencrab module (KeyError for one the picture does not place)."""
    parts = module.split(".")
    assert parts[0] == "opencrab", module
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def imported_modules(
    source: str,
    module: str,
    *,
    is_package: bool = False,
    known: Callable[[str], bool] = is_module,
) -> list[str]:
    """Every opencrab module the source of `module` imports, wherever the import is:
    `from a import b` imports a.b when `known("a.b")` (b is a module), else a."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
            modules = list(dict.fromkeys(name for name in names if known(name)))
            found += modules + ([base] if len(modules) < len(names) else [])
    return [name for name in found if name.split(".")[0] == "opencrab"]


def package_sources() -> dict[str, tuple[str, bool]]:
    """Module name -> (source, whether it is a package's `__init__`), for all of opencrab."""
    return {
        module_name(path): (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def import_graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the modules of `sources` it imports (see the module docstring)."""
    return {
        module: {
            name
            for name in imported_modules(
                source, module, is_package=package, known=sources.__contains__
            )
            if name in sources and name != module
        }
        for module, (source, package) in sources.items()
    }


def import_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The modules that import each other, however far round: each strongly connected
    component of more than one module (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for name in sorted(graph.get(module, ())):
            if name not in index:
                visit(name)
                low[module] = min(low[module], low[name])
            elif name in stack:
                low[module] = min(low[module], index[name])
        if low[module] == index[module]:  # the root of a component: pop it
            component = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def upward_imports() -> list[tuple[str, str]]:
    """(importer, imported) for every import that points up the layer picture."""
    upward: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        source = path.read_text(encoding="utf-8")
        for imported in imported_modules(source, importer, is_package=path.name == "__init__.py"):
            if layer_of(imported) > layer_of(importer):
                upward.append((importer, imported))
    return sorted(set(upward))


def test_every_module_has_a_layer() -> None:
    unplaced = {
        module_name(path)
        for path in PACKAGE.rglob("*.py")
        if module_name(path).split(".")[1:2] and module_name(path).split(".")[1] not in LAYERS
    }
    assert not unplaced, f"modules outside the layer picture: {sorted(unplaced)}"


def test_no_upward_import() -> None:
    upward = [
        f"{importer} imports {imported}"
        for importer, imported in upward_imports()
        if (importer, imported) not in ALLOWED
    ]
    assert not upward, "imports against the layer picture:\n" + "\n".join(upward)


def test_allow_list_is_not_stale() -> None:
    found = set(upward_imports())
    stale = [pair for pair in ALLOWED if pair not in found]
    assert not stale, f"allowed upward imports that no longer exist: {stale}"


def test_no_import_cycle() -> None:
    graph = import_graph(package_sources())
    found = [
        "\n".join(f"  {m} imports {', '.join(sorted(graph[m] & set(cycle)))}" for m in cycle)
        for cycle in import_cycles(graph)
    ]
    assert not found, (
        "import cycles (move what both need into a module of its own, or pass it in):\n"
        + "\n\n".join(found)
    )


def test_the_cycle_finder_sees_a_hidden_cycle() -> None:
    """A cycle closed by an import inside a function is found; what only leads into a
    cycle, and a package re-exporting its own modules, are not in one."""
    sources = {
        "opencrab.core": ("from opencrab.core.turns import Turn\n", True),
        "opencrab.core.turns": ("from opencrab.core import engine\nclass Turn: ...\n", False),
        "opencrab.core.engine": ("from .runtime import Runtime\n", False),
        "opencrab.core.runtime": (
            "def late():\n    from opencrab.core.engine import step\n",
            False,
        ),
        "opencrab.cli": ("import opencrab.core.runtime\nfrom opencrab.core import Turn\n", True),
    }
    graph = import_graph(sources)
    assert graph["opencrab.core"] == {"opencrab.core.turns"}
    assert graph["opencrab.core.turns"] == {"opencrab.core.engine"}  # a module, not __init__
    assert graph["opencrab.cli"] == {"opencrab.core.runtime", "opencrab.core"}
    assert import_cycles(graph) == [["opencrab.core.engine", "opencrab.core.runtime"]]

    # a module taking a name from its package's __init__, which imports it: a cycle
    sources["opencrab.core.engine"] = ("from opencrab.core import Turn\n", False)
    assert import_cycles(import_graph(sources)) == [
        ["opencrab.core", "opencrab.core.engine", "opencrab.core.turns"]
    ]


def test_the_walk_sees_every_kind_of_import() -> None:
    """Function-level, TYPE_CHECKING, relative and `from opencrab import x` imports count."""
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from opencrab.errors import ValidationError\n"
        "if TYPE_CHECKING:\n"
        "    from opencrab.server.app import create_app\n"
        "def late() -> None:\n"
        "    import opencrab.cli.up\n"
        "from ..gateway import base\n"
        "from . import memory\n"
        "from opencrab import importers\n"
    )
    module = "opencrab.core.probe"
    assert imported_modules(source, module) == [
        "opencrab.errors",
        "opencrab.gateway.base",
        "opencrab.core.memory",
        "opencrab.importers",
        "opencrab.server.app",
        "opencrab.cli.up",
    ]
    upward = {name for name in imported_modules(source, module) if layer_of(name) > CORE}
    assert upward == {
        "opencrab.server.app",
        "opencrab.cli.up",
        "opencrab.gateway.base",
        "opencrab.importers",
    }


ROUTES = PACKAGE / "server" / "api"
PAGES = PACKAGE / "dashboard"

PAGES_IMPORTING_ROUTES: dict[str, str] = {}
"""Dashboard modules that still import a route module (opencrab.server.api), -> why.

Must stay empty: a page reads the middle floor (opencrab.reports and the services), as
the route that answers the same figures does.
"""

ROUTES_OPENING_TRANSACTIONS: dict[str, str] = {}
"""Route modules that still open a transaction (`with db.read()` / `db.write()`), -> why."""

ROUTES_IMPORTING_REPOSITORIES: dict[str, str] = {}
"""Route modules that still import opencrab.store.repositories, -> why."""


def _modules(folder: Path) -> list[tuple[str, Path]]:
    return [(module_name(path), path) for path in sorted(folder.rglob("*.py"))]


def _imports(path: Path) -> list[str]:
    return imported_modules(
        path.read_text(encoding="utf-8"), module_name(path), is_package=path.name == "__init__.py"
    )


def opens_transaction(source: str) -> bool:
    """Whether the source enters `X.read()` or `X.write(...)`: a database transaction."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                call = item.context_expr
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr in ("read", "write")
                ):
                    return True
    return False


def pages_importing_routes() -> set[str]:
    return {
        name
        for name, path in _modules(PAGES)
        if any(
            i == "opencrab.server.api" or i.startswith("opencrab.server.api.")
            for i in _imports(path)
        )
    }


def routes_opening_transactions() -> set[str]:
    return {name for name, path in _modules(ROUTES) if opens_transaction(path.read_text("utf-8"))}


def routes_importing_repositories() -> set[str]:
    return {
        name
        for name, path in _modules(ROUTES)
        if any(i.startswith("opencrab.store.repositories") for i in _imports(path))
    }


def test_no_page_imports_a_route_module() -> None:
    found = pages_importing_routes()
    assert found - set(PAGES_IMPORTING_ROUTES) == set(), "pages importing route modules"
    assert set(PAGES_IMPORTING_ROUTES) - found == set(), "stale PAGES_IMPORTING_ROUTES"


def test_no_route_opens_a_transaction() -> None:
    found = routes_opening_transactions()
    assert found - set(ROUTES_OPENING_TRANSACTIONS) == set(), "routes opening transactions"
    assert set(ROUTES_OPENING_TRANSACTIONS) - found == set(), "stale ROUTES_OPENING_TRANSACTIONS"


def test_no_route_imports_a_repository() -> None:
    found = routes_importing_repositories()
    assert found - set(ROUTES_IMPORTING_REPOSITORIES) == set(), "routes importing repositories"
    assert set(ROUTES_IMPORTING_REPOSITORIES) - found == set(), (
        "stale ROUTES_IMPORTING_REPOSITORIES"
    )


def test_the_adapter_rules_see_what_they_forbid() -> None:
    """A `with db.read()`, an awaited `async with x.write()` and a page's import of a
    route module are each found; a plain file `.read()` is no transaction."""
    assert opens_transaction("def f(db):\n    with db.read() as conn:\n        pass\n")
    assert opens_transaction(
        "async def f(db):\n    async with db.write(snapshot=True) as conn:\n        pass\n"
    )
    assert not opens_transaction("def f(path):\n    return path.open().read()\n")
    page = "opencrab.dashboard.pages.x"
    assert imported_modules("from opencrab.server.api import budgets\n", page) == [
        "opencrab.server.api.budgets"  # a module taken from its package is that module
    ]
