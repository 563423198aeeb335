"""Approvals inside a sub-agent: the child's waiting call shows in its parent's ``pending_approvals``
(with the child's session id) and can be decided from the parent or from the child, in-process and
durably (where the child is a child workflow)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore import Agent, AgentOptions, ToolResultMessage, subagent_tool
from agentcore.approvals import PendingApproval
from agentcore.errors import TOOL_DENIED, InvalidParametersError
from agentcore.events import AgentEvent
from agentcore.protocol import DenyRequest
from agentcore.runtime import LlmContext
from agentcore.search_attributes import AWAITING_APPROVAL
from agentcore.testing.scripted import Reply, ScriptedModel, scripted_model, text, tool_calls
from tests.agent.test_approvals import call, deploy_tool
from tests.support.durable import eventually, running_worker

CHILD_PROMPT = "You deploy things."


def replies() -> ScriptedModel:
    """The lead hands a deployment to the deployer, whose ``deploy`` call needs approval."""

    def respond(context: LlmContext) -> Reply:
        turn = sum(1 for message in context.messages if message.role == "assistant")
        last = context.messages[-1]
        if context.system_prompt == CHILD_PROMPT:
            if turn == 0:
                return tool_calls([call("child_call", service="web")])
            return text(f"Deployer: {last.text}")
        if turn == 0:
            return tool_calls([("deployer", {"task": "Deploy web."})])
        return text(f"Lead: {last.text}")

    return ScriptedModel(respond)


def deployer(runs: list[dict[str, Any]]) -> Any:
    options = AgentOptions(model=scripted_model(), system_prompt=CHILD_PROMPT, tools=[deploy_tool(runs)])
    return subagent_tool("deployer", "Deploys services.", options)


def _sub_result(messages: list[Any]) -> ToolResultMessage:
    return next(m for m in messages if isinstance(m, ToolResultMessage) and m.tool_name == "deployer")


async def _until(check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.01)


async def test_in_process_child_approval_is_listed_and_decided_in_the_parent() -> None:
    runs: list[dict[str, Any]] = []
    agent = Agent(model=scripted_model(), tools=[deployer(runs)], stream_fn=replies())
    progress: list[str] = []

    def listener(event: AgentEvent, signal: Any) -> None:
        if event.type == "tool_execution_update":
            progress.append(event.partial_result.content[0].text)

    agent.subscribe(listener)
    run = asyncio.create_task(agent.prompt("Deploy web, via the deployer."))
    await _until(lambda: bool(agent.pending_approvals()))
    [pending] = agent.pending_approvals()
    assert (pending.tool_call_id, pending.tool_name, pending.arguments) == (
        "child_call",
        "deploy",
        {"service": "web"},
    )
    assert pending.session_id == "agent.sub.call_0_0"
    assert agent.get_state().pending_approvals == [pending]
    assert "waiting for approval: deploy" in progress
    # Edited arguments are checked against the child's tool, from the parent.
    with pytest.raises(InvalidParametersError):
        agent.approve("child_call", {"service": "web", "replicas": "three"})
    agent.approve("child_call", {"service": "web", "replicas": 2})
    await asyncio.wait_for(run, 30)
    assert runs == [{"service": "web", "replicas": 2}]
    assert _sub_result(agent.messages).text == "Deployer: deployed web x2"
    assert agent.pending_approvals() == []


async def test_in_process_parent_steer_denies_the_childs_waiting_call() -> None:
    runs: list[dict[str, Any]] = []
    agent = Agent(model=scripted_model(), tools=[deployer(runs)], stream_fn=replies())
    run = asyncio.create_task(agent.prompt("Deploy web, via the deployer."))
    await _until(lambda: bool(agent.pending_approvals()))
    agent.steer("No, don't deploy.")
    await asyncio.wait_for(run, 30)
    assert runs == []
    assert TOOL_DENIED in _sub_result(agent.messages).text


async def _listed_in_parent(agent: Any) -> list[PendingApproval]:
    return await eventually(agent.pending_approvals, bool)


async def test_durable_child_approval_shows_in_the_parent_and_is_decided_from_it(
    temporal_client: Client, tmp_path: Path
) -> None:
    runs: list[dict[str, Any]] = []
    async with running_worker(temporal_client, tmp_path, replies(), tools=[deployer(runs)]) as h:
        agent = await h.agents.start("ops", AgentOptions(model=scripted_model(), tools=["deployer"]))
        await agent.prompt("Deploy web, via the deployer.")
        [pending] = await _listed_in_parent(agent)
        assert (pending.tool_call_id, pending.tool_name, pending.session_id) == (
            "child_call",
            "deploy",
            "ops.sub.call_0_0",
        )
        state = await agent.get_state()
        assert state.pending_approvals == [pending]
        assert state.status == AWAITING_APPROVAL
        # The child lists it as its own (no session id: it is the one asked).
        child = await h.agents.attach("ops.sub.call_0_0")
        [own] = await child.pending_approvals()
        assert own.tool_call_id == "child_call" and own.session_id in (None, "ops.sub.call_0_0")
        # Decided through the parent: the child's Update checks the edited arguments.
        with pytest.raises(InvalidParametersError):
            await agent.approve("child_call", {"service": "web", "replicas": "three"})
        await agent.approve("child_call", {"service": "web", "replicas": 3})
        await agent.wait_for_idle(timeout=30)
        state = await agent.get_state()
        assert runs == [{"service": "web", "replicas": 3}]
        assert _sub_result(state.messages).text == "Deployer: deployed web x3"
        assert state.pending_approvals == []


async def test_durable_child_approval_decided_from_the_child_or_a_raw_parent_update(
    temporal_client: Client, tmp_path: Path
) -> None:
    runs: list[dict[str, Any]] = []
    async with running_worker(temporal_client, tmp_path, replies(), tools=[deployer(runs)]) as h:
        # From the child itself: the parent's list empties.
        agent = await h.agents.start("ops2", AgentOptions(model=scripted_model(), tools=["deployer"]))
        await agent.prompt("Deploy web, via the deployer.")
        await _listed_in_parent(agent)
        child = await h.agents.attach("ops2.sub.call_0_0")
        await child.approve("child_call")
        await agent.wait_for_idle(timeout=30)
        assert await agent.pending_approvals() == []
        assert runs == [{"service": "web"}]

        # The parent's own Update, sent as any Temporal client (the Web UI) would: it goes on to
        # the child.
        other = await h.agents.start("ops3", AgentOptions(model=scripted_model(), tools=["deployer"]))
        await other.prompt("Deploy web, via the deployer.")
        await _listed_in_parent(other)
        await other.handle.execute_update(
            "deny", DenyRequest(id="raw-deny", tool_call_id="child_call", reason="not today")
        )
        await other.wait_for_idle(timeout=30)
        result = _sub_result((await other.get_state()).messages)
        assert TOOL_DENIED in result.text and "not today" in result.text
        assert runs == [{"service": "web"}]
