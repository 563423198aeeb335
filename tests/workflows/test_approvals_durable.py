"""Tool approvals in a durable conversation: the wait is the workflow's (no activity in flight), it
survives a worker restart and a recovery from the session file, and decisions are Updates refused
with typed errors before anything is written."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHistoryEventFilterType

from agentcore import (
    ApprovalAlreadyResolvedError,
    ApprovalNotFoundError,
    InvalidParametersError,
)
from agentcore.client import AgentClient, DurableAgent
from agentcore.events import AgentEvent
from agentcore.search_attributes import AWAITING_APPROVAL
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import create_worker
from tests.agent.test_approvals import call, deploy_tool
from tests.support.durable import FAST_LIMITS, eventually, running_worker


async def read_until(agent: DurableAgent, events: list[AgentEvent], kind: str, count: int = 1) -> None:
    """Follow the conversation's events into ``events`` until ``count`` of ``kind`` arrived."""

    async def read() -> None:
        async for _, event in agent.events(len(events)):
            events.append(event)
            if sum(1 for e in events if e.type == kind) >= count:
                return

    await asyncio.wait_for(read(), 30)


def of(events: list[AgentEvent], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def tool_results(events: list[AgentEvent]) -> list[Any]:
    return [
        e.message
        for e in events
        if e.type == "message_end" and getattr(e.message, "role", "") == "toolResult"
    ]


def session_entries(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def test_approve_runs_the_call_once_and_the_wait_shows_everywhere(
    temporal_client: Client, tmp_path: Path
) -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel([tool_calls([call("c1", service="web")]), text("Deployed.")])
    async with running_worker(temporal_client, tmp_path, model, tools=[deploy_tool(runs)]) as h:
        agent = await h.agents.start("approve-1", model=scripted_model(), tools=["deploy"])
        await agent.prompt("Deploy web.")
        events: list[AgentEvent] = []
        await read_until(agent, events, "tool_approval_requested")
        types = [e.type for e in events]
        assert types.index("tool_approval_requested") == types.index("tool_execution_start") + 1

        [pending] = await agent.pending_approvals()
        assert (pending.tool_call_id, pending.tool_name, pending.arguments) == (
            "c1",
            "deploy",
            {"service": "web"},
        )
        state = await agent.get_state()
        assert state.status == AWAITING_APPROVAL and state.pending_approvals == [pending]
        # Findable through the search attribute (visibility is eventually consistent: wait for it).
        listed = await eventually(
            lambda: h.agents.list(f'AgentStatus = "{AWAITING_APPROVAL}"'),
            lambda rows: any(r.session_id == "approve-1" for r in rows),
        )
        assert [r.session_id for r in listed] == ["approve-1"]
        # The Web UI's current details say what it waits for and since when.
        metadata = await agent.handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert "waiting for approval: `deploy` (call `c1`) since " in metadata.current_details
        description = await agent.handle.describe()
        # The wait holds no activity: nothing is pending on the server.
        assert not description.raw_description.pending_activities
        # The session file holds the request while the conversation waits (written as the wait begins).
        entries = await eventually(
            lambda: asyncio.to_thread(session_entries, h.session_path("approve-1")),
            lambda entries: any(e["type"] == "custom" for e in entries),
        )
        assert [e["custom_type"] for e in entries if e["type"] == "custom"] == ["tool_approval_request"]
        assert runs == []

        with pytest.raises(ApprovalNotFoundError):
            await agent.approve("nope")
        accepted = await agent.approve("c1")
        assert accepted.status == "accepted"
        await read_until(agent, events, "agent_end")
        assert runs == [{"service": "web"}]
        assert (await agent.approve("c1")).status == "duplicate"
        with pytest.raises(ApprovalAlreadyResolvedError) as refused:
            await agent.deny("c1")
        assert refused.value.code == "APPROVAL_ALREADY_RESOLVED"
        await agent.wait_for_idle(timeout=30)
        customs = [e for e in session_entries(h.session_path("approve-1")) if e["type"] == "custom"]
        assert [(e["custom_type"], e["data"].get("decision")) for e in customs] == [
            ("tool_approval_request", None),
            ("tool_approval_decision", "approved"),
        ]
        listed = await eventually(
            lambda: h.agents.list(f'AgentStatus = "{AWAITING_APPROVAL}"'), lambda rows: not rows
        )
        assert listed == []


async def test_edited_and_invalid_arguments(temporal_client: Client, tmp_path: Path) -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel([tool_calls([call("c1", service="web")]), text("Done.")])
    async with running_worker(temporal_client, tmp_path, model, tools=[deploy_tool(runs)]) as h:
        agent = await h.agents.start("approve-edit", model=scripted_model(), tools=["deploy"])
        await agent.prompt("Deploy web.")
        events: list[AgentEvent] = []
        await read_until(agent, events, "tool_approval_requested")
        offset_before = await agent.event_offset()
        with pytest.raises(InvalidParametersError) as bad:
            await agent.approve("c1", {"service": "web", "replicas": "three"})
        assert bad.value.code == "INVALID_PARAMETERS"
        # Refused before anything was written: still waiting, no event, nothing in history.
        assert [p.tool_call_id for p in await agent.pending_approvals()] == ["c1"]
        assert await agent.event_offset() == offset_before
        history = [
            e
            async for e in agent.handle.fetch_history_events(
                event_filter_type=WorkflowHistoryEventFilterType.ALL_EVENT
            )
        ]
        accepted = [
            e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            for e in history
            if e.HasField("workflow_execution_update_accepted_event_attributes")
        ]
        assert "approve" not in accepted and "prompt" in accepted
        await agent.approve("c1", {"service": "web", "replicas": 3})
        await read_until(agent, events, "agent_end")
        assert runs == [{"service": "web", "replicas": 3}]
        [resolved] = of(events, "tool_approval_resolved")
        assert (resolved.decision, resolved.args) == ("edited", {"service": "web", "replicas": 3})


async def test_deny_and_timeout(temporal_client: Client, tmp_path: Path) -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel(
        [
            tool_calls([call("c1", service="db")]),
            text("Understood."),
            tool_calls([call("c2", service="db")]),
            text("No answer."),
        ]
    )
    tool = deploy_tool(runs, approval_timeout_seconds=1.5)
    async with running_worker(temporal_client, tmp_path, model, tools=[tool]) as h:
        agent = await h.agents.start("approve-deny", model=scripted_model(), tools=["deploy"])
        await agent.prompt("Deploy db.")
        events: list[AgentEvent] = []
        await read_until(agent, events, "tool_approval_requested")
        assert of(events, "tool_approval_requested")[0].expires_at is not None
        await agent.deny("c1", "not on a Friday")
        await read_until(agent, events, "agent_end")
        [result] = tool_results(events)
        assert result.details["error_code"] == "TOOL_DENIED" and "not on a Friday" in result.content[0].text
        assert "not on a Friday" in str(model.calls[1].messages[-1].model_dump())

        await agent.wait_for_idle(timeout=30)
        await agent.prompt("Try again.")
        await read_until(agent, events, "agent_end", 2)
        assert [e.decision for e in of(events, "tool_approval_resolved")] == ["denied", "expired"]
        assert tool_results(events)[-1].details["error_code"] == "APPROVAL_TIMEOUT"
        assert runs == []


async def test_abort_while_waiting_ends_the_run_within_a_second(
    temporal_client: Client, tmp_path: Path
) -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel([tool_calls([call("c1", service="web")]), text("never")])
    async with running_worker(temporal_client, tmp_path, model, tools=[deploy_tool(runs)]) as h:
        agent = await h.agents.start("approve-abort", model=scripted_model(), tools=["deploy"])
        await agent.prompt("Deploy web.")
        events: list[AgentEvent] = []
        await read_until(agent, events, "tool_approval_requested")
        started = time.monotonic()
        await agent.abort()
        await read_until(agent, events, "agent_end")
        assert time.monotonic() - started < 1.0
        assert [e.decision for e in of(events, "tool_approval_resolved")] == ["aborted"]
        assert tool_results(events)[0].details["error_code"] == "EXECUTION_ABORTED"
        assert runs == [] and await agent.pending_approvals() == []


async def test_a_steer_denies_the_waiting_call_and_is_answered_next(
    temporal_client: Client, tmp_path: Path
) -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel([tool_calls([call("c1", service="web")]), text("Staging it is.")])
    async with running_worker(temporal_client, tmp_path, model, tools=[deploy_tool(runs)]) as h:
        agent = await h.agents.start("approve-steer", model=scripted_model(), tools=["deploy"])
        await agent.prompt("Deploy web.")
        events: list[AgentEvent] = []
        await read_until(agent, events, "tool_approval_requested")
        await agent.steer("Wait, staging first.")
        await read_until(agent, events, "agent_end")
        [resolved] = of(events, "tool_approval_resolved")
        assert (resolved.decision, resolved.reason) == ("denied", "the user sent a new message instead")
        assert [m.role for m in model.calls[1].messages][-2:] == ["toolResult", "user"]
        assert runs == []


async def test_approve_after_the_worker_restarted_runs_the_tool_once(
    temporal_client: Client, tmp_path: Path
) -> None:
    runs: list[dict[str, Any]] = []
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    sessions = tmp_path / "sessions"
    model = ScriptedModel([tool_calls([call("c1", service="web")]), text("Deployed after the restart.")])

    def worker() -> Any:
        return create_worker(
            temporal_client,
            task_queue=task_queue,
            tools=[deploy_tool(runs)],
            sessions_dir=sessions,
            stream_fn=model,
        )

    agents = AgentClient(temporal_client, task_queue=task_queue, sessions_dir=sessions, limits=FAST_LIMITS)
    events: list[AgentEvent] = []
    async with worker():
        agent = await agents.start("approve-restart", model=scripted_model(), tools=["deploy"])
        # A client waiting for the run's end (``run``): its wait is the workflow's, and outlasts the worker.
        running = asyncio.ensure_future(agent.run("Deploy web.", timeout=60))
        await read_until(agent, events, "tool_approval_requested")
    # No worker now: the conversation still answers nothing, but its wait is in its history.
    async with worker():
        await agent.approve("c1")
        await read_until(agent, events, "agent_end")
        result = await running
        await agent.wait_for_idle(timeout=30)
    assert result.messages[-1].text == "Deployed after the restart."  # type: ignore[union-attr]
    assert runs == [{"service": "web"}]
    assert [e.decision for e in of(events, "tool_approval_resolved")] == ["approved"]
    assert tool_results(events)[0].content[0].text == "deployed web x1"


async def test_a_conversation_recovered_from_its_file_asks_again(
    temporal_client: Client, tmp_path: Path
) -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel([tool_calls([call("c1", service="web")]), text("Deployed after recovery.")])
    async with running_worker(temporal_client, tmp_path, model, tools=[deploy_tool(runs)]) as h:
        agent = await h.agents.start("approve-lost", model=scripted_model(), tools=["deploy"])
        await agent.prompt("Deploy web.")
        events: list[AgentEvent] = []
        await read_until(agent, events, "tool_approval_requested")
        [asked] = await agent.pending_approvals()
        # The request is written to the file before the wait begins (just after its event).
        path = h.session_path("approve-lost")
        await eventually(
            lambda: asyncio.to_thread(session_entries, path),
            lambda entries: any(e.get("custom_type") == "tool_approval_request" for e in entries),
        )
        await agent.handle.terminate("the Temporal database was lost")

        recovered = await h.agents.recover(h.session_path("approve-lost"), session_id="approve-found")
        again: list[AgentEvent] = []
        await read_until(recovered, again, "tool_approval_requested")
        [pending] = await recovered.pending_approvals()
        assert (pending.tool_call_id, pending.requested_at) == ("c1", asked.requested_at)
        await recovered.approve("c1")
        await read_until(recovered, again, "agent_end")
        assert runs == [{"service": "web"}]
        messages = (await recovered.get_state()).messages
        assert [m.role for m in messages] == ["user", "assistant", "toolResult", "assistant"]


async def test_a_wait_outlasts_continue_as_new(temporal_client: Client, tmp_path: Path) -> None:
    """A wait of days gathers history (updates, signals, polls): once it is due to continue as new,
    the run is set aside and the next run asks again, with the same request time; the call runs once.
    Clients waiting for the run's end (``run``, ``wait_for_idle``) do not keep the conversation from
    rolling over: their waits go on in the next run, and end with the run."""
    runs: list[dict[str, Any]] = []
    model = ScriptedModel([tool_calls([call("c1", service="web")]), text("Deployed after the roll-over.")])
    limits = FAST_LIMITS.model_copy(update={"continue_as_new_after_events": 60})
    async with running_worker(
        temporal_client, tmp_path, model, tools=[deploy_tool(runs)], limits=limits
    ) as h:
        agent = await h.agents.start("approve-can", model=scripted_model(), tools=["deploy"])
        first_run = (await agent.handle.describe()).run_id
        running = asyncio.ensure_future(agent.run("Deploy web.", timeout=60))
        events: list[AgentEvent] = []
        await read_until(agent, events, "tool_approval_requested")
        idle = asyncio.ensure_future(agent.wait_for_idle(timeout=60))
        [asked] = await agent.pending_approvals()
        # Each accepted update is history: enough of them and the conversation is due to roll over.
        for index in range(40):
            await agent.set_session_name(f"name {index}")
            if (await agent.handle.describe()).run_id != first_run:
                break
        assert (await agent.handle.describe()).run_id != first_run, (
            "the waiting conversation never continued as new"
        )
        assert not running.done() and not idle.done()
        await read_until(agent, events, "tool_approval_requested", 2)
        [pending] = await agent.pending_approvals()
        assert (pending.tool_call_id, pending.requested_at) == ("c1", asked.requested_at)
        assert (await agent.get_state()).status == AWAITING_APPROVAL
        await agent.approve("c1")
        await read_until(agent, events, "agent_end")
        result = await running
        await idle
        await agent.wait_for_idle(timeout=30)
        assert runs == [{"service": "web"}]
        assert [m.role for m in result.messages] == ["user", "assistant", "toolResult", "assistant"]
        assert result.messages[-1].text == "Deployed after the roll-over."  # type: ignore[union-attr]
        messages = (await agent.get_state()).messages
        assert [m.role for m in messages][-3:] == ["assistant", "toolResult", "assistant"]
        assert messages[-1].text == "Deployed after the roll-over."
        decisions = [
            e["data"]["decision"]
            for e in session_entries(h.session_path("approve-can"))
            if e.get("custom_type") == "tool_approval_decision"
        ]
        assert decisions == ["approved"]
