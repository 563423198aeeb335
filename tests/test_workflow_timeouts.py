"""Timeouts of a durable conversation: a tool over its own timeout, run locally or remotely."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore import AgentOptions, AgentTool, AgentToolResult
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.durable_support import running_worker


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
