"""Sub-agents (``agentcore.subagent_tool``): in-process a nested ``Agent``, durably a child workflow.

What a user notices: the caller gets the sub-agent's final answer with its session id, usage, cost
and stop reason; the child's turns and tool calls arrive as progress; an abort of the caller ends
the child with its partial answer kept; a failing child is an error result, not a failed parent;
depth is limited; a blank task starts nothing; a worker restart does not start a second child.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowExecutionStatus

from agentcore import Agent, AgentOptions, ToolResultMessage, Usage, UsageCost, subagent_tool
from agentcore.client import AgentClient
from agentcore.errors import EXECUTION_ABORTED, EXECUTION_ERROR, INVALID_PARAMETERS, SUBAGENT_DEPTH_EXCEEDED
from agentcore.events import AgentEvent
from agentcore.runtime import LlmContext
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import Reply, ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import create_worker
from tests.support.durable import (
    FAST_LIMITS,
    add_tool,
    collect_run,
    eventually,
    listed_runs,
    running_worker,
    sleep_tool,
)

CHILD_PROMPT = "You are the researcher."
PARENT_PROMPT = "You are the lead."
CHILD_USAGE = Usage(
    input=100, output=20, total_tokens=120, cost=UsageCost(input=0.01, output=0.02, total=0.03)
)
PARENT_USAGE = Usage(input=10, output=2, total_tokens=12, cost=UsageCost(total=0.001))


def _turn(context: LlmContext) -> int:
    return sum(1 for message in context.messages if message.role == "assistant")


def researcher(**options: Any) -> Any:
    fields: dict[str, Any] = {"model": scripted_model(), "system_prompt": CHILD_PROMPT, "tools": [add_tool()]}
    fields.update(options)
    return subagent_tool("researcher", "Researches a question and reports.", AgentOptions(**fields))


def replies(task: str = "Add 2 and 3.", child_final: str = "The answer is 5.") -> ScriptedModel:
    """The lead asks the researcher once and repeats its answer; the researcher uses ``add``."""

    def respond(context: LlmContext) -> Reply:
        turn = _turn(context)
        if context.system_prompt == CHILD_PROMPT:
            if turn == 0:
                return tool_calls([("add", {"a": 2, "b": 3})], preamble="Let me add.") + Reply(
                    usage=CHILD_USAGE
                )
            return text(child_final, usage=CHILD_USAGE)
        if turn == 0:
            return tool_calls([("researcher", {"task": task})]) + Reply(usage=PARENT_USAGE)
        return text("The researcher says 5.", usage=PARENT_USAGE)

    return ScriptedModel(respond)


def _sub_result(messages: list[Any]) -> ToolResultMessage:
    results = [m for m in messages if isinstance(m, ToolResultMessage) and m.tool_name == "researcher"]
    assert len(results) == 1
    return results[0]


def _progress(events: list[AgentEvent]) -> list[tuple[str, str]]:
    return [
        (e.partial_result.details["event"], e.partial_result.content[0].text)
        for e in events
        if e.type == "tool_execution_update" and e.tool_name == "researcher"
    ]


EXPECTED_PROGRESS = [
    ("tool_execution_start", "calling add"),
    ("tool_execution_end", "add done"),
    ("turn_end", "Let me add."),  # a turn ends after its tools
    ("turn_end", "The answer is 5."),
]


# ------------------------------------------------------------------------------------------ in-process


async def test_in_process_sub_agent_answers_with_its_final_answer_usage_and_progress() -> None:
    agent = Agent(
        model=scripted_model(), system_prompt=PARENT_PROMPT, tools=[researcher()], stream_fn=replies()
    )
    events: list[AgentEvent] = []
    agent.subscribe(lambda event, signal: events.append(event))
    await agent.prompt("What is 2 + 3? Ask the researcher.")
    result = _sub_result(agent.messages)
    assert not result.is_error
    assert result.text == "The answer is 5."
    assert result.details["stop_reason"] == "stop"
    assert result.details["session_id"].endswith(".sub.call_0_0")
    # Two model calls of the child, each 120 tokens and $0.03.
    assert result.details["usage"]["total_tokens"] == 240
    assert result.details["cost"] == pytest.approx(0.06)
    assert result.usage is not None and result.usage.cost.total == pytest.approx(0.06)
    # The child's progress arrives between the call's start and end.
    types = [e.type for e in events]
    start, end = types.index("tool_execution_start"), types.index("tool_execution_end")
    assert _progress(events[start:end]) == EXPECTED_PROGRESS
    assert agent.messages[-1].text == "The researcher says 5."


async def test_in_process_depth_limit_and_blank_task_start_no_child() -> None:
    started: list[str] = []

    def respond(context: LlmContext) -> Reply:
        started.append(context.system_prompt)
        if _turn(context) == 0:
            return tool_calls([("researcher", {"task": "  "}), ("researcher", {})])
        return text("ok")

    agent = Agent(model=scripted_model(), tools=[researcher()], stream_fn=ScriptedModel(respond))
    await agent.prompt("Go.")
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert [r.details["error_code"] for r in results] == [INVALID_PARAMETERS, INVALID_PARAMETERS]
    assert CHILD_PROMPT not in started  # no child model call was made

    # A researcher limited to one level, whose own tool is a researcher (allowing two): the limit
    # that led there holds, and the grandchild is refused.
    inner = subagent_tool(
        "researcher", "Researches.", AgentOptions(model=scripted_model(), system_prompt="grandchild")
    )
    outer = subagent_tool(
        "researcher",
        "Researches.",
        AgentOptions(model=scripted_model(), system_prompt=CHILD_PROMPT, tools=[inner]),
        max_depth=1,
    )
    prompts: list[str] = []

    def nested(context: LlmContext) -> Reply:
        prompts.append(context.system_prompt)
        if _turn(context) == 0 and context.system_prompt != "grandchild":
            return tool_calls([("researcher", {"task": "dig deeper"})])
        last = context.messages[-1]
        return text(last.text if isinstance(last, ToolResultMessage) else "leaf")

    agent = Agent(model=scripted_model(), tools=[outer], stream_fn=ScriptedModel(nested))
    await agent.prompt("Go.")
    assert "grandchild" not in prompts
    child_answer = _sub_result(agent.messages)
    assert SUBAGENT_DEPTH_EXCEEDED in child_answer.text  # the child read the refusal and repeated it


async def test_in_process_abort_ends_the_child_and_keeps_its_partial_answer() -> None:
    def respond(context: LlmContext) -> Reply:
        if context.system_prompt == CHILD_PROMPT:
            return tool_calls([("sleep", {"seconds": 30})], preamble="Found two leads so far.")
        return tool_calls([("researcher", {"task": "dig"})]) if _turn(context) == 0 else text("unused")

    agent = Agent(
        model=scripted_model(),
        tools=[researcher(tools=[sleep_tool()])],
        stream_fn=ScriptedModel(respond),
    )

    def listener(event: AgentEvent, signal: Any) -> None:
        if (
            event.type == "tool_execution_update"
            and event.partial_result.details["event"] == "tool_execution_start"
        ):
            agent.abort()

    agent.subscribe(listener)
    started = time.monotonic()
    await asyncio.wait_for(agent.prompt("Go."), 10)
    assert time.monotonic() - started < 5
    result = _sub_result(agent.messages)
    assert result.is_error and result.details["error_code"] == EXECUTION_ABORTED
    assert result.details["stop_reason"] == "aborted"
    assert "Found two leads so far." in result.text
    assert agent.messages[-1].stop_reason == "aborted"


# --------------------------------------------------------------------------------------------- durable


async def _children_started(handle: Any) -> int:
    history = await handle.fetch_history()
    return sum(
        1 for e in history.events if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    )


async def _runs(handle: Any) -> list[Any]:
    """The child's runs: its first run's history names none after it (no continue-as-new, no second start)."""
    history = await handle.fetch_history()
    return [e for e in history.events if e.HasField("workflow_execution_started_event_attributes")]


async def _until_child_runs_a_tool(client: Client, child_id: str) -> Any:
    """The child's handle, once its workflow runs and a tool call of it is pending."""
    child = client.get_workflow_handle(child_id)

    async def running_a_tool() -> bool:
        try:
            return bool((await child.query("get_state")).get("pending_tool_calls"))
        except Exception:  # not started yet
            return False

    assert await eventually(running_a_tool, bool)
    return child


def _session_entries(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def test_durable_sub_agent_is_a_child_workflow_with_its_own_session_file(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, replies(), tools=[researcher()]) as h:
        agent = await h.agents.start(
            "lead", AgentOptions(model=scripted_model(), system_prompt=PARENT_PROMPT, tools=["researcher"])
        )
        await agent.prompt("What is 2 + 3? Ask the researcher.")
        events = await collect_run(agent)
        await agent.wait_for_idle(timeout=30)
        state = await agent.get_state()
        result = _sub_result(state.messages)
        child_id = "lead.sub.call_0_0"
        assert not result.is_error and result.text == "The answer is 5."
        assert result.details["session_id"] == child_id
        assert result.details["stop_reason"] == "stop"
        assert result.details["cost"] == pytest.approx(0.06)
        assert _progress(events) == EXPECTED_PROGRESS
        # The child's usage rolls up into the parent's statistics (two calls each).
        stats = await agent.get_session_stats()
        assert stats.cost_total == pytest.approx(0.06 + 0.002)
        assert stats.total_tokens == 240 + 24

        # A child workflow of the parent (the Web UI links them), completed, with its own session file.
        child = temporal_client.get_workflow_handle(child_id)
        description = await child.describe()
        assert description.parent_id == "lead"
        assert description.status == WorkflowExecutionStatus.COMPLETED
        header = _session_entries(h.session_path(child_id))[0]
        assert header["metadata"]["parent_session"]["id"] == "lead"
        assert header["metadata"]["subagent"] == "researcher"
        with JsonlSessionStorage.open(h.session_path(child_id)) as storage:
            context = storage.build_context()
        assert [m.role for m in context.messages] == ["user", "assistant", "toolResult", "assistant"]
        assert context.messages[0].text == "Add 2 and 3."
        assert context.system_prompt == CHILD_PROMPT
        # The parent's file counts the child's spending too (the tool result carries its usage).
        with JsonlSessionStorage.open(h.session_path("lead")) as storage:
            assert storage.get_session_stats().cost_total == pytest.approx(0.062)
        # While the parent waited it held no activity for the sub-agent: only the child's start.
        history = await agent.handle.fetch_history()
        scheduled = [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
        ]
        assert "tools.execute" not in scheduled
        assert await _children_started(agent.handle) == 1


async def test_durable_blank_task_and_depth_limit_start_no_child(
    temporal_client: Client, tmp_path: Path
) -> None:
    def respond(context: LlmContext) -> Reply:
        if context.system_prompt == CHILD_PROMPT:
            return (
                tool_calls([("researcher", {"task": "deeper"})])
                if _turn(context) == 0
                else text("child done")
            )
        if _turn(context) == 0:
            return tool_calls([("researcher", {"task": " \n "}), ("shallow", {"task": "go"})])
        return text("lead done")

    shallow = subagent_tool(
        "shallow",
        "A researcher that may not delegate further.",
        AgentOptions(model=scripted_model(), system_prompt=CHILD_PROMPT, tools=["researcher"]),
        max_depth=1,
    )
    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(respond), tools=[researcher(), shallow]
    ) as h:
        agent = await h.agents.start(
            "depth", AgentOptions(model=scripted_model(), tools=["researcher", "shallow"])
        )
        await agent.prompt("Go.")
        await collect_run(agent)
        await agent.wait_for_idle(timeout=30)
        state = await agent.get_state()
        results = {m.tool_name: m for m in state.messages if isinstance(m, ToolResultMessage)}
        assert results["researcher"].details["error_code"] == INVALID_PARAMETERS
        assert not results["shallow"].is_error and results["shallow"].text == "child done"
        # The one child asked for a grandchild past max_depth 1: refused, in the child's transcript.
        with JsonlSessionStorage.open(h.session_path("depth.sub.call_0_1")) as storage:
            child_messages = storage.build_context().messages
        refusal = next(m for m in child_messages if isinstance(m, ToolResultMessage))
        assert refusal.details["error_code"] == SUBAGENT_DEPTH_EXCEEDED
        assert await _children_started(agent.handle) == 1
        assert await _children_started(temporal_client.get_workflow_handle("depth.sub.call_0_1")) == 0


async def test_durable_abort_through_the_parent_ends_the_child_with_its_partial_answer(
    temporal_client: Client, tmp_path: Path
) -> None:
    def respond(context: LlmContext) -> Reply:
        if context.system_prompt == CHILD_PROMPT:
            return tool_calls([("sleep", {"seconds": 60})], preamble="Found two leads so far.")
        return tool_calls([("researcher", {"task": "dig"})]) if _turn(context) == 0 else text("unused")

    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(respond), tools=[researcher(tools=[sleep_tool()])]
    ) as h:
        agent = await h.agents.start("aborting", AgentOptions(model=scripted_model(), tools=["researcher"]))
        await agent.prompt("Go.")
        aborted_at = 0.0
        events: list[AgentEvent] = []
        async for _, event in agent.events(0):
            events.append(event)
            if (
                event.type == "tool_execution_update"
                and event.partial_result.details["event"] == "tool_execution_start"
            ):
                # The parent waits for its child: it answers a query and takes the abort at once.
                started = time.monotonic()
                state = await agent.get_state()
                assert state.is_streaming and state.pending_tool_calls == ["call_0_0"]
                assert time.monotonic() - started < 1
                # The Web UI's current details name the wait.
                metadata = await agent.handle.query(
                    "__temporal_workflow_metadata", result_type=WorkflowMetadata
                )
                assert "waiting for sub-agent `researcher`" in metadata.current_details
                assert "aborting.sub.call_0_0" in metadata.current_details
                aborted_at = time.monotonic()
                await agent.abort()
            if event.type == "agent_end":
                break
        assert time.monotonic() - aborted_at < 3
        await agent.wait_for_idle(timeout=30)
        state = await agent.get_state()
        result = _sub_result(state.messages)
        assert result.is_error and result.details["error_code"] == EXECUTION_ABORTED
        assert result.details["stop_reason"] == "aborted"
        assert "Found two leads so far." in result.text
        assert state.messages[-1].stop_reason == "aborted"
        # The child ended its run aborted (not cut off): completed, its file holds the partial run.
        child = temporal_client.get_workflow_handle("aborting.sub.call_0_0")
        assert (await child.describe()).status == WorkflowExecutionStatus.COMPLETED
        with JsonlSessionStorage.open(h.session_path("aborting.sub.call_0_0")) as storage:
            messages = storage.build_context().messages
        assert messages[1].text == "Found two leads so far."
        assert messages[-1].stop_reason == "aborted"
        # The parent goes on: a new prompt runs.
        await agent.prompt("Still there?")
        await agent.wait_for_idle(timeout=30)
        assert (await agent.get_state()).messages[-1].text == "unused"


async def test_durable_failing_child_is_an_error_result_not_a_failed_parent(
    temporal_client: Client, tmp_path: Path
) -> None:
    def respond(context: LlmContext) -> Reply:
        if context.system_prompt == CHILD_PROMPT:
            return tool_calls([("sleep", {"seconds": 60})])
        return tool_calls([("researcher", {"task": "dig"})]) if _turn(context) == 0 else text("It failed.")

    async with running_worker(
        temporal_client, tmp_path, ScriptedModel(respond), tools=[researcher(tools=[sleep_tool()])]
    ) as h:
        agent = await h.agents.start("failing", AgentOptions(model=scripted_model(), tools=["researcher"]))
        await agent.prompt("Go.")
        child = await _until_child_runs_a_tool(temporal_client, "failing.sub.call_0_0")
        # While it waits for the child, the parent takes a steer (delivered after the call).
        await agent.steer("Keep it short.")
        assert len((await agent.get_queues()).steering) == 1
        await child.terminate("operator stopped it")
        await agent.wait_for_idle(timeout=30)
        state = await agent.get_state()
        result = _sub_result(state.messages)
        assert result.is_error and result.details["error_code"] == EXECUTION_ERROR
        assert "terminated" in result.text.lower()
        assert [m.role for m in state.messages][-3:] == ["toolResult", "user", "assistant"]
        assert state.messages[-2].text == "Keep it short."
        assert state.messages[-1].text == "It failed."
        assert (await agent.handle.describe()).status == WorkflowExecutionStatus.RUNNING


async def test_worker_restart_mid_child_starts_no_second_child(
    temporal_client: Client, tmp_path: Path
) -> None:
    calls: list[str] = []

    def respond(context: LlmContext) -> Reply:
        calls.append(context.system_prompt)
        if context.system_prompt == CHILD_PROMPT:
            if _turn(context) == 0:
                return tool_calls([("sleep", {"seconds": 3})], preamble="Working.")
            return text("Child finished.")
        return (
            tool_calls([("researcher", {"task": "dig"})]) if _turn(context) == 0 else text("Lead finished.")
        )

    model = ScriptedModel(respond)
    tools = [researcher(tools=[sleep_tool()])]
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    sessions = tmp_path / "sessions"

    def worker() -> Any:
        return create_worker(
            temporal_client, task_queue=task_queue, tools=tools, sessions_dir=sessions, stream_fn=model
        )

    agents = AgentClient(temporal_client, task_queue=task_queue, sessions_dir=sessions, limits=FAST_LIMITS)
    async with worker():
        agent = await agents.start("restart", AgentOptions(model=scripted_model(), tools=["researcher"]))
        await agent.prompt("Go.")
        await _until_child_runs_a_tool(temporal_client, "restart.sub.call_0_0")
    # The worker is gone mid-child; a new one takes both workflows over from their histories.
    async with worker():
        await agent.wait_for_idle(timeout=60)
        state = await agent.get_state()
    assert _sub_result(state.messages).text == "Child finished."
    assert state.messages[-1].text == "Lead finished."
    assert await _children_started(agent.handle) == 1
    assert len(await _runs(temporal_client.get_workflow_handle("restart.sub.call_0_0"))) == 1
    # The lead's model was asked twice, before and after its one child; the child's calls may have
    # been asked again when the worker went (a model call in flight is retried), never a new child's.
    assert calls.count("") == 2 and calls.count(CHILD_PROMPT) >= 2


async def test_parent_and_child_past_the_continue_as_new_threshold(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Both histories pass the threshold during the call: the child still ends with its run and
    returns (it never rolls over), the parent continues as new only after its run, carrying the
    result and the statistics that count the child."""
    limits = FAST_LIMITS.model_copy(update={"continue_as_new_after_events": 20})
    async with running_worker(temporal_client, tmp_path, replies(), tools=[researcher()], limits=limits) as h:
        agent = await h.agents.start(
            "rolling", AgentOptions(model=scripted_model(), system_prompt=PARENT_PROMPT, tools=["researcher"])
        )
        await agent.prompt("What is 2 + 3? Ask the researcher.")
        await agent.wait_for_idle(timeout=30)
        runs = await listed_runs(temporal_client, "rolling", at_least=2)
        assert len(runs) >= 2
        state = await agent.get_state()
        assert _sub_result(state.messages).text == "The answer is 5."
        assert state.messages[-1].text == "The researcher says 5."
        assert (await agent.get_session_stats()).cost_total == pytest.approx(0.062)
        # The child's one run (the one its parent started) is the run that completed.
        first = min(runs, key=lambda run: run.start_time)
        parent_first = temporal_client.get_workflow_handle("rolling", run_id=first.run_id)
        started = [
            e.child_workflow_execution_started_event_attributes.workflow_execution.run_id
            for e in (await parent_first.fetch_history()).events
            if e.HasField("child_workflow_execution_started_event_attributes")
        ]
        child = await temporal_client.get_workflow_handle("rolling.sub.call_0_0").describe()
        assert child.status == WorkflowExecutionStatus.COMPLETED
        assert started == [child.run_id]
