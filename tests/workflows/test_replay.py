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

from agentcore import AgentOptions
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import Harness, add_tool, running_worker
from tests.support.replay import replayer as _replayer  # the one every durable test replays with

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))


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


async def test_a_watched_conversation_replays(temporal_client: Client, tmp_path: Path) -> None:
    """A conversation read while it runs (an event subscriber, ``get_state`` every few ms, as the
    web chat and the Web UI do) records no local activity (whose result a query could make come a
    task late, and replay in another order than an Update taken with it) and replays."""

    def reply(context: Any) -> Any:
        if context.messages[-1].role == "user":
            return tool_calls([("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})])
        return text("three and seven, " * 4)

    model = ScriptedModel(reply, chunks=4, delay=0.005)

    async def converse(h: Harness, name: str) -> WorkflowHistory:
        agent = await h.agents.start(name, AgentOptions(model=scripted_model(), tools=["add"]))
        done = asyncio.Event()

        async def follow() -> None:
            async for _offset, _event in agent.events():
                pass

        async def look() -> None:
            while not done.is_set():
                await agent.get_state()
                await asyncio.sleep(0.005)

        watchers = [asyncio.create_task(follow()), asyncio.create_task(look())]
        for turn in range(3):
            await agent.prompt(f"turn {turn}")
            await agent.wait_for_idle(timeout=30)
        done.set()
        watchers[0].cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        return await agent.handle.fetch_history()

    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        histories = await asyncio.gather(*(converse(h, f"watched-{n}") for n in range(10)))
    for history in histories:
        kinds = {event.event_type for event in history.events}
        assert EventType.EVENT_TYPE_MARKER_RECORDED not in kinds
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds
        await _replayer().replay_workflow(history)
