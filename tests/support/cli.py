"""A demo deployment for CLI tests: a worker with the demo tools and the sommelier model on loopback."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from agentcore.cli.common import DEMO_TOOL_NAMES, demo_model
from agentcore.client import AgentClient, DurableAgent
from agentcore.demo import DEMO_SYSTEM_PROMPT, demo_tools
from agentcore.demo.script import sommelier_responder
from agentcore.state import AgentOptions
from agentcore.testing.loopback import LoopbackServer
from agentcore.worker import create_worker
from tests.support.durable import FAST_LIMITS
from tests.support.replay import watch_worker

AGENTCORE = str(Path(sys.executable).parent / "agentcore")


@dataclass
class Deployment:
    address: str
    task_queue: str
    data_dir: Path
    sessions_dir: Path
    demo_port: int
    agents: AgentClient

    def argv(self, *command: str) -> list[str]:
        """CLI arguments for ``command`` against this deployment."""
        return [
            "--address", self.address, "--task-queue", self.task_queue,
            "--data-dir", str(self.data_dir), "--sessions-dir", str(self.sessions_dir), *command,
        ]  # fmt: skip

    def env(self) -> dict[str, str]:
        """The same deployment through environment variables (for the README's commands)."""
        return {
            **os.environ,
            "TEMPORAL_ADDRESS": self.address,
            "AGENTCORE_TASK_QUEUE": self.task_queue,
            "AGENTCORE_DATA_DIR": str(self.data_dir),
            "AGENTCORE_SESSIONS_DIR": str(self.sessions_dir),
            "AGENTCORE_DEMO_PORT": str(self.demo_port),
        }

    async def start_demo(self, session_id: str) -> DurableAgent:
        options = AgentOptions(
            model=demo_model(self.demo_port), tools=list(DEMO_TOOL_NAMES), system_prompt=DEMO_SYSTEM_PROMPT
        )
        return await self.agents.start(session_id, options)


@asynccontextmanager
async def demo_deployment(
    client: Client, tmp_path: Path, pacing: float = 0.0, data_dir: Path | None = None
) -> AsyncIterator[Deployment]:
    task_queue = f"cli-{uuid.uuid4().hex[:10]}"
    data_dir = data_dir or tmp_path / "data"
    sessions_dir = data_dir / "sessions"
    async with LoopbackServer(sommelier_responder(pacing=pacing)) as loopback:
        worker = create_worker(
            client,
            task_queue=task_queue,
            tools=demo_tools(data_dir / "cellar.sqlite"),
            sessions_dir=sessions_dir,
        )
        watch_worker(worker)
        async with worker:
            agents = AgentClient(client, task_queue=task_queue, sessions_dir=sessions_dir, limits=FAST_LIMITS)
            yield Deployment(
                client.service_client.config.target_host,
                task_queue,
                data_dir,
                sessions_dir,
                loopback.port,
                agents,
            )
