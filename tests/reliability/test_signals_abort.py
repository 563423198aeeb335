"""Faults 7 and 8: duplicate signals and updates, and abort at the three awkward moments."""

from __future__ import annotations

import asyncio

from agentcore.errors import EXECUTION_ABORTED
from agentcore.messages import Message, ToolResultMessage, UserMessage
from agentcore.protocol import ConversationLimits

from .conftest import FAULT_LIMITS, Rig, assistant_messages, wait_until
from .test_worker_faults import directive, wait_event


def user_texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if isinstance(m, UserMessage)]


async def test_duplicate_steer_follow_up_and_prompt_are_applied_once(rig: Rig) -> None:
    """Fault 7, including across continue-as-new (the seen ids are carried over)."""
    rig.agents.limits = FAULT_LIMITS.model_copy(update={"continue_as_new_after_events": 40})
    await rig.spawn(delay=0.05, chunks=20)
    agent = await rig.start("dupes")
    first = await agent.prompt("question", id="prompt-1")
    for _ in range(2):
        await agent.steer("steer once", id="steer-1")
        await agent.follow_up("follow once", id="follow-1")
    repeat = await agent.prompt("question", id="prompt-1")  # same id while busy: not AGENT_BUSY
    assert repeat == first
    state = await rig.settle(agent)
    assert user_texts(state.messages) == ["question", "steer once", "follow once"]
    # The steer may land before the run's first steering poll and share its model call (pi's rule).
    assert len(assistant_messages(state.messages)) in (2, 3)
    before = state.message_count

    for i in range(4):  # push the history past the threshold: continue-as-new happens between runs
        await agent.prompt(f"filler {i}")
        await agent.wait_for_idle(timeout=30)
    description = await agent.handle.describe()
    assert description.run_id != agent.handle.first_execution_run_id
    await agent.steer("steer once", id="steer-1")
    await agent.follow_up("follow once", id="follow-1")
    await agent.prompt("question", id="prompt-1")
    state = await rig.settle(agent)
    queues = await agent.get_queues()
    assert queues.steering == [] and queues.follow_up == []
    texts = user_texts(state.messages)
    assert texts.count("steer once") <= 1 and texts.count("question") <= 1
    assert state.message_count == before + 4 * 2


async def test_abort_mid_stream_keeps_the_partial_as_aborted(rig: Rig) -> None:
    """Fault 8a: the partial assistant message is kept with stop_reason "aborted"."""
    await rig.spawn(delay=0.1, chunks=60)
    agent = await rig.start("abort-stream")
    offset = await agent.event_offset()
    await agent.prompt("a long answer please")
    await wait_event(agent, "message_update", offset)
    await asyncio.sleep(0.5)
    await agent.abort()
    state = await rig.settle(agent)
    reply = state.messages[-1]
    assert reply.role == "assistant" and reply.stop_reason == "aborted"
    assert reply.text, "the text streamed before the abort is kept"
    assert state.error_message is None or "abort" in state.error_message.lower()
    await agent.prompt("still there?")
    state = await rig.settle(agent)
    assert state.messages[-1].stop_reason == "stop"


async def test_abort_mid_tool_batch_ends_pending_tools_as_aborted(rig: Rig) -> None:
    """Fault 8b: every pending tool of a parallel batch ends as aborted; messages queued meanwhile
    survive (the steering message is recorded, the follow-up stays queued for the next run)."""
    await rig.spawn()
    agent = await rig.start("abort-tools", tools=["safe_op"])
    calls = [("safe_op", {"key": f"t{i}", "work": 20}) for i in range(3)]
    await agent.prompt(directive(*calls))
    await rig.wait_log("safe_op-start", count=3)
    await agent.steer("steer during tools", id="s")
    await agent.follow_up("follow-up during tools", id="f")
    await agent.abort()
    state = await rig.settle(agent)
    results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 3
    assert all(r.is_error and r.details == {"error_code": EXECUTION_ABORTED} for r in results)
    assert rig.log_lines("safe_op-effect") == []
    assert state.pending_tool_calls == []
    assert state.messages[-1].role == "assistant" and state.messages[-1].stop_reason == "aborted"
    queues = await agent.get_queues()
    queued = [item.message.text for item in queues.steering + queues.follow_up]
    texts = user_texts(state.messages) + queued
    assert texts.count("steer during tools") == 1 and texts.count("follow-up during tools") == 1


async def test_abort_around_continue_as_new_keeps_queued_messages(rig: Rig) -> None:
    """Fault 8c: abort a run whose end triggers continue-as-new, with messages queued: they are
    carried into the new run, and each is answered exactly once afterwards."""
    rig.agents.limits = ConversationLimits(
        llm_heartbeat_seconds=1, tool_heartbeat_seconds=1, continue_as_new_after_events=30
    )
    await rig.spawn(delay=0.1, chunks=60)
    agent = await rig.start("abort-can")
    await agent.prompt("warm up")
    await agent.wait_for_idle(timeout=30)
    first_run = (await agent.handle.describe()).run_id
    offset = await agent.event_offset()
    await agent.prompt("long one")
    await wait_event(agent, "message_update", offset)
    await agent.steer("queued steer", id="qs")
    await agent.follow_up("queued follow-up", id="qf")
    await agent.abort()
    await agent.abort()  # a second abort, landing as the run ends and rolls over: a no-op
    await wait_until(
        lambda: _run_id_changed(agent, first_run), 30, what="continue-as-new after the aborted run"
    )
    state = await rig.settle(agent)
    queues = await agent.get_queues()
    carried = [item.message.text for item in queues.steering + queues.follow_up]
    assert sorted(carried + [t for t in user_texts(state.messages) if t.startswith("queued")]) == [
        "queued follow-up",
        "queued steer",
    ]
    await agent.continue_()  # the queued messages now run, once each
    state = await rig.settle(agent)
    texts = user_texts(state.messages)
    assert texts.count("queued steer") == 1 and texts.count("queued follow-up") == 1
    assert state.messages[-1].role == "assistant" and state.messages[-1].stop_reason == "stop"


async def _run_id_changed(agent, first_run: str) -> bool:  # type: ignore[no-untyped-def]
    return (await agent.handle.describe()).run_id != first_run
