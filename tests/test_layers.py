"""The layer picture holds: no module of opencrab imports one above its layer.

"Layers" in docs/architecture.md, top to bottom:

    4  process.py  cli/  server/  dashboard/  gateway/
    3  tickets/  agentmode/  importers/
    2  core/  actions/
    1  llm/  events.py  messages.py
    0  store/  config/  errors.py

Modules the picture does not name sit where what they are puts them: `plugins.py` (the
hook specifications, imported by every layer), `prompts/`, `instance.py` and `offload.py`
beside config and errors; `auth.py` (the api_tokens store) beside store; `event_log.py`
(the AgentEvent log) beside events.py; `__main__` with the CLI.

Every import counts: at module level, inside functions, under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
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
    "process": TOP,  # the one assembly of background services, per role
    "tickets": MIDDLE,
    "agentmode": MIDDLE,
    "importers": MIDDLE,
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
    """Whether `opencrab.<name>` is a module or package (not a name such as __version__)."""
    return (PACKAGE / f"{name}.py").is_file() or (PACKAGE / name / "__init__.py").is_file()


def module_name(path: Path) -> str:
    """The dotted module name of a source file of the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The layer of an opencrab module (KeyError for one the picture does not place)."""
    parts = module.split(".")
    assert parts[0] == "opencrab", module
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def imported_modules(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """Every opencrab module the source of `module` imports, wherever the import is."""
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
            found.append(base)
            if base == "opencrab":  # `from opencrab import events` imports opencrab.events
                found += [f"opencrab.{alias.name}" for alias in node.names if is_module(alias.name)]
    return [name for name in found if name.split(".")[0] == "opencrab"]


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
        "opencrab.gateway",
        "opencrab.core",
        "opencrab",
        "opencrab.importers",
        "opencrab.server.app",
        "opencrab.cli.up",
    ]
    upward = {name for name in imported_modules(source, module) if layer_of(name) > CORE}
    assert upward == {
        "opencrab.server.app",
        "opencrab.cli.up",
        "opencrab.gateway",
        "opencrab.importers",
    }
