"""Replay: every recorded history replays against the current workflow code without nondeterminism.

A change to ``workflows/`` that would break running conversations fails here. Histories are recorded
by ``python -m tests.histories.record`` (feature scenarios) and by the reliability stage with
``AGENTCORE_RECORD_HISTORIES=1`` (fault scenarios); see ``docs/versioning.md``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from agentcore import AgentOptions
from agentcore.temporal import DATA_CONVERTER
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import workflow_runner
from agentcore.workflows import ConversationWorkflow
from tests.durable_support import add_tool, running_worker

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
    assert {"tools-and-steering-run1", "tree-run1", "streaming-run1", "paced-run1"} <= names, names
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
