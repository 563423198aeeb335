"""Fault 11: the real OpenAI provider in a worker process, against the loopback HTTP server playing
429 (with retry-after), 529, 500, a connection dropped mid-stream, a 400 and a 401."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType

from agentcore.client import DurableAgent
from agentcore.messages import ToolResultMessage
from agentcore.testing.loopback import LoopbackServer, Script, ScriptToolCall

from .conftest import Rig

RETRYABLE = {
    "429": Script(status=429, headers={"retry-after": "1"}, error_message="Rate limit reached"),
    "529": Script(status=529, error_message="Overloaded"),
    "500": Script(status=500, error_message="Internal error"),
    "drop": Script(text="this answer is cut off mid-stream by a dropped connection", drop_after=3),
}
FINAL = {
    "400": Script(status=400, error_message="Invalid request: bad field"),
    "401": Script(status=401, error_message="Incorrect API key provided"),
}


async def llm_attempts(agent: DurableAgent) -> list[tuple[int, str]]:
    """``(attempt, last failure)`` of every llm.stream attempt in the current run's history.

    A model call expected to be quick starts as a local activity (a marker in the history, with its
    failure if it failed); a failed one counts as the call's first attempt, so the remote attempt
    after it is the second, and its last failure is the local one's.
    """
    history = await agent.handle.fetch_history()
    names = {}
    attempts: list[tuple[int, str]] = []
    local_failure = ""
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            data = marker.details["data"].payloads[0].data if "data" in marker.details else b""
            if marker.marker_name == "core_local_activity" and b'"llm.stream"' in data:
                local_failure = marker.failure.message if marker.HasField("failure") else ""
                if local_failure:
                    attempts.append((1, ""))
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            if names.get(started.scheduled_event_id) == "llm.stream":
                if local_failure and started.attempt == 1:
                    attempts.append((2, local_failure))
                else:
                    attempts.append((started.attempt, started.last_failure.message))
                local_failure = ""
    return attempts


async def test_provider_faults_retried_by_temporal_or_ending_the_turn(rig: Rig) -> None:
    async with LoopbackServer() as server:
        await rig.spawn(model="provider")
        agent = await rig.start("provider", model=server.model("openai-completions"))
        for name, failure in RETRYABLE.items():
            server.enqueue(failure, Script(text=f"ok after {name}"))
            await agent.prompt(f"case {name}")
            state = await rig.settle(agent)
            reply = state.messages[-1]
            assert reply.role == "assistant" and reply.stop_reason == "stop", (name, reply)
            assert reply.text == f"ok after {name}"
            attempt, last_failure = (await llm_attempts(agent))[-1]
            assert attempt == 2, f"{name}: the retry is visible in history"
            assert last_failure, name
        for name, failure in FINAL.items():
            server.enqueue(failure)
            await agent.prompt(f"case {name}")
            state = await rig.settle(agent)
            reply = state.messages[-1]
            assert reply.role == "assistant" and reply.stop_reason == "error", (name, reply)
            assert name in (reply.error_message or "") and "not retryable" in (reply.error_message or "")
            assert state.error_message == reply.error_message
            assert (await llm_attempts(agent))[-1][0] == 1, f"{name} is not retried"
        await agent.prompt("still accepting prompts?")  # the conversation goes on after a failed turn
        state = await rig.settle(agent)
        assert state.messages[-1].stop_reason == "stop" and state.error_message is None
        assert server.requests_received == 2 * len(RETRYABLE) + len(FINAL) + 1


async def test_tool_arguments_that_are_not_json(rig: Rig) -> None:
    """Bad input from the model: arguments that are not JSON, or that fail the tool's schema, get an
    error tool result; the tool never runs and the turn goes on."""
    async with LoopbackServer() as server:
        await rig.spawn(model="provider")
        agent = await rig.start("bad-args", tools=["safe_op"], model=server.model("openai-completions"))
        server.enqueue(
            Script(tool_calls=[ScriptToolCall("safe_op", '{"key": "k1", "work": ', id="c1")]),
            Script(tool_calls=[ScriptToolCall("safe_op", {"key": 5, "work": "soon"}, id="c2")]),
            Script(text="I could not run it."),
        )
        await agent.prompt("run the op")
        state = await rig.settle(agent)
        results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
        assert len(results) == 2 and all(r.is_error for r in results)
        assert rig.log_lines("safe_op-start") == []
        assert state.messages[-1].text == "I could not run it."
