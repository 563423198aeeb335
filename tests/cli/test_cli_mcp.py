"""``agentcore worker --mcp ... --mcp-config FILE`` and ``agentcore dev --mcp``, in-process through
``agentcore.cli.run``, against real MCP servers and a real dev server."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from agentcore.cli import run
from agentcore.client import AgentClient
from agentcore.state import AgentOptions
from agentcore.testing.scripted import scripted_model
from tests.support.durable import FAST_LIMITS
from tests.support.mcp import ROOT, http_server


async def test_worker_serves_the_tools_of_mcp_servers_from_flags_and_a_config_file(
    temporal_client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "mcp.log"
    server_args = ["-m", "tests.support.mcp_servers", "stdio", "--name", "alpha", "--log", str(log)]
    config = {
        "mcpServers": {
            "alpha": {
                "command": sys.executable,
                "args": server_args,
                "env": {"PYTHONPATH": str(ROOT)},
                "cwd": str(ROOT),
            }
        }
    }
    (tmp_path / "mcp.json").write_text(json.dumps(config))
    task_queue = f"cli-mcp-{uuid.uuid4().hex[:8]}"
    async with http_server("beta", log) as beta:
        argv = [
            "--address", temporal_client.service_client.config.target_host, "--task-queue", task_queue,
            "--data-dir", str(tmp_path / "data"),
            "worker", "--mcp-config", str(tmp_path / "mcp.json"), "--mcp", f"beta={beta.url}",
        ]  # fmt: skip
        worker = asyncio.create_task(run(argv))
        try:
            agents = AgentClient(
                temporal_client,
                task_queue=task_queue,
                sessions_dir=tmp_path / "data" / "sessions",
                limits=FAST_LIMITS,
            )
            options = AgentOptions(model=scripted_model(), tools=["mcp:alpha/add", "mcp:beta/count"])
            agent = await agents.start(f"cli-mcp-{uuid.uuid4().hex[:6]}", options)
            state = await agent.get_state()
            for _ in range(600):  # the workflow asks a worker to describe its tools as it starts
                if state.tools or state.error_message:
                    break
                await asyncio.sleep(0.05)
                state = await agent.get_state()
            # Both servers offer both tools: each is called by its server's name.
            assert [tool.name for tool in state.tools] == ["alpha_add", "beta_count"]
            assert state.error_message is None
        finally:
            worker.cancel()
            with pytest.raises(asyncio.CancelledError):
                await worker
    err = capsys.readouterr().err
    assert "MCP server 'alpha'" in err and f"MCP server 'beta': {beta.url}" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mcp", "files"], "expected NAME=COMMAND"),
        (["--mcp", "a=x", "--mcp", "a=y"], "given twice: a"),
        (["--mcp-config", "/nonexistent/mcp.json"], "/nonexistent/mcp.json"),
    ],
)
async def test_a_bad_mcp_flag_is_a_usage_error_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    for command in (["dev", "--port", "0", "--no-ui", "--no-chat"], ["worker"]):
        argv = ["--address", "127.0.0.1:1", "--data-dir", str(tmp_path), *command, *flags]
        assert await run(argv) == 2, shlex.join(argv)
        assert message in capsys.readouterr().err
