"""A quick tool call runs inside its workflow task; a slow one is handed off, still running, to the
remote ``tools.execute``; a tool that is not retry-safe stays remote.

A retry-safe tool's call is first a local activity bounded to one publish interval (as a quick
model call is). One that has not ended by then goes on in the worker and the remote activity takes
it over: it runs once, and abort and ``get_state`` act while it runs. The activity's side is tested
under ``ActivityEnvironment`` (a local attempt is the same activity with ``info.is_local``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

import agentcore.activities.tools as tools_activities
from agentcore import AgentOptions, AgentTool, AgentToolResult
from agentcore.activities.tools import ToolActivities
from agentcore.messages import TextContent, ToolResultMessage
from agentcore.protocol import ToolAttemptResult, ToolCallInput
from agentcore.temporal import DATA_CONVERTER
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.tools import ToolRegistry
from agentcore.worker import create_worker
from tests.durable_support import SleepArgs, collect_run, running_worker, sleep_tool


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
    """Local model calls and local tools chained in one run: together they hold a workflow task one
    publish interval at most, so ``get_state`` is answered while the run goes on (held for the whole
    run, it would be answered only after its end)."""
    calls = 40

    def respond(context: Any) -> Any:
        if context.messages[-1].role == "user" and context.messages[-1].text == "hello":
            return text("hi")
        done = sum(1 for m in context.messages if m.role == "toolResult")
        return tool_calls([("work", {"seconds": 0.04})]) if done < calls else text("done")

    work = Counted()
    async with running_worker(temporal_client, tmp_path, ScriptedModel(respond), tools=[work.tool()]) as h:
        agent = await h.agents.start("local-tool-chain", AgentOptions(model=scripted_model(), tools=["work"]))
        await agent.prompt("hello")  # (the first model call is remote; the next ones are quick)
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


# ------------------------------------------------------------------------- the activity, by itself


def _env(*, local: bool) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.payload_converter = DATA_CONVERTER.payload_converter
    env.info = dataclasses.replace(env.info, is_local=local, workflow_id="wf")
    return env


def _input(seconds: float, **fields: Any) -> ToolCallInput:
    return ToolCallInput(
        session_id="s",
        tool_name="work",
        tool_call_id="c1",
        arguments={"seconds": seconds},
        timeout_seconds=30,
        **fields,
    )


def _activities(work: Counted) -> ToolActivities:
    return ToolActivities(ToolRegistry([work.tool()]), local_wait=timedelta(milliseconds=50))


async def test_a_quick_local_attempt_returns_the_result_and_its_progress() -> None:
    work = Counted()
    attempt = await _env(local=True).run(_activities(work).execute, _input(0.0))
    assert isinstance(attempt, ToolAttemptResult) and not attempt.handoff
    assert attempt.result is not None and attempt.result.content == [TextContent(text="worked 0.0")]
    assert [u.content for u in attempt.updates] == [[TextContent(text="working")]]
    assert 0 < attempt.local_seconds < 0.05


async def test_a_handed_off_tool_is_taken_over_not_run_again() -> None:
    work = Counted()
    acts = _activities(work)
    handed = await _env(local=True).run(acts.execute, _input(0.3))
    assert isinstance(handed, ToolAttemptResult) and handed.handoff and handed.result is None
    done = await _env(local=False).run(acts.execute, _input(0.3))
    assert isinstance(done, AgentToolResult) and done.content == [TextContent(text="worked 0.3")]
    assert (work.runs, work.finished) == (1, 1) and not acts._running


async def test_a_handed_off_tool_not_on_this_worker_runs_anew() -> None:
    work = Counted()
    assert (await _env(local=True).run(_activities(work).execute, _input(0.2))).handoff  # type: ignore[union-attr]
    done = await _env(local=False).run(_activities(work).execute, _input(0.2))
    assert isinstance(done, AgentToolResult) and work.runs == 2


async def test_a_handed_off_tool_nobody_takes_over_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_activities, "HANDOFF_WAIT_SECONDS", 0.1)
    work = Counted()
    acts = _activities(work)
    assert (await _env(local=True).run(acts.execute, _input(5.0))).handoff  # type: ignore[union-attr]
    await asyncio.sleep(0.3)
    assert work.aborted == 1 and not acts._running


async def test_a_stop_attempt_aborts_the_handed_off_tool() -> None:
    """The abort cancelled the remote activity before it started: the workflow's stop attempt finds
    the tool still running here and aborts it."""
    work = Counted()
    acts = _activities(work)
    assert (await _env(local=True).run(acts.execute, _input(5.0))).handoff  # type: ignore[union-attr]
    stopped = await _env(local=True).run(acts.execute, _input(5.0, stop=True))
    assert isinstance(stopped, ToolAttemptResult) and stopped.result is not None and stopped.result.is_error
    assert (work.runs, work.aborted, work.finished) == (1, 1, 0) and not acts._running


async def test_a_local_attempt_waits_no_longer_than_its_task_has_left() -> None:
    work = Counted()
    attempt = await _env(local=True).run(_activities(work).execute, _input(0.03, local_wait_seconds=0.01))
    assert isinstance(attempt, ToolAttemptResult) and attempt.handoff


async def test_side_by_side_attempts_keep_their_results_after_a_replay(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Two calls of one batch both go remote after their local attempts, which end in the other
    order than they started: the first is slow (handed off after the attempt's bound), the second
    ends at once with a result too large for the workflow task (handed off finished). The workflow
    takes them in the order they started (``TemporalRuntime._in_start_order``), so their remote
    activities come in that order live and on replay; each call keeps its own result when a new
    worker replays the conversation."""

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
    assert remote.count("tools.execute") == 2, remote  # both handed to the remote activity
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
