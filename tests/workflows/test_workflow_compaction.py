"""A durable conversation far past a small model's context window keeps working through compactions.

The model is the real OpenAI provider against the loopback server, which enforces a 2,000-token
window and answers an over-long request with OpenAI's own context_length_exceeded error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from agentcore import AgentOptions
from agentcore.compaction import CompactionSettings
from agentcore.errors import AgentBusyError
from agentcore.events import AgentEvent, CompactionEndEvent
from agentcore.messages import AssistantMessage
from agentcore.session import CompactionEntry, JsonlSessionStorage
from agentcore.testing.loopback import LoopbackServer
from agentcore.testing.scripted import ScriptedModel, error, scripted_model, text
from tests.support.compaction import API_KEY, SYSTEM_PROMPT, facts_in, lookup_tool, prompt_text, responder
from tests.support.durable import collect_run, running_worker
from tests.support.loop import long_history

WINDOW = 2_000


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    async with LoopbackServer(responder, context_window=WINDOW) as srv:
        yield srv


async def test_long_conversation_compacts_and_recovers(
    temporal_client: Client, tmp_path: Path, server: LoopbackServer
) -> None:
    model = server.model(context_window=WINDOW, max_tokens=512)
    async with running_worker(
        temporal_client, tmp_path, stream_fn=None, tools=[lookup_tool()], get_api_key=lambda provider: API_KEY
    ) as h:
        agent = await h.agents.start(
            "long", AgentOptions(model=model, tools=["lookup"], system_prompt=SYSTEM_PROMPT)
        )
        compactions = []
        for number in range(1, 25):
            offset = await agent.event_offset()
            await agent.prompt(prompt_text(number))
            events = await collect_run(agent, offset)
            await agent.wait_for_idle(timeout=30)
            compactions += [e for e in events if e.type == "compaction_end"]
            last = (await agent.get_state()).messages[-1]
            assert last.role == "assistant" and last.stop_reason == "stop", last  # type: ignore[union-attr]
        assert len([c for c in compactions if c.summary]) >= 3, "several compactions happened"
        assert all(
            c.tokens_after is not None and c.tokens_after < c.tokens_before for c in compactions if c.summary
        )

        # Manual compaction, refused while a run is active, works when idle.
        manual = await agent.compact("Keep every FACT line.")
        assert manual.reason == "manual"

        state = await agent.get_state()
        stats = await agent.get_session_stats()
        with JsonlSessionStorage.open(h.session_path("long")) as storage:
            context = storage.build_context()
            file_stats = storage.get_session_stats()
            entries = storage.find_entries("compaction")
        # Recovery from the file rebuilds exactly the compacted context the workflow holds.
        assert [m.model_dump() for m in context.messages] == [m.model_dump() for m in state.messages]
        # Nothing is deleted: every message of the 24 prompts is still counted.
        assert file_stats.message_count == stats.message_count >= 24 * 4
        assert stats.cost_total == pytest.approx(file_stats.cost_total)
        assert all(isinstance(e, CompactionEntry) for e in entries) and len(entries) >= 3
        # What was learned early survives in the summary chain.
        latest = entries[-1]
        assert isinstance(latest, CompactionEntry)
        assert 1 in facts_in(latest.summary)

        recovered = await h.agents.recover(h.session_path("long"), session_id="long-recovered")
        await recovered.wait_for_idle(timeout=20)
        recovered_state = await recovered.get_state()
        assert [m.model_dump() for m in recovered_state.messages] == [m.model_dump() for m in state.messages]
        await recovered.prompt(prompt_text(99))
        await recovered.wait_for_idle(timeout=30)
        assert (await recovered.get_state()).messages[-1].stop_reason == "stop"  # type: ignore[union-attr]


async def test_compact_is_refused_while_running(
    temporal_client: Client, tmp_path: Path, server: LoopbackServer
) -> None:
    from agentcore.testing.scripted import ScriptedModel, scripted_model, text

    slow = ScriptedModel(lambda context: text("slow " * 50), chunks=50, delay=0.02)
    async with running_worker(temporal_client, tmp_path, slow) as h:
        agent = await h.agents.start("busy-compact", AgentOptions(model=scripted_model()))
        await agent.prompt("go")
        with pytest.raises(AgentBusyError):
            await agent.compact()
        await agent.wait_for_idle(timeout=20)
        result = await agent.compact()
        assert result.summary is None  # two messages: nothing worth compacting


async def test_fork_branch_labels_and_name(
    temporal_client: Client, tmp_path: Path, server: LoopbackServer
) -> None:
    model = server.model(context_window=200_000, max_tokens=512)
    async with running_worker(
        temporal_client, tmp_path, stream_fn=None, tools=[lookup_tool()], get_api_key=lambda provider: API_KEY
    ) as h:
        agent = await h.agents.start(
            "tree", AgentOptions(model=model, tools=["lookup"], system_prompt=SYSTEM_PROMPT)
        )
        for number in (1, 2, 3):
            await agent.prompt(prompt_text(number))
            await agent.wait_for_idle(timeout=30)
        page = await agent.get_messages()
        assert len(page.messages) == 12
        middle = page.entry_ids[3]  # the first run's final assistant message
        assert middle is not None

        await agent.set_label(middle, "after item 1")
        await agent.set_session_name("Item research")

        # Fork from the middle: a new conversation with the first exchange only; the original goes on.
        fork = await h.agents.fork("tree", middle, "tree-fork")
        forked = await fork.get_state()
        assert [m.model_dump() for m in forked.messages] == [m.model_dump() for m in page.messages[:4]]
        with JsonlSessionStorage.open(h.session_path("tree-fork")) as storage:
            assert storage.get_metadata().metadata["parent_session"]["id"] == "tree"
        await fork.prompt(prompt_text(7))
        await fork.wait_for_idle(timeout=30)
        assert (await fork.get_state()).message_count == 8
        assert (await agent.get_state()).message_count == 12

        # Branch back to the middle with a model-written summary of the abandoned branch.
        result = await agent.branch(middle, summarize=True)
        assert result.summary is not None and 2 in facts_in(result.summary) and 3 in facts_in(result.summary)
        state = await agent.get_state()
        assert len(state.messages) == 5 and state.messages[-1].role == "user"  # the summary, as context
        await agent.prompt(prompt_text(4))
        await agent.wait_for_idle(timeout=30)
        with JsonlSessionStorage.open(h.session_path("tree")) as storage:
            context = storage.build_context()
            assert storage.get_label(middle) == "after item 1"
            assert storage.get_metadata().name == "Item research"
            assert storage.get_session_stats().message_count == 16  # the abandoned branch is kept
        assert [m.model_dump() for m in context.messages] == [
            m.model_dump() for m in (await agent.get_state()).messages
        ]


async def test_abort_during_auto_compaction_cancels_the_summary_call(
    temporal_client: Client, tmp_path: Path
) -> None:
    """The summary call is cancelled as a model call is: the run ends aborted long before the summary
    would have streamed to its end (20 s), ``compaction_end`` says ``aborted`` without an error, and
    the session file holds no compaction entry."""
    small = scripted_model(context_window=400, max_tokens=100)
    model = ScriptedModel([text("SUMMARY " * 400), text("never")], chunks=400, delay=0.05)
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start(
            "abort-compaction",
            AgentOptions(model=small, messages=long_history(small)),
            compaction=CompactionSettings(keep_recent_tokens=60),
        )
        await agent.prompt("next")
        events: list[AgentEvent] = []
        aborted_at = 0.0
        async for _, event in agent.events(0):
            events.append(event)
            if event.type == "compaction_start":
                await agent.abort()
                aborted_at = time.monotonic()
            if event.type == "agent_end":
                break
        ended_after = time.monotonic() - aborted_at
        await agent.wait_for_idle(timeout=20)
        session = JsonlSessionStorage.open(h.session_path("abort-compaction"))
        entries = session.get_entries()
        session.close()
    end = next(event for event in events if isinstance(event, CompactionEndEvent))
    assert end.aborted and end.error_message is None and end.entry_id is None
    assert ended_after < 5, f"the run ended {ended_after:.1f} s after the abort"
    last = [event for event in events if event.type == "message_end"][-1]
    assert isinstance(last.message, AssistantMessage) and last.message.stop_reason == "aborted"
    assert not any(isinstance(entry, CompactionEntry) for entry in entries)
    assert len(model.calls) == 1  # the summary call only: the model was not called after the abort


async def test_abort_stops_a_manual_compaction(temporal_client: Client, tmp_path: Path) -> None:
    """``abort`` during ``compact()`` cancels the summary call (it would stream for 20 s): ``compact``
    returns ``aborted`` without an error, the file holds no compaction entry, and the conversation
    takes a prompt again."""
    small = scripted_model(context_window=4_000, max_tokens=100)
    model = ScriptedModel(
        lambda context: text("SUMMARY " * 400) if len(model.calls) == 2 else text("after"),
        chunks=400,
        delay=0.05,
    )
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start(
            "abort-manual",
            AgentOptions(model=small, messages=long_history(small)),
            compaction=CompactionSettings(keep_recent_tokens=60),
        )
        await agent.prompt("first")
        await agent.wait_for_idle(timeout=30)
        offset = await agent.event_offset()
        compacting = asyncio.ensure_future(agent.compact())
        async for _, event in agent.events(offset):
            if event.type == "compaction_start":
                break
        await asyncio.sleep(0.3)  # the summary is streaming
        await agent.abort()
        started = time.monotonic()
        end = await asyncio.wait_for(compacting, 10)
        took = time.monotonic() - started
        await agent.prompt("next")
        await agent.wait_for_idle(timeout=30)
        session = JsonlSessionStorage.open(h.session_path("abort-manual"))
        entries = session.get_entries()
        session.close()
    assert end.aborted and end.error_message is None and end.entry_id is None
    assert took < 5, f"compact returned {took:.1f} s after the abort"
    assert not any(isinstance(entry, CompactionEntry) for entry in entries)
    assert "next" in [m.text for m in model.calls[-1].messages if m.role == "user"]  # type: ignore[union-attr]


async def test_a_failed_compaction_names_its_code_once(temporal_client: Client, tmp_path: Path) -> None:
    small = scripted_model(context_window=400, max_tokens=100)
    model = ScriptedModel(lambda context: error("upstream exploded"))
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start(
            "failed-compaction",
            AgentOptions(model=small, messages=long_history(small)),
            compaction=CompactionSettings(keep_recent_tokens=60),
        )
        await agent.prompt("next")  # auto-compaction: its summary call fails on every attempt
        events = await collect_run(agent, timeout=60)
    end = next(event for event in events if isinstance(event, CompactionEndEvent))
    assert end.error_message == "COMPACTION_FAILED: summary request failed: upstream exploded"
