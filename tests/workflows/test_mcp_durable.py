"""MCP tools in durable conversations: real MCP servers (stdio and streamable HTTP, ``tests/support/mcp_servers``)
behind a real worker on the dev server, turns driven by the scripted model."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer

from agentcore import AgentOptions
from agentcore.client import DurableAgent
from agentcore.errors import EXECUTION_ABORTED, EXECUTION_ERROR, INVALID_PARAMETERS
from agentcore.mcp import MCPServerHTTP
from agentcore.messages import ImageContent, TextContent, ToolResultMessage
from agentcore.runtime import LlmContext
from agentcore.temporal import DATA_CONVERTER
from agentcore.testing.scripted import CallSpec, Reply, ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import workflow_runner
from agentcore.workflows import ConversationWorkflow
from tests.support.durable import collect_run, running_worker
from tests.support.mcp import http_server, log_lines, stdio_server
from tests.support.process import wait_until


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "mcp.log"


@pytest.fixture
async def beta(log: Path) -> AsyncIterator[MCPServerHTTP]:
    async with http_server("beta", log) as server:
        yield server


class Model:
    """Calls ``calls`` when the user speaks, then says "done"; remembers the tools it was shown."""

    def __init__(self, *calls: CallSpec) -> None:
        self.calls = calls
        self.tools_seen: list[dict[str, dict[str, Any]]] = []
        self.scripted = ScriptedModel(self.respond)

    def respond(self, context: LlmContext) -> Reply:
        self.tools_seen.append({tool.name: tool.parameters for tool in context.tools})
        if context.messages[-1].role == "user":
            return tool_calls(list(self.calls))
        return text("done")


@asynccontextmanager
async def alpha_turn(
    client: Client, tmp_path: Path, log: Path, session_id: str, model: Model
) -> AsyncIterator[DurableAgent]:
    """A worker with the stdio server ``alpha``, and a conversation using all its tools, prompted."""
    async with running_worker(
        client, tmp_path, model.scripted, mcp_servers=[stdio_server("alpha", log)]
    ) as h:
        agent = await h.agents.start(session_id, AgentOptions(model=scripted_model(), tools=["mcp:alpha"]))
        await agent.prompt("go")
        yield agent


async def hold_started(log: Path, count: int = 1) -> int:
    """The pid of the server process where the ``count``-th call to ``hold`` started."""
    await wait_until(lambda: len(log_lines(log, "hold-start")) >= count, what=f"hold call {count}")
    return int(log_lines(log, "hold-start")[count - 1][2])


def tool_results(messages: list[Any]) -> dict[str, ToolResultMessage]:
    return {m.tool_name: m for m in messages if isinstance(m, ToolResultMessage)}


def scheduled_activities(history: Any) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


def local_activities(history: Any) -> list[str]:
    return [
        json.loads(e.marker_recorded_event_attributes.details["data"].payloads[0].data)["activity_type"]
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]


async def test_a_turn_calls_a_stdio_servers_tool_by_its_own_name_and_schema(
    temporal_client: Client, tmp_path: Path, log: Path
) -> None:
    model = Model(("add", {"a": 2, "b": 3}))
    async with alpha_turn(temporal_client, tmp_path, log, "mcp-stdio", model) as agent:
        await agent.wait_for_idle(timeout=60)
        state = await agent.get_state()
        history = await agent.handle.fetch_history()
    result = tool_results(state.messages)["add"]
    assert not result.is_error and result.text == "5"
    assert result.details["mcp_server"] == "alpha"
    assert log_lines(log, "add") == [["add", "2+3", log_lines(log, "add")[0][2]]]  # ran once
    shown = model.tools_seen[0]
    assert {"echo", "add", "fail", "picture", "hold", "record"} <= set(shown)  # the whole server
    assert shown["add"]["properties"]["a"]["type"] == "integer"  # the server's own schema
    assert {tool.name for tool in state.tools} == set(shown)  # recorded in the workflow
    # The tools.execute activity like any tool call's (a retry-safe one's local attempt, here).
    assert "tools.execute" in scheduled_activities(history) + local_activities(history)
    # The recorded history replays with no MCP server anywhere (the worker and its servers are gone).
    replayer = Replayer(
        workflows=[ConversationWorkflow],
        data_converter=DATA_CONVERTER,
        workflow_runner=workflow_runner(DATA_CONVERTER),
    )
    await replayer.replay_workflow(history)


async def test_a_turn_calls_one_tool_of_an_http_server(
    temporal_client: Client, tmp_path: Path, beta: MCPServerHTTP
) -> None:
    model = Model(("echo", {"text": "over HTTP"}))
    async with running_worker(temporal_client, tmp_path, model.scripted, mcp_servers=[beta]) as h:
        agent = await h.agents.start(
            "mcp-http", AgentOptions(model=scripted_model(), tools=["mcp:beta/echo"])
        )
        await agent.prompt("echo")
        await agent.wait_for_idle(timeout=60)
        state = await agent.get_state()
    assert list(model.tools_seen[0]) == ["echo"]  # only the tool named
    assert tool_results(state.messages)["echo"].text == "beta: over HTTP"


async def test_schema_errors_raised_tools_images_and_resources_become_results(
    temporal_client: Client, tmp_path: Path, log: Path
) -> None:
    model = Model(
        ("add", {"a": "two", "b": 3}),
        ("fail", {"reason": "not today"}),
        ("picture", {}),
        ("document", {}),
    )
    async with alpha_turn(temporal_client, tmp_path, log, "mcp-results", model) as agent:
        await agent.wait_for_idle(timeout=60)
        state = await agent.get_state()
    results = tool_results(state.messages)
    invalid = results["add"]
    assert invalid.is_error and invalid.text.startswith(INVALID_PARAMETERS)
    assert "/a: 'two' is not of type 'integer'" in invalid.text
    assert log_lines(log, "add") == []  # refused before it reached the server
    failed = results["fail"]
    assert failed.is_error and failed.text.startswith(EXECUTION_ERROR) and "refused: not today" in failed.text
    picture = results["picture"]
    assert not picture.is_error
    assert [type(block) for block in picture.content] == [ImageContent, TextContent]
    image = picture.content[0]
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    assert results["document"].text == "Buy grapes."


async def test_progress_notifications_become_tool_execution_updates(
    temporal_client: Client, tmp_path: Path, beta: MCPServerHTTP
) -> None:
    model = Model(("count", {"steps": 3}))
    async with running_worker(temporal_client, tmp_path, model.scripted, mcp_servers=[beta]) as h:
        agent = await h.agents.start("mcp-progress", AgentOptions(model=scripted_model(), tools=["mcp:beta"]))
        offset = await agent.event_offset()
        await agent.prompt("count")
        events = await collect_run(agent, offset, timeout=60)
    updates = [e for e in events if e.type == "tool_execution_update"]
    assert [update.partial_result.content[0].text for update in updates] == [
        "step 1 of 3",
        "step 2 of 3",
        "step 3 of 3",
    ]
    assert updates[-1].partial_result.details == {"progress": 3.0, "total": 3.0}
    end = next(e for e in events if e.type == "tool_execution_end")
    assert not end.is_error


async def test_an_abort_cancels_the_mcp_request_on_the_server(
    temporal_client: Client, tmp_path: Path, log: Path
) -> None:
    model = Model(("hold", {"tag": "a1"}))
    async with alpha_turn(temporal_client, tmp_path, log, "mcp-abort", model) as agent:
        await hold_started(log)
        await agent.abort()
        await agent.wait_for_idle(timeout=60)
        # The server's handler was cancelled: notifications/cancelled reached it.
        await wait_until(lambda: log_lines(log, "hold-cancelled"), what="the server to see the cancellation")
        state = await agent.get_state()
    held = tool_results(state.messages).get("hold")
    assert held is not None and held.is_error and held.text.startswith(EXECUTION_ABORTED)
    assert log_lines(log, "hold-end") == []


async def test_a_stdio_server_killed_mid_call_is_restarted_and_the_call_retried(
    temporal_client: Client, tmp_path: Path, log: Path
) -> None:
    model = Model(("hold", {"tag": "k1"}))
    async with alpha_turn(temporal_client, tmp_path, log, "mcp-kill", model) as agent:
        first_pid = await hold_started(log)
        os.kill(first_pid, signal.SIGKILL)
        # ``hold`` is read-only, so retry-safe: the next attempt reaches the restarted server.
        second_pid = await hold_started(log, count=2)
        log.with_name(log.name + ".release").touch()
        await agent.wait_for_idle(timeout=60)
        state = await agent.get_state()
    assert second_pid != first_pid
    result = tool_results(state.messages)["hold"]
    assert not result.is_error and result.text == f"released k1 in {second_pid}"


async def test_two_servers_with_the_same_tool_name_are_told_apart(
    temporal_client: Client, tmp_path: Path, log: Path, beta: MCPServerHTTP
) -> None:
    model = Model(("alpha_echo", {"text": "one"}), ("beta_echo", {"text": "two"}))
    servers = [stdio_server("alpha", log), beta]
    async with running_worker(temporal_client, tmp_path, model.scripted, mcp_servers=servers) as h:
        options = AgentOptions(model=scripted_model(), tools=["mcp:alpha/echo", "mcp:beta/echo"])
        agent = await h.agents.start("mcp-clash", options)
        await agent.prompt("echo twice")
        await agent.wait_for_idle(timeout=60)
        state = await agent.get_state()
    assert sorted(model.tools_seen[0]) == ["alpha_echo", "beta_echo"]
    results = tool_results(state.messages)
    assert results["alpha_echo"].text == "alpha: one"
    assert results["beta_echo"].text == "beta: two"


async def test_set_tools_takes_mcp_names_and_refuses_unknown_servers(
    temporal_client: Client, tmp_path: Path, log: Path
) -> None:
    model = Model()
    respond: Callable[[LlmContext], Reply] = lambda context: text("ok")  # noqa: E731
    model.scripted = ScriptedModel(respond)
    async with running_worker(
        temporal_client, tmp_path, model.scripted, mcp_servers=[stdio_server("alpha", log)]
    ) as h:
        agent = await h.agents.start("mcp-set-tools", AgentOptions(model=scripted_model()))
        await agent.set_tools(["mcp:alpha/echo"])
        assert [tool.name for tool in (await agent.get_state()).tools] == ["echo"]
        from agentcore.errors import ToolNotFoundError

        with pytest.raises(ToolNotFoundError):
            await agent.set_tools(["mcp:nowhere"])
