"""Faults 1-3, 6 and 9: worker processes killed (SIGKILL) or stalled (SIGSTOP) mid-work, by pid.

Each test ends with ``rig.settle``: the session file equals the workflow's state, no workflow task
failed, and the histories replay.
"""

from __future__ import annotations

import asyncio

import orjson

from agentcore.client import DurableAgent
from agentcore.errors import OUTCOME_UNKNOWN
from agentcore.messages import ToolResultMessage

from .conftest import Rig, assert_no_answered_twice, assistant_messages, file_messages, wait_until


def directive(*calls: tuple[str, dict[str, object]]) -> str:
    return orjson.dumps({"calls": [list(call) for call in calls]}).decode()


async def wait_event(agent: DurableAgent, kind: str, offset: int = 0, timeout: float = 30) -> int:
    async def read() -> int:
        async for event_offset, event in agent.events(offset):
            if event.type == kind:
                return event_offset
        raise AssertionError("event stream ended")

    return await asyncio.wait_for(read(), timeout)


async def test_kill_mid_stream_another_worker_finishes_the_turn(rig: Rig) -> None:
    """Fault 1: exactly one assistant message for the turn, written by the worker that finished it."""
    first = await rig.spawn(delay=0.1, chunks=40)
    agent = await rig.start("mid-stream")
    offset = await agent.event_offset()
    await agent.prompt("tell me a long story")
    await wait_event(agent, "message_update", offset)  # the activity is publishing deltas: mid-stream
    first.kill()
    second = await rig.spawn(delay=0.01, chunks=40)
    retry_offset = await wait_event(agent, "llm_retry", offset)
    state = await rig.settle(agent)
    assert retry_offset > offset
    replies = assistant_messages(state.messages)
    assert len(replies) == 1
    assert replies[0].stop_reason == "stop"
    assert f"from worker {second.pid}" in replies[0].text
    assert [line[2] for line in rig.log_lines("stream-start")] == [str(first.pid), str(second.pid)]


async def test_kill_mid_tool_safe_reruns_unsafe_reports_unknown(rig: Rig) -> None:
    """Fault 2: a retry-safe tool runs again and one result is recorded; a tool that is not retry-safe
    never runs again and gets an "outcome unknown" error result; the turn goes on."""
    first = await rig.spawn()
    agent = await rig.start("mid-tool", tools=["safe_op", "unsafe_op"])
    await agent.prompt(
        directive(("safe_op", {"key": "s1", "work": 4}), ("unsafe_op", {"key": "u1", "work": 4}))
    )
    await rig.wait_log("safe_op-start", "s1")
    await rig.wait_log("unsafe_op-start", "u1")
    first.kill()  # both tools are mid-work: no effect yet
    second = await rig.spawn()
    state = await rig.settle(agent)

    assert len(rig.log_lines("safe_op-start", "s1")) == 2  # re-run on the second worker...
    assert [line[2] for line in rig.log_lines("safe_op-effect", "s1")] == [str(second.pid)]
    assert len(rig.log_lines("unsafe_op-start", "u1")) == 1  # ...the unsafe one never again
    assert rig.log_lines("unsafe_op-effect", "u1") == []

    results = {m.tool_name: m for m in state.messages if isinstance(m, ToolResultMessage)}
    assert len([m for m in state.messages if isinstance(m, ToolResultMessage)]) == 2
    assert not results["safe_op"].is_error and results["safe_op"].text == "safe_op s1 done"
    unsafe = results["unsafe_op"]
    assert unsafe.is_error and "outcome is unknown" in unsafe.text
    assert unsafe.details == {"error_code": OUTCOME_UNKNOWN}
    final = state.messages[-1]
    assert final.role == "assistant" and final.stop_reason == "stop"  # the turn went on
    assert f"done by worker {second.pid}" in final.text


async def test_kill_between_tool_effect_and_result(rig: Rig) -> None:
    """Fault 3: the effect happened, the result never reached Temporal. A retry-safe tool runs again
    (its effect twice: that is what retry-safe promises to tolerate) and one result is recorded; a
    tool that is not retry-safe is not re-run and its result says the outcome is unknown."""
    first = await rig.spawn()
    agent = await rig.start("after-effect", tools=["safe_op", "unsafe_op"])
    await agent.prompt(
        directive(("safe_op", {"key": "s2", "linger": 4}), ("unsafe_op", {"key": "u2", "linger": 4}))
    )
    await rig.wait_log("safe_op-effect", "s2")
    await rig.wait_log("unsafe_op-effect", "u2")
    first.kill()
    await rig.spawn()
    state = await rig.settle(agent)
    assert len(rig.log_lines("safe_op-effect", "s2")) == 2
    assert len(rig.log_lines("unsafe_op-effect", "u2")) == 1
    results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
    assert sorted(m.tool_name for m in results) == ["safe_op", "unsafe_op"]
    assert next(m for m in results if m.tool_name == "unsafe_op").is_error
    assert state.messages[-1].role == "assistant"


async def test_kill_after_tool_results_written_before_model_answers(rig: Rig) -> None:
    """Fault 3, the recording side: the next model call has appended the tool results to the file
    when the worker dies; the retry appends nothing twice and the model answers once."""
    first = await rig.spawn(delay=0.1, chunks=40)
    agent = await rig.start("results-written", tools=["add"])
    offset = await agent.event_offset()
    await agent.prompt(directive(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})))
    await rig.wait_log("stream-start", count=2)  # the model call after the tools has begun...
    await wait_event(agent, "tool_execution_end", offset)
    path = rig.session_path(agent)
    await wait_until(lambda: sum(m.role == "toolResult" for m in file_messages(path)) == 2, 10)
    first.kill()  # ...and the results are in the file
    await rig.spawn()
    state = await rig.settle(agent)
    assert [m.role for m in state.messages] == ["user", "assistant", "toolResult", "toolResult", "assistant"]


async def test_stalled_worker_resumed_late_does_not_fork_the_file(rig: Rig) -> None:
    """Fault 6: two workers on one queue; one is SIGSTOPped mid-stream past its heartbeat timeout,
    the other finishes the turn, then the stalled one resumes: its late writes neither fork nor
    duplicate the session file, and the file still equals the workflow's state."""
    slow = await rig.spawn(delay=0.2, chunks=30)
    agent = await rig.start("stalled")
    offset = await agent.event_offset()
    await agent.prompt("first")
    await wait_event(agent, "message_update", offset)
    streaming_pid = int(rig.log_lines("stream-start")[-1][2])
    assert streaming_pid == slow.pid
    slow.stop()
    other = await rig.spawn(delay=0.2, chunks=30)
    # The retry is streaming on the other worker. Before that, the stopped worker's outstanding
    # activity polls may each take an attempt (the server hands it to a poll no one serves: a 1 s
    # heartbeat timeout, then the retry's back-off), hence the wait's margin.
    await rig.wait_log("stream-start", count=2, timeout=90)
    slow.cont()  # the stalled attempt wakes up while the retry is still streaming
    state = await rig.settle(agent)
    await asyncio.sleep(3)  # give the late attempt every chance to write
    state = await rig.settle(agent)
    replies = assistant_messages(state.messages)
    assert len(replies) == 1 and f"from worker {other.pid}" in replies[0].text
    with open(rig.session_path(agent), "rb") as handle:
        lines = [orjson.loads(line) for line in handle.read().splitlines()[1:]]
    parents = [line.get("parent_id") for line in lines]
    assert len(parents) == len(set(parents)), "two entries share a parent: the file forked"
    # And the conversation goes on normally on both workers.
    await agent.prompt("second")
    state = await rig.settle(agent)
    assert [m.role for m in state.messages] == ["user", "assistant", "user", "assistant"]
    assert_no_answered_twice(state.messages)


async def test_prompt_sent_with_no_worker_runs_once_when_one_starts(rig: Rig) -> None:
    """Fault 9: the prompt waits (accepted by no one) and runs exactly once when a worker starts."""
    agent = await rig.start("no-worker")
    prompt = asyncio.create_task(agent.prompt("anyone there?", id="p-1"))
    await asyncio.sleep(2)
    assert not prompt.done()
    await rig.spawn()
    accepted = await asyncio.wait_for(prompt, 30)
    assert accepted.status == "accepted"
    # The client retrying the same request: Temporal hands back the first outcome, nothing runs.
    again = await agent.prompt("anyone there?", id="p-1")
    assert again == accepted
    state = await rig.settle(agent)
    assert [m.role for m in state.messages] == ["user", "assistant"]
    assert len(rig.log_lines("stream-start")) == 1
