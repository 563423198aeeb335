"""agentcore uses the Temporal SDK through its public API only.

A private module or name (``temporalio.x._y``, ``from temporalio.x import _y``) can change in any
minor release, and so can whatever an assignment to an SDK attribute replaces; either would break a
worker silently on an upgrade within ``temporalio>=1.35,<2``. This scans every Python file of the
repository, tests and benchmarks included.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _is_private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def sdk_misuse(source: str) -> list[str]:
    """Each private use of ``temporalio`` or assignment to one of its attributes in ``source``."""
    tree = ast.parse(source)
    bound: set[str] = set()  # names that refer to temporalio modules or objects
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "temporalio" or alias.name.startswith("temporalio."):
                    if _is_private(alias.name):
                        found.append(f"line {node.lineno}: import {alias.name}")
                    bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "temporalio":
            for alias in node.names:
                if _is_private(node.module) or _is_private(alias.name):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                bound.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Attribute) and _root(node) in bound and _is_private(node.attr):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Call) and node.args:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            first = node.args[0]
            patched_by_name = isinstance(first, ast.Constant) and str(first.value).startswith("temporalio")
            if name in {"setattr", "delattr"} and (_root(first) in bound or patched_by_name):
                found.append(f"line {node.lineno}: {name}({ast.unparse(first)}, ...)")
        for target in targets:
            # ``x.attr = ...`` and ``x.table[key] = ...`` replace something inside the SDK; names in a
            # subscript's index (``counts[Enum.VALUE] += 1``) are only read.
            if isinstance(target, ast.Attribute | ast.Subscript) and _root(target) in bound:
                found.append(f"line {node.lineno}: assigns {ast.unparse(target)}")
    return found


def test_the_check_sees_each_kind_of_misuse() -> None:
    assert sdk_misuse("import temporalio.converter._extstore")
    assert sdk_misuse("from temporalio.contrib.workflow_streams._stream import x")
    assert sdk_misuse("from temporalio.contrib.workflow_streams import _PUBLISH_SIGNAL")
    assert sdk_misuse("import temporalio.converter\ntemporalio.converter._extstore.X()")
    assert sdk_misuse("import temporalio.bridge.worker as b\nb.encode_completion = f")
    assert sdk_misuse("import temporalio.bridge.worker as b\nsetattr(b, 'encode_completion', f)")
    assert sdk_misuse("from temporalio import workflow\nworkflow.now = f")
    assert sdk_misuse("monkeypatch.setattr('temporalio.workflow.now', f)")
    assert sdk_misuse("from temporalio.client import Client\nClient.connect = f")
    assert sdk_misuse("from temporalio import activity\nactivity.registry['x'] = f")
    assert not sdk_misuse("from temporalio import workflow\nx = workflow.now()\nobj.attr = workflow.uuid4()")
    assert not sdk_misuse("from temporalio.api.enums.v1 import T\ncounts[T.A if k == T.B else T.C] += 1")
    assert not sdk_misuse("from temporalio.client import Client\nclient = Client(**config)\nself.x = client")


def _python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


@pytest.mark.parametrize("path", _python_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_private_sdk_use(path: Path) -> None:
    assert sdk_misuse(path.read_text()) == []
