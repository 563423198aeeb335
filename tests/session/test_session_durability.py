"""Crash safety, the one-writer lock, path confinement and format versions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from importlib import import_module
from pathlib import Path

import orjson
import pytest

from agentcore.session import (
    MIGRATIONS,
    FsyncPolicy,
    InvalidSessionIdError,
    JsonlSessionStorage,
    MessageEntry,
    PathOutsideRootError,
    SessionLockedError,
    SessionPaths,
    SessionRegistry,
    SessionVersionError,
    StorageRateLimits,
    migrate_file,
)
from agentcore.session import entries as entries_module
from agentcore.session.lines import TORN_MARKER
from agentcore.session.storage import file as file_module
from agentcore.session.storage import jsonl as jsonl_module
from tests.support.session import new_session, reopen, texts, user

REPO = Path(__file__).resolve().parents[2]
# ``agentcore.session.migrate`` is also a function re-exported by the package; get the module itself.
migrate_module = import_module("agentcore.session.migrate")
FIXTURE = Path(__file__).parents[1] / "fixtures" / "session_v1.jsonl"


def run_python(code: str, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
        **kwargs,
    )


# ------------------------------------------------------------------------------------ torn tails


def test_torn_tail_is_ignored_and_the_next_append_starts_on_a_fresh_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with new_session(path) as storage:
        storage.append_entry(MessageEntry(id="a", message=user("kept")))
    good = path.read_bytes()
    with path.open("ab") as file:
        file.write(b'{"id":"b","parent_id":"a","type":"mess')
    with reopen(path) as reader:  # readers see every complete entry and nothing else
        assert [e.id for e in reader.get_entries()] == ["a"]
    with reopen(path, writer=True) as writer:
        assert any("torn" in w for w in writer.warnings)
        writer.append_entry(MessageEntry(id="c", message=user("after crash")))
    data = path.read_bytes()
    assert data.startswith(good)  # existing bytes never rewritten
    assert data[len(good) :].startswith(b'{"id":"b","parent_id":"a","type":"mess' + TORN_MARKER + b"\n")
    with reopen(path) as again:  # strict open succeeds: the marked line is a known torn write
        assert [e.id for e in again.get_entries()] == ["a", "c"]
        assert again.get_entry("c").parent_id == "a"  # type: ignore[union-attr]
        assert texts(again.build_context().messages) == ["kept", "after crash"]


def test_unterminated_but_complete_last_entry_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    new_session(path).close()
    line = orjson.dumps(
        {
            "type": "message",
            "id": "a",
            "parent_id": None,
            "timestamp": 1,
            "message": {"role": "user", "content": "lost only its newline", "timestamp": 1},
        }
    )
    with path.open("ab") as file:
        file.write(line)
    reader = reopen(path)
    with reopen(path, writer=True) as writer:
        assert writer.get_leaf_id() == "a"
        writer.append_entry(MessageEntry(id="b", message=user("next")))
    assert path.read_bytes().endswith(line + b"\n" + path.read_bytes().splitlines()[-1] + b"\n")
    # A reader that saw the unterminated entry picks up the rest with refresh().
    assert reader.refresh() == 1
    assert [e.id for e in reader.get_entries()] == ["a", "b"]
    reader.close()


def test_sigkill_mid_append_leaves_a_file_that_reopens_clean(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with new_session(path) as storage:
        storage.append_entry(MessageEntry(id="a", message=user("before the crash")))
    # The child appends for real, but its write stops halfway and the process is SIGKILLed.
    child = run_python(
        """
        import os, signal, sys
        from agentcore.session import JsonlSessionStorage, MessageEntry
        from agentcore.session.storage import jsonl as jsonl_module
        from agentcore.messages import UserMessage

        def half_then_die(fd, data):
            os.write(fd, data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)

        s = JsonlSessionStorage.open(sys.argv[1], writer=True)
        jsonl_module.write_all = half_then_die
        s.append_entry(MessageEntry(id="b", message=UserMessage(content="torn " * 50, timestamp=1)))
        """,
        str(path),
    )
    assert child.returncode == -signal.SIGKILL
    assert not path.read_bytes().endswith(b"\n")
    with reopen(path, writer=True) as storage:  # the lock died with the child
        assert [e.id for e in storage.get_entries()] == ["a"]
        storage.append_entry(MessageEntry(id="b", message=user("retried")))  # the activity's retry
    with reopen(path) as again:
        assert texts(again.build_context().messages) == ["before the crash", "retried"]


def test_failed_write_indexes_what_made_it_so_a_retry_does_not_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    storage = new_session(path)

    def first_line_then_fail(fd: int, data: bytes) -> None:
        os.write(fd, data[: data.index(b"\n") + 10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jsonl_module, "write_all", first_line_then_fail)
    with pytest.raises(OSError):
        storage.append_entries(
            [MessageEntry(id="a", message=user("one")), MessageEntry(id="b", message=user("two"))]
        )
    monkeypatch.undo()
    assert [e.id for e in storage.get_entries()] == ["a"]
    storage.append_entries(
        [MessageEntry(id="a", message=user("one")), MessageEntry(id="b", message=user("two"))]
    )
    storage.close()
    with reopen(path) as again:
        assert [e.id for e in again.get_entries()] == ["a", "b"]


# ----------------------------------------------------------------------------------------- lock


def test_a_second_process_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    storage = new_session(path)
    child = run_python(
        """
        import sys
        from agentcore.session import JsonlSessionStorage, SessionLockedError
        try:
            JsonlSessionStorage.open(sys.argv[1], writer=True)
        except SessionLockedError as exc:
            print(exc.code)
        """,
        str(path),
    )
    assert child.stdout.strip() == "SESSION_LOCKED", child.stderr
    # Readers never lock.
    reader = run_python(
        "import sys; from agentcore.session import JsonlSessionStorage as S; print(S.open(sys.argv[1]).get_metadata().id)",
        str(path),
    )
    assert reader.stdout.strip() == "s"
    storage.close()
    after = run_python(
        "import sys; from agentcore.session import JsonlSessionStorage as S; S.open(sys.argv[1], writer=True); print('ok')",
        str(path),
    )
    assert after.stdout.strip() == "ok", after.stderr


def test_parent_is_refused_while_a_child_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    new_session(path).close()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = "import sys; from agentcore.session import JsonlSessionStorage as S; s = S.open(sys.argv[1], writer=True); print('locked', flush=True); sys.stdin.readline()"
    with subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(SessionLockedError):
            reopen(path, writer=True)
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=30)
    reopen(path, writer=True).close()


def test_one_writer_per_path_in_a_process(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    registry = SessionRegistry()
    first = registry.writer(
        path, create=True, cwd="/", rate_limits=StorageRateLimits.unlimited(), fsync=FsyncPolicy("never")
    )
    assert registry.writer(tmp_path / "." / "s.jsonl") is first
    with pytest.raises(SessionLockedError):  # flock also separates two opens in one process
        reopen(path, writer=True)
    first.append_entry(MessageEntry(message=user("x")))
    registry.release(path)
    assert first.closed
    second = registry.writer(path)
    assert second is not first and len(second.get_entries()) == 1
    registry.close_all()
    assert second.closed


# ---------------------------------------------------------------------------------------- paths


def test_session_paths_confine_ids_and_paths(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    paths = SessionPaths(root)
    assert paths.path_for("conv-1.a_b") == root.resolve() / "conv-1.a_b.jsonl"
    for bad_id in ("", "../x", "a/b", ".hidden", "x" * 129, "a b", "/etc/passwd"):
        with pytest.raises(InvalidSessionIdError):
            paths.path_for(bad_id)
    for bad_path in (
        "../escape.jsonl",
        "sub/../../escape.jsonl",
        "/etc/passwd",
        str(tmp_path / "other.jsonl"),
    ):
        with pytest.raises(PathOutsideRootError):
            paths.confine(bad_path)
    (root / "link.jsonl").symlink_to(tmp_path / "outside.jsonl")
    with pytest.raises(PathOutsideRootError):
        paths.confine("link.jsonl")
    (tmp_path / "outside").mkdir()
    (root / "dirlink").symlink_to(tmp_path / "outside")
    with pytest.raises(PathOutsideRootError):
        paths.confine("dirlink/s.jsonl")
    assert paths.confine(str(root / "ok.jsonl")) == root.resolve() / "ok.jsonl"  # absolute inside is fine


def test_storage_honours_the_root(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    with pytest.raises(PathOutsideRootError):
        JsonlSessionStorage.create("../x.jsonl", root=root)
    with pytest.raises(PathOutsideRootError):
        JsonlSessionStorage.open("/etc/passwd", root=root)
    storage = JsonlSessionStorage.create("inside.jsonl", root=root, fsync=FsyncPolicy("never"))
    assert storage.path == root.resolve() / "inside.jsonl"
    storage.close()
    JsonlSessionStorage.open("inside.jsonl", root=SessionPaths(root)).close()


# ------------------------------------------------------------------------------------- versions


def test_checked_in_v1_file_loads(tmp_path: Path) -> None:
    with JsonlSessionStorage.open(FIXTURE) as storage:
        meta = storage.get_metadata()
        assert (meta.id, meta.version, meta.name) == ("fixture-v1", 1, "Lisbon weather")
        context = storage.build_context()
        storage.validate()  # every entry of the fixture is valid
    assert context.model is not None and context.model.base_url == "http://localhost:11434/v1"
    assert context.thinking_level == "low" and context.active_tools == ["get_weather"]
    assert context.system_prompt == "You are a helpful assistant."
    got = texts(context.messages)
    assert got[0].startswith("The conversation history before this point was compacted")
    assert got[1:] == ["It is 22C and sunny in Lisbon.", got[2], "Thanks!"]
    assert got[2].startswith("The following is a summary of a branch")


def test_newer_or_invalid_versions_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    for version in (2, 0, "1", None):
        path.write_bytes(
            orjson.dumps({"type": "session", "version": version, "id": "s", "cwd": "/", "timestamp": 1})
            + b"\n"
        )
        with pytest.raises(SessionVersionError):
            reopen(path)


def test_migration_chain_runs_for_older_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend the format moved to version 2 (each entry gains a field): v1 files still load, in memory only."""

    def v1_to_v2(
        header: dict[str, object], entries: list[dict[str, object]]
    ) -> tuple[dict[str, object], list[dict[str, object]]]:
        return header, [{**entry, "migrated": True} for entry in entries]

    monkeypatch.setattr(entries_module, "FORMAT_VERSION", 2)
    monkeypatch.setattr(file_module, "FORMAT_VERSION", 2)
    monkeypatch.setattr(jsonl_module, "FORMAT_VERSION", 2)
    monkeypatch.setattr(migrate_module, "FORMAT_VERSION", 2)
    monkeypatch.setitem(MIGRATIONS, 1, v1_to_v2)
    calls: list[int] = []
    real = file_module.migrate
    monkeypatch.setattr(file_module, "migrate", lambda h, e: (calls.append(len(e)), real(h, e, target=2))[1])
    before = FIXTURE.read_bytes()
    with JsonlSessionStorage.open(FIXTURE) as storage:
        assert calls == [15]
        assert storage.get_metadata().version == 1
        assert texts(storage.build_context().messages)[-1] == "Thanks!"
    assert FIXTURE.read_bytes() == before
    with pytest.raises(SessionVersionError, match="migrate_file"):
        JsonlSessionStorage.open(FIXTURE, writer=True)


def test_migrate_file_copies_into_the_current_format(tmp_path: Path) -> None:
    with migrate_file(FIXTURE, tmp_path / "copy.jsonl") as copy:
        assert copy.get_leaf_id() == "e15"
        assert copy.build_context() == JsonlSessionStorage.open(FIXTURE).build_context()
