"""The event stream of a durable conversation: ordered, offset-addressed, resumable, across rollovers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore import AgentOptions, AssistantMessage, Model
from agentcore.events import StreamDone, StreamError, StreamEvent, StreamStart, TextDelta, TextEnd, TextStart
from agentcore.messages import TextContent
from agentcore.protocol import ConversationLimits
from agentcore.runtime import LlmContext, StreamOptions
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import add_tool, collect_run, running_worker


def _respond(context: LlmContext) -> Any:
    last = context.messages[-1]
    if last.role == "user":
        return tool_calls([("add", {"a": 1, "b": 2})])
    return text("three")


async def test_resume_from_an_offset_loses_and_repeats_nothing(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_respond), tools=[add_tool()]) as h:
        agent = await h.agents.start("resume", AgentOptions(model=scripted_model(), tools=["add"]))
        await agent.prompt("1+2")
        await agent.wait_for_idle(timeout=20)
        everything = [(offset, event.type) async for offset, event in _until_end(agent.events(0))]
        assert [offset for offset, _ in everything] == list(range(len(everything)))
        cut = len(everything) // 2
        first = []
        async for offset, event in agent.events(0):
            first.append((offset, event.type))
            if len(first) == cut:
                break  # the subscriber disconnects here
        rest = [(offset, event.type) async for offset, event in _until_end(agent.events(first[-1][0] + 1))]
        assert first + rest == everything


async def test_a_waiting_poll_is_answered_once_a_task_not_once_an_event(
    temporal_client: Client, tmp_path: Path
) -> None:
    """A tool turn (the prompt, two model calls and a tool: four workflow tasks, some twenty events)
    reaches a waiting subscriber in at most one poll answer a task: its events enter the stream
    where the task ends, not as they are made (a poll woken by a task's first event would answer
    with that one alone, and the subscriber's next poll cost a workflow task of its own)."""
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_respond), tools=[add_tool()]) as h:
        agent = await h.agents.start("one-answer", AgentOptions(model=scripted_model(), tools=["add"]))
        await agent.run("warm up")
        ends: asyncio.Queue[None] = asyncio.Queue()

        async def follow(start: int) -> None:  # a subscriber always polling, as a page's is
            async for _offset, event in agent.events(start):
                if event.type == "agent_end":
                    ends.put_nowait(None)

        subscriber = asyncio.create_task(follow(await agent.event_offset()))
        await asyncio.sleep(0.5)  # its first poll waits
        polls_before = _polls(await agent.handle.fetch_history())
        turns = 6
        for turn in range(turns):
            await agent.prompt(f"turn {turn}")
            await asyncio.wait_for(ends.get(), 20)
            await asyncio.sleep(0.2)  # the next poll waits before the next prompt
        subscriber.cancel()
        await asyncio.gather(subscriber, return_exceptions=True)
        polls = _polls(await agent.handle.fetch_history()) - polls_before
        # A poll answered at each of a turn's four tasks at most (with its events so far).
        assert polls <= 4 * turns + 2, polls


def _polls(history: Any) -> int:
    return sum(
        1
        for event in history.events
        if event.HasField("workflow_execution_update_accepted_event_attributes")
        and event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        == "__temporal_workflow_stream_poll"
    )


async def _until_end(events: AsyncIterator[tuple[int, Any]]) -> AsyncIterator[tuple[int, Any]]:
    async for offset, event in events:
        yield offset, event
        if event.type == "agent_end":
            return


async def test_a_subscriber_follows_continue_as_new(temporal_client: Client, tmp_path: Path) -> None:
    limits = ConversationLimits(continue_as_new_after_events=40, llm_heartbeat_seconds=2)
    model = ScriptedModel(lambda context: text("ok"))
    async with running_worker(temporal_client, tmp_path, model, limits=limits) as h:
        agent = await h.agents.start("follow", AgentOptions(model=scripted_model()))
        seen: list[tuple[int, str]] = []
        ends = 0

        async def subscriber() -> None:
            nonlocal ends
            async for offset, event in agent.events(0):
                seen.append((offset, event.type))
                if event.type == "agent_end":
                    ends += 1
                    if ends == 8:
                        return

        task = asyncio.create_task(subscriber())
        first_run = (await agent.handle.describe()).run_id
        for i in range(8):
            await agent.prompt(f"p{i}")
            await agent.wait_for_idle(timeout=20)
        await asyncio.wait_for(task, 30)
        assert (await agent.handle.describe()).run_id != first_run, "the workflow should have rolled over"
        offsets = [offset for offset, _ in seen]
        assert offsets == sorted(set(offsets)), "offsets strictly increase: nothing repeated"
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "no gap: nothing lost"
        assert [t for _, t in seen].count("agent_start") == 8


class _FlakyProvider:
    """Fails each context's first call with a retryable error after streaming some text."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        return self._stream(model, self.calls)

    async def _stream(self, model: Model, call: int) -> AsyncIterator[StreamEvent]:
        partial = AssistantMessage(api=model.api, provider=model.provider, model=model.id, timestamp=1)
        yield StreamStart(partial=partial)
        words = "doomed attempt" if call == 1 else "fine answer"
        partial.content.append(TextContent(text=words))
        yield TextStart(content_index=0, partial=partial)
        yield TextDelta(content_index=0, delta=words, partial=partial)
        yield TextEnd(content_index=0, content=words, partial=partial)
        await asyncio.sleep(0.2)  # long enough that deltas are published while streaming
        if call == 1:
            failed = partial.model_copy(
                update={"stop_reason": "error", "error_message": "HTTP 529 overloaded"}
            )
            yield StreamError(
                reason="error", error=failed, retryable=True, retry_after_seconds=0.1, status_code=529
            )
        else:
            yield StreamDone(reason="stop", message=partial)


async def test_a_retried_model_call_is_announced_and_recorded_once(
    temporal_client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_worker(temporal_client, tmp_path, _FlakyProvider()) as h:
        agent = await h.agents.start("retry", AgentOptions(model=scripted_model()))
        with caplog.at_level(logging.WARNING):
            await agent.prompt("hello")
            events = await collect_run(agent)
            await agent.wait_for_idle(timeout=20)
        # An expected, retried failure is one line in the worker's log, not a traceback.
        failures = [r for r in caplog.records if "failed" in r.getMessage()]
        assert [r.getMessage().split(" (")[0] for r in failures] == [
            "model call attempt 1 failed, to be retried: HTTP 529 overloaded"
        ]
        assert all(r.exc_info is None for r in failures)
        types = [event.type for event in events]
        assert "llm_retry" in types
        retry_at = types.index("llm_retry")
        # The retry says why the attempt before it failed.
        assert "529 overloaded" in (events[retry_at].error_message or "")  # type: ignore[union-attr]
        deltas_before = [e for e in events[:retry_at] if e.type == "message_update"]
        assert any("doomed" in str(e.assistant_message_event) for e in deltas_before)  # type: ignore[union-attr]
        state = await agent.get_state()
        assert [m.role for m in state.messages] == ["user", "assistant"]
        assert state.messages[-1].text == "fine answer"  # type: ignore[union-attr]
        history = await agent.handle.fetch_history()
        failed = [e for e in history.events if e.activity_task_started_event_attributes.attempt == 2]
        assert failed, "the retry is a second attempt of the same activity, visible in history"


async def test_a_retried_call_is_remembered_by_its_message_across_continue_as_new(
    temporal_client: Client, tmp_path: Path
) -> None:
    """``get_state().retries`` names the message a retried call made (a page loaded later shows the
    notice a live one showed), and the next run of the workflow still knows it."""
    limits = ConversationLimits(continue_as_new_after_events=40, llm_heartbeat_seconds=2)
    async with running_worker(temporal_client, tmp_path, _FlakyProvider(), limits=limits) as h:
        agent = await h.agents.start("retry-kept", AgentOptions(model=scripted_model()))
        first_run = (await agent.handle.describe()).run_id
        await agent.prompt("hello")
        await agent.wait_for_idle(timeout=20)
        page = await agent.get_messages()
        [note] = (await agent.get_state()).retries
        assert note.entry_id == page.entry_ids[1] and note.attempt == 2
        assert "529 overloaded" in (note.error_message or "")
        for i in range(6):  # answered at once: no retry, no note
            await agent.prompt(f"p{i}")
            await agent.wait_for_idle(timeout=20)
        assert (await agent.handle.describe()).run_id != first_run, "the workflow should have rolled over"
        assert (await agent.get_state()).retries == [note]


class _HeldRetryProvider(_FlakyProvider):
    """As ``_FlakyProvider``, but the second attempt stops after its delta until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def _stream(self, model: Model, call: int) -> AsyncIterator[StreamEvent]:
        async for event in super()._stream(model, call):
            if call == 2 and isinstance(event, TextEnd):
                await self.release.wait()
            yield event


async def test_the_streaming_message_drops_a_failed_attempts_text(
    temporal_client: Client, tmp_path: Path
) -> None:
    provider = _HeldRetryProvider()
    async with running_worker(temporal_client, tmp_path, provider) as h:
        agent = await h.agents.start("retry-partial", AgentOptions(model=scripted_model()))
        await agent.prompt("hello")
        partial = None
        for _ in range(200):
            state = await agent.get_state()
            if state.streaming_message is not None and "fine" in state.streaming_message.text:
                partial = state.streaming_message.text
                break
            await asyncio.sleep(0.05)
        provider.release.set()
        await agent.wait_for_idle(timeout=20)
        assert partial == "fine answer", "the query folds only the retry's deltas"


class _QuickRetryProvider(_FlakyProvider):
    """Fails the first call at once with a retryable error; the retry answers after ``delay``."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def _stream(self, model: Model, call: int) -> AsyncIterator[StreamEvent]:
        partial = AssistantMessage(api=model.api, provider=model.provider, model=model.id, timestamp=1)
        yield StreamStart(partial=partial)
        if call == 1:
            failed = partial.model_copy(
                update={"stop_reason": "error", "error_message": "HTTP 429 slow down"}
            )
            yield StreamError(
                reason="error", error=failed, retryable=True, retry_after_seconds=0.2, status_code=429
            )
            return
        partial.content.append(TextContent(text="quick answer"))
        yield TextStart(content_index=0, partial=partial)
        yield TextDelta(content_index=0, delta="quick answer", partial=partial)
        yield TextEnd(content_index=0, content="quick answer", partial=partial)
        await asyncio.sleep(self.delay)
        yield StreamDone(reason="stop", message=partial)


async def test_a_quick_retry_loses_no_event(temporal_client: Client, tmp_path: Path) -> None:
    """The retry's events (``llm_retry``, its deltas) reach the subscriber however quickly it ends."""
    # Ending just as the first publish tick (80 ms) sends its batch is what lost them once.
    for round_, delay in enumerate((0.0, 0.078, 0.082, 0.086, 0.09, 0.1)):
        async with running_worker(temporal_client, tmp_path / str(round_), _QuickRetryProvider(delay)) as h:
            agent = await h.agents.start(f"quick-retry-{round_}", AgentOptions(model=scripted_model()))
            await agent.prompt("hello")
            events = await collect_run(agent)
            types = [event.type for event in events]
            assert "llm_retry" in types, types
            deltas = [e for e in events[types.index("llm_retry") :] if e.type == "message_update"]
            assert any("quick answer" in str(e.assistant_message_event) for e in deltas), types  # type: ignore[union-attr]


def test_folding_many_deltas_at_once_gives_what_folding_each_gives() -> None:
    from agentcore.messages import AssistantMessage
    from agentcore.partial import apply_delta, apply_deltas

    deltas: list[dict] = [{"type": "thinking_start", "content_index": 0}]
    deltas += [{"type": "thinking_delta", "content_index": 0, "delta": f"t{i} "} for i in range(50)]
    deltas += [{"type": "thinking_end", "content_index": 0, "content": "thought"}]
    deltas += [{"type": "text_delta", "content_index": 1, "delta": f"w{i} "} for i in range(20_000)]
    deltas += [
        {"type": "text_delta", "content_index": 7, "delta": "gap"},
        {"type": "bogus", "content_index": 1},
    ]
    deltas += [
        {"type": "toolcall_start", "content_index": 2},
        {"type": "text_delta", "content_index": 2, "delta": "x"},
    ]
    deltas += [{"type": "text_delta", "content_index": 1, "delta": "!"}]

    def empty() -> AssistantMessage:
        return AssistantMessage(api="a", provider="p", model="m", content=[], stop_reason="stop", timestamp=1)

    one_by_one, at_once = empty(), empty()
    for delta in deltas:
        apply_delta(one_by_one, delta)
    apply_deltas(at_once, deltas)
    assert at_once == one_by_one
    assert at_once.content[0].thinking == "thought"  # type: ignore[union-attr]
    assert at_once.content[1].text.endswith("w19999 !") and len(at_once.content) == 8  # type: ignore[union-attr]
