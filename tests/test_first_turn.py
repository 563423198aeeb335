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
from tests.durable_support import add_tool, running_worker


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
    """Started with its prompt on a worker that has seen the model answer quickly: the prompt is
    accepted in the workflow's first task, the tool's spec is looked up and the run's first model
    call made in the worker (local activities), so no activity goes through the server but the
    write ``wait_for_idle`` asked for while the run went on."""
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
    # The quick tool runs in the worker too (handed to the server only if it outlasts its bound).
    scheduled = [name for name in _scheduled(events) if name not in ("session.append", "tools.execute")]
    assert scheduled == [], scheduled
    assert _local(events)[:3] == ["tools.describe", "llm.stream", "llm.stream"], _local(events)
    assert len(completed) <= 5, f"{len(completed)} workflow tasks for the start and one tool turn"


async def test_tools_this_worker_does_not_know_are_looked_up_by_any_worker(
    temporal_client: Client, tmp_path: Path
) -> None:
    """The local lookup of the tools' specs declines when the worker does not know every name (an
    MCP server it has not listed yet, a tool other workers register): the remote ``tools.describe``
    answers, and a name no worker registers is reported as before."""
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_respond), tools=[add_tool()]) as h:
        agent = await h.agents.start(
            "unknown-tool", AgentOptions(model=scripted_model(), tools=["add", "nope"])
        )
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        events = list((await agent.handle.fetch_history()).events)
    assert _scheduled(events) == ["tools.describe"], _scheduled(events)
    assert _local(events) == ["tools.describe"], _local(events)
    assert state.error_message is not None and "nope" in state.error_message
    assert [tool.name for tool in state.tools] == ["add"]


async def test_a_first_model_call_runs_remotely_until_the_worker_has_seen_the_model_quick(
    temporal_client: Client, tmp_path: Path
) -> None:
    """A worker that has not yet seen a model answer makes a conversation's first call remotely
    (its local attempt declines at once: a real model's first call would only be handed off); once
    it has seen that model answer within a publish interval, a new conversation's first call is
    made locally, with no llm.stream activity through the server."""
    async with running_worker(temporal_client, tmp_path, ScriptedModel(lambda c: text("hi"))) as h:
        options = AgentOptions(model=scripted_model())
        first = await h.agents.start("first-seen", options, prompt="hello")
        await first.wait_for_idle(timeout=20)
        second = await h.agents.start("second-seen", options)
        await second.wait_for_idle(timeout=20)  # past the run's first task (no local attempt there)
        await second.prompt("hello")
        await second.wait_for_idle(timeout=20)
        first_events = list((await first.handle.fetch_history()).events)
        second_events = list((await second.handle.fetch_history()).events)
        assert (await second.get_state()).messages[-1].text == "hi"  # type: ignore[union-attr]
    assert _scheduled(first_events).count("llm.stream") == 1
    assert _scheduled(second_events).count("llm.stream") == 0
    assert _local(second_events) == ["llm.stream"]


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
