"""Tool calls are regular activities: a tool runs once, in order with its batch, and ``get_state``
answers while tools run (every call's result comes in a workflow task of its own)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History
from temporalio.client import Client

from agentcore import AgentOptions, AgentTool, AgentToolResult
from agentcore.messages import ToolResultMessage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import create_worker
from tests.support.durable import SleepArgs, collect_run, running_worker, sleep_tool


class Counted:
    """A tool that sleeps ``args.seconds`` (or until aborted), counting its runs."""

    def __init__(self, name: str = "work", *, retry_safe: bool = True) -> None:
        self.name = name
        self.retry_safe = retry_safe
        self.runs = 0
        self.finished = 0
        self.aborted = 0
        self.started = asyncio.Event()

    def tool(self) -> AgentTool:
        async def execute(tool_call_id: str, args: SleepArgs, signal: Any, on_update: Any) -> AgentToolResult:
            self.runs += 1
            self.started.set()
            on_update(AgentToolResult.text("working"))
            stopped = asyncio.Event()
            signal.add_listener(stopped.set)
            try:
                await asyncio.wait_for(stopped.wait(), args.seconds)
            except TimeoutError:
                self.finished += 1
                return AgentToolResult.text(f"worked {args.seconds}")
            self.aborted += 1
            return AgentToolResult.text("stopped", is_error=True)

        return AgentTool(
            name=self.name,
            description="Work a while.",
            parameters=SleepArgs,
            execute=execute,
            timeout_seconds=30,
            retry_safe=self.retry_safe,
        )


def _tool_activities(history: History) -> tuple[int, int]:
    """``tools.execute`` in a history: (remote activities scheduled, local attempts recorded)."""
    remote = local = 0
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            remote += event.activity_task_scheduled_event_attributes.activity_type.name == "tools.execute"
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            attributes = event.marker_recorded_event_attributes
            if attributes.marker_name == "core_local_activity":
                data = json.loads(attributes.details["data"].payloads[0].data)
                local += data.get("activity_type") == "tools.execute"
    return remote, local


def _answered(seconds: float) -> ScriptedModel:
    return ScriptedModel([tool_calls([("work", {"seconds": seconds})]), text("done")])


async def _one_turn(client: Client, tmp_path: Path, seconds: float, session: str) -> tuple[Any, ...]:
    """One prompt whose tool works ``seconds``: the tool's counter, the run's events, the state and
    the history."""
    work = Counted()
    async with running_worker(client, tmp_path, _answered(seconds), tools=[work.tool()]) as h:
        agent = await h.agents.start(session, AgentOptions(model=scripted_model(), tools=["work"]))
        await agent.prompt("work")
        events = await collect_run(agent)
        state = await agent.get_state()
        history = await agent.handle.fetch_history()
    return work, events, state, history


async def test_a_tool_that_is_not_retry_safe_stays_remote(temporal_client: Client, tmp_path: Path) -> None:
    work = Counted(retry_safe=False)
    async with running_worker(temporal_client, tmp_path, _answered(0.0), tools=[work.tool()]) as h:
        agent = await h.agents.start(
            "local-tool-unsafe", AgentOptions(model=scripted_model(), tools=["work"])
        )
        await agent.prompt("work")
        await agent.wait_for_idle(timeout=30)
        history = await agent.handle.fetch_history()
    assert work.runs == 1 and _tool_activities(history) == (1, 0)


async def test_quick_tool_turns_in_a_row_leave_the_conversation_responsive(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Model calls and tools chained in one run: ``get_state`` is answered while the run goes on."""
    calls = 40

    def respond(context: Any) -> Any:
        if context.messages[-1].role == "user" and context.messages[-1].text == "hello":
            return text("hi")
        done = sum(1 for m in context.messages if m.role == "toolResult")
        return tool_calls([("work", {"seconds": 0.04})]) if done < calls else text("done")

    work = Counted()
    async with running_worker(temporal_client, tmp_path, ScriptedModel(respond), tools=[work.tool()]) as h:
        agent = await h.agents.start("local-tool-chain", AgentOptions(model=scripted_model(), tools=["work"]))
        await agent.prompt("hello")
        await agent.wait_for_idle(timeout=30)
        await agent.prompt("work")
        await asyncio.wait_for(work.started.wait(), 30)
        states = []
        while len(states) < 3:
            states.append(await agent.get_state())
            await asyncio.sleep(0.05)
        await agent.wait_for_idle(timeout=60)
    assert all(s.is_streaming for s in states), "get_state was answered only once the run had ended"
    assert work.runs == calls


async def test_side_by_side_calls_keep_their_results_after_a_replay(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Two calls of one batch end in the other order than they started (the first is slow, the
    second large): each call keeps its own result when a new worker replays the conversation."""

    async def big(tool_call_id: str, args: SleepArgs, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult.text("x" * 100_000)

    tools = [
        sleep_tool(),
        AgentTool(name="big", description="A large result.", parameters=SleepArgs, execute=big),
    ]

    def respond(context: Any) -> Any:
        if context.messages[-1].role == "user":
            return tool_calls([("sleep", {"seconds": 0.4}), ("big", {"seconds": 0})])
        return text("both done")

    model = ScriptedModel(respond)
    async with running_worker(temporal_client, tmp_path, model, tools=tools) as h:
        options = AgentOptions(model=scripted_model(), tools=["sleep", "big"])
        agent = await h.agents.start("side-by-side-replay", options, prompt="go")
        await agent.wait_for_idle(timeout=30)
        live = _tool_results((await agent.get_messages()).messages)
        history = await agent.handle.fetch_history()
    assert live == {"sleep": "slept 0.4", "big": 100_000}, live
    remote = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert remote.count("tools.execute") == 2, remote
    # A new worker on the same queue has nothing cached: it replays the history to answer.
    worker = create_worker(
        temporal_client, task_queue=h.task_queue, tools=tools, sessions_dir=h.sessions_dir, stream_fn=model
    )
    async with worker:
        replayed = _tool_results((await agent.get_messages()).messages)
    assert replayed == live, replayed


def _tool_results(messages: list[Any]) -> dict[str, Any]:
    """Each tool's result text (its length, when large)."""
    return {
        m.tool_name: len(m.text) if len(m.text) > 1000 else m.text
        for m in messages
        if isinstance(m, ToolResultMessage)
    }
