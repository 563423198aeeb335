"""Process plumbing for the durable benches: CPU and memory from /proc, child processes, ready lines.

psutil is not required: CPU seconds come from ``/proc/<pid>/stat`` (utime + stime, clock ticks) and
resident memory from ``/proc/<pid>/status``, so the figures split cleanly between the worker process
and the Temporal server process.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (its threads included)."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def children(parent: int, name: str) -> list[int]:
    """Direct children of ``parent`` whose command name starts with ``name``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        ppid = int(raw[raw.rindex(")") + 2 :].split()[1])
        if ppid == parent and comm.startswith(name):
            found.append(int(entry.name))
    return found


@dataclass
class Child:
    """A Python helper process started with ``-m``; it prints ``READY <info>`` once serving."""

    process: asyncio.subprocess.Process
    info: str

    @property
    def pid(self) -> int:
        return self.process.pid

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


async def spawn(module: str, *args: str, timeout: float = 60) -> Child:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, *args, cwd=str(ROOT), stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    while True:
        line = await asyncio.wait_for(process.stdout.readline(), timeout)
        if not line:
            raise RuntimeError(f"{module} exited before it was ready (code {await process.wait()})")
        text = line.decode().strip()
        if text.startswith("READY"):
            return Child(process, text[len("READY") :].strip())
