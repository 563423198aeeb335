"""The installed package: one top-level name, ``agentcore``, with the Temporal edge inside it.

A Temporal project usually has its own ``workflows`` and ``activities`` packages and a ``worker``
module; installing agentcore must not shadow them.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_installs_only_the_agentcore_package(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path, ROOT],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("agentcore-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"agentcore"}
    for module in ("workflows/conversation.py", "activities/llm.py", "worker.py", "py.typed"):
        assert f"agentcore/{module}" in names, module
    # The MIT licence travels with the wheel (setuptools picks LICENSE up by its name).
    assert any(name.split("/")[0].endswith(".dist-info") and name.endswith("/LICENSE") for name in names)
    # The web chat's page and assets ship inside the package (nothing from a CDN, no build step).
    for asset in ("index.html", "app.js", "app.css", "favicon.svg"):
        assert f"agentcore/web/static/{asset}" in names, asset


def test_the_edge_imports_under_the_library_name() -> None:
    code = "import agentcore.workflows, agentcore.activities, agentcore.worker; import workflows"
    done = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True)
    assert "No module named 'workflows'" in done.stderr


def test_the_sdist_runs_its_own_tests(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "-o", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (sdist,) = tmp_path.glob("agentcore-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    unpacked = tmp_path / sdist.name.removesuffix(".tar.gz")
    metadata = (unpacked / "PKG-INFO").read_text()
    assert "License-Expression: MIT" in metadata
    assert "Classifier: Operating System :: POSIX" in metadata
    # The support modules, fixtures and recorded histories are in it, and its tests run from it:
    # the replay tests import the package, the conftest and the histories of the unpacked tree.
    for needed in ("tests/conftest.py", "tests/support/durable.py", "workflows/conversation.py", "worker.py"):
        assert (unpacked / needed).is_file(), needed
    probe = "import agentcore, tests.conftest; print(agentcore.__file__, tests.conftest.__file__)"
    where = subprocess.run(
        [sys.executable, "-c", probe], cwd=unpacked, capture_output=True, text=True, check=True
    ).stdout
    assert where.count(str(unpacked)) == 2, where
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/workflows/test_replay.py"],
        cwd=unpacked,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
