"""Wake-ups: ``schedule_wakeup`` / ``cancel_wakeup`` / ``get_state().wakeups`` and ``wakeup_tool`` in
both runtimes; durably a workflow timer that survives a stopped worker, continue-as-new and recovery."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client

from agentcore import Agent, AgentError, AgentOptions, ToolResultMessage, subagent_tool, wakeup_tool
from agentcore.cli import run
from agentcore.errors import WakeupInPastError, WakeupNotFoundError
from agentcore.events import AgentEvent
from agentcore.messages import UserMessage
from agentcore.protocol import ConversationLimits
from agentcore.runtime import LlmContext
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import Reply, ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import create_worker
from tests.support.durable import FAST_LIMITS, eventually, running_worker, sleep_tool


def echo_model(**kwargs: Any) -> ScriptedModel:
    """Answers every call with what the last user message said: a fired wake-up shows in the answer."""

    def reply(context: LlmContext) -> Reply:
        last = next(m for m in reversed(context.messages) if isinstance(m, UserMessage))
        return text(f"seen: {last.text}")

    return ScriptedModel(reply, **kwargs)


def user_texts(messages: list[Any]) -> list[str]:
    return [m.text for m in messages if m.role == "user"]


async def until(condition: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


# A tool turn, its answer, then the wake-up's note and the answer to it.
TOOL_TURN_THEN_NOTE = ["user", "assistant", "toolResult", "assistant", "user", "assistant"]

# ------------------------------------------------------------------------------------------ in-process


async def test_in_process_wakeup_runs_the_conversation_with_its_note() -> None:
    agent = Agent(model=scripted_model(), stream_fn=echo_model())
    seen: list[AgentEvent] = []
    agent.subscribe(lambda event, signal: seen.append(event))
    wakeup_id = agent.schedule_wakeup("check the deploy", after=timedelta(seconds=0.3))
    [pending] = agent.get_state().wakeups
    assert (pending.id, pending.note) == (wakeup_id, "check the deploy")
    assert pending.due_at > datetime.now(UTC)
    assert not agent.messages  # nothing runs before it is due
    await until(lambda: any(e.type == "agent_end" for e in seen))
    await agent.wait_for_idle()
    assert agent.get_state().wakeups == []
    [note] = user_texts(agent.messages)
    assert note.startswith("[wake-up] check the deploy\n(due ")
    assert agent.messages[-1].text == f"seen: {note}"
    types = [e.type for e in seen]
    assert types[:3] == ["wakeup_scheduled", "wakeup_fired", "agent_start"]
    assert seen[1].id == wakeup_id


async def test_in_process_refusals_and_cancel() -> None:
    agent = Agent(model=scripted_model(), stream_fn=echo_model())
    with pytest.raises(WakeupInPastError) as refused:
        agent.schedule_wakeup("too late", at=datetime.now(UTC) - timedelta(seconds=1))
    assert refused.value.code == "WAKEUP_IN_PAST"
    with pytest.raises(WakeupNotFoundError) as unknown:
        agent.cancel_wakeup("no-such-wakeup")
    assert isinstance(unknown.value, AgentError) and unknown.value.code == "WAKEUP_NOT_FOUND"
    # Awaitable as the durable runtime's coroutines are: the same code runs on both.
    wakeup_id = await agent.schedule_wakeup("never", after=timedelta(seconds=0.2))
    await agent.cancel_wakeup(wakeup_id)
    assert agent.get_state().wakeups == []
    await asyncio.sleep(0.4)
    assert agent.messages == []


async def test_in_process_wakeup_waits_out_the_rate_and_is_cancelled_when_the_conversation_is_full() -> None:
    """A wake-up's note is a message (SPEC-9.1): past the per-minute rate it waits for the window
    (it does not fire late into a refusal), and with the conversation full it is cancelled, saying why."""
    full = Agent(model=scripted_model(), stream_fn=echo_model(), limits=ConversationLimits(max_messages=2))
    seen: list[AgentEvent] = []
    full.subscribe(lambda event, signal: seen.append(event))
    await full.prompt("hello")  # two messages: full
    await full.schedule_wakeup("no room", after=timedelta(seconds=0.1))
    await until(lambda: any(e.type == "wakeup_cancelled" for e in seen))
    [cancelled] = [e for e in seen if e.type == "wakeup_cancelled"]
    assert cancelled.reason.startswith("RATE_LIMITED: Conversation holds 2 messages")
    assert len(full.messages) == 2 and full.get_state().wakeups == []

    busy = Agent(
        model=scripted_model(), stream_fn=echo_model(), limits=ConversationLimits(max_messages_per_minute=1)
    )
    await busy.prompt("hello")  # the minute's one message
    wakeup_id = await busy.schedule_wakeup("later", after=timedelta(seconds=0.1))
    await asyncio.sleep(0.5)
    assert len(busy.messages) == 2  # due, but waiting for the window (about a minute): not fired
    assert [w.id for w in busy.get_state().wakeups] == [wakeup_id]
    await busy.cancel_wakeup(wakeup_id)


async def test_in_process_wakeup_during_a_run_is_a_follow_up() -> None:
    agent = Agent(
        model=scripted_model(),
        tools=[sleep_tool()],
        stream_fn=ScriptedModel(
            [tool_calls([("sleep", {"seconds": 0.5})]), text("slept"), text("took the note")]
        ),
    )
    agent.schedule_wakeup("mid-run", after=timedelta(seconds=0.1))
    await agent.prompt("Sleep a bit.")
    # One run: the note came in as a follow-up, after the run's own answer.
    assert [m.role for m in agent.messages] == TOOL_TURN_THEN_NOTE
    assert agent.messages[4].text.startswith("[wake-up] mid-run")
    assert agent.messages[-1].text == "took the note"


async def test_in_process_wakeup_tool_schedules_and_refuses() -> None:
    model = ScriptedModel(
        [
            tool_calls(
                [
                    ("schedule_wakeup", {"note": "look at the deploy", "delay_seconds": 0.3}),
                    ("schedule_wakeup", {"note": "too soon", "delay_seconds": 0.01}),
                    ("schedule_wakeup", {"note": "one too many", "delay_seconds": 0.3}),
                ]
            ),
            text("I will check back."),
            text("Deploy looked at."),
        ]
    )
    agent = Agent(
        model=scripted_model(),
        tools=[wakeup_tool(min_delay=timedelta(seconds=0.2))],
        stream_fn=model,
        limits=ConversationLimits(max_pending_wakeups=1),
    )
    seen: list[AgentEvent] = []
    agent.subscribe(lambda event, signal: seen.append(event))
    await agent.prompt("Deploy, then check on it.")
    results = [m for m in agent.messages if m.role == "toolResult"]
    assert [r.is_error for r in results] == [False, True, True]
    assert results[1].details["error_code"] == "INVALID_PARAMETERS"
    assert "WAKEUP_LIMIT" in results[2].text  # the model reads why
    [pending] = agent.get_state().wakeups
    assert pending.note == "look at the deploy"
    assert results[0].details["wakeup_id"] == pending.id
    # Announced right after the call's end event (the durable runtime does the same).
    [end] = [
        i
        for i, e in enumerate(seen)
        if e.type == "tool_execution_end" and e.tool_call_id == results[0].tool_call_id
    ]
    assert seen[end + 1].type == "wakeup_scheduled" and seen[end + 1].id == pending.id
    await until(lambda: agent.messages[-1].text == "Deploy looked at.")


# ------------------------------------------------------------------------------------------- durable


async def test_durable_wakeup_fires_runs_and_is_listed(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, echo_model()) as h:
        agent = await h.agents.start("wake-1", AgentOptions(model=scripted_model()))
        wakeup_id = await agent.schedule_wakeup("check the deploy", after=timedelta(seconds=1))
        state = await agent.get_state()
        [pending] = state.wakeups
        assert (pending.id, pending.note) == (wakeup_id, "check the deploy")
        assert state.messages == []
        # Waiting is a timer: no activity in flight; the Web UI's current details name the wait.
        description = await agent.handle.describe()
        assert not description.raw_description.pending_activities
        metadata = await agent.handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert "next wake-up" in metadata.current_details and "1 pending" in metadata.current_details
        state = await eventually(agent.get_state, lambda s: len(s.messages) == 2)
        assert state.wakeups == []
        [note] = user_texts(state.messages)
        assert note.startswith("[wake-up] check the deploy\n(due ")
        assert state.messages[-1].text == f"seen: {note}"
        types = [event.type async for _, event in _events_until(agent, "agent_end")]
        assert types[:3] == ["wakeup_scheduled", "wakeup_fired", "agent_start"]
        await agent.wait_for_idle()
        with JsonlSessionStorage.open(h.session_path("wake-1")) as storage:
            kinds = [e.custom_type for e in storage.find_entries("custom")]
        assert kinds == ["wakeup_scheduled", "wakeup_fired"]


async def _events_until(agent: Any, last: str) -> Any:
    async for offset, event in agent.events(0):
        yield offset, event
        if event.type == last:
            return


async def test_durable_wakeup_in_a_full_conversation_is_cancelled_saying_why(
    temporal_client: Client, tmp_path: Path
) -> None:
    full = FAST_LIMITS.model_copy(update={"max_messages": 2})
    async with running_worker(temporal_client, tmp_path, echo_model(), limits=full) as h:
        agent = await h.agents.start("wake-full", AgentOptions(model=scripted_model()))
        await agent.prompt("hello")
        await agent.wait_for_idle()
        await agent.schedule_wakeup("no room", after=timedelta(seconds=0.2))
        events = [event async for _, event in _events_until(agent, "wakeup_cancelled")]
        assert events[-1].reason.startswith("RATE_LIMITED: Conversation holds 2 messages")  # type: ignore[union-attr]
        state = await agent.get_state()
        assert state.message_count == 2 and state.wakeups == []


async def test_durable_refusals_cancel_and_reset(
    temporal_client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_worker(temporal_client, tmp_path, echo_model()) as h:
        agent = await h.agents.start("wake-2", AgentOptions(model=scripted_model()))
        with pytest.raises(WakeupInPastError):
            await agent.schedule_wakeup("late", at=datetime.now(UTC) - timedelta(minutes=1))
        with pytest.raises(WakeupNotFoundError) as unknown:
            await agent.cancel_wakeup("no-such-wakeup")
        assert unknown.value.code == "WAKEUP_NOT_FOUND"
        first = await agent.schedule_wakeup("cancel me", after=timedelta(seconds=1))
        await agent.schedule_wakeup("reset me", at=datetime.now() + timedelta(hours=1))  # naive: local
        await agent.cancel_wakeup(first)
        [left] = (await agent.get_state()).wakeups
        assert left.note == "reset me"
        # ``agentcore state`` lists it.
        address = h.agents.client.service_client.config.target_host
        argv = ["--address", address, "--task-queue", h.task_queue, "--sessions-dir", str(h.sessions_dir)]
        assert await run([*argv, "state", "wake-2"]) == 0
        [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("wake-up")]
        assert left.id in row and "reset me" in row
        assert abs((left.due_at - datetime.now(UTC)).total_seconds() - 3600) < 60
        await agent.reset()
        assert (await agent.get_state()).wakeups == []
        await asyncio.sleep(1.5)
        assert (await agent.get_state()).messages == []  # the cancelled one never fired
        types = [(e.type, getattr(e, "reason", None)) async for _, e in _first_events(agent, 4)]
        assert types == [
            ("wakeup_scheduled", None),
            ("wakeup_scheduled", None),
            ("wakeup_cancelled", "cancelled"),
            ("wakeup_cancelled", "reset"),
        ]


async def _first_events(agent: Any, count: int) -> Any:
    seen = 0
    async for offset, event in agent.events(0):
        yield offset, event
        seen += 1
        if seen == count:
            return


async def test_durable_wakeup_due_while_no_worker_ran_fires_once(
    temporal_client: Client, tmp_path: Path
) -> None:
    task_queue = "tq-wake-down"
    sessions = tmp_path / "sessions"
    from agentcore.client import AgentClient

    agents = AgentClient(temporal_client, task_queue=task_queue, sessions_dir=sessions, limits=FAST_LIMITS)
    model = echo_model()
    async with create_worker(temporal_client, task_queue=task_queue, sessions_dir=sessions, stream_fn=model):
        agent = await agents.start("wake-down", AgentOptions(model=scripted_model()))
        await agent.schedule_wakeup("while you were away", after=timedelta(seconds=1))
        await agent.wait_for_idle()
    await asyncio.sleep(2.5)  # due, with no worker running
    assert model.calls == []
    async with create_worker(temporal_client, task_queue=task_queue, sessions_dir=sessions, stream_fn=model):
        state = await eventually(agent.get_state, lambda s: len(s.messages) == 2)
        await asyncio.sleep(1)  # a second firing would show by now
        state = await agent.get_state()
    [note] = user_texts(state.messages)
    assert note.startswith("[wake-up] while you were away")
    assert "late)" in note  # how late it fired
    assert len(model.calls) == 1
    history = await agent.handle.fetch_history()
    assert sum(1 for e in history.events if e.HasField("timer_fired_event_attributes")) == 1


async def test_durable_wakeup_survives_continue_as_new(temporal_client: Client, tmp_path: Path) -> None:
    limits = FAST_LIMITS.model_copy(update={"continue_as_new_after_events": 20})
    async with running_worker(temporal_client, tmp_path, echo_model(), limits=limits) as h:
        agent = await h.agents.start("wake-can", AgentOptions(model=scripted_model()))
        wakeup_id = await agent.schedule_wakeup("after the roll-over", after=timedelta(seconds=4))
        first_run = (await agent.handle.describe()).run_id
        for index in range(3):
            await agent.prompt(f"message {index}")
            await agent.wait_for_idle(timeout=20)

        async def run_id() -> str | None:
            return (await h.agents.client.get_workflow_handle("wake-can").describe()).run_id

        assert await eventually(run_id, lambda rid: rid != first_run) != first_run
        assert [w.id for w in (await agent.get_state()).wakeups] == [wakeup_id]
        state = await eventually(
            agent.get_state, lambda s: any("after the roll-over" in t for t in user_texts(s.messages))
        )
        assert state.wakeups == []
        assert sum("[wake-up]" in t for t in user_texts(state.messages)) == 1


async def test_durable_wakeup_tool_is_a_timer_not_an_activity(
    temporal_client: Client, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [
            tool_calls([("schedule_wakeup", {"note": "look at the deploy", "delay_seconds": 1})]),
            text("I will check back."),
            text("Deploy looked at."),
        ]
    )
    tool = wakeup_tool(min_delay=timedelta(seconds=1))
    async with running_worker(temporal_client, tmp_path, model, tools=[tool]) as h:
        agent = await h.agents.start(
            "wake-tool", AgentOptions(model=scripted_model(), tools=["schedule_wakeup"])
        )
        await agent.prompt("Deploy, then check on it.")
        state = await eventually(
            agent.get_state, lambda s: s.messages and s.messages[-1].text == "Deploy looked at."
        )
        assert [m.role for m in state.messages] == TOOL_TURN_THEN_NOTE
        assert state.messages[4].text.startswith("[wake-up] look at the deploy")
        history = await agent.handle.fetch_history()
        activities = [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
        ]
        assert "tools.execute" not in activities
        assert sum(1 for e in history.events if e.HasField("timer_started_event_attributes")) >= 1


async def test_recover_rebuilds_pending_wakeups(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, echo_model()) as h:
        agent = await h.agents.start("wake-rec", AgentOptions(model=scripted_model()))
        keep = await agent.schedule_wakeup("still pending", after=timedelta(seconds=3))
        gone = await agent.schedule_wakeup("cancelled", after=timedelta(hours=1))
        await agent.cancel_wakeup(gone)
        await agent.wait_for_idle()
        await agent.handle.terminate("the Temporal database was lost")
        recovered = await h.agents.recover(h.session_path("wake-rec"), session_id="wake-rec-2")
        [pending] = (await recovered.get_state()).wakeups
        assert (pending.id, pending.note) == (keep, "still pending")
        state = await eventually(recovered.get_state, lambda s: len(s.messages) == 2)
        assert user_texts(state.messages)[0].startswith("[wake-up] still pending")


async def test_durable_wakeup_during_a_run_is_a_follow_up(temporal_client: Client, tmp_path: Path) -> None:
    model = ScriptedModel([tool_calls([("sleep", {"seconds": 2})]), text("slept"), text("took the note")])
    async with running_worker(temporal_client, tmp_path, model, tools=[sleep_tool()]) as h:
        agent = await h.agents.start("wake-busy", AgentOptions(model=scripted_model(), tools=["sleep"]))
        await agent.prompt("Sleep a bit.")
        await eventually(agent.get_state, lambda s: bool(s.pending_tool_calls))
        await agent.schedule_wakeup("mid-run", after=timedelta(seconds=0.2))
        state = await eventually(agent.get_state, lambda s: len(s.messages) == 6 and s.status == "idle")
        assert [m.role for m in state.messages] == TOOL_TURN_THEN_NOTE
        assert state.messages[4].text.startswith("[wake-up] mid-run")
        types = [event.type async for _, event in _events_until(agent, "agent_end")]
        assert types.count("agent_start") == 1  # one run: the note came in as its follow-up


def _subagent_script() -> ScriptedModel:
    return ScriptedModel(
        [
            tool_calls([("helper", {"task": "Check back on the deploy later."})]),
            tool_calls([("schedule_wakeup", {"note": "the deploy", "delay_seconds": 120})]),
            text("I cannot come back to it: check the deploy in 2 minutes."),
            text("Noted."),
        ]
    )


def _refused_in_child(model: ScriptedModel) -> ToolResultMessage:
    """The child's wake-up result, as its next model call saw it."""
    [result] = [m for m in model.calls[2].messages if isinstance(m, ToolResultMessage)]
    return result


async def test_a_subagent_cannot_schedule_a_wakeup_in_either_runtime(
    temporal_client: Client, tmp_path: Path
) -> None:
    """A sub-agent's conversation ends with its task: a wake-up would reach nobody, so the call is
    an error result the child reads (and nothing is left pending anywhere)."""
    helper = subagent_tool(
        "helper", "Does one task.", AgentOptions(model=scripted_model(), tools=[wakeup_tool()])
    )
    model = _subagent_script()
    agent = Agent(model=scripted_model(), tools=[helper], stream_fn=model)
    await agent.prompt("Deploy, and have someone check it.")
    refused = _refused_in_child(model)
    assert refused.is_error and refused.details["error_code"] == "TOOL_NOT_SUPPORTED"
    assert agent.get_state().wakeups == [] and agent.messages[-1].text == "Noted."

    model = _subagent_script()
    async with running_worker(temporal_client, tmp_path, model, tools=[helper]) as h:
        durable = await h.agents.start("wake-sub", AgentOptions(model=scripted_model(), tools=["helper"]))
        await durable.prompt("Deploy, and have someone check it.")
        state = await eventually(
            durable.get_state, lambda s: bool(s.messages) and s.messages[-1].text == "Noted."
        )
        refused = _refused_in_child(model)
        assert refused.is_error and refused.details["error_code"] == "TOOL_NOT_SUPPORTED"
        assert state.wakeups == []
