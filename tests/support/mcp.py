"""Real MCP servers for the tests (``tests/support/mcp_servers.py``): one the worker runs over stdio, one over
streamable HTTP on a loopback port the OS chose."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from agentcore.mcp import MCPServerHTTP, MCPServerSSE, MCPServerStdio

ROOT = Path(__file__).resolve().parents[2]


def stdio_server(name: str, log: Path, **fields: object) -> MCPServerStdio:
    return MCPServerStdio(
        name,
        sys.executable,
        ["-m", "tests.support.mcp_servers", "stdio", "--name", name, "--log", str(log)],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
        **fields,  # type: ignore[arg-type]
    )


@asynccontextmanager
async def http_server(name: str, log: Path, port: int = 0) -> AsyncIterator[MCPServerHTTP]:
    async with _web_server("http", name, log, port) as port:
        yield MCPServerHTTP(name, f"http://127.0.0.1:{port}/mcp")


@asynccontextmanager
async def sse_server(name: str, log: Path) -> AsyncIterator[MCPServerSSE]:
    async with _web_server("sse", name, log) as port:
        yield MCPServerSSE(name, f"http://127.0.0.1:{port}/sse")


@asynccontextmanager
async def _web_server(transport: str, name: str, log: Path, port: int = 0) -> AsyncIterator[int]:
    argv = [sys.executable, "-m", "tests.support.mcp_servers", transport, "--name", name, "--log", str(log)]
    argv += ["--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, env=env)
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 30)
        if not line.startswith(b"PORT "):
            raise RuntimeError(f"the {transport} MCP server did not start: {line!r}")
        yield int(line.split()[1])
    finally:
        process.terminate()
        try:
            process.wait(1)
        except subprocess.TimeoutExpired:  # uvicorn waits for open streams to close
            process.kill()
            process.wait(5)


def log_lines(log: Path, event: str) -> list[list[str]]:
    if not log.exists():
        return []
    return [line.split() for line in log.read_text().splitlines() if line.startswith(event + " ")]
