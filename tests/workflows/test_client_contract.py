"""The durable handle as a new user meets it: recovery without the sessions directory, timeouts,
listeners that fail, typed errors for bad arguments, events carrying the spec's types."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore import AgentOptions, AgentToolResult
from agentcore.client import AgentClient
from agentcore.errors import AgentError, EntryNotFoundError, InvalidSessionIdError, SessionExistsError
from agentcore.errors import ValidationError as AgentValidationError
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import FAST_LIMITS, add_tool, collect_run, running_worker, sleep_tool


def _answer(context: Any) -> Any:
    last = context.messages[-1]
    if last.role == "user" and "sleep" in last.text:
        return tool_calls([("sleep", {"seconds": 2.0})])
    if last.role == "user" and "add" in last.text:
        return tool_calls([("add", {"a": 2, "b": 3})])
    users = [m for m in context.messages if m.role == "user"]
    return text(f"answer {len(users)}")


async def test_recover_without_the_sessions_directory_has_a_worker_place_the_file(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer), tools=[add_tool()]) as h:
        original = await h.agents.start("first", AgentOptions(model=scripted_model(), tools=["add"]))
        await original.prompt("add please")
        await original.wait_for_idle(timeout=20)
        elsewhere = tmp_path / "backup" / "first.jsonl"
        elsewhere.parent.mkdir()
        elsewhere.write_bytes(h.session_path("first").read_bytes())
        # As the issue shows it: no sessions directory on the client.
        client = AgentClient(temporal_client, task_queue=h.task_queue, limits=FAST_LIMITS)
        recovered = await client.recover(elsewhere, session_id="second")
        placed = h.session_path("second").read_bytes().split(b"\n", 1)
        assert placed[1] == elsewhere.read_bytes().split(b"\n", 1)[1], "every entry as it was"
        with JsonlSessionStorage.open(h.session_path("second")) as storage:
            assert storage.get_metadata().id == "second", "the header names the new session"
        await recovered.prompt("and now?")
        await recovered.wait_for_idle(timeout=20)
        assert (await recovered.get_state()).messages[-1].text == "answer 2"  # type: ignore[union-attr]
        with JsonlSessionStorage.open(h.session_path("second")) as storage:
            assert [m.role for m in storage.build_context().messages] == [
                "user",
                "assistant",
                "toolResult",
                "assistant",
                "user",
                "assistant",
            ]
        assert elsewhere.read_bytes() == h.session_path("first").read_bytes(), "the source is untouched"


async def test_recover_refuses_what_a_worker_cannot_place(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer)) as h:
        agent = await h.agents.start("taken", AgentOptions(model=scripted_model()))
        await agent.prompt("hello")
        await agent.wait_for_idle(timeout=20)
        other = tmp_path / "other.jsonl"
        with JsonlSessionStorage.create(other, str(tmp_path)) as storage:
            assert storage.get_metadata().id
        client = AgentClient(temporal_client, task_queue=h.task_queue, limits=FAST_LIMITS)
        # Another file already holds the id in the workers' directory: never written over.
        before = h.session_path("taken").read_bytes()
        await agent.handle.terminate()
        with pytest.raises(SessionExistsError):
            await client.recover(other, session_id="taken", options=AgentOptions(model=scripted_model()))
        assert h.session_path("taken").read_bytes() == before


async def test_wait_for_idle_times_out_with_timeout_error(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer), tools=[sleep_tool()]) as h:
        agent = await h.agents.start("slow-tool", AgentOptions(model=scripted_model(), tools=["sleep"]))
        await agent.prompt("sleep a while")
        with pytest.raises(TimeoutError):
            await agent.wait_for_idle(timeout=0.5)
        await agent.wait_for_idle(timeout=20)  # the conversation went on
        assert (await agent.get_state()).messages[-1].text == "answer 1"  # type: ignore[union-attr]


async def test_a_listener_that_raises_keeps_receiving_events(
    temporal_client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer)) as h:
        agent = await h.agents.start("listened", AgentOptions(model=scripted_model()))
        seen: list[str] = []
        ends = asyncio.Event()

        def listener(event: Any, signal: Any) -> None:
            seen.append(event.type)
            if seen.count("agent_end") == 2:
                ends.set()
            if len(seen) == 2:
                raise RuntimeError("a bug in the listener")

        with caplog.at_level(logging.ERROR, logger="agentcore.client"):
            unsubscribe = await agent.subscribe(listener)
            for question in ("one", "two"):
                await agent.prompt(question)
                await agent.wait_for_idle(timeout=20)
            await asyncio.wait_for(ends.wait(), 20)
            unsubscribe()
        assert seen.count("agent_start") == 2
        assert any("a bug in the listener" in (r.exc_text or "") for r in caplog.records)


async def test_bad_arguments_raise_typed_errors_before_anything_is_sent(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer)) as h:
        for bad in ("", "../escape", "a/b"):
            with pytest.raises(InvalidSessionIdError):
                await h.agents.attach(bad)
        agent = await h.agents.start("levels", AgentOptions(model=scripted_model()))
        with pytest.raises(AgentValidationError, match="unknown thinking level 'bogus'"):
            await agent.set_thinking_level("bogus")
        await agent.set_thinking_level("high")
        assert (await agent.get_state()).thinking_level == "high"
        with pytest.raises(EntryNotFoundError, match="'no-such-entry'"):
            await agent.set_label("no-such-entry", "a label")


async def test_events_carry_tool_results_as_the_in_process_agent_does(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer), tools=[sleep_tool()]) as h:
        agent = await h.agents.start("typed", AgentOptions(model=scripted_model(), tools=["sleep"]))
        await agent.prompt("sleep a while")
        events = await collect_run(agent)
        progress = [e for e in events if e.type == "tool_execution_update"]
        end = next(e for e in events if e.type == "tool_execution_end")
        assert isinstance(end.result, AgentToolResult) and end.result.content[0].text == "slept 2.0"  # type: ignore[union-attr]
        assert progress and isinstance(progress[0].partial_result, AgentToolResult)  # type: ignore[union-attr]


async def test_wait_for_idle_says_why_entries_cannot_be_written(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer)) as h:
        agent = await h.agents.start("blocked", AgentOptions(model=scripted_model()))
        await agent.prompt("one")
        await agent.wait_for_idle(timeout=20)
        path = h.session_path("blocked")
        with path.open("ab") as file:  # someone else wrote a line that is not an entry
            file.write(b"{not an entry}\n")
        await agent.prompt("two")
        with pytest.raises(AgentError) as raised:
            await agent.wait_for_idle(timeout=30)
        state = await agent.get_state()
        assert state.error_message and "line 6: malformed JSON" in state.error_message
        assert state.error_message in str(raised.value)
        assert [m.role for m in state.messages][:3] == ["user", "assistant", "user"], "nothing is lost"


async def test_a_branch_back_to_the_start_keeps_the_file_recoverable(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer), tools=[add_tool()]) as h:
        agent = await h.agents.start(
            "rooted", AgentOptions(model=scripted_model(), tools=["add"], system_prompt="Be brief.")
        )
        await agent.prompt("add please")
        await agent.wait_for_idle(timeout=20)
        await agent.set_model(scripted_model("other"))
        await agent.set_system_prompt("Be terse.")
        page = await agent.get_messages()
        await agent.branch(page.entry_ids[1])  # the path still holds the first settings
        await agent.branch(None)  # the start: the path holds none
        await agent.prompt("fresh start")
        await agent.wait_for_idle(timeout=20)
        live = await agent.get_state()
        with JsonlSessionStorage.open(h.session_path("rooted")) as storage:
            context = storage.build_context()
        assert context.model == live.model and context.model.id == "other"  # type: ignore[union-attr]
        assert context.system_prompt == "Be terse." and context.active_tools == ["add"]
        assert context.thinking_level == live.thinking_level
        copy = tmp_path / "rooted-copy.jsonl"
        copy.write_bytes(h.session_path("rooted").read_bytes())
        recovered = await h.agents.recover(copy, session_id="rooted-2")
        state = await recovered.get_state()
        assert state.model == live.model and state.system_prompt == "Be terse."
        assert [m.model_dump() for m in state.messages] == [m.model_dump() for m in live.messages]


async def test_a_model_call_that_fails_every_attempt_says_so(temporal_client: Client, tmp_path: Path) -> None:
    from agentcore import AssistantMessage
    from agentcore.events import StreamError, StreamStart
    from agentcore.protocol import ConversationLimits

    calls = 0

    async def overloaded(model: Any, context: Any, options: Any) -> Any:
        nonlocal calls
        calls += 1
        partial = AssistantMessage(api=model.api, provider=model.provider, model=model.id, timestamp=1)
        yield StreamStart(partial=partial)
        text_ = "HTTP 529 from loopback: Overloaded (retryable; retry after 0.1s)"
        failed = partial.model_copy(update={"stop_reason": "error", "error_message": text_})
        yield StreamError(reason="error", error=failed, retryable=True, retry_after_seconds=0.1)

    limits = FAST_LIMITS.model_copy(update={"llm_max_attempts": 2})
    assert isinstance(limits, ConversationLimits)
    async with running_worker(temporal_client, tmp_path, overloaded, limits=limits) as h:
        agent = await h.agents.start("overloaded", AgentOptions(model=scripted_model()))
        await agent.prompt("hello")
        await agent.wait_for_idle(timeout=30)
        state = await agent.get_state()
    assert calls == 2
    assert state.messages[-1].error_message == (  # type: ignore[union-attr]
        "HTTP 529 from loopback: Overloaded (retryable, but every attempt failed)"
    )


async def test_events_no_longer_retained_are_skipped_with_a_warning(
    temporal_client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    limits = FAST_LIMITS.model_copy(update={"retained_events": 15})
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer), limits=limits) as h:
        agent = await h.agents.start("forgetful", AgentOptions(model=scripted_model()))
        for question in ("one", "two", "three"):
            await agent.prompt(question)
            await agent.wait_for_idle(timeout=20)
        with caplog.at_level(logging.WARNING, logger="agentcore.client"):
            offset, _ = await anext(agent.events(0))
        assert offset > 0
        assert [r.getMessage() for r in caplog.records] == [
            f"'forgetful': events 0-{offset - 1} are no longer retained; continuing from {offset}"
        ]
