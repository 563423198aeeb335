"""``agentcore worker`` as the image runs it: a real process, stopped by SIGTERM, logging JSON lines."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from agentcore.client import AgentClient
from agentcore.messages import ToolResultMessage
from agentcore.session import JsonlSessionStorage
from agentcore.state import AgentOptions
from agentcore.testing.loopback import LoopbackServer, Script
from tests.support.durable import FAST_LIMITS, collect_run
from tests.support.process import AgentcoreProcess, wait_until


class Rig:
    def __init__(self, client: Client, tmp_path: Path) -> None:
        self.address = client.service_client.config.target_host
        self.task_queue = f"proc-{uuid.uuid4().hex[:10]}"
        self.data_dir = tmp_path / "data"
        self.sessions_dir = self.data_dir / "sessions"
        self.tool_log = tmp_path / "tool.log"
        self.tool_log.touch()
        self.agents = AgentClient(
            client, task_queue=self.task_queue, sessions_dir=self.sessions_dir, limits=FAST_LIMITS
        )

    def worker(self, *options: str) -> AgentcoreProcess:
        return AgentcoreProcess(
            [
                "--address",
                self.address,
                "--task-queue",
                self.task_queue,
                "--data-dir",
                str(self.data_dir),
                "--sessions-dir",
                str(self.sessions_dir),
                "worker",
                "--tools",
                "tests.support.worker_tools:TOOLS",
                *options,
            ],  # fmt: skip
            env={"OPENAI_API_KEY": "sk-loopback", "AGENTCORE_TEST_TOOL_LOG": str(self.tool_log)},
        )

    def tool_events(self) -> list[list[str]]:
        return [line.split() for line in self.tool_log.read_text().splitlines()]


@pytest.fixture
async def rig(temporal_client: Client, tmp_path: Path) -> Rig:
    return Rig(temporal_client, tmp_path)


def _started(line: str) -> bool:
    return "worker on" in line


async def test_sigterm_mid_tool_lets_the_tool_finish_records_it_once_and_exits_0(rig: Rig) -> None:
    async with LoopbackServer() as model_server:
        first = await rig.worker("--graceful-shutdown", "30").start()
        second: AgentcoreProcess | None = None
        try:
            await first.wait_for_line(_started)
            agent = await rig.agents.start(
                "sigterm-mid-tool", AgentOptions(model=model_server.model(), tools=["slow_op"])
            )
            await agent.prompt('/tool slow_op {"seconds": 3, "label": "backup"}')
            await wait_until(lambda: rig.tool_events(), what="the tool to start")
            first.signal()
            assert await first.wait(60) == 0
            assert any("stopping" in line for line in first.lines), first.lines
            # The tool ran to its end in the stopping worker, and only there.
            assert [event[0] for event in rig.tool_events()] == ["start", "end"]
            assert {event[2] for event in rig.tool_events()} == {str(first.process.pid)}  # type: ignore[union-attr]

            # Another worker takes the conversation on from the recorded result.
            second = await rig.worker().start()
            await second.wait_for_line(_started)
            events = await collect_run(agent, timeout=60)
            second.signal()
            assert await second.wait(60) == 0
        finally:
            await first.stop()
            if second is not None:
                await second.stop()
    ends = [event for event in events if event.type == "tool_execution_end"]
    assert [end.result.content[0].text for end in ends] == ["slow_op backup finished after 3.0s"]
    assert events[-1].type == "agent_end"
    assert [event[0] for event in rig.tool_events()] == ["start", "end"]  # never run again
    with JsonlSessionStorage.open(rig.sessions_dir / "sigterm-mid-tool.jsonl") as storage:
        results = [m for m in storage.build_context().messages if isinstance(m, ToolResultMessage)]
    assert [result.text for result in results] == ["slow_op backup finished after 3.0s"]


async def test_json_logs_name_the_session_run_activity_and_attempt(rig: Rig) -> None:
    async with LoopbackServer() as model_server:
        # The first model call fails (a retried 500): the worker logs the failed attempt.
        model_server.enqueue(Script(status=500, error_message="upstream overloaded"))
        worker = await rig.worker("--log-format", "json").start()
        try:
            await worker.wait_for_line(_started)
            agent = await rig.agents.start("json-logs", AgentOptions(model=model_server.model()))
            await agent.prompt("hello")
            await collect_run(agent, timeout=60)
            await worker.wait_for_line(lambda line: "to be retried" in line)
            worker.signal()
            assert await worker.wait(60) == 0
        finally:
            await worker.stop()
    records = worker.json_lines()
    assert records and len(records) == len(worker.lines), worker.lines  # every line one JSON object
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records)
    retried = [record for record in records if "to be retried" in record["message"]]
    assert len(retried) == 1
    record = retried[0]
    assert record["level"] == "WARNING"
    assert record["session_id"] == "json-logs"
    assert record["activity"] == "llm.stream"
    assert record["attempt"] == 1
    assert (
        record["workflow_run_id"]
        == (await rig.agents.client.get_workflow_handle("json-logs").describe()).run_id
    )
    # The SDK's context dict is in the fields, not repeated in the message.
    assert "{" not in record["message"]
    assert "sk-loopback" not in "\n".join(worker.lines)
