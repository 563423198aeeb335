"""``DurableAgent.run``: a prompt answered when its run ends, in one update (``prompt_and_wait``)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentcore import Agent, AgentBusyError, AgentOptions, AgentTool, AgentToolResult
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import eventually, running_worker


def _tool_then_answer(context: Any) -> Any:
    last = context.messages[-1]
    if last.role == "user":
        return tool_calls([("noop", {})])
    users = [m for m in context.messages if m.role == "user"]
    return text(f"answer {len(users)}")


def _noop() -> AgentTool:
    async def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult.text("done")

    return AgentTool(
        name="noop",
        description="Do nothing.",
        parameters={"type": "object", "properties": {}},
        execute=execute,
    )


def _waiting_tool(execute: Any) -> AgentTool:
    return AgentTool(
        name="noop",
        description="Wait.",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        timeout_seconds=120,
    )


def _file_texts(path: Path) -> list[str]:
    """The user and assistant texts of the session file's context."""
    with JsonlSessionStorage.open(path) as storage:
        messages = storage.build_context().messages
    return [m.text for m in messages if m.role != "toolResult" and m.text]  # type: ignore[union-attr]


async def _updates_accepted(client: Client, session_id: str) -> list[str]:
    history = await client.get_workflow_handle(session_id).fetch_history()
    return [
        event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]


async def test_run_returns_the_runs_messages_once_it_ended(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(_tool_then_answer), tools=[_noop()]
    ) as h:
        agent = await h.agents.start(
            f"run-{uuid.uuid4().hex[:8]}", AgentOptions(model=scripted_model(), tools=["noop"])
        )
        first = await agent.run("one", timeout=20)
        assert (first.status, first.start) == ("accepted", 0)
        assert [m.role for m in first.messages] == ["user", "assistant", "toolResult", "assistant"]
        assert first.messages[-1].text == "answer 1"  # type: ignore[union-attr]
        assert first.message_count == 4
        second = await agent.run("two", timeout=20)
        assert second.start == 4 and second.message_count == 8
        assert [m.role for m in second.messages] == ["user", "assistant", "toolResult", "assistant"]
        assert second.messages[-1].text == "answer 2"  # type: ignore[union-attr]
        # One update a turn, and what it returned is the conversation's state.
        assert await _updates_accepted(temporal_client, agent.session_id) == ["prompt_and_wait"] * 2
        state = await agent.get_state()
        assert state.messages == [*first.messages, *second.messages]
        # The session file follows within a second (the deferred flush), as for a streamed turn ...
        path = h.session_path(agent.session_id)
        texts = await eventually(
            lambda: asyncio.to_thread(_file_texts, path), lambda t: t[-1:] == ["answer 2"]
        )
        assert texts == ["one", "answer 1", "two", "answer 2"]
        # ... and wait_for_idle still waits for it.
        third = await agent.run("three", timeout=20)
        await agent.wait_for_idle(timeout=20)
        assert _file_texts(path)[-1] == third.messages[-1].text == "answer 3"  # type: ignore[union-attr]


async def test_run_is_refused_while_a_run_is_active_and_applied_once_per_id(
    temporal_client: Client, tmp_path: Path
) -> None:
    release = asyncio.Event()

    async def slow(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        await release.wait()
        return AgentToolResult.text("done")

    tool = _waiting_tool(slow)
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_tool_then_answer), tools=[tool]) as h:
        agent = await h.agents.start(
            f"run-{uuid.uuid4().hex[:8]}", AgentOptions(model=scripted_model(), tools=["noop"])
        )
        running = asyncio.ensure_future(agent.run("one", id="req-1", timeout=30))
        await eventually(agent.get_state, lambda s: s.pending_tool_calls != [])
        with pytest.raises(AgentBusyError):
            await agent.run("two", timeout=5)
        # Sent again with its id (a client retrying): the same run, answered once it ends.
        again = asyncio.ensure_future(agent.run("one", id="req-1", timeout=30))
        with pytest.raises(TimeoutError):
            await agent.run("one", id="req-1", timeout=0.5)  # gives up waiting; the run goes on
        release.set()
        first, second = await asyncio.gather(running, again)
        assert first.messages == second.messages
        assert [m.role for m in first.messages] == ["user", "assistant", "toolResult", "assistant"]
        assert len((await agent.get_state()).messages) == 4


async def test_an_aborted_run_returns_what_it_made(temporal_client: Client, tmp_path: Path) -> None:
    started = asyncio.Event()

    async def endless(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        started.set()
        await asyncio.sleep(60)
        return AgentToolResult.text("never")

    tool = _waiting_tool(endless)
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_tool_then_answer), tools=[tool]) as h:
        agent = await h.agents.start(
            f"run-{uuid.uuid4().hex[:8]}", AgentOptions(model=scripted_model(), tools=["noop"])
        )
        running = asyncio.ensure_future(agent.run("one", timeout=30))
        await asyncio.wait_for(started.wait(), 20)
        await agent.abort("enough")
        result = await asyncio.wait_for(running, 10)
        assert [m.role for m in result.messages][:2] == ["user", "assistant"]
        assert result.messages[-1].role in ("toolResult", "assistant")
        assert not (await agent.get_state()).is_streaming


async def test_run_answers_as_the_in_process_agent_does(temporal_client: Client, tmp_path: Path) -> None:
    def summary(idle: Any) -> tuple[int, int, list[tuple[str, str]]]:
        return idle.start, idle.message_count, [(m.role, m.text) for m in idle.messages]

    local = Agent(model=scripted_model(), tools=[_noop()], stream_fn=ScriptedModel(_tool_then_answer))
    expected = [summary(await local.run("one")), summary(await local.run("two"))]
    assert expected[1][0] == 4 and expected[1][2][-1] == ("assistant", "answer 2")
    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(_tool_then_answer), tools=[_noop()]
    ) as h:
        agent = await h.agents.start(
            f"run-{uuid.uuid4().hex[:8]}", AgentOptions(model=scripted_model(), tools=["noop"])
        )
        assert [
            summary(await agent.run("one", timeout=20)),
            summary(await agent.run("two", timeout=20)),
        ] == expected
