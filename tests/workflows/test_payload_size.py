"""Large content (tool output, prompts, progress) never puts a payload over Temporal's 2 MB limit: the
conversation goes on, its events and state still arrive, and the session file holds everything."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.client import Client

from agentcore import AgentOptions, AgentTool, AgentToolResult
from agentcore.budget import EVENT_MAX_BYTES, EVENT_MAX_BYTES_UNDER_PRESSURE
from agentcore.cli import run
from agentcore.messages import TextContent
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import listed_runs, running_worker

KB = 1024


class DumpArgs(BaseModel):
    kilobytes: int
    fill: str = "x"


def dump_tool(timeout_seconds: float | None = None) -> AgentTool:
    async def execute(tool_call_id: str, args: DumpArgs, signal: Any, on_update: Any) -> AgentToolResult:
        if timeout_seconds is not None:  # the remote variant reports progress as large as its result
            on_update(AgentToolResult(content=[TextContent(text="p" * (args.kilobytes * KB))]))
            await asyncio.sleep(0.3)
        return AgentToolResult(content=[TextContent(text=args.fill * (args.kilobytes * KB))])

    extra = {} if timeout_seconds is None else {"timeout_seconds": timeout_seconds}
    return AgentTool(name="dump", description="Print a lot.", parameters=DumpArgs, execute=execute, **extra)


def _tool_chars(context: Any) -> int:
    return sum(len(m.text) for m in context.messages if m.role == "toolResult")


def _six_at_once(context: Any) -> Any:
    last = context.messages[-1]
    if last.role == "user" and last.text == "dump it all":
        return tool_calls([("dump", {"kilobytes": 500, "fill": c}) for c in "abcdef"])
    return text(f"read {_tool_chars(context)} chars")


def _options(**fields: Any) -> AgentOptions:
    # A context window the large outputs fit in: this is not about compaction.
    return AgentOptions(model=scripted_model(context_window=100_000_000), tools=["dump"], **fields)


async def _events_until_idle(agent: Any, prompt: Any) -> list[Any]:
    """Every event of one run, read live by a subscriber (as a UI would)."""
    events: list[Any] = []
    done = asyncio.Event()

    def listener(event: Any, signal: Any) -> None:
        events.append(event)
        if event.type == "agent_end":
            done.set()

    unsubscribe = await agent.subscribe(listener)
    await agent.prompt(prompt)
    await asyncio.wait_for(done.wait(), 120)
    unsubscribe()
    return events


async def test_six_large_tool_results_in_one_turn(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(_six_at_once), tools=[dump_tool()]
    ) as h:
        agent = await h.agents.start("big-results", _options())
        events = await _events_until_idle(agent, "dump it all")
        # The model was given all of it (the model call's input refers to stored payloads).
        assert events[-1].messages[-1].text == f"read {6 * 500 * KB} chars"
        # A subscriber slower than the run may miss its oldest events (the workflow keeps the newest
        # 2 MB of them, with a warning to the subscriber); what arrives is whole or visibly cut.
        ends = [e for e in events if e.type == "tool_execution_end"]
        assert ends and all(len(e.result.content[0].text) == 500 * KB for e in ends), "a result fits whole"
        turn_end = next(e for e in events if e.type == "turn_end")
        assert len(turn_end.tool_results) == 6
        cut = turn_end.tool_results[0].content[0].text
        assert len(cut) < 500 * KB and cut.endswith("the session file holds them all]")
        assert events[-1].type == "agent_end" and len(events[-1].messages) == 9
        state = await agent.get_state()
        assert state.messages[-1].text == f"read {6 * 500 * KB} chars"  # type: ignore[union-attr]
        assert state.message_count == 9 and state.first_message_index + len(state.messages) == 9
        await agent.wait_for_idle(timeout=60)  # every entry is in the session file from here on
        with JsonlSessionStorage.open(h.session_path("big-results")) as storage:
            results = [m for m in storage.build_context().messages if m.role == "toolResult"]
        assert [m.text for m in results] == [c * (500 * KB) for c in "abcdef"], "the file holds everything"
        # The stored payloads are beside the sessions; the history holds references to them.
        assert len(list((h.sessions_dir / ".payloads").iterdir())) >= 6
        history = await agent.handle.fetch_history()
        assert max(event.ByteSize() for event in history.events) < EVENT_MAX_BYTES * 2


async def test_get_messages_pages_through_a_large_transcript(
    temporal_client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(_six_at_once), tools=[dump_tool()]
    ) as h:
        agent = await h.agents.start("big-pages", _options())
        await agent.prompt("dump it all")
        await agent.wait_for_idle(timeout=60)
        state = await agent.get_state()
        assert state.first_message_index > 0, "get_state answers with the newest messages that fit"
        seen: list[Any] = []
        start = pages = 0
        while start < state.message_count:
            pages += 1
            page = await agent.get_messages(start)
            assert page.start == start and page.messages and len(page.entry_ids) == len(page.messages)
            seen.extend(page.messages)
            start += len(page.messages)
        assert pages >= 3, "3 MB of tool output takes several 1 MB answers"
        assert [m.role for m in seen] == ["user", "assistant"] + ["toolResult"] * 6 + ["assistant"]
        assert [len(m.text) for m in seen[2:8]] == [500 * KB] * 6  # type: ignore[union-attr]
        # So does `agentcore messages`: one line per message, in order, across its pages.
        capsys.readouterr()
        argv = ["--address", temporal_client.service_client.config.target_host, "--task-queue", h.task_queue]
        argv += ["--data-dir", str(tmp_path), "--sessions-dir", str(h.sessions_dir), "messages", "big-pages"]
        assert await run(argv) == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines()]
        assert [int(row[0]) for row in rows] == list(range(9))
        assert [row[2] for row in rows] == [m.role for m in seen]
        assert [row[4][:3] for row in rows[2:8]] == [c * 3 for c in "abcdef"]


def _one_per_turn(turns: int) -> Any:
    def respond(context: Any) -> Any:
        done = sum(1 for m in context.messages if m.role == "toolResult")
        if done < turns:
            return tool_calls([("dump", {"kilobytes": 500, "fill": "abcdefghijklmnopqrstuvwxyz"[done % 26]})])
        return text(f"read {_tool_chars(context)} chars")

    return respond


async def test_a_long_run_of_large_results_keeps_its_history_small(
    temporal_client: Client, tmp_path: Path
) -> None:
    # 30 results of 500 KB in one run, read live: every poll answer is recorded in the history, and
    # at full size they would pass the 50 MB at which the server ends a workflow (a run continues as
    # new only once it ends). Events are cut once the run's history is large.
    turns = 30
    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(_one_per_turn(turns)), tools=[dump_tool()]
    ) as h:
        agent = await h.agents.start("long-big-run", _options())
        events = await _events_until_idle(agent, "go")
        assert events[-1].messages[-1].text == f"read {turns * 500 * KB} chars"
        assert len(events[-1].messages) == 2 + 2 * turns
        assert len(events[-1].model_dump_json()) < 2 * EVENT_MAX_BYTES_UNDER_PRESSURE
        ends = [e for e in events if e.type == "tool_execution_end"]
        assert ends and len(ends[0].result.content[0].text) == 500 * KB, "whole while the history is small"
        sizes = []
        for run in await listed_runs(temporal_client, "long-big-run"):
            history = await temporal_client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
            sizes.append(sum(event.ByteSize() for event in history.events))
        assert sizes and max(sizes) < 20 * 1024 * KB, sizes


async def test_large_progress_and_a_large_prompt(temporal_client: Client, tmp_path: Path) -> None:
    def respond(context: Any) -> Any:
        last = context.messages[-1]
        if last.role == "user":
            return tool_calls([("dump", {"kilobytes": 1500})])
        return text(f"prompt {len(context.messages[0].text)}, tool {_tool_chars(context)}")

    # Its progress travels as an activity_events signal, cut to the stream's budget by the activity.
    tool = dump_tool(timeout_seconds=30)
    async with running_worker(temporal_client, tmp_path, ScriptedModel(respond), tools=[tool]) as h:
        agent = await h.agents.start("big-progress", _options())
        events = await _events_until_idle(agent, "q" * (1200 * KB))
        updates = [e for e in events if e.type == "tool_execution_update"]
        assert updates and len(updates[0].partial_result.content[0].text) < EVENT_MAX_BYTES
        assert updates[0].partial_result.content[0].text.endswith("the session file holds them all]")
        # The tool's result was cut by the worker (512 KB), the prompt arrived whole.
        answer = events[-1].messages[-1].text
        assert answer.startswith(f"prompt {1200 * KB}, tool ")
        assert 512 * KB < int(answer.rsplit(" ", 1)[1]) < 513 * KB
