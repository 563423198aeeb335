"""The agent loop against a scripted model: event order, tool batches, steering, failures."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentcore import (
    EXECUTION_ABORTED,
    EXECUTION_TIMEOUT,
    INVALID_PARAMETERS,
    TOOL_NOT_FOUND,
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    AgentToolResult,
    AssistantMessage,
    InvalidMessageRoleError,
    Message,
    ToolExecutionMode,
    ToolResultMessage,
    agent_loop,
    agent_loop_continue,
    stream_assistant_response,
)
from agentcore.errors import TOOL_CALL_TRUNCATED
from agentcore.testing import ScriptedModel, error, length, text, thinking, tool_calls
from tests.support.loop import MODEL, RecordingRuntime, collect, kinds, make_tool, of_type, sleeper, user


def config(**fields: Any) -> AgentLoopConfig:
    return AgentLoopConfig(model=MODEL, **fields)


async def run(
    model: ScriptedModel,
    tools: list[Any] | None = None,
    prompt: str = "hi",
    signal: AbortSignal | None = None,
    **fields: Any,
) -> list[Any]:
    context = AgentContext(system_prompt="be brief", tools=tools or [])
    return await collect(agent_loop([user(prompt)], context, config(**fields), signal, model))


# ------------------------------------------------------------------------------------------ text


async def test_text_reply_emits_pi_event_order_and_streams_deltas() -> None:
    model = ScriptedModel([text("Hello there")], chunks=3)
    events = await run(model)
    assert kinds(events) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        *["message_update"] * 5,  # text_start, 3 deltas, text_end
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    deltas = [e.assistant_message_event for e in of_type(events, "message_update")]
    assert [d["type"] for d in deltas] == ["text_start", "text_delta", "text_delta", "text_delta", "text_end"]
    assert "".join(d["delta"] for d in deltas if d["type"] == "text_delta") == "Hello there"
    assert "partial" not in deltas[0]
    final = events[-1].messages
    assert [m.role for m in final] == ["user", "assistant"]
    assert final[1].text == "Hello there" and final[1].stop_reason == "stop"
    assert model.calls[0].system_prompt == "be brief"


async def test_thinking_then_text_keeps_both_blocks() -> None:
    events = await run(ScriptedModel([thinking("let me see", "42")]))
    assistant = of_type(events, "message_end")[-1].message
    assert [block.type for block in assistant.content] == ["thinking", "text"]
    assert assistant.content[0].thinking == "let me see"
    updates = [e.assistant_message_event["type"] for e in of_type(events, "message_update")]
    assert updates[:3] == ["thinking_start", "thinking_delta", "thinking_end"]


async def test_turn_end_and_agent_end_carry_the_new_messages_only() -> None:
    history: list[Message] = [user("earlier"), AssistantMessage(content=[], timestamp=5)]
    context = AgentContext(messages=history)
    events = await collect(agent_loop([user("now")], context, config(), None, ScriptedModel([text("ok")])))
    assert [m.role for m in events[-1].messages] == ["user", "assistant"]
    assert len(context.messages) == 2  # the caller's context is not mutated


# ------------------------------------------------------------------------------------------ tools


async def test_parallel_batch_ends_in_completion_order_results_in_call_order() -> None:
    slow = make_tool("slow", sleeper(0.05))
    fast = make_tool("fast", sleeper(0.0))
    model = ScriptedModel([tool_calls([("slow", {}), ("fast", {})]), text("done")])
    events = await run(model, [slow, fast])

    starts = [e.tool_name for e in of_type(events, "tool_execution_start")]
    ends = [e.tool_name for e in of_type(events, "tool_execution_end")]
    assert starts == ["slow", "fast"]
    assert ends == ["fast", "slow"]  # completion order
    # Both ran at once: the second start comes before the first end.
    sequence = [e.type for e in events if e.type.startswith("tool_execution")]
    assert sequence == [
        "tool_execution_start",
        "tool_execution_start",
        "tool_execution_end",
        "tool_execution_end",
    ]

    result_messages = [e.message for e in of_type(events, "message_end") if e.message.role == "toolResult"]
    assert [m.tool_name for m in result_messages] == ["slow", "fast"]  # the order the model asked
    turn_end = of_type(events, "turn_end")[0]
    assert [m.tool_name for m in turn_end.tool_results] == ["slow", "fast"]
    # Result messages come after the whole batch, before turn_end.
    last_tool_end = max(i for i, e in enumerate(events) if e.type == "tool_execution_end")
    first_result = min(
        i for i, e in enumerate(events) if e.type == "message_start" and e.message.role == "toolResult"
    )
    assert last_tool_end < first_result < events.index(turn_end)
    # The model's second call sees both results, in call order.
    assert [m.role for m in model.calls[1].messages] == ["user", "assistant", "toolResult", "toolResult"]


@pytest.mark.parametrize("how", ["config", "tool"])
async def test_sequential_batch_runs_one_tool_at_a_time(how: str) -> None:
    log: list[str] = []
    mode = ToolExecutionMode.SEQUENTIAL if how == "tool" else None
    first = make_tool("first", sleeper(0.02, log, "first"), execution_mode=mode)
    second = make_tool("second", sleeper(0.0, log, "second"))
    model = ScriptedModel([tool_calls([("first", {}), ("second", {})]), text("done")])
    tool_execution = ToolExecutionMode.SEQUENTIAL if how == "config" else ToolExecutionMode.PARALLEL
    events = await run(model, [first, second], tool_execution=tool_execution)
    assert log == ["start first", "end first", "start second", "end second"]
    sequence = [(e.type, e.tool_name) for e in events if e.type.startswith("tool_execution")]
    assert sequence == [
        ("tool_execution_start", "first"),
        ("tool_execution_end", "first"),
        ("tool_execution_start", "second"),
        ("tool_execution_end", "second"),
    ]


def concurrency_probe(seconds: float) -> tuple[Any, dict[str, int]]:
    """A tool that records how many of its calls run at the same time."""
    stats = {"running": 0, "peak": 0}

    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        stats["running"] += 1
        stats["peak"] = max(stats["peak"], stats["running"])
        await asyncio.sleep(seconds)
        stats["running"] -= 1
        return AgentToolResult.text(str(args.get("n", "ok")))

    return execute, stats


async def test_many_tool_calls_never_run_more_than_ten_at_once() -> None:
    execute, stats = concurrency_probe(0.01)
    tool = make_tool("work", execute)
    model = ScriptedModel([tool_calls([("work", {"n": n}) for n in range(25)]), text("done")])
    events = await run(model, [tool])
    assert stats["peak"] == 10
    turn_end = of_type(events, "turn_end")[0]
    assert [m.text for m in turn_end.tool_results] == [str(n) for n in range(25)]
    assert len(of_type(events, "tool_execution_end")) == 25


async def test_max_concurrent_tools_is_configurable() -> None:
    execute, stats = concurrency_probe(0.005)
    model = ScriptedModel([tool_calls([("work", {})] * 6), text("done")])
    await run(model, [make_tool("work", execute)], max_concurrent_tools=2)
    assert stats["peak"] == 2


async def test_tool_updates_are_forwarded_until_the_tool_settles() -> None:
    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        on_update(AgentToolResult.text("25%"))
        await asyncio.sleep(0)
        on_update(AgentToolResult.text("50%"))
        asyncio.get_running_loop().call_later(0.01, on_update, AgentToolResult.text("too late"))
        return AgentToolResult.text("done")

    model = ScriptedModel([tool_calls([("progress", {"x": 1})]), text("ok")], delay=0.03)
    events = await run(model, [make_tool("progress", execute)])
    updates = of_type(events, "tool_execution_update")
    assert [u.partial_result.content[0].text for u in updates] == ["25%", "50%"]
    assert updates[0].args == {"x": 1}
    start = events.index(of_type(events, "tool_execution_start")[0])
    end = events.index(of_type(events, "tool_execution_end")[0])
    assert all(start < events.index(u) < end for u in updates)


async def test_unknown_tool_gets_tool_not_found_and_the_runtime_is_not_called() -> None:
    model = ScriptedModel([tool_calls([("missing", {}), ("known", {})]), text("sorry")])
    runtime = RecordingRuntime(model)
    events = await run(model, [make_tool("known")], runtime=runtime)
    results = of_type(events, "turn_end")[0].tool_results
    assert results[0].is_error and results[0].details["error_code"] == TOOL_NOT_FOUND
    assert 'Tool "missing" not found' in results[0].text and "known" in results[0].text
    assert not results[1].is_error
    assert runtime.tool_runs == ["known"]


async def test_clock_comes_from_the_runtime() -> None:
    model = ScriptedModel([tool_calls([("known", {})]), error("boom", raise_=True)])
    runtime = RecordingRuntime(model, clock_ms=123_456)
    events = await run(model, [make_tool("known")], runtime=runtime)
    results = of_type(events, "turn_end")[0].tool_results
    assert results[0].timestamp == 123_456
    failed = of_type(events, "message_end")[-1].message
    assert failed.stop_reason == "error" and failed.timestamp == 123_456


async def test_bad_arguments_give_invalid_parameters_in_pi_format() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
    }
    ran = []

    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        ran.append(args)
        return AgentToolResult.text("sunny")

    model = ScriptedModel([tool_calls([("weather", {"days": 0})]), text("oops")])
    events = await run(model, [make_tool("weather", execute, parameters=schema)])
    result = of_type(events, "turn_end")[0].tool_results[0]
    assert ran == []
    assert result.is_error and result.details["error_code"] == INVALID_PARAMETERS
    assert result.text == (
        'INVALID_PARAMETERS: Validation failed for tool "weather":\n'
        "  - /days: 0 is less than the minimum of 1\n"
        "  - (root): 'city' is a required property\n\n"
        'Received arguments:\n{\n  "days": 0\n}'
    )


async def test_length_stop_fails_every_tool_call_and_lets_the_model_retry() -> None:
    ran = []

    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        ran.append(tool_call_id)
        return AgentToolResult.text("ran")

    model = ScriptedModel([length("Let me", [("write", {"a": 1}), ("write", {"b": 2})]), text("shorter")])
    events = await run(model, [make_tool("write", execute)])
    results = of_type(events, "turn_end")[0].tool_results
    assert ran == []
    assert [r.details["error_code"] for r in results] == [TOOL_CALL_TRUNCATED] * 2
    assert all("output token limit" in r.text and '"write"' in r.text for r in results)
    assert events[-1].messages[-1].text == "shorter"


async def test_terminate_on_every_result_ends_without_another_model_call() -> None:
    async def finish(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[], terminate=True)

    model = ScriptedModel([tool_calls([("finish", {})]), text("never")])
    events = await run(model, [make_tool("finish", finish)])
    assert len(model.calls) == 1
    assert events[-1].type == "agent_end"


async def test_should_stop_after_turn_ends_the_run() -> None:
    model = ScriptedModel([tool_calls([("known", {})]), text("never")])
    seen: list[tuple[str, int]] = []

    def stop(message: AssistantMessage, results: list[ToolResultMessage]) -> bool:
        seen.append((message.stop_reason, len(results)))
        return True

    events = await run(model, [make_tool("known")], should_stop_after_turn=stop)
    assert seen == [("toolUse", 1)]
    assert len(model.calls) == 1 and kinds(events)[-2:] == ["turn_end", "agent_end"]


# --------------------------------------------------------------------------------------- failures


async def test_provider_error_ends_the_run_after_turn_end() -> None:
    model = ScriptedModel([error("rate limited", partial="I was say"), text("never")])
    events = await run(model)
    assert kinds(events)[-3:] == ["message_end:assistant", "turn_end", "agent_end"]
    failed = of_type(events, "turn_end")[0]
    assert failed.tool_results == []
    assert failed.message.stop_reason == "error" and failed.message.error_message == "rate limited"
    assert failed.message.text == "I was say"
    assert len(model.calls) == 1


async def test_stream_fn_that_raises_becomes_an_error_message_keeping_partial_text() -> None:
    model = ScriptedModel([error("socket closed", raise_=True, partial="Half an ans")], chunks=2)
    events = await run(model)
    final = of_type(events, "message_end")[-1].message
    assert final.stop_reason == "error"
    assert final.error_message == "socket closed"
    assert final.text == "Half an ans"
    assert kinds(events)[-2:] == ["turn_end", "agent_end"]


async def test_stream_fn_raising_before_any_event_still_gets_message_start() -> None:
    def broken(model: Any, context: Any, options: Any) -> Any:
        raise ConnectionError("no route to host")

    events = await collect(agent_loop([user("hi")], AgentContext(), config(), None, broken))
    assert kinds(events)[4:] == ["message_start:assistant", "message_end:assistant", "turn_end", "agent_end"]
    assert events[5].message.error_message == "no route to host"


async def test_stream_fn_raising_after_abort_is_reported_as_aborted() -> None:
    signal = AbortSignal()

    async def broken(model: Any, context: Any, options: Any) -> Any:
        signal.abort()
        raise RuntimeError("connection reset")
        yield  # pragma: no cover

    events = await collect(agent_loop([user("hi")], AgentContext(), config(), signal, broken))
    assert of_type(events, "message_end")[-1].message.stop_reason == "aborted"


async def test_hook_failure_becomes_an_error_message() -> None:
    def transform(messages: list[Message], signal: Any) -> list[Message]:
        raise ValueError("context too large")

    events = await run(ScriptedModel([text("never")]), transform_context=transform)
    final = of_type(events, "message_end")[-1].message
    assert final.stop_reason == "error" and final.error_message == "context too large"


async def test_abort_mid_stream_keeps_the_partial_text() -> None:
    signal = AbortSignal()
    model = ScriptedModel([text("one two three four five six seven eight")], chunks=8, delay=0.005)
    events = []
    async for event in agent_loop([user("hi")], AgentContext(), config(), signal, model):
        events.append(event)
        deltas = [
            e
            for e in events
            if e.type == "message_update" and e.assistant_message_event["type"] == "text_delta"
        ]
        if len(deltas) == 3:
            signal.abort()
    final = of_type(events, "message_end")[-1].message
    assert final.stop_reason == "aborted"
    assert final.text == "one two three fo"[: len(final.text)] and 0 < len(final.text) < 39
    assert kinds(events)[-2:] == ["turn_end", "agent_end"]


async def test_abort_mid_tool_gives_execution_aborted_promptly() -> None:
    signal = AbortSignal()
    model = ScriptedModel([tool_calls([("hang", {}), ("quick", {})]), text("never")])
    events = []
    started = time.perf_counter()
    async for event in agent_loop(
        [user("hi")],
        AgentContext(tools=[make_tool("hang", sleeper(30)), make_tool("quick")]),
        config(),
        signal,
        model,
    ):
        events.append(event)
        if event.type == "tool_execution_end":
            signal.abort()  # the quick tool is done; the hanging one is still running
    assert time.perf_counter() - started < 2
    results = of_type(events, "turn_end")[0].tool_results
    assert results[0].details["error_code"] == EXECUTION_ABORTED and results[0].is_error
    assert not results[1].is_error
    # The next model call sees the abort and the run ends there.
    assert of_type(events, "message_end")[-1].message.stop_reason == "aborted"


async def test_sequential_batch_stops_starting_tools_once_aborted() -> None:
    signal = AbortSignal()
    ran: list[str] = []

    async def first(tool_call_id: str, args: Any, sig: AbortSignal, on_update: Any) -> AgentToolResult:
        ran.append("first")
        signal.abort()
        return AgentToolResult.text("first done")

    async def later(tool_call_id: str, args: Any, sig: AbortSignal, on_update: Any) -> AgentToolResult:
        ran.append("later")
        return AgentToolResult.text("later done")

    tools = [make_tool("first", first), make_tool("later", later)]
    model = ScriptedModel([tool_calls([("first", {}), ("later", {}), ("later", {})]), text("never")])
    events = await collect(
        agent_loop(
            [user("hi")],
            AgentContext(tools=tools),
            config(tool_execution=ToolExecutionMode.SEQUENTIAL),
            signal,
            model,
        )
    )
    assert ran == ["first"]
    results = of_type(events, "turn_end")[0].tool_results
    assert results[0].text == "first done"
    assert [r.details["error_code"] for r in results[1:]] == [EXECUTION_ABORTED] * 2


async def test_tool_timeout_gives_execution_timeout() -> None:
    model = ScriptedModel([tool_calls([("slow", {})]), text("gave up")])
    started = time.perf_counter()
    events = await run(model, [make_tool("slow", sleeper(30), timeout_seconds=0.05)])
    assert time.perf_counter() - started < 2
    result = of_type(events, "turn_end")[0].tool_results[0]
    assert result.is_error and result.details["error_code"] == EXECUTION_TIMEOUT
    assert "0.05" in result.text


# ------------------------------------------------------------------------------- steering, queues


async def test_steering_during_a_batch_waits_for_every_tool_and_turn_end() -> None:
    queued: list[Message] = []
    log: list[str] = []

    async def slow(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        queued.append(user("change of plan"))  # the user steers while tools run
        await asyncio.sleep(0.01)
        log.append(tool_call_id)
        return AgentToolResult.text("slow done")

    def steering() -> list[Message]:
        taken = list(queued)
        queued.clear()
        return taken

    model = ScriptedModel([tool_calls([("slow", {}), ("slow", {})]), text("ok, new plan")])
    events = await run(model, [make_tool("slow", slow)], get_steering_messages=steering)
    assert len(log) == 2  # no tool skipped
    order = kinds(events)
    first_turn_end = order.index("turn_end")
    assert order[first_turn_end + 1 : first_turn_end + 4] == [
        "turn_start",
        "message_start:user",
        "message_end:user",
    ]
    # Two steering messages (one per tool), both delivered before the next model call.
    assert [m.role for m in model.calls[1].messages] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "user",
        "user",
    ]


async def test_steering_polled_at_start_joins_the_first_turn() -> None:
    pending = [user("also this")]

    async def steering() -> list[Message]:
        taken = list(pending)
        pending.clear()
        return taken

    model = ScriptedModel([text("both")])
    events = await run(model, get_steering_messages=steering)
    assert kinds(events).count("turn_start") == 1
    assert [m.content[0].text for m in model.calls[0].messages] == ["hi", "also this"]


async def test_follow_ups_only_when_the_agent_would_stop() -> None:
    follow = [user("and then?")]
    polls: list[int] = []

    def follow_ups() -> list[Message]:
        polls.append(len(model.calls))
        taken = list(follow)
        follow.clear()
        return taken

    model = ScriptedModel([tool_calls([("known", {})]), text("first"), text("second")])
    events = await run(model, [make_tool("known")], get_follow_up_messages=follow_ups)
    # Not polled after the tool turn (the agent was not stopping), only after each final answer.
    assert polls == [2, 3]
    assert [m.role for m in events[-1].messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]
    assert events[-1].messages[-1].text == "second"


# ------------------------------------------------------------------------------------ hooks, misc


async def test_transform_context_then_convert_to_llm_shape_what_the_model_sees() -> None:
    seen: dict[str, Any] = {}

    async def transform(messages: list[Message], signal: Any) -> list[Message]:
        seen["transform_signal"] = signal
        return messages[-1:]

    def convert(messages: list[Message]) -> list[Message]:
        seen["converted"] = [m.role for m in messages]
        return messages

    signal = AbortSignal()
    history: list[Message] = [user("old"), AssistantMessage(content=[], timestamp=3)]
    model = ScriptedModel([text("ok")])
    await collect(
        agent_loop(
            [user("new")],
            AgentContext(messages=history),
            config(transform_context=transform, convert_to_llm=convert),
            signal,
            model,
        )
    )
    assert seen["transform_signal"] is signal
    assert seen["converted"] == ["user"]
    assert [m.content[0].text for m in model.calls[0].messages] == ["new"]


async def test_api_key_and_options_reach_the_stream() -> None:
    model = ScriptedModel([text("ok"), text("ok")])
    await run(model, get_api_key=lambda provider: f"key-for-{provider}", max_tokens=99, session_id="s1")
    await run(model, api_key="fallback")
    first, second = model.options
    assert first.api_key == "key-for-scripted" and first.max_tokens == 99 and first.session_id == "s1"
    assert second.api_key == "fallback"
    assert "key-for" not in first.model_dump_json()


async def test_tool_specs_reach_the_model() -> None:
    model = ScriptedModel([text("ok")])
    await run(
        model, [make_tool("known", parameters={"type": "object", "properties": {"q": {"type": "string"}}})]
    )
    spec = model.calls[0].tools[0]
    assert spec.name == "known" and spec.parameters["properties"] == {"q": {"type": "string"}}


async def test_continue_preconditions() -> None:
    with pytest.raises(InvalidMessageRoleError, match="no messages"):
        agent_loop_continue(AgentContext(), config())
    done = AgentContext(messages=[user("hi"), AssistantMessage(content=[], timestamp=2)])
    with pytest.raises(InvalidMessageRoleError, match="assistant"):
        agent_loop_continue(done, config())


async def test_continue_answers_the_last_message_without_re_emitting_it() -> None:
    model = ScriptedModel([text("answer")])
    context = AgentContext(messages=[user("question")])
    events = await collect(agent_loop_continue(context, config(), None, model))
    assert kinds(events) == [
        "agent_start",
        "turn_start",
        "message_start:assistant",
        "message_update",
        "message_update",
        "message_update",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    assert [m.role for m in events[-1].messages] == ["assistant"]


async def test_stream_assistant_response_emits_and_appends() -> None:
    context = AgentContext(messages=[user("hi")])
    emitted: list[str] = []

    async def emit(event: Any) -> None:
        emitted.append(event.type)

    message = await stream_assistant_response(context, config(), None, emit, ScriptedModel([text("yo")]))
    assert message.text == "yo"
    assert emitted[0] == "message_start" and emitted[-1] == "message_end"
    assert context.messages[-1] is message


async def test_a_schema_checked_spec_refuses_bad_arguments_as_the_tool_pipeline_does() -> None:
    from pydantic import BaseModel

    from agentcore.messages import ToolCall
    from agentcore.tool_exec import check_arguments_by_schema, execute_tool

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tool = make_tool("count", parameters=schema)
    assert tool.spec().schema_checks_arguments
    bad = ToolCall(id="c1", name="count", arguments={"n": "three"})
    refused = check_arguments_by_schema(tool.spec(), bad)
    assert refused is not None and refused.is_error
    assert refused == await execute_tool(tool, bad, AbortSignal(), lambda _: None)
    assert check_arguments_by_schema(tool.spec(), ToolCall(id="c2", name="count", arguments={"n": 3})) is None

    # Only where the schema alone decides: a pydantic model parses laxly ("3" is an int to it), and
    # prepare_arguments runs where the tool's code is.
    class Count(BaseModel):
        n: int

    lax = make_tool("count", parameters=Count)
    prepared = make_tool("count", parameters=schema)
    prepared.prepare_arguments = lambda args: {"n": int(args["n"])}
    for tool in (lax, prepared):
        assert not tool.spec().schema_checks_arguments
        assert (
            check_arguments_by_schema(tool.spec(), ToolCall(id="c3", name="count", arguments={"n": "3"}))
            is None
        )
