"""``workflows/`` reads top-down: no import circle among the ``agentcore.workflows`` modules.

Imports are read from the source with ``ast``, all of them: module level, inside functions, and
under ``if TYPE_CHECKING`` (a type-only import is still a loop a reader must hold in mind).
"""

from __future__ import annotations

import ast
from pathlib import Path

import agentcore.workflows

PACKAGE = "agentcore.workflows"
ROOT = Path(agentcore.workflows.__file__).parent


def _module_name(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The ``agentcore.workflows`` modules ``path`` imports, relative or absolute."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = PACKAGE if path.stem == "__init__" or node.level == 1 else PACKAGE.rsplit(".", 1)[0]
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            # ``from . import policies`` imports the submodule, not the package's ``__init__``.
            submodules = {f"{target}.{alias.name}" for alias in node.names} & modules
            found |= submodules or {target}
    return found & modules


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    paths = sorted(root.glob("*.py"))
    modules = {_module_name(path) for path in paths}
    return {_module_name(path): _imports(path, modules) - {_module_name(path)} for path in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (as the modules along it), or None."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> list[str] | None:
        if module in visiting:
            return [*visiting[visiting.index(module) :], module]
        if module in done:
            return None
        visiting.append(module)
        for imported in sorted(graph.get(module, ())):
            cycle = visit(imported)
            if cycle:
                return cycle
        visiting.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


def test_workflows_import_each_other_without_a_circle() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.conversation" in graph and graph[f"{PACKAGE}.conversation"], graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_a_type_checking_import_back_is_a_circle(tmp_path: Path) -> None:
    """The checker sees what the rule forbids: a loop closed by an import under TYPE_CHECKING, or
    inside a function."""
    (tmp_path / "__init__.py").write_text("from .conversation import Workflow\n")
    (tmp_path / "state.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .runtime import Runtime\n"
    )
    (tmp_path / "runtime.py").write_text("from . import policies\nfrom .state import State\n")
    (tmp_path / "policies.py").write_text("")
    (tmp_path / "conversation.py").write_text(
        "from .runtime import Runtime\ndef later():\n    from agentcore.workflows import state\n"
    )
    graph = import_graph(tmp_path)
    assert find_cycle(graph) == [f"{PACKAGE}.runtime", f"{PACKAGE}.state", f"{PACKAGE}.runtime"]
    (tmp_path / "state.py").write_text("")
    assert find_cycle(import_graph(tmp_path)) is None


def test_no_workflow_starts_a_local_activity() -> None:
    """A local activity's result can reach the workflow a task later than a replay hands it back
    (a query came while it ran), and an Update or signal taken in that task then replays in another
    order (docs/versioning.md, "No local activities, by design"). So ``workflows/`` calls none."""
    local_calls = {
        "start_local_activity",
        "execute_local_activity",
        "start_local_activity_method",
        "execute_local_activity_method",
        "start_local_activity_class",
        "execute_local_activity_class",
    }
    found = [
        f"{path.name}:{node.lineno}"
        for path in sorted(ROOT.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute) and node.attr in local_calls
    ]
    assert found == []
