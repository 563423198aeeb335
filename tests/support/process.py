"""``agentcore`` commands as real processes: started, read line by line, signalled by pid."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.support.cli import AGENTCORE

ROOT = Path(__file__).resolve().parents[2]


class AgentcoreProcess:
    """One ``agentcore`` command; its stderr lines (and, apart, its stdout lines) are collected as
    they come."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.argv = list(argv)
        self.env = {**os.environ, **(env or {})}
        self.lines: list[str] = []
        self.stdout_lines: list[str] = []
        self.process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> AgentcoreProcess:
        self.process = await asyncio.create_subprocess_exec(
            AGENTCORE, *self.argv, cwd=ROOT, env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        assert self.process.stdout is not None

        async def read(stream: asyncio.StreamReader, lines: list[str]) -> None:
            while line := await stream.readline():
                lines.append(line.decode().rstrip("\n"))

        await asyncio.gather(
            read(self.process.stderr, self.lines), read(self.process.stdout, self.stdout_lines)
        )

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines if line.startswith("{")]

    async def wait_for_line(self, predicate: Callable[[str], bool], timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                if predicate(line):
                    return line
            assert self.process is not None
            if self.process.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(f"no such line from {self.argv}; got:\n" + "\n".join(self.lines))
            await asyncio.sleep(0.05)

    def signal(self, signum: int = signal.SIGTERM) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    async def wait(self, timeout: float = 60) -> int:
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), timeout)
        if self._reader is not None:
            await self._reader
        return code

    async def stop(self) -> None:
        """Make sure it is gone (a test that failed midway)."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await self._reader


async def wait_until(predicate: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(0.05)
