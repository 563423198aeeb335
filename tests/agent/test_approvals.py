"""Tool approvals in-process: a call of a tool that ``requires_approval`` waits for a person.

The durable side is in ``test_approvals_durable.py``; ``test_parity.py`` holds both to the same events.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentcore import (
    Agent,
    AgentTool,
    AgentToolResult,
    ApprovalAlreadyResolvedError,
    ApprovalNotFoundError,
    InvalidParametersError,
    PendingApproval,
)
from agentcore.events import AgentEvent
from agentcore.messages import ToolResultMessage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls

DEPLOY_SCHEMA = {
    "type": "object",
    "properties": {"service": {"type": "string"}, "replicas": {"type": "integer", "minimum": 1}},
    "required": ["service"],
    "additionalProperties": False,
}


def deploy_tool(runs: list[dict[str, Any]], **fields: Any) -> AgentTool:
    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        runs.append(args)
        return AgentToolResult.text(f"deployed {args['service']} x{args.get('replicas', 1)}")

    return AgentTool(
        name="deploy",
        description="Deploy a service.",
        parameters=DEPLOY_SCHEMA,
        execute=execute,
        requires_approval=True,
        **fields,
    )


def call(call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": "deploy", "arguments": arguments}


class Recorder:
    def __init__(self, agent: Agent) -> None:
        self.events: list[AgentEvent] = []
        agent.subscribe(lambda event, signal: self.events.append(event))

    async def until(self, kind: str, count: int = 1, timeout: float = 5) -> None:
        deadline = time.monotonic() + timeout
        while sum(1 for e in self.events if e.type == kind) < count:
            assert time.monotonic() < deadline, f"no {count} x {kind} within {timeout} s"
            await asyncio.sleep(0.01)

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    def results(self) -> list[ToolResultMessage]:
        return [
            e.message
            for e in self.events
            if e.type == "message_end" and isinstance(e.message, ToolResultMessage)
        ]


def make_agent(replies: list[Any], runs: list[dict[str, Any]], **tool_fields: Any) -> tuple[Agent, Recorder]:
    agent = Agent(
        model=scripted_model(), tools=[deploy_tool(runs, **tool_fields)], stream_fn=ScriptedModel(replies)
    )
    return agent, Recorder(agent)


async def test_a_call_waits_for_approval_and_runs_once_approved() -> None:
    runs: list[dict[str, Any]] = []
    agent, rec = make_agent([tool_calls([call("c1", service="web")]), text("Deployed.")], runs)
    run = asyncio.create_task(agent.prompt("Deploy web."))
    await rec.until("tool_approval_requested")
    assert runs == []  # nothing ran yet
    [pending] = agent.pending_approvals()
    assert isinstance(pending, PendingApproval)
    assert (pending.tool_call_id, pending.tool_name, pending.arguments) == (
        "c1",
        "deploy",
        {"service": "web"},
    )
    assert pending.expires_at is None and pending.requested_at > 0
    assert agent.get_state().pending_approvals == [pending]
    types = [e.type for e in rec.events]
    assert types.index("tool_approval_requested") == types.index("tool_execution_start") + 1

    agent.approve("c1")
    await asyncio.wait_for(run, 5)
    assert runs == [{"service": "web"}]
    [resolved] = rec.of("tool_approval_resolved")
    assert (resolved.decision, resolved.args) == ("approved", {"service": "web"})
    assert agent.pending_approvals() == []
    assert rec.results()[0].content[0].text == "deployed web x1"
    agent.approve("c1")  # the same decision again: a no-op
    with pytest.raises(ApprovalAlreadyResolvedError) as refused:
        agent.deny("c1")
    assert refused.value.code == "APPROVAL_ALREADY_RESOLVED"


async def test_edited_arguments_are_checked_and_the_call_runs_with_them() -> None:
    runs: list[dict[str, Any]] = []
    agent, rec = make_agent([tool_calls([call("c1", service="web")]), text("Done.")], runs)
    run = asyncio.create_task(agent.prompt("Deploy web."))
    await rec.until("tool_approval_requested")
    with pytest.raises(InvalidParametersError) as bad:
        agent.approve("c1", {"service": "web", "replicas": 0})
    assert bad.value.code == "INVALID_PARAMETERS" and "replicas" in bad.value.message
    assert agent.pending_approvals()[0].tool_call_id == "c1"  # still waiting
    agent.approve("c1", {"service": "web", "replicas": 3})
    await asyncio.wait_for(run, 5)
    assert runs == [{"service": "web", "replicas": 3}]
    [resolved] = rec.of("tool_approval_resolved")
    assert (resolved.decision, resolved.args) == ("edited", {"service": "web", "replicas": 3})


async def test_a_denied_call_gives_the_model_the_reason() -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel([tool_calls([call("c1", service="db")]), text("Understood.")])
    agent = Agent(model=scripted_model(), tools=[deploy_tool(runs)], stream_fn=model)
    rec = Recorder(agent)
    run = asyncio.create_task(agent.prompt("Deploy db."))
    await rec.until("tool_approval_requested")
    with pytest.raises(ApprovalNotFoundError):
        agent.deny("no-such-call")
    agent.deny("c1", "not on a Friday")
    await asyncio.wait_for(run, 5)
    assert runs == []
    [result] = rec.results()
    assert result.is_error and result.details["error_code"] == "TOOL_DENIED"
    assert "not on a Friday" in result.content[0].text
    # the model's next call saw the denial
    assert "not on a Friday" in str(model.calls[1].messages[-1].model_dump())


async def test_an_unanswered_call_expires() -> None:
    runs: list[dict[str, Any]] = []
    agent, rec = make_agent(
        [tool_calls([call("c1", service="web")]), text("Nobody answered.")],
        runs,
        approval_timeout_seconds=0.2,
    )
    await asyncio.wait_for(agent.prompt("Deploy web."), 5)
    [requested] = rec.of("tool_approval_requested")
    assert requested.expires_at is not None
    assert [e.decision for e in rec.of("tool_approval_resolved")] == ["expired"]
    assert rec.results()[0].details["error_code"] == "APPROVAL_TIMEOUT"
    assert runs == []


async def test_abort_while_waiting_ends_the_run_at_once() -> None:
    runs: list[dict[str, Any]] = []
    agent, rec = make_agent([tool_calls([call("c1", service="web")]), text("never")], runs)
    run = asyncio.create_task(agent.prompt("Deploy web."))
    await rec.until("tool_approval_requested")
    started = time.monotonic()
    agent.abort()
    await asyncio.wait_for(run, 1)
    assert time.monotonic() - started < 1
    assert [e.decision for e in rec.of("tool_approval_resolved")] == ["aborted"]
    assert rec.results()[0].details["error_code"] == "EXECUTION_ABORTED"
    assert agent.pending_approvals() == [] and runs == []


async def test_a_steer_denies_waiting_calls_and_is_delivered_next() -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel([tool_calls([call("c1", service="web")]), text("OK, staging instead.")])
    agent = Agent(model=scripted_model(), tools=[deploy_tool(runs)], stream_fn=model)
    rec = Recorder(agent)
    run = asyncio.create_task(agent.prompt("Deploy web."))
    await rec.until("tool_approval_requested")
    agent.steer("Wait, deploy to staging first.")
    await asyncio.wait_for(run, 5)
    [resolved] = rec.of("tool_approval_resolved")
    assert (resolved.decision, resolved.reason) == ("denied", "the user sent a new message instead")
    assert runs == []
    last_context = [m.role for m in model.calls[1].messages]
    assert last_context[-2:] == ["toolResult", "user"]


async def test_parallel_calls_are_gated_independently_and_keep_source_order() -> None:
    runs: list[dict[str, Any]] = []
    agent, rec = make_agent(
        [
            tool_calls([call("a", service="one"), call("b", service="two"), call("c", service="three")]),
            text("ok"),
        ],
        runs,
    )
    run = asyncio.create_task(agent.prompt("Deploy all."))
    await rec.until("tool_approval_requested", 3)
    assert [p.tool_call_id for p in agent.pending_approvals()] == ["a", "b", "c"]
    agent.approve("c")
    await rec.until("tool_execution_end")
    assert runs == [{"service": "three"}]  # c ran while a and b still wait
    assert [p.tool_call_id for p in agent.pending_approvals()] == ["a", "b"]
    agent.deny("a", "no")
    agent.approve("b")
    await asyncio.wait_for(run, 5)
    assert [r.tool_call_id for r in rec.results()] == ["a", "b", "c"]
    assert [r.is_error for r in rec.results()] == [True, False, False]


async def test_invalid_arguments_are_refused_before_anyone_is_asked() -> None:
    runs: list[dict[str, Any]] = []
    agent, rec = make_agent([tool_calls([call("c1", replicas=2)]), text("Oops.")], runs)
    await asyncio.wait_for(agent.prompt("Deploy."), 5)
    assert rec.of("tool_approval_requested") == []
    assert rec.results()[0].details["error_code"] == "INVALID_PARAMETERS"


async def test_a_tool_without_approval_emits_no_approval_events() -> None:
    runs: list[dict[str, Any]] = []
    tool = deploy_tool(runs).model_copy(update={"requires_approval": False})
    agent = Agent(
        model=scripted_model(),
        tools=[tool],
        stream_fn=ScriptedModel([tool_calls([call("c1", service="web")]), text("ok")]),
    )
    rec = Recorder(agent)
    await asyncio.wait_for(agent.prompt("Deploy."), 5)
    assert runs == [{"service": "web"}]
    assert not [e for e in rec.events if e.type.startswith("tool_approval")]


def test_a_tools_spec_carries_its_approval_settings() -> None:
    spec = deploy_tool([], approval_timeout_seconds=30).spec()
    assert spec.requires_approval is True and spec.approval_timeout_seconds == 30
