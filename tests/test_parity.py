"""Parity: one table of scenarios, run against the in-process ``Agent`` and a durable conversation.

Both runtimes must produce the same **whole event stream**: types, order, tool call ids, tool
results, stop reasons, message contents, usage, compaction figures; ids that each runtime makes up
(entry ids) and timestamps are normalised. They must also end with the same messages, and their
model calls must have seen the same tools. One scripted model answers both (no HTTP).

A scenario is a list of steps (prompt, steer, follow_up, continue_) plus triggers that act when an
event arrives ("at the first tool_execution_start, steer"), so timing-dependent cases (steering
mid-batch, abort mid-stream) line up in both runtimes. Events only the durable runtime emits are
listed once, in ``agentcore.events.DURABLE_ONLY_EVENTS``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from temporalio.client import Client

from agentcore import Agent, AgentOptions, AgentTool, AgentToolResult, ToolExecutionMode, subagent_tool
from agentcore.compaction import CompactionSettings
from agentcore.events import DURABLE_ONLY_EVENTS, AgentEvent
from agentcore.messages import AssistantMessage, Message, TextContent, UserMessage
from agentcore.model import Model
from agentcore.testing.scripted import Reply, ScriptedModel, error, scripted_model, text, tool_calls
from tests.durable_support import add_tool, progress_tool, running_worker, sleep_tool

Trigger = tuple[str, int, str, str]  # (event type, occurrence, action, text)
Step = tuple[str, str]  # (command, text): prompt / steer / follow_up / continue_


def multiply_tool() -> AgentTool:
    """Parameters as a JSON schema: its arguments are checked where the call is scheduled, in both
    runtimes (a durable conversation holds the schema, so it needs no activity to refuse them)."""

    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult.text(str(args["a"] * args["b"]))

    return AgentTool(
        name="multiply",
        description="Multiply two numbers.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        execute=execute,
        timeout_seconds=5,
    )


def failing_tool() -> AgentTool:
    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        raise RuntimeError("the disk is on fire")

    return AgentTool(name="explode", description="Always fails.", execute=execute, timeout_seconds=5)


def finishing_tool() -> AgentTool:
    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        result = AgentToolResult.text("final answer recorded")
        result.terminate = True
        return result

    return AgentTool(name="finish", description="Ends the run.", execute=execute, timeout_seconds=5)


def unlocking_tool() -> AgentTool:
    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        result = AgentToolResult.text("multiply is available now")
        result.added_tool_names = ["multiply", "no_such_tool"]
        return result

    return AgentTool(name="unlock", description="Unlocks multiply.", execute=execute, timeout_seconds=5)


def _default_tools() -> list[AgentTool]:
    return [add_tool(), sleep_tool(), progress_tool(), multiply_tool(), failing_tool(), finishing_tool()]


def researcher_tool() -> AgentTool:
    """A sub-agent with tools of its own; in-process it answers through the caller's stream function,
    durably through the worker's: one scripted model plays both agents, in call order."""
    options = AgentOptions(
        model=scripted_model(), system_prompt="You research.", tools=[add_tool(), sleep_tool()]
    )
    return subagent_tool("researcher", "Researches a question and reports.", options)


# A model with a small window, and a history that fills most of it: the next model call compacts first.
SMALL_MODEL = scripted_model(context_window=400, max_tokens=100)


def _long_history() -> list[Message]:
    history: list[Message] = []
    for index in range(6):
        history.append(UserMessage(content=f"question {index} " + "word " * 40, timestamp=1))
        history.append(
            AssistantMessage(
                content=[TextContent(text=f"answer {index} " + "word " * 40)],
                api=SMALL_MODEL.api,
                provider=SMALL_MODEL.provider,
                model=SMALL_MODEL.id,
                timestamp=1,
            )
        )
    return history


@dataclass
class Scenario:
    name: str
    replies: Callable[[], ScriptedModel]
    steps: list[Step] = field(default_factory=lambda: [("prompt", "Go.")])
    tools: list[AgentTool] = field(default_factory=_default_tools)
    active: list[str] | None = None  # the tools active at the start (default: all of ``tools``)
    triggers: list[Trigger] = field(default_factory=list)
    tool_execution: ToolExecutionMode = ToolExecutionMode.PARALLEL
    model: Model = field(default_factory=scripted_model)
    messages: list[Message] = field(default_factory=list)
    compaction: CompactionSettings | None = None
    # Aborted partial text depends on timing: its deltas are dropped and its text not compared.
    loose_content: bool = False


def _model(replies: list[Reply | str], **kwargs: Any) -> Callable[[], ScriptedModel]:
    return lambda: ScriptedModel(list(replies), **kwargs)


SCENARIOS = [
    Scenario("text", _model([text("Hello there.")])),
    Scenario(
        "parallel_batch_with_bad_arguments_and_unknown_tool",
        _model(
            [
                # The bad and the unknown call end at once, before the good one (a tool's own
                # progress is left out: when it arrives beside another call's end is timing).
                tool_calls([("add", {"a": 1, "b": 2}), ("multiply", {"a": "one"}), ("nope", {})]),
                text("One of three worked."),
            ]
        ),
    ),
    Scenario("tool_progress", _model([tool_calls([("progress", {"a": 1, "b": 2})]), text("Done.")])),
    Scenario(
        "sequential_batch",
        _model([tool_calls([("add", {"a": 1, "b": 2}), ("multiply", {"a": 3, "b": 4})]), text("Done.")]),
        tool_execution=ToolExecutionMode.SEQUENTIAL,
    ),
    Scenario(
        "steer_during_batch",
        _model([tool_calls([("sleep", {"seconds": 0.6})]), text("Changed course."), text("Unused.")]),
        triggers=[("tool_execution_start", 1, "steer", "Actually, stop sleeping.")],
    ),
    Scenario(
        "two_queued_steers_then_continue",
        _model([text("First."), text("Answer to A."), text("Answer to B."), text("Unused.")]),
        steps=[("prompt", "Go."), ("steer", "A"), ("steer", "B"), ("continue_", "")],
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
    Scenario(
        "abort_mid_batch_with_a_steer_queued",
        _model([tool_calls([("sleep", {"seconds": 5})]), text("Now about the steer.")]),
        steps=[("prompt", "Go."), ("continue_", "")],
        triggers=[
            ("tool_execution_update", 1, "steer", "Do this instead."),
            ("tool_execution_update", 1, "abort", ""),
        ],
    ),
    Scenario("provider_error", _model([error("upstream exploded")])),
    Scenario("tool_error", _model([tool_calls([("explode", {})]), text("It failed.")])),
    Scenario(
        "terminate",
        _model([tool_calls([("finish", {})]), text("never asked")]),
    ),
    Scenario(
        "added_tool_names",
        _model([tool_calls([("unlock", {})]), tool_calls([("multiply", {"a": 6, "b": 7})]), text("42.")]),
        tools=[unlocking_tool(), multiply_tool()],
        active=["unlock"],
    ),
    Scenario(
        "subagent",
        _model(
            [
                tool_calls([("researcher", {"task": "Add 1 and 2."})]),
                tool_calls([("add", {"a": 1, "b": 2})], preamble="Adding."),  # the sub-agent
                text("It is 3."),  # the sub-agent's answer
                text("The researcher says 3."),
            ]
        ),
        tools=[researcher_tool()],
    ),
    Scenario(
        "subagent_aborted_through_parent",
        _model(
            [
                tool_calls([("researcher", {"task": "Dig."})]),
                tool_calls([("sleep", {"seconds": 5})], preamble="One lead so far."),
                text("never"),
            ]
        ),
        tools=[researcher_tool()],
        # The sub-agent's first progress: its sleep call started.
        triggers=[("tool_execution_update", 1, "abort", "")],
    ),
    Scenario(
        "auto_compaction",
        _model([text("SUMMARY OF EARLIER WORK"), text("Fresh answer.")]),
        model=SMALL_MODEL,
        messages=_long_history(),
        compaction=CompactionSettings(keep_recent_tokens=60),
        steps=[("prompt", "Next question.")],
    ),
]


# ------------------------------------------------------------------------------------ normalising

# A sub-agent's session id names its parent's (a durable session id; "agent" in-process).
_MADE_UP_IDS = {"entry_id", "first_kept_entry_id", "session_id"}


def _scrub(value: Any, loose: bool) -> Any:
    """Timestamps dropped, made-up ids replaced by a marker; in ``loose`` mode an aborted message's
    partial text (how much streamed before the abort is timing) replaced too."""
    if isinstance(value, list):
        return [_scrub(item, loose) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key == "timestamp":
            continue
        if key in _MADE_UP_IDS and item is not None:
            out[key] = "<id>"
        else:
            out[key] = _scrub(item, loose)
    if loose and out.get("role") == "assistant" and out.get("stop_reason") == "aborted":
        out["content"] = "<partial>"
    if out.get("role") in ("assistant", "user"):
        # An empty text block is a provider artefact (the scripted model opens one before it sees
        # an abort); it carries nothing a user could notice.
        blocks = out.get("content")
        if isinstance(blocks, list):
            out["content"] = [b for b in blocks if not (b.get("type") == "text" and not b.get("text"))]
    return out


def normalise_event(event: AgentEvent, loose: bool) -> dict[str, Any] | None:
    """The event as compared, or None for one that is not (durable-only, or a timing artefact)."""
    if event.type in DURABLE_ONLY_EVENTS:
        return None
    if loose and event.type == "message_update":
        return None
    data = event.model_dump(mode="json")
    if event.type == "message_update":
        # The durable stream ships deltas without the partial message (a subscriber rebuilds it).
        data.pop("message", None)
    if event.type == "message_start" and data["message"]["role"] == "assistant":
        # The partial a stream starts with: what a provider knows before the first token varies.
        data["message"] = {"role": "assistant", "content": data["message"]["content"]}
    return _scrub(data, loose)


def normalise_messages(messages: list[Message], loose: bool) -> list[dict[str, Any]]:
    return [_scrub(message.model_dump(mode="json"), loose) for message in messages]


# --------------------------------------------------------------------------------------- running


@dataclass
class Outcome:
    events: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tools_seen: list[list[str]]  # per model call, the tool names it was given
    # Durable only: the active tool sets its session file records, in order.
    active_tools_recorded: list[list[str]] = field(default_factory=list)


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


def _active_tools(scenario: Scenario) -> list[AgentTool]:
    names = scenario.active
    return [t for t in scenario.tools if names is None or t.name in names]


async def run_in_process(scenario: Scenario) -> Outcome:
    model = scenario.replies()
    active = _active_tools(scenario)
    agent = Agent(
        model=scenario.model,
        tools=active,
        messages=list(scenario.messages),
        stream_fn=model,
        tool_execution=scenario.tool_execution,
        compaction=scenario.compaction,
        available_tools=[t for t in scenario.tools if t not in active],
    )
    events: list[dict[str, Any]] = []
    triggers = _Triggers(scenario.triggers)

    def listener(event: AgentEvent, signal: Any) -> None:
        normalised = normalise_event(event, scenario.loose_content)
        if normalised is not None:  # snapshot now: a streaming partial changes in place
            events.append(normalised)
        for action, arg in triggers.due(event):
            if action == "abort":
                agent.abort()
            else:
                getattr(agent, action)(arg)

    agent.subscribe(listener)
    for command, arg in scenario.steps:
        if command in ("prompt", "continue_"):
            run = agent.prompt(arg) if command == "prompt" else agent.continue_()
            await asyncio.wait_for(run, 30)
        else:
            getattr(agent, command)(arg)
    await agent.wait_for_idle()
    return Outcome(
        events,
        normalise_messages(agent.get_state().messages, scenario.loose_content),
        [[t.name for t in call.tools] for call in model.calls],
    )


async def run_durable(scenario: Scenario, client: Client, tmp_path: Path) -> Outcome:
    model = scenario.replies()
    async with running_worker(client, tmp_path, model, tools=scenario.tools) as h:
        agent = await h.agents.start(
            f"parity-{scenario.name}",
            AgentOptions(
                model=scenario.model,
                tools=[t.name for t in _active_tools(scenario)],
                messages=list(scenario.messages),
                tool_execution=scenario.tool_execution,
            ),
            compaction=scenario.compaction,
        )
        events: list[dict[str, Any]] = []
        runs_ended = 0
        triggers = _Triggers(scenario.triggers)

        async def read() -> None:
            nonlocal runs_ended
            async for _, event in agent.events(0):
                normalised = normalise_event(event, scenario.loose_content)
                if normalised is not None:
                    events.append(normalised)
                for action, arg in triggers.due(event):
                    if action == "abort":
                        await agent.abort()
                    else:
                        await getattr(agent, action)(arg)
                if event.type == "agent_end":
                    runs_ended += 1

        async def until_runs_ended(count: int) -> None:
            deadline = time.monotonic() + 30
            while runs_ended < count:
                assert time.monotonic() < deadline, f"run {count} did not end within 30 s"
                await asyncio.sleep(0.02)

        reader = asyncio.create_task(read())
        try:
            runs = 0
            for command, arg in scenario.steps:
                if command in ("prompt", "continue_"):
                    await (agent.prompt(arg) if command == "prompt" else agent.continue_())
                    runs += 1
                    await until_runs_ended(runs)
                    await agent.wait_for_idle(timeout=30)
                else:
                    await getattr(agent, command)(arg)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        state = await agent.get_state()
        session_file = next((tmp_path / "sessions").rglob("*.jsonl"))
        entries = [orjson.loads(line) for line in session_file.read_bytes().splitlines()]
        return Outcome(
            events,
            normalise_messages(state.messages, scenario.loose_content),
            [[t.name for t in call.tools] for call in model.calls],
            [e["active_tools"] for e in entries if e.get("type") == "active_tools_change"],
        )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_durable_matches_in_process(
    scenario: Scenario, temporal_client: Client, tmp_path: Path
) -> None:
    local = await run_in_process(scenario)
    durable = await run_durable(scenario, temporal_client, tmp_path)
    assert durable.events == local.events
    assert durable.messages == local.messages
    assert durable.tools_seen == local.tools_seen
    if scenario.name == "added_tool_names":  # the session file alone rebuilds the active tools
        assert durable.active_tools_recorded == [["unlock"], ["unlock", "multiply"]]


async def test_listeners_get_the_runs_abort_signal_in_both_runtimes(
    temporal_client: Client, tmp_path: Path
) -> None:
    """SPEC-5.2: ``listener(event, signal)``; the signal reports the abort of the event's run, and a
    new run starts with a fresh one."""

    def replies() -> ScriptedModel:
        return ScriptedModel([tool_calls([("sleep", {"seconds": 5})]), text("Back.")])

    seen_in_process: list[tuple[str, bool, str | None]] = []
    agent = Agent(model=scripted_model(), tools=[sleep_tool()], stream_fn=replies())

    def in_process_listener(event: AgentEvent, signal: Any) -> None:
        seen_in_process.append((event.type, signal.aborted, signal.reason))
        if event.type == "tool_execution_update":
            agent.abort()

    agent.subscribe(in_process_listener)
    await agent.prompt("Go.")
    await agent.prompt("Again.")

    seen_durable: list[tuple[str, bool, str | None]] = []
    async with running_worker(temporal_client, tmp_path, replies(), tools=[sleep_tool()]) as h:
        durable = await h.agents.start("parity-listener-signal", model=scripted_model(), tools=["sleep"])

        async def durable_listener(event: AgentEvent, signal: Any) -> None:
            seen_durable.append((event.type, signal.aborted, signal.reason))
            if event.type == "tool_execution_update":
                await durable.abort()

        await durable.subscribe(durable_listener, from_offset=0)
        for prompt, runs in (("Go.", 1), ("Again.", 2)):
            await durable.prompt(prompt)
            deadline = time.monotonic() + 30
            while sum(1 for seen in seen_durable if seen[0] == "agent_end") < runs:
                assert time.monotonic() < deadline, "the run did not end within 30 s"
                await asyncio.sleep(0.02)
        await durable.close()

    assert seen_durable == seen_in_process
    assert ("agent_end", True, "aborted") in seen_in_process
    assert seen_in_process[-1] == ("agent_end", False, None)
