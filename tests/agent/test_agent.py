"""The stateful ``Agent``: state reducer, listeners, queues, busy rules, abort."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from agentcore import (
    AbortSignal,
    Agent,
    AgentBusyError,
    AgentOptions,
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    InvalidMessageRoleError,
    Message,
    QueueMode,
    UserMessage,
    ValidationError,
)
from agentcore.testing import ScriptedModel, error, text, tool_calls
from tests.support.loop import MODEL, long_history, make_tool, user

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()


def agent_with(model: ScriptedModel, **fields: Any) -> Agent:
    return Agent(model=MODEL, stream_fn=model, **fields)


def said(message: Message) -> str:
    return "".join(getattr(block, "text", "") for block in message.content)


async def test_prompt_runs_and_state_holds_the_transcript() -> None:
    agent = agent_with(ScriptedModel([text("Hi!")]))
    await agent.prompt("hello")
    state = agent.get_state()
    assert [m.role for m in state.messages] == ["user", "assistant"]
    assert said(state.messages[1]) == "Hi!"
    assert not state.is_streaming and state.streaming_message is None and state.error_message is None


async def test_options_object_and_keyword_fields_both_work() -> None:
    model = ScriptedModel([text("a"), text("b")])
    by_options = Agent(AgentOptions(model=MODEL, stream_fn=model, system_prompt="sys"))
    by_fields = Agent(model=MODEL, stream_fn=model, system_prompt="sys")
    for agent in (by_options, by_fields):
        await agent.prompt("x")
        assert agent.system_prompt == "sys"
    assert [said(a.messages[-1]) for a in (by_options, by_fields)] == ["a", "b"]
    with pytest.raises(TypeError):
        Agent(AgentOptions(model=MODEL), system_prompt="both")


async def test_listeners_sync_and_async_are_awaited_in_order() -> None:
    log: list[str] = []
    agent = agent_with(ScriptedModel([text("ok")]))

    async def slow(event: Any, signal: AbortSignal) -> None:
        await asyncio.sleep(0.001)
        log.append(f"slow:{event.type}")

    def fast(event: Any, signal: AbortSignal) -> None:
        assert isinstance(signal, AbortSignal)
        log.append(f"fast:{event.type}")

    agent.subscribe(slow)
    agent.subscribe(fast)
    await agent.prompt("hi")
    # Each event reaches both listeners (slow first, though it sleeps) before the next event.
    assert log[:4] == ["slow:agent_start", "fast:agent_start", "slow:turn_start", "fast:turn_start"]
    assert log[-2:] == ["slow:agent_end", "fast:agent_end"]


async def test_unsubscribe_stops_delivery() -> None:
    seen: list[str] = []
    agent = agent_with(ScriptedModel([text("a"), text("b")]))
    unsubscribe = agent.subscribe(lambda event, signal: seen.append(event.type))
    await agent.prompt("one")
    count = len(seen)
    unsubscribe()
    await agent.prompt("two")
    assert count > 0 and len(seen) == count


async def test_reducer_tracks_streaming_message_and_pending_tool_calls() -> None:
    observed: dict[str, Any] = {}
    agent: Agent

    async def tool(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        observed["pending_during_tool"] = set(agent.get_state().pending_tool_calls)
        return AgentToolResult.text("ok")

    def listener(event: Any, signal: AbortSignal) -> None:
        state = agent.get_state()
        if event.type == "message_update":
            observed.setdefault("streaming", []).append(said(state.streaming_message))
        if event.type == "agent_end":
            observed["streaming_at_end"] = state.is_streaming

    agent = agent_with(
        ScriptedModel([tool_calls([("look", {})]), text("all done")], chunks=2),
        tools=[make_tool("look", tool)],
    )
    agent.subscribe(listener)
    await agent.prompt("go")
    assert observed["pending_during_tool"] == {"call_0_0"}
    assert "all " in observed["streaming"] and "all done" in observed["streaming"]
    assert observed["streaming_at_end"] is True  # still streaming until agent_end listeners settle
    assert agent.get_state().pending_tool_calls == set()
    assert not agent.is_streaming


async def test_provider_error_sets_error_message() -> None:
    agent = agent_with(ScriptedModel([error("quota exceeded")]))
    await agent.prompt("hi")
    state = agent.get_state()
    assert state.error_message == "quota exceeded"
    assert state.messages[-1].stop_reason == "error"


async def test_listener_failure_ends_the_run_with_an_error_message() -> None:
    agent = agent_with(ScriptedModel([text("ok")]))

    def broken(event: Any, signal: AbortSignal) -> None:
        if event.type == "turn_end":
            raise RuntimeError("listener bug")

    agent.subscribe(broken)
    await agent.prompt("hi")
    assert agent.get_state().error_message == "listener bug"
    assert not agent.is_streaming


async def test_prompt_while_running_is_agent_busy() -> None:
    agent = agent_with(ScriptedModel([text("slow answer " * 5)], chunks=5, delay=0.01))
    running = asyncio.create_task(agent.prompt("first"))
    await asyncio.sleep(0.005)
    with pytest.raises(AgentBusyError) as caught:
        await agent.prompt("second")
    assert caught.value.code == "AGENT_BUSY"
    with pytest.raises(AgentBusyError):
        await agent.continue_()
    with pytest.raises(AgentBusyError):
        agent.reset()
    await running
    assert [m.role for m in agent.messages] == ["user", "assistant"]
    agent.reset()
    assert agent.messages == [] and not agent.has_queued_messages()


async def test_abort_mid_stream_keeps_partial_and_marks_aborted() -> None:
    agent = agent_with(ScriptedModel([text("a b c d e f g h i j")], chunks=10, delay=0.01))
    deltas = 0

    def abort_after_some_text(event: Any, signal: AbortSignal) -> None:
        nonlocal deltas
        if event.type == "message_update" and event.assistant_message_event.get("type") == "text_delta":
            deltas += 1
            if deltas == 3:  # on an event, not after a sleep: a loaded machine streams slower
                agent.abort()

    agent.subscribe(abort_after_some_text)
    await agent.prompt("talk")
    last = agent.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "aborted"
    assert 0 < len(last.text) < len("a b c d e f g h i j")
    assert agent.get_state().error_message == "Request was aborted"


async def test_wait_for_idle_returns_after_the_run() -> None:
    agent = agent_with(ScriptedModel([text("ok")], delay=0.005))
    await agent.wait_for_idle()  # idle at first: returns at once
    task = asyncio.create_task(agent.prompt("hi"))
    await asyncio.sleep(0)
    assert agent.is_streaming
    await agent.wait_for_idle()
    assert not agent.is_streaming and task.done()


async def test_get_state_is_a_copy_and_setters_copy() -> None:
    agent = agent_with(ScriptedModel([text("ok")]))
    await agent.prompt("hi")
    snapshot = agent.get_state()
    snapshot.messages.clear()
    snapshot.pending_tool_calls.add("x")
    assert len(agent.messages) == 2 and agent.get_state().pending_tool_calls == set()
    mine = [user("replaced")]
    agent.messages = mine
    mine.append(user("later"))
    assert len(agent.messages) == 1
    tools = [make_tool("a")]
    agent.tools = tools
    tools.append(make_tool("b"))
    assert [t.name for t in agent.tools] == ["a"]
    agent.thinking_level = "high"
    assert agent.get_state().thinking_level == "high"


async def test_text_prompt_with_images_becomes_one_user_message() -> None:
    model = ScriptedModel([text("a cat")])
    agent = agent_with(model)
    await agent.prompt("what is this?", images=[ImageContent(data=PNG, mime_type="image/png")])
    first = agent.messages[0]
    assert isinstance(first, UserMessage)
    assert [b.type for b in first.content] == ["text", "image"]
    assert model.calls[0].messages[0] == first


async def test_invalid_prompts_raise_validation_errors_naming_the_field() -> None:
    agent = agent_with(ScriptedModel([]))
    with pytest.raises(ValidationError, match="text"):
        await agent.prompt("")
    with pytest.raises(ValidationError, match=r"content\.1.*base64"):
        await agent.prompt(
            "look", images=[{"type": "image", "data": "not base64!", "mime_type": "image/png"}]
        )
    with pytest.raises(ValidationError, match="mime_type"):
        await agent.prompt("look", images=[{"type": "image", "data": PNG, "mime_type": "text/plain"}])
    assert agent.messages == [] and not agent.is_streaming


async def test_prompt_accepts_messages_and_lists() -> None:
    model = ScriptedModel([text("one"), text("two")])
    agent = agent_with(model)
    await agent.prompt(user("single"))
    await agent.prompt([user("a"), {"role": "user", "content": "b", "timestamp": 5}])
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "user", "assistant"]


# ---------------------------------------------------------------------------------- continue_


async def test_continue_preconditions() -> None:
    agent = agent_with(ScriptedModel([text("ok")]))
    with pytest.raises(InvalidMessageRoleError) as caught:
        await agent.continue_()
    assert caught.value.code == "INVALID_MESSAGE_ROLE"
    await agent.prompt("hi")
    with pytest.raises(InvalidMessageRoleError, match="assistant"):
        await agent.continue_()


async def test_continue_after_a_user_message_answers_it() -> None:
    model = ScriptedModel([text("answer")])
    agent = agent_with(model, messages=[user("pending question")])
    await agent.continue_()
    assert [m.role for m in agent.messages] == ["user", "assistant"]


async def test_continue_from_assistant_runs_queued_steering_then_follow_ups() -> None:
    model = ScriptedModel([text("first"), text("steered"), text("followed")])
    agent = agent_with(model)
    await agent.prompt("hi")
    agent.steer("steer me")
    agent.steer("and me")
    await agent.continue_()
    # one-at-a-time: the first steering message is the prompt; the second arrives after that turn.
    texts = [said(m) for m in agent.messages]
    assert texts[2:] == ["steer me", "steered", "and me", "followed"]

    agent.follow_up("one more")
    model.replies = [text("x")] * 10
    model.calls.clear()
    await agent.continue_()
    assert said(agent.messages[-2]) == "one more"


# --------------------------------------------------------------------------------- queue modes


async def _steer_during_tool(mode: QueueMode) -> tuple[Agent, ScriptedModel]:
    agent: Agent

    async def slow(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        agent.steer("first steer")
        agent.steer("second steer")
        await asyncio.sleep(0.005)
        return AgentToolResult.text("tool done")

    model = ScriptedModel([tool_calls([("slow", {})]), text("after one"), text("after two")])
    agent = agent_with(model, tools=[make_tool("slow", slow)], steering_mode=mode)
    await agent.prompt("go")
    return agent, model


async def test_steering_one_at_a_time_delivers_one_per_turn() -> None:
    agent, model = await _steer_during_tool(QueueMode.ONE_AT_A_TIME)
    roles_and_text = [(m.role, said(m)) for m in agent.messages]
    assert roles_and_text[3:] == [
        ("user", "first steer"),
        ("assistant", "after one"),
        ("user", "second steer"),
        ("assistant", "after two"),
    ]
    assert len(model.calls) == 3


async def test_steering_all_delivers_everything_at_once() -> None:
    agent, model = await _steer_during_tool(QueueMode.ALL)
    roles_and_text = [(m.role, said(m)) for m in agent.messages]
    assert roles_and_text[3:] == [
        ("user", "first steer"),
        ("user", "second steer"),
        ("assistant", "after one"),
    ]
    assert len(model.calls) == 2


@pytest.mark.parametrize("mode", [QueueMode.ONE_AT_A_TIME, QueueMode.ALL])
async def test_follow_up_modes(mode: QueueMode) -> None:
    agent: Agent

    def listener(event: Any, signal: AbortSignal) -> None:
        if event.type == "agent_start":
            agent.follow_up("f1")
            agent.follow_up("f2")

    model = ScriptedModel([text("r1"), text("r2"), text("r3")])
    agent = agent_with(model, follow_up_mode=mode)
    agent.subscribe(listener)
    await agent.prompt("start")
    texts = [said(m) for m in agent.messages]
    if mode == QueueMode.ONE_AT_A_TIME:
        assert texts == ["start", "r1", "f1", "r2", "f2", "r3"]
    else:
        assert texts == ["start", "r1", "f1", "f2", "r2"]
    assert not agent.has_queued_messages()


async def test_clear_queues() -> None:
    agent = agent_with(ScriptedModel([]))
    agent.steer("s")
    agent.follow_up(user("f"))
    assert agent.has_queued_messages()
    agent.clear_steering_queue()
    assert agent.has_queued_messages()
    agent.clear_follow_up_queue()
    assert not agent.has_queued_messages()


async def test_sync_tool_runs_in_a_thread_and_reports_progress() -> None:
    import threading

    main_thread = threading.get_ident()
    updates: list[str] = []

    def blocking(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        on_update(AgentToolResult.text("halfway"))
        return AgentToolResult.text(f"thread={threading.get_ident() != main_thread}")

    agent = agent_with(
        ScriptedModel([tool_calls([("block", {})]), text("ok")]), tools=[make_tool("block", blocking)]
    )
    agent.subscribe(
        lambda e, s: (
            updates.append(e.partial_result.content[0].text) if e.type == "tool_execution_update" else None
        )
    )
    await agent.prompt("go")
    assert said(agent.messages[2]) == "thread=True"
    assert updates == ["halfway"]


async def test_tool_names_are_refused_in_process() -> None:
    with pytest.raises(ValidationError, match="tools.0"):
        Agent(model=MODEL, tools=["search_wines"])


async def test_default_stream_fn_is_looked_up_in_providers_at_call_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agentcore.providers

    model = ScriptedModel([text("from the provider registry")])
    agent = Agent(model=MODEL)  # no stream_fn: agentcore.providers.stream, resolved when the run calls it
    monkeypatch.setattr(agentcore.providers, "stream", model, raising=False)
    await agent.prompt("hi")
    assert said(agent.messages[-1]) == "from the provider registry"
    assert len(model.calls) == 1


async def test_what_a_person_sends_must_be_user_messages() -> None:
    agent = Agent(model=MODEL, stream_fn=ScriptedModel([text("hi")]))
    reply = AssistantMessage(api=MODEL.api, provider=MODEL.provider, model=MODEL.id, timestamp=1)
    for bad in (reply, [user("hello"), reply]):
        with pytest.raises(InvalidMessageRoleError, match="'assistant'"):
            await agent.prompt(bad)
    with pytest.raises(InvalidMessageRoleError):
        agent.steer(reply)
    with pytest.raises(InvalidMessageRoleError):
        agent.follow_up(reply)
    assert agent.get_state().messages == []


def test_a_tool_name_is_checked_whole() -> None:
    from pydantic import ValidationError as PydanticValidationError

    with pytest.raises(PydanticValidationError):
        make_tool("foo\n")


# ------------------------------------------------------------------------- pi's loop semantics


async def test_abort_during_a_tool_batch_keeps_queued_steering_for_the_next_run() -> None:
    started = asyncio.Event()

    async def wait_for_abort(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> Any:
        started.set()
        await signal.wait()
        return AgentToolResult.text("stopped")

    model = ScriptedModel([tool_calls([("wait", {})]), text("Got the steer."), text("And the follow-up.")])
    agent = agent_with(model, tools=[make_tool("wait", wait_for_abort)])
    run = asyncio.create_task(agent.prompt("go"))
    await started.wait()
    agent.steer("change of plan")
    agent.follow_up("and later this")
    agent.abort()
    await run
    messages = agent.messages
    assert not any(isinstance(m, UserMessage) and said(m) == "change of plan" for m in messages)
    assert isinstance(messages[-1], AssistantMessage) and messages[-1].stop_reason == "aborted"
    assert len(model.calls) == 1  # the model never saw the steer in the aborted run
    assert agent.has_queued_messages()
    await agent.continue_()
    assert [said(m) for m in agent.messages[-4:]] == [
        "change of plan",
        "Got the steer.",
        "and later this",
        "And the follow-up.",
    ]


async def test_sequential_tool_results_reach_the_state_before_the_next_tool_runs() -> None:
    agent: Agent
    seen: list[list[str]] = []

    async def look(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> Any:
        seen.append([m.role for m in agent.get_state().messages])
        return AgentToolResult.text(tool_call_id)

    model = ScriptedModel([tool_calls([("look", {}), ("look", {})]), text("done")])
    agent = agent_with(model, tools=[make_tool("look", look)], tool_execution="sequential")
    order: list[str] = []
    agent.subscribe(lambda event, signal: order.append(event.type))
    await agent.prompt("go")
    assert seen == [["user", "assistant"], ["user", "assistant", "toolResult"]]
    batch = order[order.index("tool_execution_start") : order.index("turn_end")]
    assert batch == ["tool_execution_start", "tool_execution_end", "message_start", "message_end"] * 2


async def test_added_tool_names_activate_known_tools_for_the_next_model_call() -> None:
    async def unlock(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> Any:
        result = AgentToolResult.text("unlocked")
        result.added_tool_names = ["secret", "nobody_knows_this"]
        return result

    model = ScriptedModel([tool_calls([("unlock", {})]), tool_calls([("secret", {})]), text("done")])
    agent = agent_with(model, tools=[make_tool("unlock", unlock)], available_tools=[make_tool("secret")])
    await agent.prompt("go")
    assert [t.name for t in model.calls[0].tools] == ["unlock"]
    assert [t.name for t in model.calls[1].tools] == ["unlock", "secret"]
    assert [t.name for t in agent.tools] == ["unlock", "secret"]
    result = agent.messages[-2]
    assert result.role == "toolResult" and not result.is_error and said(result) == "secret ok"


async def test_limits_refuse_a_prompt_over_the_message_limits() -> None:
    from agentcore import RateLimitError
    from agentcore.protocol import ConversationLimits

    agent = agent_with(ScriptedModel(["a", "b", "c"]), limits=ConversationLimits(max_messages=2))
    await agent.prompt("one")
    with pytest.raises(RateLimitError):
        await agent.prompt("two")  # 2 held + 1 incoming
    assert len(agent.messages) == 2

    per_minute = agent_with(ScriptedModel(["a", "b"]), limits=ConversationLimits(max_messages_per_minute=2))
    await per_minute.prompt("one")
    per_minute.steer("two")
    with pytest.raises(RateLimitError):
        await per_minute.prompt("three")


async def test_limits_refuse_continue_steer_and_follow_up_and_leave_no_trace() -> None:
    """SPEC-9.1 at every entry point that adds a message: a refused steer is not queued (150 steers
    within a minute: the 99 that fit after the prompt are taken, the rest raise), and ``continue_``
    with the conversation full does not run."""
    from agentcore import RateLimitError
    from agentcore.model import QueueMode
    from agentcore.protocol import ConversationLimits

    agent = agent_with(ScriptedModel([text("First."), text("Steered.")], delay=0.05))
    agent.steering_mode = QueueMode.ALL
    refused: list[RateLimitError] = []

    def steer_a_lot(event: Any, signal: Any) -> None:
        if event.type == "message_start" and event.message.role == "assistant" and not refused:
            for index in range(150):
                try:
                    agent.steer(f"steer {index}")
                except RateLimitError as err:
                    refused.append(err)

    agent.subscribe(steer_a_lot)
    await agent.prompt("Go.")
    users = [said(m) for m in agent.messages if m.role == "user"]
    assert users == ["Go.", *(f"steer {i}" for i in range(99))]
    assert len(refused) == 51 and all(err.code == "RATE_LIMITED" for err in refused)
    assert not agent.has_queued_messages()

    full = agent_with(ScriptedModel([text("a"), text("b")]), limits=ConversationLimits(max_messages=3))
    await full.prompt("one")
    full.follow_up("two")  # 2 held + 1 queued: full now
    with pytest.raises(RateLimitError):
        await full.continue_()
    with pytest.raises(RateLimitError):
        full.steer("three")
    assert [said(m) for m in full.messages] == ["one", "a"]


async def test_limits_cap_concurrent_tool_calls() -> None:
    from agentcore.protocol import ConversationLimits

    running = 0
    most = 0

    async def busy(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> Any:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1
        return AgentToolResult.text("ok")

    model = ScriptedModel([tool_calls([("busy", {})] * 5), text("done")])
    agent = agent_with(
        model, tools=[make_tool("busy", busy)], limits=ConversationLimits(max_concurrent_tools=2)
    )
    await agent.prompt("go")
    assert most == 2


async def test_in_process_context_overflow_is_compacted_and_the_call_made_again() -> None:
    """As a durable conversation: a context overflow is compacted (reason ``overflow``) and the model
    call retried once on the summary; the run answers instead of ending on the overflow error."""
    from agentcore.compaction import CompactionSettings

    overflow = "Context overflow: prompt is too long: 210000 tokens > 200000 maximum"
    model = ScriptedModel([error(overflow), text("SUMMARY OF EARLIER WORK"), text("fresh answer")])
    agent = Agent(
        model=MODEL,
        stream_fn=model,
        messages=long_history(MODEL),
        compaction=CompactionSettings(keep_recent_tokens=60),
    )
    events: list[Any] = []
    agent.subscribe(lambda event, signal: events.append(event))
    await agent.prompt("next")
    compaction = [e for e in events if e.type.startswith("compaction_")]
    assert [(e.type, e.reason) for e in compaction] == [
        ("compaction_start", "overflow"),
        ("compaction_end", "overflow"),
    ]
    assert compaction[1].will_retry and compaction[1].summary == "SUMMARY OF EARLIER WORK"
    assert said(agent.messages[-1]) == "fresh answer" and agent.get_state().error_message is None
    assert "SUMMARY OF EARLIER WORK" in said(model.calls[2].messages[0])
    ends = [e.message for e in events if e.type == "message_end" and e.message.role == "assistant"]
    assert len(ends) == 1  # the overflowed call's message is not kept

    # Once only: a second overflow ends the run on it.
    again = ScriptedModel([error(overflow), text("SUMMARY"), error(overflow)])
    agent = Agent(
        model=MODEL,
        stream_fn=again,
        messages=long_history(MODEL),
        compaction=CompactionSettings(keep_recent_tokens=60),
    )
    await agent.prompt("next")
    assert len(again.calls) == 3 and agent.messages[-1].error_message == overflow


async def test_in_process_aborted_compaction_is_no_error() -> None:
    """As pi: a compaction aborted while its summary streams ends ``aborted=True`` with no error, the
    context stays as it was and the run ends aborted without calling the model."""
    from agentcore.compaction import CompactionSettings
    from agentcore.testing import scripted_model

    small = scripted_model(context_window=400, max_tokens=100)
    history = long_history(small)
    model = ScriptedModel([text("SUMMARY " * 100), text("never")], chunks=100, delay=0.05)
    agent = Agent(
        model=small, stream_fn=model, messages=history, compaction=CompactionSettings(keep_recent_tokens=60)
    )
    events: list[Any] = []

    def listener(event: Any, signal: Any) -> None:
        events.append(event)
        if event.type == "compaction_start":
            agent.abort()

    agent.subscribe(listener)
    await asyncio.wait_for(agent.prompt("next"), 2)
    end = next(e for e in events if e.type == "compaction_end")
    assert end.aborted and end.error_message is None and end.summary is None
    assert agent.messages[: len(history)] == history
    assert agent.messages[-1].stop_reason == "aborted" and len(model.calls) == 1


async def test_in_process_auto_compaction_runs_before_the_model_call_events() -> None:
    from agentcore.compaction import CompactionSettings
    from agentcore.testing import scripted_model

    small = scripted_model(context_window=400, max_tokens=100)
    history = long_history(small)
    model = ScriptedModel([text("SUMMARY OF EARLIER WORK"), text("fresh answer")])
    agent = Agent(
        model=small,
        stream_fn=model,
        messages=history,
        compaction=CompactionSettings(keep_recent_tokens=60),
    )
    order: list[str] = []
    agent.subscribe(lambda event, signal: order.append(event.type))
    await agent.prompt("next")
    assert order[:6] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "compaction_start",
        "compaction_end",
    ]
    assert order[6] == "message_start"
    messages = agent.messages
    assert "SUMMARY OF EARLIER WORK" in said(messages[0])
    assert said(messages[-1]) == "fresh answer"
    assert len(messages) < len(history) + 2
    assert "SUMMARY OF EARLIER WORK" in said(model.calls[1].messages[0])
