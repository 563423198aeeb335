"""Helpers for workflow tests: a worker on a unique task queue with scripted models and test tools."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecution

from agentcore import AgentTool, AgentToolResult
from agentcore.client import AgentClient, DurableAgent
from agentcore.events import AgentEvent
from agentcore.protocol import ConversationLimits
from agentcore.runtime import StreamFn
from agentcore.worker import create_worker
from tests.support.replay import watch_worker


class AddArgs(BaseModel):
    a: float
    b: float


def add_tool() -> AgentTool:
    def execute(tool_call_id: str, args: AddArgs, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult.text(str(args.a + args.b), details={"sum": args.a + args.b})

    return AgentTool(
        name="add", description="Add two numbers.", parameters=AddArgs, execute=execute, timeout_seconds=5
    )


class SleepArgs(BaseModel):
    seconds: float


def sleep_tool(name: str = "sleep", **fields: Any) -> AgentTool:
    async def execute(tool_call_id: str, args: SleepArgs, signal: Any, on_update: Any) -> AgentToolResult:
        on_update(AgentToolResult.text("sleeping"))
        await asyncio.sleep(args.seconds)
        return AgentToolResult.text(f"slept {args.seconds}")

    return AgentTool(name=name, description="Sleep a while.", parameters=SleepArgs, execute=execute, **fields)


def progress_tool() -> AgentTool:
    """Quick, retry-safe, and reports progress twice."""

    def execute(tool_call_id: str, args: AddArgs, signal: Any, on_update: Any) -> AgentToolResult:
        on_update(AgentToolResult.text("halfway"))
        on_update(AgentToolResult.text("almost"))
        return AgentToolResult.text(f"done {args.a + args.b}")

    return AgentTool(
        name="progress",
        description="Add slowly, reporting progress.",
        parameters=AddArgs,
        execute=execute,
        timeout_seconds=5,
    )


FAST_LIMITS = ConversationLimits(llm_heartbeat_seconds=2, tool_heartbeat_seconds=2)


@dataclass
class Harness:
    agents: AgentClient
    sessions_dir: Path
    task_queue: str

    def session_path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{session_id}.jsonl"


@asynccontextmanager
async def running_worker(
    client: Client,
    tmp_path: Path,
    stream_fn: StreamFn | None,
    tools: Sequence[AgentTool] = (),
    limits: ConversationLimits | None = None,
    **worker_options: Any,
) -> AsyncIterator[Harness]:
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    sessions_dir = tmp_path / "sessions"
    worker = create_worker(
        client,
        task_queue=task_queue,
        tools=list(tools),
        sessions_dir=sessions_dir,
        stream_fn=stream_fn,
        **worker_options,
    )
    watch_worker(worker)
    async with worker:
        yield Harness(
            AgentClient(
                client, task_queue=task_queue, sessions_dir=sessions_dir, limits=limits or FAST_LIMITS
            ),
            sessions_dir,
            task_queue,
        )


async def collect_run(agent: DurableAgent, start_offset: int = 0, timeout: float = 30) -> list[AgentEvent]:
    """Events from ``start_offset`` up to and including the next ``agent_end``."""
    events: list[AgentEvent] = []

    async def read() -> None:
        async for _, event in agent.events(start_offset):
            events.append(event)
            if event.type == "agent_end":
                return

    await asyncio.wait_for(read(), timeout)
    return events


T = TypeVar("T")


async def eventually(
    read: Callable[[], Awaitable[T]], done: Callable[[T], bool], timeout: float = 30, interval: float = 0.1
) -> T:
    """Read until ``done(value)``, up to ``timeout`` seconds; the last value either way.

    For anything eventually consistent (Temporal's visibility: list, search attributes): a test
    never samples it once, and the assertion after this call says what was expected."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await read()
        if done(value) or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(interval)


async def listed_runs(client: Client, workflow_id: str, at_least: int = 1) -> list[WorkflowExecution]:
    """The runs of ``workflow_id`` in visibility, waiting until it lists ``at_least`` of them."""

    async def read() -> list[WorkflowExecution]:
        return [execution async for execution in client.list_workflows(f'WorkflowId = "{workflow_id}"')]

    return await eventually(read, lambda runs: len(runs) >= at_least)
