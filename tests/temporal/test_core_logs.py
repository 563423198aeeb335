"""``agentcore worker --log-format json`` writes JSON lines only, Temporal Core's own lines included
(forwarded into Python logging), even when the server it polls goes away under it."""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

from agentcore.temporal import DevServer
from tests.support.process import AgentcoreProcess, wait_until


async def test_every_line_of_a_worker_whose_server_dies_is_json(tmp_path: Path) -> None:
    server = await DevServer(
        tmp_path / "server", ui=False, persistent=False, log_file=tmp_path / "server.log"
    ).start()
    worker = AgentcoreProcess(
        [
            "--address",
            server.address,
            "--task-queue",
            f"logs-{uuid.uuid4().hex[:8]}",
            "--data-dir",
            str(tmp_path / "data"),
            "worker",
            "--log-format",
            "json",
        ],  # fmt: skip
    )
    try:
        await worker.start()
        await worker.wait_for_line(lambda line: "worker on" in line)
        assert server.pid is not None
        started = len(worker.lines)  # (Core wrote its own lines to stdout, coloured text)
        os.kill(server.pid, signal.SIGKILL)
        # Core retries its polls and says so (temporalio_client::retry, WARN): those lines too.
        await wait_until(
            lambda: any("retried" in line for line in worker.lines[started:] + worker.stdout_lines),
            timeout=60,
            what="Core's warnings",
        )
        worker.signal(signal.SIGTERM)
        await worker.wait(60)
    finally:
        await worker.stop()
        await server.stop()
    lines = [line for line in worker.lines + worker.stdout_lines if line.strip()]
    not_json = []
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            not_json.append(line)
    assert not not_json, not_json
    core = [record for record in map(json.loads, lines) if record["logger"].startswith("temporalio.core")]
    assert core and all(record["level"] in ("WARNING", "ERROR") for record in core)
