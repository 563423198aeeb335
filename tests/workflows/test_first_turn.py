"""A conversation's start and first turn: what it costs the server.

``AgentClient.start(..., prompt=...)`` starts the conversation and gives it its prompt in one call
(update-with-start), and its first model call runs in the worker holding it (a local activity)
once that worker has seen the model answer quickly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentcore import AgentOptions
from agentcore.errors import AgentError
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import add_tool, running_worker


def _respond(context: Any) -> Any:
    last = context.messages[-1]
    if last.role == "user":
        return tool_calls([("add", {"a": 2, "b": 3})])
    return text("5")


def _scheduled(events: list[Any]) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def _local(events: list[Any]) -> list[str]:
    names = []
    for e in events:
        if e.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
            continue
        data = e.marker_recorded_event_attributes.details["data"].payloads[0].data
        names += [name for name in ("llm.stream", "tools.describe") if f'"{name}"'.encode() in data]
    return names


async def test_a_conversation_started_with_its_prompt_takes_it_in_its_first_workflow_task(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Started with its prompt: the prompt is accepted in the workflow's first task, and the run's
    calls follow as regular activities (none local: docs/versioning.md)."""
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_respond), tools=[add_tool()]) as h:
        options = AgentOptions(model=scripted_model(), tools=["add"])
        warm = await h.agents.start("warm", options, prompt="2+3?")  # the worker learns the model is quick
        await warm.wait_for_idle(timeout=20)

        agent = await h.agents.start("first-turn", options, prompt="2+3?")
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        events = list((await agent.handle.fetch_history()).events)

    assert [m.role for m in state.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert state.messages[-1].text == "5" and not state.error_message  # type: ignore[union-attr]
    completed = [e.event_id for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]
    accepted = [
        e.event_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        and e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name == "prompt"
    ]
    assert len(accepted) == 1 and accepted[0] == completed[0] + 1, "the prompt came with the first task"
    scheduled = [name for name in _scheduled(events) if name != "session.append"]
    assert scheduled == ["tools.describe", "llm.stream", "tools.execute", "llm.stream"], scheduled
    assert _local(events) == []


async def test_tools_this_worker_does_not_know_are_looked_up_by_any_worker(
    temporal_client: Client, tmp_path: Path
) -> None:
    """``tools.describe`` is answered by any worker: a name no worker registers is reported."""
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_respond), tools=[add_tool()]) as h:
        agent = await h.agents.start(
            "unknown-tool", AgentOptions(model=scripted_model(), tools=["add", "nope"])
        )
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        events = list((await agent.handle.fetch_history()).events)
    assert _scheduled(events)[0] == "tools.describe", _scheduled(events)
    assert _local(events) == [], _local(events)
    assert state.error_message is not None and "nope" in state.error_message
    assert [tool.name for tool in state.tools] == ["add"]


async def test_starting_with_a_prompt_an_id_already_running_is_refused(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(lambda c: text("hi"))) as h:
        options = AgentOptions(model=scripted_model())
        agent = await h.agents.start("taken", options, prompt="one")
        await agent.wait_for_idle(timeout=20)
        with pytest.raises(AgentError) as refused:
            await h.agents.start("taken", options, prompt="two")
        assert refused.value.code == "AGENT_EXISTS"
        state = await agent.get_state()
    assert [m.text for m in state.messages] == ["one", "hi"]  # type: ignore[union-attr]
