"""Replay: every recorded history replays against the current workflow code without nondeterminism.

A change to ``workflows/`` that would break running conversations fails here. Histories are recorded
by ``python -m tests.histories.record`` (feature scenarios) and by the reliability stage with
``AGENTCORE_RECORD_HISTORIES=1`` (fault scenarios); see ``docs/versioning.md``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from agentcore import AgentOptions
from agentcore.temporal import DATA_CONVERTER
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import workflow_runner
from agentcore.workflows import ConversationWorkflow
from tests.durable_support import Harness, add_tool, running_worker

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def _replayer() -> Replayer:
    return Replayer(
        workflows=[ConversationWorkflow],
        data_converter=DATA_CONVERTER,
        workflow_runner=workflow_runner(DATA_CONVERTER),
    )


def test_recorded_histories_exist() -> None:
    names = {path.stem for path in HISTORIES}
    # Both kinds: the feature scenarios and the fault scenarios (see ``docs/versioning.md``).
    assert {"tools-and-steering-run1", "tree-run1", "streaming-run1", "paced-run1", "run-run1"} <= names, (
        names
    )
    assert any(name.startswith("fault-") for name in names), names


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    await _replayer().replay_workflow(history)


async def test_a_fresh_history_replays(temporal_client: Client, tmp_path: Path) -> None:
    model = ScriptedModel([tool_calls([("add", {"a": 1, "b": 2})]), text("3")])
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        agent = await h.agents.start("replay-fresh", AgentOptions(model=scripted_model(), tools=["add"]))
        await agent.prompt("1+2")
        await agent.steer("and a steer")
        await agent.wait_for_idle(timeout=20)
        history = await agent.handle.fetch_history()
    await _replayer().replay_workflow(history)


async def test_local_attempts_answered_a_task_late_replay(temporal_client: Client, tmp_path: Path) -> None:
    """A local activity that ends at once (a first model call's attempt declining, a quick tool)
    may have its result recorded in the workflow task it started in while the workflow gets it in
    the next one (more often with many conversations at once, or a query coming meanwhile); a
    replay hands it back in the task it started in. What the conversation does next (its commands:
    search-attribute upserts, session writes, the next calls) must not depend on which."""

    def reply(context: Any) -> Any:
        # Two quick tools side by side, then an answer: local attempts in a row and in parallel.
        if context.messages[-1].role == "user":
            return tool_calls([("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})])
        return text("three and seven, " * 4)

    model = ScriptedModel(reply, chunks=4, delay=0.005)

    async def converse(h: Harness, name: str) -> WorkflowHistory:
        agent = await h.agents.start(name, AgentOptions(model=scripted_model(), tools=["add"]))
        for turn in range(3):
            await agent.prompt(f"turn {turn}")
            state = asyncio.create_task(agent.get_state())  # a client looking in meanwhile
            await agent.wait_for_idle(timeout=30)
            await state
        return await agent.handle.fetch_history()

    late = 0
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        for batch in range(10):  # (until it happened: about one conversation in ten)
            histories = await asyncio.gather(*(converse(h, f"late-{batch}-{n}") for n in range(10)))
            for history in histories:
                await _replayer().replay_workflow(history)
                late += _tasks_completed_before_a_local_result(history)
            if late:
                return
    pytest.skip("no local attempt's result came a task late in 100 conversations: nothing replayed it")


def _tasks_completed_before_a_local_result(history: WorkflowHistory) -> int:
    """Workflow tasks completed with local-activity markers and nothing else, another task at once
    after them: the worker completed the task before the workflow acted on the result."""
    kinds = [event.event_type for event in history.events]
    count = 0
    for index, kind in enumerate(kinds):
        if kind != EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            continue
        end = index + 1
        while end < len(kinds) and kinds[end] == EventType.EVENT_TYPE_MARKER_RECORDED:
            end += 1
        if (
            end > index + 1
            and end < len(kinds)
            and kinds[end] == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
        ):
            count += 1
    return count
