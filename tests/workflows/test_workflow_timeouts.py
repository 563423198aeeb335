"""Timeouts of a durable conversation: a tool over its own timeout, run locally or remotely."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore import AgentOptions, AgentTool, AgentToolResult
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import running_worker


def _respond(context: Any) -> Any:
    last = context.messages[-1]
    return tool_calls([("stall", {})]) if last.role == "user" else text(f"after: {last.text[:40]}")


def stall_tool(timeout: float, retry_safe: bool = True) -> AgentTool:
    async def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        await asyncio.Event().wait()  # never finishes on its own
        return AgentToolResult.text("unreachable")

    return AgentTool(
        name="stall",
        description="Never returns.",
        execute=execute,
        timeout_seconds=timeout,
        retry_safe=retry_safe,
    )


@pytest.mark.parametrize("retry_safe", [True, False], ids=["local", "remote"])
async def test_a_tool_over_its_timeout_gets_execution_timeout(
    temporal_client: Client, tmp_path: Path, retry_safe: bool
) -> None:
    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(_respond), tools=[stall_tool(0.5, retry_safe)]
    ) as h:
        agent = await h.agents.start(
            f"timeout-{retry_safe}", AgentOptions(model=scripted_model(), tools=["stall"])
        )
        await agent.prompt("go")
        await agent.wait_for_idle(timeout=30)
        messages = (await agent.get_state()).messages
        result = messages[2]
        assert result.role == "toolResult" and result.is_error  # type: ignore[union-attr]
        assert result.details["error_code"] == "EXECUTION_TIMEOUT"  # type: ignore[union-attr]
        assert messages[-1].text.startswith("after: EXECUTION_TIMEOUT")  # type: ignore[union-attr]


async def test_a_model_call_waiting_on_the_session_lock_keeps_heartbeating(
    temporal_client: Client, tmp_path: Path
) -> None:
    """The model activity waits for the session file's lock (another writer holds it) longer than its
    heartbeat timeout: it beats while it waits, so the server does not time it out and run it again."""
    from temporalio.api.enums.v1 import EventType

    from agentcore.protocol import ConversationLimits
    from agentcore.session import JsonlSessionStorage

    limits = ConversationLimits(llm_heartbeat_seconds=1)
    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(lambda c: text("ok")), limits=limits
    ) as h:
        agent = await h.agents.start("locked", AgentOptions(model=scripted_model()))
        await agent.prompt("first")
        await agent.wait_for_idle(timeout=20)
        path = next((tmp_path / "sessions").rglob("*.jsonl"))
        holder = JsonlSessionStorage.open(path, writer=True)  # the file's lock, as another writer
        try:
            await agent.prompt("second")
            await asyncio.sleep(2.5)  # the call waits on the lock, 2.5x its heartbeat timeout
        finally:
            holder.close()
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        history = (await agent.handle.fetch_history()).events
    assert [m.role for m in state.messages] == ["user", "assistant", "user", "assistant"]
    assert not state.error_message
    timed_out = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT]
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert not timed_out and max(attempts) == 1, attempts
