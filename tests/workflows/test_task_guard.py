"""A query that brings history events ahead of their workflow task is refused, never acted on
(``workflows/task_guard.py``), and agentcore's client sends it again.

The server sends a query straight to a worker when the workflow has no workflow task scheduled, and
the worker that takes it gets the history as it stands then. Here: a conversation's tool runs on an
activities-only worker; the workflow worker stops; a query is sent (no task scheduled: it goes
straight to the task queue, once the stopped worker's sticky queue has given it up); the tool ends,
which schedules a workflow task; then a new workflow worker starts and takes both. When it takes the
query first, the query's history ends with the tool's result and no ``WorkflowTaskStarted`` after it:
the guard refuses that activation (the query fails with ``EVENTS_AHEAD_OF_TASK``), and the workflow
task that follows replays the whole history. Which one the worker takes first is the server's
choice: the scenario runs until the refusal has happened (after 1, 5 and 2 scenarios in three runs of
this test; a scenario takes ~3 s, at most ``ATTEMPTS`` of them).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.worker import Worker

from agentcore import AgentOptions, AgentTool, AgentToolResult
from agentcore.activities import SessionStore
from agentcore.client import AgentClient
from agentcore.errors import EVENTS_AHEAD_OF_TASK
from agentcore.messages import AssistantMessage
from agentcore.plugin import conversation_activities, workflow_runner
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.tools import ToolRegistry
from agentcore.workflows import ConversationWorkflow
from agentcore.workflows.task_guard import TaskGuardInterceptor
from tests.support.durable import FAST_LIMITS, running_worker
from tests.support.replay import watch_worker

ATTEMPTS = 20  # scenarios at most until the worker has taken the query first once


class HoldArgs(BaseModel):
    label: str


class Held:
    """A tool that runs until released."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    def tool(self) -> AgentTool:
        async def execute(tool_call_id: str, args: HoldArgs, signal: Any, on_update: Any) -> AgentToolResult:
            self.started.set()
            await self.release.wait()
            return AgentToolResult.text(f"held {args.label}")

        return AgentTool(
            name="hold", description="Hold.", parameters=HoldArgs, execute=execute, timeout_seconds=60
        )


def _workflow_worker(client: Client, task_queue: str) -> Worker:
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[ConversationWorkflow],
        workflow_runner=workflow_runner(client.data_converter),
        interceptors=[TaskGuardInterceptor()],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    watch_worker(worker)
    return worker


async def _one_scenario(client: Client, tmp_path: Path, index: int) -> bool:
    """One conversation through the scenario; whether its query was refused."""
    held = Held()
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    sessions = tmp_path / f"sessions-{index}"
    model = ScriptedModel([tool_calls([("hold", {"label": "a"})]), text("done")])
    activities = Worker(
        client,
        task_queue=task_queue,
        activities=conversation_activities(
            SessionStore(sessions), ToolRegistry([held.tool()]), stream_fn=model
        ),
    )
    agents = AgentClient(client, task_queue=task_queue, sessions_dir=sessions, limits=FAST_LIMITS)
    async with activities:
        async with _workflow_worker(client, task_queue):
            agent = await agents.start(f"guard-{index}", AgentOptions(model=scripted_model(), tools=["hold"]))
            await agent.prompt("hold on")
            await asyncio.wait_for(held.started.wait(), 30)
        # No workflow worker: the query waits for one (the stopped worker's sticky queue gives it up
        # within its 1 s), sent while no workflow task is scheduled.
        raw = asyncio.create_task(agent.handle.query("get_state", rpc_timeout=timedelta(seconds=30)))
        await asyncio.sleep(1.5)
        held.release.set()  # the tool's result schedules a workflow task
        await asyncio.sleep(1.5)
        async with _workflow_worker(client, task_queue):
            try:
                await raw
                refused = False
            except WorkflowQueryFailedError as err:
                assert EVENTS_AHEAD_OF_TASK in str(err), err
                refused = True
            await agent.wait_for_idle(timeout=30)
            state = await agent.get_state()  # the client's own query: sent again if refused
            history = await agent.handle.fetch_history()
    last = state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.text == "done"
    failed = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
    assert not failed, failed
    return refused


async def test_a_query_with_events_ahead_of_their_task_is_refused_and_the_conversation_goes_on(
    temporal_client: Client, tmp_path: Path
) -> None:
    refusals = 0
    for index in range(ATTEMPTS):
        refusals += await _one_scenario(temporal_client, tmp_path, index)
        if refusals:
            print(f"\nthe worker took the query first in scenario {index + 1}")
            break
    assert refusals, f"in {ATTEMPTS} scenarios the worker never took the query before the workflow task"


async def test_an_update_no_handler_takes_is_refused_by_the_conversation(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Refused by the conversation's own validator (one the task guard sees), as a typed error."""
    async with running_worker(temporal_client, tmp_path, ScriptedModel([text("hi")])) as h:
        agent = await h.agents.start("guard-unknown-update", AgentOptions(model=scripted_model()))
        with pytest.raises(Exception) as raised:
            await agent.handle.execute_update("no_such_update", "x")
        assert "no update named 'no_such_update'" in str(raised.value.__cause__ or raised.value)
        history = await agent.handle.fetch_history()
    names = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]
    assert "no_such_update" not in names
