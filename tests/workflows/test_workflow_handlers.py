"""Every update, validator, signal and query of the conversation workflow, on a real dev server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from agentcore import AgentOptions, ThinkingLevel
from agentcore.compaction import CompactionSettings
from agentcore.errors import (
    AgentBusyError,
    AgentNotFoundError,
    InvalidMessageRoleError,
    RateLimitError,
    ToolNotFoundError,
    ValidationError,
)
from agentcore.messages import UserMessage
from agentcore.protocol import ConversationLimits, QueuedMessage
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import FAST_LIMITS, add_tool, collect_run, eventually, listed_runs, running_worker


def _echo(context) -> object:  # type: ignore[no-untyped-def]
    last = context.messages[-1]
    return text(f"echo {len([m for m in context.messages if m.role == 'user'])}: {getattr(last, 'text', '')}")


async def _count_events(agent, kind: EventType.ValueType) -> int:  # type: ignore[no-untyped-def]
    history = await agent.handle.fetch_history()
    return sum(1 for event in history.events if event.event_type == kind)


async def test_busy_refusals_leave_history_untouched(temporal_client: Client, tmp_path: Path) -> None:
    slow = ScriptedModel(_echo, chunks=50, delay=0.02)
    async with running_worker(temporal_client, tmp_path, slow) as h:
        agent = await h.agents.start("busy", AgentOptions(model=scripted_model()))
        await agent.prompt("first")
        for call in (agent.prompt("second"), agent.reset(), agent.set_model(scripted_model("other"))):
            with pytest.raises(AgentBusyError):
                await call
        with pytest.raises(AgentBusyError):
            await agent.continue_()
        await agent.wait_for_idle(timeout=20)
        # Refused updates never reach history: only the accepted prompt and wait_for_idle are there.
        accepted = await _count_events(agent, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
        assert accepted == 2
        state = await agent.get_state()
        assert [m.role for m in state.messages] == ["user", "assistant"]


async def test_continue_preconditions_and_queue_drain(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_echo)) as h:
        agent = await h.agents.start("cont", AgentOptions(model=scripted_model()))
        with pytest.raises(InvalidMessageRoleError, match="No messages"):
            await agent.continue_()
        await agent.prompt("hello")
        await agent.wait_for_idle(timeout=20)
        with pytest.raises(InvalidMessageRoleError, match="assistant"):
            await agent.continue_()
        await agent.steer("queued while idle")
        queues = await agent.get_queues()
        assert [q.message.content[0].text for q in queues.steering] == ["queued while idle"]  # type: ignore[union-attr]
        await agent.continue_()
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        assert [m.role for m in state.messages] == ["user", "assistant", "user", "assistant"]
        assert state.messages[-1].text == "echo 2: queued while idle"  # type: ignore[union-attr]
        assert (await agent.get_queues()).steering == []


async def test_queued_messages_can_be_cleared_and_are_never_sent(
    temporal_client: Client, tmp_path: Path
) -> None:
    """pi's clearSteeringQueue / clearFollowUpQueue / clearAllQueues on a durable conversation: each
    returns what it removed, a cleared message never reaches the model, nothing reaches the file."""
    model = ScriptedModel(_echo)
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start("clear", AgentOptions(model=scripted_model()))
        await agent.prompt("hello")
        await agent.wait_for_idle(timeout=20)
        file_before = h.session_path("clear").read_bytes()

        await agent.steer("steer one")
        await agent.steer("steer two")
        await agent.follow_up("follow one")
        removed = await agent.clear_steering_queue()
        assert [q.message.text for q in removed.steering] == ["steer one", "steer two"]
        assert removed.follow_up == []
        queues = await agent.get_queues()
        assert queues.steering == [] and [q.message.text for q in queues.follow_up] == ["follow one"]
        assert (await agent.get_state()).steering_queue_length == 0

        assert await agent.has_queued_messages()
        removed = await agent.clear_follow_up_queue()
        assert [q.message.text for q in removed.follow_up] == ["follow one"] and removed.steering == []
        assert not await agent.has_queued_messages()
        # Nothing is queued any more: continuing from the assistant's answer has nothing to send.
        with pytest.raises(InvalidMessageRoleError):
            await agent.continue_()

        await agent.steer("steer three")
        await agent.follow_up("follow two")
        removed = await agent.clear_all_queues()
        assert [q.message.text for q in removed.steering] == ["steer three"]
        assert [q.message.text for q in removed.follow_up] == ["follow two"]
        assert await agent.get_queues() == (await agent.clear_all_queues())  # both empty now

        # A resent clear (same id) applies once: it does not empty what was queued since.
        await agent.clear_queues("all", id="clear-1")
        await agent.steer("kept")
        assert (await agent.clear_queues("all", id="clear-1")).steering == []
        assert [q.message.text for q in (await agent.get_queues()).steering] == ["kept"]
        await agent.clear_all_queues()

        await agent.wait_for_idle(timeout=20)
        assert h.session_path("clear").read_bytes() == file_before
        await agent.prompt("again")
        await agent.wait_for_idle(timeout=20)
        sent = [m.text for m in model.calls[-1].messages if m.role == "user"]  # type: ignore[union-attr]
        assert sent == ["hello", "again"]


async def test_settings_updates_are_recorded_in_the_session(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_echo), tools=[add_tool()]) as h:
        agent = await h.agents.start("settings", AgentOptions(model=scripted_model()))
        await agent.set_model(scripted_model("bigger", context_window=9999))
        await agent.set_thinking_level(ThinkingLevel.HIGH)
        await agent.set_system_prompt("You are terse.")
        await agent.set_tools(["add"])
        with pytest.raises(ToolNotFoundError, match="missing_tool"):
            await agent.set_tools(["add", "missing_tool"])
        await agent.prompt("hi")
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        assert state.model.id == "bigger" and state.thinking_level == ThinkingLevel.HIGH
        assert [t.name for t in state.tools] == ["add"] and state.system_prompt == "You are terse."
        with JsonlSessionStorage.open(h.session_path("settings")) as storage:
            context = storage.build_context()
        assert (
            context.model is not None
            and context.model.id == "bigger"
            and context.model.context_window == 9999
        )
        assert context.thinking_level == ThinkingLevel.HIGH
        assert context.system_prompt == "You are terse."
        assert context.active_tools == ["add"]


async def test_reset_clears_transcript_and_moves_the_session_leaf(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_echo)) as h:
        agent = await h.agents.start("reset", AgentOptions(model=scripted_model()))
        await agent.prompt("one")
        await agent.wait_for_idle(timeout=20)
        await agent.reset()
        assert (await agent.get_state()).messages == []
        await agent.prompt("two")
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        assert [m.role for m in state.messages] == ["user", "assistant"]
        assert state.messages[-1].text == "echo 1: two"  # type: ignore[union-attr]
        with JsonlSessionStorage.open(h.session_path("reset")) as storage:
            assert [m.role for m in storage.build_context().messages] == ["user", "assistant"]
            # Nothing is deleted: the first exchange is still in the file, on its own branch.
            assert storage.get_session_stats().message_count == 4


async def test_after_reset_the_session_file_alone_rebuilds_the_conversation(
    temporal_client: Client, tmp_path: Path
) -> None:
    """A reset keeps the conversation's settings and records them on the new path (as a branch
    does): ``recover`` without options gives the same model, thinking level, tools and system
    prompt. Stats count the whole file, live and recovered alike (the reset exchange included)."""
    model = ScriptedModel(_echo)
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        agent = await h.agents.start(
            "reset-settings",
            AgentOptions(
                model=scripted_model("kept", context_window=5000),
                thinking_level=ThinkingLevel.HIGH,
                tools=["add"],
                system_prompt="You are terse.",
            ),
        )
        await agent.prompt("before the reset")
        await agent.wait_for_idle(timeout=20)
        await agent.reset()
        await agent.wait_for_idle(timeout=20)
        live = await agent.get_state()
        live_stats = await agent.get_session_stats()
        assert live_stats.message_count == 2  # the reset exchange still counts: it is in the file

        recovered = await h.agents.recover(h.session_path("reset-settings"), session_id="reset-settings-2")
        await recovered.wait_for_idle(timeout=20)
        state = await recovered.get_state()
        assert state.messages == []
        assert state.model == live.model and state.model.id == "kept"
        assert state.thinking_level == ThinkingLevel.HIGH
        assert [t.name for t in state.tools] == ["add"]
        assert state.system_prompt == "You are terse."
        assert await recovered.get_session_stats() == live_stats

        # Both go on alike: the same answer to the same prompt, the same stats after it.
        for conversation in (agent, recovered):
            await conversation.prompt("after the reset")
            await conversation.wait_for_idle(timeout=20)
        assert (await recovered.get_state()).messages[-1].text == "echo 1: after the reset"  # type: ignore[union-attr]
        assert await recovered.get_session_stats() == await agent.get_session_stats()
        with JsonlSessionStorage.open(h.session_path("reset-settings")) as storage:
            assert storage.get_session_stats() == await agent.get_session_stats()


async def test_repeated_ids_apply_once(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_echo, delay=0.01, chunks=20)) as h:
        agent = await h.agents.start("dedup", AgentOptions(model=scripted_model()))
        first = await agent.prompt("once", id="p-1")
        again = await agent.prompt("once", id="p-1")
        assert first.status == "accepted" and again.status in ("accepted", "duplicate")
        await agent.follow_up("later", id="f-1")
        await agent.follow_up("later", id="f-1")
        await agent.steer("now", id="s-1")
        await agent.steer("now", id="s-1")
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        users = [m.text for m in state.messages if m.role == "user"]  # type: ignore[union-attr]
        assert users == ["once", "now", "later"]
        # A repeat after the run ended is still recognised (ids are remembered, not just in flight).
        await agent.prompt("once", id="p-1")
        await agent.wait_for_idle(timeout=20)
        assert (await agent.get_state()).message_count == len(state.messages)


async def test_rate_limits_refuse_with_a_clear_error(temporal_client: Client, tmp_path: Path) -> None:
    limits = FAST_LIMITS.model_copy(update={"max_messages": 4, "max_messages_per_minute": 3})
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_echo), limits=limits) as h:
        agent = await h.agents.start("limits", AgentOptions(model=scripted_model()))
        for i in range(2):
            await agent.prompt(f"m{i}")
            await agent.wait_for_idle(timeout=20)
        with pytest.raises(RateLimitError, match="limit is 4"):
            await agent.prompt("one too many")
        state = await agent.get_state()
        assert len(state.messages) == 4  # nothing lost, nothing added

    per_minute = FAST_LIMITS.model_copy(update={"max_messages_per_minute": 2})
    async with running_worker(temporal_client, tmp_path / "b", ScriptedModel(_echo), limits=per_minute) as h:
        agent = await h.agents.start("per-minute", AgentOptions(model=scripted_model()))
        await agent.prompt("a")
        await agent.wait_for_idle(timeout=20)
        await agent.prompt("b")
        await agent.wait_for_idle(timeout=20)
        with pytest.raises(RateLimitError, match="per minute"):
            await agent.prompt("c")


async def test_limits_refuse_continue_steer_and_follow_up_before_anything_is_recorded(
    temporal_client: Client, tmp_path: Path
) -> None:
    """SPEC-9.1 at every entry point that adds a message: steering over the per-minute rate is refused
    (RateLimitError, as in-process) and leaves no trace, in the queue or in the workflow's history;
    ``continue_`` with the conversation full does not run."""
    per_minute = FAST_LIMITS.model_copy(update={"max_messages_per_minute": 5})
    slow = ScriptedModel(_echo, chunks=40, delay=0.05)
    async with running_worker(temporal_client, tmp_path, slow, limits=per_minute) as h:
        agent = await h.agents.start("steer-rate", AgentOptions(model=scripted_model()))
        await agent.prompt("go")
        accepted, refused = [], []
        for index in range(8):
            try:
                await agent.steer(f"steer-{index}")
                accepted.append(index)
            except RateLimitError as err:
                assert err.code == "RATE_LIMITED"
                refused.append(index)
        with pytest.raises(RateLimitError):
            await agent.follow_up("one more")
        assert accepted == [0, 1, 2, 3] and refused == [4, 5, 6, 7]
        queues = await agent.get_queues()
        assert [item.message.text for item in queues.steering] == [f"steer-{i}" for i in range(4)]
        history = await agent.handle.fetch_history()
        recorded = b"".join(event.SerializeToString() for event in history.events)
        assert b"steer-3" in recorded and b"steer-4" not in recorded and b"one more" not in recorded
        await agent.abort()
        await agent.wait_for_idle(timeout=20)

    full = FAST_LIMITS.model_copy(update={"max_messages": 3})
    async with running_worker(temporal_client, tmp_path / "b", ScriptedModel(_echo), limits=full) as h:
        agent = await h.agents.start("continue-full", AgentOptions(model=scripted_model()))
        await agent.prompt("one")
        await agent.wait_for_idle(timeout=20)
        await agent.follow_up("two")  # 2 held + 1 queued: full now
        with pytest.raises(RateLimitError, match="limit is 3"):
            await agent.continue_()
        with pytest.raises(RateLimitError, match="limit is 3"):
            await agent.steer("three")
        state = await agent.get_state()
        assert state.message_count == 2 and not state.is_streaming
        assert (state.steering_queue_length, state.follow_up_queue_length) == (0, 1)


async def test_steer_and_follow_up_signals_past_the_limits_are_dropped(
    temporal_client: Client, tmp_path: Path
) -> None:
    """The ``steer`` / ``follow_up`` signals (an operator's, from the Temporal Web UI or
    ``temporal workflow signal``) cannot be refused as the updates are: one past the per-minute rate
    is dropped, and nothing of it is queued or reaches the model."""
    per_minute = FAST_LIMITS.model_copy(update={"max_messages_per_minute": 4})
    slow = ScriptedModel(_echo, chunks=40, delay=0.05)
    async with running_worker(temporal_client, tmp_path, slow, limits=per_minute) as h:
        agent = await h.agents.start("signal-rate", AgentOptions(model=scripted_model()))
        await agent.prompt("go")
        for index in range(6):
            name = "steer" if index % 2 == 0 else "follow_up"
            item = QueuedMessage(
                id=f"sig-{index}", message=UserMessage(content=f"signal-{index}", timestamp=1)
            )
            await agent.handle.signal(name, item)

        def handled(history: WorkflowHistory) -> bool:  # the six signals in, and a task completed after
            ours = [
                i
                for i, event in enumerate(history.events)
                if event.workflow_execution_signaled_event_attributes.signal_name in ("steer", "follow_up")
            ]
            completed = [
                i
                for i, event in enumerate(history.events)
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
            ]
            return len(ours) == 6 and completed[-1] > ours[-1]

        assert handled(await eventually(agent.handle.fetch_history, handled))
        queues = await agent.get_queues()
        assert [i.message.text for i in queues.steering] == ["signal-0", "signal-2"]
        assert [i.message.text for i in queues.follow_up] == ["signal-1"]
        await agent.abort()
        await agent.wait_for_idle(timeout=20)


async def test_queries_and_not_found(temporal_client: Client, tmp_path: Path) -> None:
    model = ScriptedModel([tool_calls([("add", {"a": 1, "b": 1})]), text("2")])
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        with pytest.raises(AgentNotFoundError):
            await h.agents.attach("no-such-session")
        agent = await h.agents.start("queries", AgentOptions(model=scripted_model(), tools=["add"]))
        await agent.prompt("1+1?")
        events = await collect_run(agent)
        assert events[-1].type == "agent_end"
        await agent.wait_for_idle(timeout=20)
        page = await agent.get_messages(1, 3)
        assert page.start == 1 and page.total == 4
        assert [m.role for m in page.messages] == ["assistant", "toolResult"]
        stats = await agent.get_session_stats()
        assert stats.message_count == 4 and stats.tool_calls == 1
        attached = await h.agents.attach("queries")
        assert (await attached.get_state()).message_count == 4
        with pytest.raises(ValidationError):
            await agent.prompt("")


async def test_continue_as_new_carries_queues_and_state(temporal_client: Client, tmp_path: Path) -> None:
    limits = ConversationLimits(continue_as_new_after_events=40, llm_heartbeat_seconds=2)
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_echo), limits=limits) as h:
        agent = await h.agents.start("rollover", AgentOptions(model=scripted_model()))
        first_run = (await agent.handle.describe()).run_id
        for i in range(6):
            await agent.prompt(f"p{i}")
            await agent.wait_for_idle(timeout=20)
        await agent.steer("kept across runs")
        await agent.follow_up("also kept")
        # Let the workflow roll over while the messages are queued.
        for _ in range(100):
            if (await agent.handle.describe()).run_id != first_run:
                break
            await asyncio.sleep(0.1)
        second_run = (await agent.handle.describe()).run_id
        assert second_run != first_run
        queues = await agent.get_queues()
        assert len(queues.steering) == 1 and len(queues.follow_up) == 1
        await agent.continue_()
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        users = [m.text for m in state.messages if m.role == "user"]  # type: ignore[union-attr]
        assert users[-2:] == ["kept across runs", "also kept"]
        assert state.message_count == 16
        with JsonlSessionStorage.open(h.session_path("rollover")) as storage:
            assert len(storage.build_context().messages) == 16


async def test_recover_rebuilds_a_conversation_from_its_session_file(
    temporal_client: Client, tmp_path: Path
) -> None:
    model = ScriptedModel(_echo)
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        original = await h.agents.start(
            "orig", AgentOptions(model=scripted_model(), tools=["add"], system_prompt="S")
        )
        for i in range(3):
            await original.prompt(f"q{i}")
            await original.wait_for_idle(timeout=20)
        before = await original.get_state()
        copy = tmp_path / "elsewhere.jsonl"
        copy.write_bytes(h.session_path("orig").read_bytes())
        recovered = await h.agents.recover(copy, session_id="recovered")
        await recovered.wait_for_idle(timeout=20)
        with JsonlSessionStorage.open(h.session_path("recovered")) as storage:
            assert storage.get_metadata().id == "recovered"  # the copy's header names its session
        state = await recovered.get_state()
        assert [m.model_dump() for m in state.messages] == [m.model_dump() for m in before.messages]
        assert state.system_prompt == "S" and [t.name for t in state.tools] == ["add"]
        await recovered.prompt("q3")
        await recovered.wait_for_idle(timeout=20)
        after = await recovered.get_state()
        assert after.messages[-1].text == "echo 4: q3"  # type: ignore[union-attr]
        assert (await recovered.get_session_stats()).message_count == 8


async def test_large_tool_outputs_never_make_a_large_payload(temporal_client: Client, tmp_path: Path) -> None:
    from pydantic import BaseModel

    from agentcore import AgentTool, AgentToolResult

    class DumpArgs(BaseModel):
        n: int

    def dump(tool_call_id: str, args: DumpArgs, signal: object, on_update: object) -> AgentToolResult:
        return AgentToolResult.text(f"{args.n}:" + "x" * 300_000)

    big = AgentTool(name="dump", description="Return a large blob.", parameters=DumpArgs, execute=dump)

    def respond(context):  # type: ignore[no-untyped-def]
        last = context.messages[-1]
        return tool_calls([("dump", {"n": len(context.messages)})]) if last.role == "user" else text("got it")

    limits = ConversationLimits(continue_as_new_after_events=60, llm_heartbeat_seconds=2)
    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(respond), tools=[big], limits=limits
    ) as h:
        # 3.6 MB of tool output outgrows the scripted model's context window: compaction stays off
        # (this scripted model answers a summary request with a tool call, and each turn waited out
        # three failed compaction attempts, 44 s in all).
        agent = await h.agents.start(
            "big",
            AgentOptions(model=scripted_model(), tools=["dump"]),
            compaction=CompactionSettings(enabled=False),
        )
        for i in range(12):
            await agent.prompt(f"dump {i}")
            await agent.wait_for_idle(timeout=30)
        largest = 0
        runs = await listed_runs(temporal_client, "big", at_least=2)
        assert len(runs) > 1, "the conversation should have continued-as-new"
        for execution in runs:
            history = await temporal_client.get_workflow_handle(
                "big", run_id=execution.run_id
            ).fetch_history()
            for event in history.events:
                largest = max(largest, event.ByteSize())
        assert largest < 1_000_000, f"largest history event {largest} bytes"
        assert (await agent.get_state()).message_count == 48
        with JsonlSessionStorage.open(h.session_path("big")) as storage:
            assert storage.get_session_stats().message_count == 48


async def test_messages_carry_their_session_entry_ids(temporal_client: Client, tmp_path: Path) -> None:
    model = ScriptedModel([tool_calls([("add", {"a": 1, "b": 1})]), text("2")])
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        agent = await h.agents.start("ids", AgentOptions(model=scripted_model(), tools=["add"]))
        await agent.prompt("1+1?")
        await agent.wait_for_idle(timeout=20)
        page = await agent.get_messages()
        with JsonlSessionStorage.open(h.session_path("ids")) as storage:
            context = storage.build_context()
            assert page.entry_ids == context.message_entry_ids
            for entry_id, message in zip(page.entry_ids, page.messages, strict=True):
                entry = storage.get_entry(entry_id)  # type: ignore[arg-type]
                assert entry is not None and entry.message == message  # type: ignore[union-attr]
        recovered = await h.agents.recover(h.session_path("ids"), session_id="ids-recovered")
        assert (await recovered.get_messages()).entry_ids == page.entry_ids


async def test_unknown_tools_at_start_are_reported(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_echo), tools=[add_tool()]) as h:
        agent = await h.agents.start(
            "unknown-tools", AgentOptions(model=scripted_model(), tools=["add", "ghost"])
        )
        await agent.wait_for_idle(timeout=20)
        state = await agent.get_state()
        assert [t.name for t in state.tools] == ["add"]
        assert state.error_message is not None and "ghost" in state.error_message
        await agent.prompt("still works")
        await agent.wait_for_idle(timeout=20)
        assert (await agent.get_state()).messages[-1].role == "assistant"


async def test_starting_a_running_session_again_is_refused(temporal_client: Client, tmp_path: Path) -> None:
    from agentcore.errors import AgentError

    async with running_worker(temporal_client, tmp_path, ScriptedModel(_echo)) as h:
        await h.agents.start("twice", AgentOptions(model=scripted_model()))
        with pytest.raises(AgentError) as refused:
            await h.agents.start("twice", AgentOptions(model=scripted_model()))
        assert refused.value.code == "AGENT_EXISTS"


async def _runs_chain(client: Client, workflow_id: str, first_run: str) -> list[WorkflowHistory]:
    """Each run's history, from ``first_run`` along its continues-as-new."""
    histories, run_id = [], first_run
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        last = history.events[-1]
        if last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return histories
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id


async def test_back_to_back_runs_continue_as_new_at_the_threshold(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Runs sent one after the other, each as its predecessor ends, leave no pause to roll over in: the
    run that passes the threshold rolls the conversation over in the workflow task it ended in (its
    unwritten entries go with the next run, which writes them), and the next prompt goes to the next
    run, so no run's history outgrows the threshold by more than a turn."""
    threshold = 40
    limits = ConversationLimits(continue_as_new_after_events=threshold, llm_heartbeat_seconds=2)
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_echo), limits=limits) as h:
        agent = await h.agents.start("back-to-back", AgentOptions(model=scripted_model()))
        first_run = (await agent.handle.describe()).run_id
        for i in range(16):
            idle = await agent.run(f"p{i}", timeout=20)
            assert idle.messages[-1].text == f"echo {i + 1}: p{i}"
        await agent.wait_for_idle(timeout=20)  # the last run's entries written
        runs = await _runs_chain(temporal_client, "back-to-back", first_run)
        with JsonlSessionStorage.open(h.session_path("back-to-back")) as storage:
            users = [m.text for m in storage.build_context().messages if isinstance(m, UserMessage)]
    lengths = [len(run.events) for run in runs]
    assert len(lengths) >= 3, lengths
    assert all(length <= threshold + 20 for length in lengths[:-1]), lengths
    assert users == [f"p{i}" for i in range(16)]
    for run in runs[:-1]:
        types = [event.event_type for event in run.events]
        ended = max(
            i for i, t in enumerate(types) if t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
        )
        # No task after the last run's: no session.append activity, no timer.
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED not in types[ended:], [
            EventType.Name(t) for t in types[ended:]
        ]
