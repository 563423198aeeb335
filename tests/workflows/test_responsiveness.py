"""Abort and ``get_state`` act while a quick tool or a quick model call runs, not after it.

A quick call is the kind that once ran as a local activity (a short, retry-safe tool; a model call
expected to end within one publish interval). A local activity holds its workflow task open, and
neither queries nor signals reach the workflow until it ends: a 5 s tool then delayed both by 5 s.
These tests assert the order of things (the query is answered and the run ends while the call would
still be running), not milliseconds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client

from agentcore import AgentOptions, AgentTool, AgentToolResult
from agentcore.messages import ToolResultMessage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import running_worker

CALL_SECONDS = 5.0


class SlowArgs(BaseModel):
    label: str = ""


class _Call:
    """A call that takes ``CALL_SECONDS`` whatever happens (it ignores the abort signal, as a tool
    stuck in I/O does): ``finished`` says whether it ran to its end."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.finished = False

    async def run(self) -> None:
        self.started.set()
        await asyncio.sleep(CALL_SECONDS)
        self.finished = True


def quick_slow_tool(call: _Call) -> AgentTool:
    async def execute(tool_call_id: str, args: SlowArgs, signal: Any, on_update: Any) -> AgentToolResult:
        await call.run()
        return AgentToolResult.text("done")

    # Short timeout and retry-safe: what counted as a quick tool (it ran as a local activity).
    return AgentTool(
        name="quick_slow",
        description="Looks quick, takes 5 s.",
        parameters=SlowArgs,
        execute=execute,
        timeout_seconds=10,
    )


async def test_get_state_and_abort_act_while_a_quick_tool_runs(
    temporal_client: Client, tmp_path: Path
) -> None:
    call = _Call()
    model = ScriptedModel([tool_calls([("quick_slow", {"label": "x"})]), text("not reached")])
    async with running_worker(temporal_client, tmp_path, model, tools=[quick_slow_tool(call)]) as h:
        agent = await h.agents.start("quick-tool", AgentOptions(model=scripted_model(), tools=["quick_slow"]))
        await agent.prompt("run the tool")
        await asyncio.wait_for(call.started.wait(), 30)

        state = await agent.get_state()
        assert not call.finished, "get_state was answered only after the tool ended"
        assert state.is_streaming and len(state.pending_tool_calls) == 1

        await agent.abort()
        await agent.wait_for_idle(timeout=30)
        assert not call.finished, "the abort took effect only after the tool ended"
        state = await agent.get_state()
        results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
        assert len(results) == 1 and results[0].is_error and "abort" in results[0].text.lower()
        assert not state.is_streaming and state.pending_tool_calls == []
