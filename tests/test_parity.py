"""Parity: one scenario suite, run against the in-process ``Agent`` and the durable conversation.

Both must produce the same messages (timestamps aside) and the same sequence of event types. The
scenarios drive the agents through triggers ("when the first tool_execution_start arrives, steer"),
so timing-dependent cases (steering mid-batch, abort mid-stream) line up in both runtimes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore import Agent, AgentOptions, AgentTool, ToolExecutionMode
from agentcore.events import AgentEvent
from agentcore.messages import Message
from agentcore.testing.scripted import Reply, ScriptedModel, error, scripted_model, text, tool_calls
from tests.durable_support import add_tool, progress_tool, running_worker, sleep_tool

Trigger = tuple[str, int, str, str]  # (event type, occurrence, action, text)


@dataclass
class Scenario:
    name: str
    replies: Callable[[], ScriptedModel]
    tools: list[AgentTool] = field(default_factory=lambda: [add_tool(), sleep_tool(), progress_tool()])
    prompt: str = "Go."
    triggers: list[Trigger] = field(default_factory=list)
    tool_execution: ToolExecutionMode = ToolExecutionMode.PARALLEL
    # Aborted partial text depends on timing: compare roles and stop reasons only.
    loose_content: bool = False


def _model(replies: list[Reply | str], **kwargs: Any) -> Callable[[], ScriptedModel]:
    return lambda: ScriptedModel(list(replies), **kwargs)


SCENARIOS = [
    Scenario("text", _model([text("Hello there.")])),
    Scenario(
        "parallel_tools",
        _model([tool_calls([("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]), text("3 and 7.")]),
    ),
    Scenario(
        "tool_progress",
        _model([tool_calls([("progress", {"a": 1, "b": 2})]), text("Done.")]),
    ),
    Scenario(
        "sequential_tools",
        _model([tool_calls([("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]), text("Done.")]),
        tool_execution=ToolExecutionMode.SEQUENTIAL,
    ),
    Scenario(
        "steering_during_tool",
        _model([tool_calls([("sleep", {"seconds": 0.6})]), text("Changed course."), text("Unused.")]),
        triggers=[("tool_execution_start", 1, "steer", "Actually, stop sleeping.")],
    ),
    Scenario(
        "follow_up",
        # A model that takes a moment, as a real one does: the follow-up lands while it answers.
        _model([text("First answer."), text("Second answer.")], delay=0.3),
        triggers=[("message_start", 1, "follow_up", "And another thing.")],
    ),
    Scenario(
        "abort_mid_stream",
        _model(["x " * 400], chunks=400, delay=0.005),
        triggers=[("message_update", 2, "abort", "")],
        loose_content=True,
    ),
    Scenario(
        "abort_mid_tool",
        _model([tool_calls([("sleep", {"seconds": 5})]), text("never")]),
        triggers=[("tool_execution_update", 1, "abort", "")],
    ),
    Scenario("provider_error", _model([error("upstream exploded")])),
    Scenario("unknown_tool", _model([tool_calls([("nope", {})]), text("Sorry.")])),
    Scenario("bad_arguments", _model([tool_calls([("add", {"a": "one"})]), text("Oops.")])),
]


def _normalise(messages: list[Message], loose: bool) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        data = message.model_dump(mode="json", exclude={"timestamp", "usage"})
        # An empty text block is a provider artefact (the scripted model opens one before it sees an
        # abort); it carries nothing a user could notice.
        data["content"] = [b for b in data["content"] if not (b["type"] == "text" and not b["text"])]
        if loose:
            data = {"role": data["role"], "stop_reason": data.get("stop_reason")}
        elif data["role"] == "toolResult":
            data.pop("details", None)
        out.append(data)
    return out


def _event_types(events: list[AgentEvent], loose: bool) -> list[str]:
    types = [event.type for event in events]
    if loose:  # the number of deltas before an abort depends on timing
        types = [t for t in types if t != "message_update"]
    return types


class _Triggers:
    def __init__(self, triggers: list[Trigger]) -> None:
        self.triggers = triggers
        self.counts: dict[str, int] = {}

    def due(self, event: AgentEvent) -> list[tuple[str, str]]:
        self.counts[event.type] = self.counts.get(event.type, 0) + 1
        return [
            (action, arg)
            for etype, n, action, arg in self.triggers
            if etype == event.type and n == self.counts[event.type]
        ]


async def _run_in_process(scenario: Scenario) -> tuple[list[Message], list[AgentEvent]]:
    agent = Agent(
        model=scripted_model(),
        tools=scenario.tools,
        stream_fn=scenario.replies(),
        tool_execution=scenario.tool_execution,
    )
    events: list[AgentEvent] = []
    triggers = _Triggers(scenario.triggers)

    def listener(event: AgentEvent, signal: Any) -> None:
        events.append(event)
        for action, arg in triggers.due(event):
            if action == "abort":
                agent.abort()
            else:
                getattr(agent, action)(arg)

    agent.subscribe(listener)
    await asyncio.wait_for(agent.prompt(scenario.prompt), 30)
    await agent.wait_for_idle()
    return agent.get_state().messages, events


async def _run_durable(
    scenario: Scenario, client: Client, tmp_path: Path
) -> tuple[list[Message], list[AgentEvent]]:
    async with running_worker(client, tmp_path, scenario.replies(), tools=scenario.tools) as h:
        agent = await h.agents.start(
            f"parity-{scenario.name}",
            AgentOptions(
                model=scripted_model(),
                tools=[t.name for t in scenario.tools],
                tool_execution=scenario.tool_execution,
            ),
        )
        events: list[AgentEvent] = []
        triggers = _Triggers(scenario.triggers)
        await agent.prompt(scenario.prompt)

        async def read() -> None:
            async for _, event in agent.events(0):
                events.append(event)
                for action, arg in triggers.due(event):
                    if action == "abort":
                        await agent.abort()
                    else:
                        await getattr(agent, action)(arg)
                if event.type == "agent_end":
                    return

        await asyncio.wait_for(read(), 30)
        await agent.wait_for_idle(timeout=30)
        state = await agent.get_state()
        return state.messages, events


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_durable_matches_in_process(
    scenario: Scenario, temporal_client: Client, tmp_path: Path
) -> None:
    local_messages, local_events = await _run_in_process(scenario)
    durable_messages, durable_events = await _run_durable(scenario, temporal_client, tmp_path)
    loose = scenario.loose_content
    assert _normalise(durable_messages, loose) == _normalise(local_messages, loose)
    assert _event_types(durable_events, loose) == _event_types(local_events, loose)
