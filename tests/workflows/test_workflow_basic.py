from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore import AgentOptions
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import add_tool, collect_run, eventually, running_worker


async def test_tool_turn_reaches_state_events_and_session_file(
    temporal_client: Client, tmp_path: Path
) -> None:
    model = ScriptedModel([tool_calls([("add", {"a": 2, "b": 3})]), text("The sum is 5.")])
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        agent = await h.agents.start(
            "s1", AgentOptions(model=scripted_model(), tools=["add"], system_prompt="Be brief.")
        )
        accepted = await agent.prompt("What is 2 + 3?")
        assert accepted.status == "accepted"
        events = await collect_run(agent)
        await agent.wait_for_idle()
        state = await agent.get_state()
        assert [m.role for m in state.messages] == ["user", "assistant", "toolResult", "assistant"]
        assert state.messages[-1].text == "The sum is 5."
        assert state.messages[2].text == "5.0"
        assert not state.is_streaming
        types = [e.type for e in events]
        assert types[0] == "agent_start" and types[-1] == "agent_end"
        assert "tool_execution_start" in types and "tool_execution_end" in types
        history = await agent.handle.fetch_history()
        scheduled = [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
        ]
        # Every call is a regular activity (docs/versioning.md, "No local activities, by design").
        assert scheduled.count("tools.execute") == 1 and scheduled.count("llm.stream") == 2
        with JsonlSessionStorage.open(h.session_path("s1")) as storage:
            context = storage.build_context()
            assert [m.model_dump() for m in context.messages] == [m.model_dump() for m in state.messages]
            assert context.system_prompt == "Be brief."
            assert context.active_tools == ["add"]


async def test_search_attributes_make_conversations_findable(temporal_client: Client, tmp_path: Path) -> None:
    model = ScriptedModel(lambda context: text("ok"))
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start("findable-1", AgentOptions(model=scripted_model("finder")))
        await agent.prompt("hi")
        await agent.wait_for_idle(timeout=20)
        found = await eventually(
            lambda: h.agents.list('AgentModel = "scripted/finder" AND AgentStatus = "idle"'),
            lambda found: bool(found) and found[0].message_count == 2,
        )
        assert [s.session_id for s in found] == ["findable-1"]
        assert found[0].message_count == 2 and found[0].agent_status == "idle"


async def test_get_state_shows_the_message_being_streamed(temporal_client: Client, tmp_path: Path) -> None:
    import asyncio

    model = ScriptedModel(
        lambda context: text("one two three four five six seven eight"), chunks=40, delay=0.05
    )
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start("partial", AgentOptions(model=scripted_model()))
        await agent.prompt("count")
        partial_texts = []
        for _ in range(60):
            state = await agent.get_state()
            if state.streaming_message is not None and state.streaming_message.text:
                partial_texts.append(state.streaming_message.text)
            if not state.is_streaming and partial_texts:
                break
            await asyncio.sleep(0.05)
        await agent.wait_for_idle(timeout=20)
        final = (await agent.get_state()).messages[-1].text
        assert partial_texts, "a query mid-stream sees the partial text"
        assert all(final.startswith(p) for p in partial_texts)
        assert any(len(p) < len(final) for p in partial_texts)


async def test_back_to_back_runs_are_indexed_idle_once_quiet(temporal_client: Client, tmp_path: Path) -> None:
    """Once runs back to back are over, the index shows the conversation idle with every message
    counted, without anyone asking."""
    import asyncio

    model = ScriptedModel(lambda context: text("ok"))
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start("quiet-index", AgentOptions(model=scripted_model("quiet")))
        runs = 5
        for index in range(runs):
            offset = await agent.event_offset()
            watcher = asyncio.create_task(collect_run(agent, offset))
            await agent.prompt(f"turn {index}")
            await watcher
        found = []
        for _ in range(100):  # the flush waits FLUSH_DELAY; visibility is eventually consistent
            found = await h.agents.list('AgentModel = "scripted/quiet" AND AgentStatus = "idle"')
            if found and found[0].message_count == 2 * runs:
                break
            await asyncio.sleep(0.1)
        assert [(s.session_id, s.message_count) for s in found] == [("quiet-index", 2 * runs)]


async def test_a_paced_conversation_flushes_at_its_next_workflow_task(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Runs a person paces (more than FLUSH_DELAY apart) are written to the session file and indexed
    idle at the next workflow task (here the subscriber's next poll), not by the timer's own task a
    second later; back-to-back runs still wait for the next run (the test above)."""
    import asyncio

    from temporalio.api.enums.v1 import EventType

    from agentcore.session import JsonlSessionStorage

    model = ScriptedModel(lambda context: text("ok"))
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start("paced", AgentOptions(model=scripted_model("paced")))
        ends: asyncio.Queue[None] = asyncio.Queue()

        async def subscribe() -> None:  # one subscriber throughout, as a chat UI keeps
            async for _, event in agent.events(await agent.event_offset()):
                if event.type == "agent_end":
                    ends.put_nowait(None)

        subscriber = asyncio.create_task(subscribe())
        runs = 4
        for index in range(runs):
            if index:
                await asyncio.sleep(1.3)  # a person reading the answer
            await agent.prompt(f"turn {index}")
            await asyncio.wait_for(ends.get(), 30)
            if index:
                # The subscriber's next poll brings the flush (the timers below tell how it came).
                written = 0
                for _ in range(100):
                    with JsonlSessionStorage.open(h.session_path("paced")) as storage:
                        written = len(storage.build_context().messages)
                    if written == 2 * (index + 1):
                        break
                    await asyncio.sleep(0.02)
                assert written == 2 * (index + 1)
        subscriber.cancel()
        history = (await agent.handle.fetch_history()).events
        fired = sum(e.event_type == EventType.EVENT_TYPE_TIMER_FIRED for e in history)
        # The first run follows none, so it waits for its timer, as back-to-back runs do.
        assert fired <= 1, f"{fired} flush timers fired in {runs} paced runs"
        # Visibility is eventually consistent: wait for the idle upsert to show, with a deadline.
        found: list[Any] = []
        for _ in range(100):
            found = await h.agents.list('AgentModel = "scripted/paced" AND AgentStatus = "idle"')
            if [(s.session_id, s.message_count) for s in found] == [("paced", 2 * runs)]:
                break
            await asyncio.sleep(0.1)
        assert [(s.session_id, s.message_count) for s in found] == [("paced", 2 * runs)]


async def test_a_run_still_going_after_its_first_workflow_task_is_indexed_running(
    temporal_client: Client, tmp_path: Path
) -> None:
    """A model that says nothing for a while (a long time to first token): the run outlasts its
    first workflow task, so the index shows the conversation running, and its events stream."""
    import asyncio
    import time

    scripted = ScriptedModel([text("Finally.")])

    async def quiet(model, context, options):  # type: ignore[no-untyped-def]
        await asyncio.sleep(3)  # nothing at all streams before this
        async for event in scripted(model, context, options):
            yield event

    async with running_worker(temporal_client, tmp_path, quiet) as h:
        agent = await h.agents.start("quiet", AgentOptions(model=scripted_model()))
        arrivals: dict[str, float] = {}

        async def watch() -> None:
            async for _, event in agent.events():
                arrivals.setdefault(event.type, time.monotonic())
                if event.type == "agent_end":
                    return

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.2)
        await agent.prompt("Hello?")
        # Visibility is eventually consistent: read until the index shows the run, or the run ends.
        listed = await eventually(
            lambda: h.agents.list(f'AgentSessionId = "{agent.session_id}" AND AgentStatus = "running"'),
            lambda listed: bool(listed) or watcher.done(),
        )
        await asyncio.wait_for(watcher, 30)
    assert arrivals["agent_end"] - arrivals["turn_start"] > 2.5, arrivals
    assert [s.session_id for s in listed] == ["quiet"], "a run outlasting its first task is indexed running"


async def test_streamed_deltas_follow_the_events_before_them(temporal_client: Client, tmp_path: Path) -> None:
    """Deltas the model activity publishes itself (its call outlived one interval) reach subscribers
    after the events the workflow published before the call, never before them."""
    model = ScriptedModel([text("one two three four five six")], chunks=6, delay=0.03)
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start("ordered", AgentOptions(model=scripted_model()))
        await agent.prompt("Count.")
        events = await collect_run(agent)
    types = [event.type for event in events]
    assert types[:5] == ["agent_start", "turn_start", "message_start", "message_end", "message_start"], types
    assert types.count("message_update") >= 6 and types[-3:] == ["message_end", "turn_end", "agent_end"], (
        types
    )
    streamed = "".join(
        e.assistant_message_event.get("delta", "") for e in events if e.type == "message_update"
    )
    assert streamed == "one two three four five six"


async def _watched_tool_turns(
    client: Client, tmp_path: Path, turns: int, calls: int, name: str = "watched"
) -> tuple[list[list[str]], list[Any]]:
    """``turns`` tool turns (``calls`` tool calls each, zero-latency model), each prompt landing
    while a subscriber's poll waits: each run's event types, and the history events they added."""
    import asyncio

    def respond(context):  # type: ignore[no-untyped-def]
        if context.messages[-1].role == "user":
            return tool_calls([("add", {"a": i, "b": 2}) for i in range(calls)])
        return text("done")

    async with running_worker(client, tmp_path, ScriptedModel(respond), tools=[add_tool()]) as h:
        agent = await h.agents.start(f"{name}-{calls}", AgentOptions(model=scripted_model(), tools=["add"]))
        offset = await agent.event_offset()
        history_before = len((await agent.handle.fetch_history()).events)
        runs = []
        for index in range(turns):
            watcher = asyncio.create_task(collect_run(agent, offset))
            await asyncio.sleep(0.2)  # the subscriber's poll is waiting when the prompt lands
            await agent.prompt(f"add {index}")
            runs.append([event.type for event in await watcher])
            offset = await agent.event_offset()
        return runs, list((await agent.handle.fetch_history()).events[history_before:])


async def test_an_abort_reaches_a_handed_off_call(temporal_client: Client, tmp_path: Path) -> None:
    """A call expected quick that turns out slow is handed from its local attempt to a remote
    activity; an abort then stops it there, and the text streamed so far is kept."""
    import asyncio

    quick = ScriptedModel(lambda context: text("Quick."))
    slow = ScriptedModel(lambda context: text(" ".join(["word"] * 40)), chunks=40, delay=0.05)

    def stream(model, context, options):  # type: ignore[no-untyped-def]
        return (slow if "slow" in context.messages[-1].text else quick)(model, context, options)

    async with running_worker(temporal_client, tmp_path, stream) as h:
        agent = await h.agents.start("handed-abort", AgentOptions(model=scripted_model()))
        await agent.prompt("quick one")
        await agent.wait_for_idle(timeout=20)
        await agent.prompt("now a slow one")
        await asyncio.sleep(0.6)
        await agent.abort()
        await agent.wait_for_idle(timeout=5)
        state = await agent.get_state()
    reply = state.messages[-1]
    assert reply.role == "assistant" and reply.stop_reason == "aborted"
    assert reply.text.startswith("word") and len(reply.text) < len(" ".join(["word"] * 40))
    assert len(slow.calls) == 1, "the remote activity took the call over, it did not call again"


async def test_a_failed_local_attempt_counts_as_the_first_and_its_retry_waits(
    temporal_client: Client, tmp_path: Path
) -> None:
    """A retryable provider failure in a local attempt: the remote attempt comes after the delay the
    provider asked for, announced as attempt 2; the call is made twice, not three times."""
    import time

    from agentcore.events import StreamError, StreamStart
    from agentcore.messages import AssistantMessage

    answers = ScriptedModel(lambda context: text("Recovered."))
    calls: list[float] = []

    async def flaky(model, context, options):  # type: ignore[no-untyped-def]
        calls.append(time.monotonic())
        if len(calls) == 1:
            partial = AssistantMessage(api=model.api, provider=model.provider, model=model.id, timestamp=1)
            yield StreamStart(partial=partial)
            failed = partial.model_copy(update={"stop_reason": "error", "error_message": "429 slow down"})
            yield StreamError(reason="error", error=failed, retryable=True, retry_after_seconds=0.5)
            return
        async for event in answers(model, context, options):
            yield event

    async with running_worker(temporal_client, tmp_path, flaky) as h:
        agent = await h.agents.start("flaky-local", AgentOptions(model=scripted_model()))
        await agent.prompt("hello")
        events = await collect_run(agent)
        state = await agent.get_state()
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.5
    retries = [e for e in events if e.type == "llm_retry"]
    assert [e.attempt for e in retries] == [2]
    assert state.messages[-1].text == "Recovered." and not state.error_message


async def _appends_in(agent: Any, count: Callable[[list[Any]], int]) -> int:
    return count(list((await agent.handle.fetch_history()).events))


async def test_a_worker_stopped_during_a_model_call_leaves_nothing_to_log(
    temporal_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that stops while a model call streams leaves its cached conversation to Python's
    garbage collector (the SDK evicts only runs with work pending), which closes the run's coroutine
    and each of its generators. Closing them must raise nothing: it was logged as ``aclose():
    asynchronous generator is already running`` and ``Not in workflow event loop``."""
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    slow = ScriptedModel(lambda context: text("slow " * 100), chunks=100, delay=0.05)
    async with running_worker(temporal_client, tmp_path, slow) as h:
        agent = await h.agents.start("stopped-mid-call", AgentOptions(model=scripted_model()))
        await agent.prompt("go")
        async for _, event in agent.events(0):
            if event.type == "message_update":
                break
    gc.collect()
    assert [f"{u.exc_type.__name__}: {u.exc_value} in {u.object!r}" for u in unraisable] == []
