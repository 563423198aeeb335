"""Parity: one table of scenarios, run against the in-process ``Agent`` and a durable conversation.

Both runtimes must produce the same **whole event stream**: types, order, tool call ids, tool
results, stop reasons, message contents, usage, compaction figures; ids that each runtime makes up
(entry ids) and timestamps are normalised. Streamed deltas are compared by the text they add up to:
a durable subscriber gets a model call's deltas one by one once the call outlives the model
activity's first publish interval, and one per block (derived from the final message) when it ends
within it, while in-process each delta arrives as the provider sent it. They must also end with the
same messages and settings, and their model calls must have seen the same tools. One scripted model
answers both (no HTTP).

A scenario is a list of steps (prompt, steer, follow_up, continue_, reset) plus triggers that act when an
event arrives ("at the first tool_execution_start, steer"), so timing-dependent cases (steering
mid-batch, abort mid-stream) line up in both runtimes. Events only the durable runtime emits are
listed once, in ``agentcore.events.DURABLE_ONLY_EVENTS``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from temporalio.client import Client

from agentcore import (
    Agent,
    AgentOptions,
    AgentTool,
    AgentToolResult,
    ToolExecutionMode,
    subagent_tool,
    wakeup_tool,
)
from agentcore.compaction import CompactionSettings
from agentcore.errors import ToolUnavailableError
from agentcore.events import DURABLE_ONLY_EVENTS, AgentEvent, StreamError, StreamEvent, StreamStart
from agentcore.messages import AssistantMessage, Message
from agentcore.model import Model, ThinkingLevel
from agentcore.protocol import DurableState
from agentcore.runtime import LlmContext, StreamOptions
from agentcore.session import SessionStats
from agentcore.state import AgentState
from agentcore.testing.scripted import (
    Reply,
    ScriptedModel,
    error,
    scripted_model,
    text,
    thinking,
    tool_calls,
)
from tests.support.durable import add_tool, progress_tool, running_worker, sleep_tool
from tests.support.loop import long_history

Trigger = tuple[str, int, str, str]  # (event type, occurrence, action, text)
Step = tuple[str, str]  # (command, text): prompt / steer / follow_up / continue_ / reset


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


def parsing_multiply_tool() -> AgentTool:
    """``times``: ``prepare_arguments`` turns the model's ``{"expr": "6x7"}`` into ``{"a": 6, "b": 7}``
    before the schema check; a durable conversation runs it in the tool's activity (it is code)."""

    def prepare(arguments: Any) -> dict[str, int]:
        left, right = str(arguments["expr"]).split("x")
        return {"a": int(left), "b": int(right)}

    return multiply_tool().model_copy(update={"name": "times", "prepare_arguments": prepare})


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


def deploy_tool(timeout: float | None = None) -> AgentTool:
    """A tool a person approves before it runs (JSON schema: edited arguments are checked by it)."""

    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult.text(f"deployed {args['service']} x{args.get('replicas', 1)}")

    return AgentTool(
        name="deploy",
        description="Deploy a service.",
        parameters={
            "type": "object",
            "properties": {"service": {"type": "string"}, "replicas": {"type": "integer"}},
            "required": ["service"],
        },
        execute=execute,
        timeout_seconds=5,
        requires_approval=True,
        approval_timeout_seconds=timeout,
    )


def _deploy(call_id: str = "c1", **arguments: Any) -> Reply:
    return tool_calls([{"id": call_id, "name": "deploy", "arguments": arguments or {"service": "web"}}])


def unavailable_tool() -> AgentTool:
    """A tool whose server is down (an MCP server, say): durably retried, then the same result."""

    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        raise ToolUnavailableError('MCP server "files" is not running')

    return AgentTool(name="read_file", description="Read a file.", execute=execute, timeout_seconds=5)


IN_TURN_CALLS = 12  # more than the 10 concurrent calls SPEC-9.1 allows


def in_turn_tool() -> AgentTool:
    """Call ``n`` ends a moment after call ``n - 1`` did: the end events come in a fixed order in both
    runtimes, and calls 10 and 11 start only when calls 0 and 1 have freed their slots."""
    ended: list[asyncio.Event] = []

    async def execute(
        tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any
    ) -> AgentToolResult:
        if not ended:
            ended.extend(asyncio.Event() for _ in range(IN_TURN_CALLS))
        n = int(args["n"])
        if n:
            await ended[n - 1].wait()
        # Far apart enough that a loaded machine reports the ends (durably: activity completions)
        # in this order.
        await asyncio.sleep(0.4)
        ended[n].set()
        if n == IN_TURN_CALLS - 1:
            ended.clear()  # ready for the other runtime's run
        return AgentToolResult.text(f"call {n} done")

    return AgentTool(
        name="in_turn",
        description="Ends after the call before it.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        execute=execute,
        timeout_seconds=20,
    )


def _default_tools() -> list[AgentTool]:
    return [
        add_tool(),
        sleep_tool(),
        progress_tool(),
        multiply_tool(),
        failing_tool(),
        finishing_tool(),
        unavailable_tool(),
        in_turn_tool(),
    ]


def researcher_tool() -> AgentTool:
    """A sub-agent with tools of its own; in-process it answers through the caller's stream function,
    durably through the worker's: one scripted model plays both agents, in call order."""
    options = AgentOptions(
        model=scripted_model(), system_prompt="You research.", tools=[add_tool(), sleep_tool()]
    )
    return subagent_tool("researcher", "Researches a question and reports.", options)


# A model with a small window, and a history that fills most of it: the next model call compacts first.
SMALL_MODEL = scripted_model(context_window=400, max_tokens=100)


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
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    system_prompt: str = ""
    messages: list[Message] = field(default_factory=list)
    compaction: CompactionSettings | None = None
    # Durable: at the end, recover a new conversation from the session file alone.
    recover: bool = False
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
    Scenario(
        "abort_mid_sequential_batch",
        _model([tool_calls([("sleep", {"seconds": 5}), ("add", {"a": 1, "b": 2})]), text("never")]),
        tool_execution=ToolExecutionMode.SEQUENTIAL,
        triggers=[("tool_execution_update", 1, "abort", "")],
    ),
    Scenario(
        # ``add`` takes a pydantic model: durably its arguments are checked in its activity, on the
        # worker where that code lives, with the same result.
        "bad_arguments_to_a_pydantic_tool",
        _model([tool_calls([("add", {"a": "one", "b": 2})]), text("That failed.")]),
    ),
    Scenario(
        "prepare_arguments",
        _model([tool_calls([("times", {"expr": "6x7"}), ("times", {"expr": "six"})]), text("42.")]),
        tools=[parsing_multiply_tool()],
        tool_execution=ToolExecutionMode.SEQUENTIAL,  # both end at once: keep their order
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
        "approval_approved",
        _model([_deploy(), text("Deployed.")]),
        tools=[deploy_tool()],
        triggers=[("tool_approval_requested", 1, "approve", "c1")],
    ),
    Scenario(
        "approval_edited",
        _model([_deploy(), text("Deployed the API.")]),
        tools=[deploy_tool()],
        triggers=[("tool_approval_requested", 1, "approve", 'c1 {"service": "api", "replicas": 2}')],
    ),
    Scenario(
        "approval_denied",
        _model([_deploy(), text("Not today, then.")]),
        tools=[deploy_tool()],
        triggers=[("tool_approval_requested", 1, "deny", "c1 not on a Friday")],
    ),
    Scenario(
        "approval_timeout",
        _model([_deploy(), text("Nobody answered.")]),
        tools=[deploy_tool(timeout=0.3)],
    ),
    Scenario(
        "approval_abort_while_waiting",
        _model([_deploy(), text("never")]),
        tools=[deploy_tool()],
        triggers=[("tool_approval_requested", 1, "abort", "")],
    ),
    Scenario(
        "approval_parallel_in_source_order",
        _model(
            [
                tool_calls(
                    [
                        {"id": "a", "name": "deploy", "arguments": {"service": "one"}},
                        {"id": "b", "name": "deploy", "arguments": {"service": "two"}},
                    ]
                ),
                text("One of two."),
            ]
        ),
        tools=[deploy_tool()],
        triggers=[
            ("tool_approval_requested", 2, "approve", "b"),
            ("tool_execution_end", 1, "deny", "a later"),
        ],
    ),
    Scenario(
        "coerced_arguments",
        # As pi's AJV coerceTypes: "6" is read as 6 where a number belongs (JSON Schema and pydantic
        # parameters alike); "six" is still refused with its path.
        _model(
            [
                tool_calls([("multiply", {"a": "6", "b": 7})]),
                tool_calls([("add", {"a": "1", "b": True})]),
                tool_calls([("multiply", {"a": "six", "b": 7})]),
                text("42 and 2."),
            ]
        ),
    ),
    Scenario(
        "unavailable_tool",
        _model([tool_calls([("read_file", {})]), text("The file server is down.")]),
    ),
    Scenario(
        "more_than_ten_parallel_calls",
        _model([tool_calls([("in_turn", {"n": n}) for n in range(IN_TURN_CALLS)]), text("All done.")]),
    ),
    Scenario(
        "context_overflow",
        # The model refuses the long context: compacted (reason overflow), the call made once more.
        _model(
            [
                error("Context overflow: prompt is too long: 210000 tokens > 200000 maximum"),
                text("SUMMARY OF EARLIER WORK"),
                text("Answer on the summary."),
            ]
        ),
        messages=long_history(SMALL_MODEL),
        compaction=CompactionSettings(keep_recent_tokens=60),
        steps=[("prompt", "Next question.")],
    ),
    Scenario(
        "aborted_compaction",
        # Aborted while the summary streams: no entry, no error, the run ends aborted.
        _model([text("SUMMARY " * 200), text("never")], chunks=200, delay=0.05),
        model=SMALL_MODEL,
        messages=long_history(SMALL_MODEL),
        compaction=CompactionSettings(keep_recent_tokens=60),
        steps=[("prompt", "Next question.")],
        triggers=[("compaction_start", 1, "abort", "")],
    ),
    Scenario(
        "auto_compaction",
        _model([text("SUMMARY OF EARLIER WORK"), text("Fresh answer.")]),
        model=SMALL_MODEL,
        messages=long_history(SMALL_MODEL),
        compaction=CompactionSettings(keep_recent_tokens=60),
        steps=[("prompt", "Next question.")],
    ),
    Scenario(
        # The settings the conversation keeps survive a reset in the session file: a conversation
        # recovered from it has them, and the same messages and stats (see the test).
        "reset_then_recover",
        _model([tool_calls([("add", {"a": 1, "b": 2})]), text("3."), text("After the reset.")]),
        steps=[("prompt", "Add 1 and 2."), ("reset", ""), ("prompt", "Start again.")],
        tools=[add_tool(), multiply_tool()],
        thinking_level=ThinkingLevel.HIGH,
        system_prompt="You are terse.",
        recover=True,
    ),
    Scenario(
        # Several slow chunks per block (thinking, text, a tool call's JSON): durable subscribers
        # get several deltas per block too, adding up to the same text (see the test).
        "multi_chunk_streaming",
        _model(
            [
                tool_calls([("add", {"a": 1, "b": 2})], preamble="Let me add those."),
                thinking("The tool said 3, which answers it.", "The sum is 3, as the tool said."),
            ],
            chunks=6,
            delay=0.05,
        ),
    ),
    Scenario(
        # The same chunks with no pause: the call ends within the first publish interval, and a
        # durable subscriber gets one delta per block (see the test).
        "multi_chunk_within_one_interval",
        _model([text("Quick, in six chunks but all at once.")], chunks=6),
    ),
]


# ------------------------------------------------------------------------------------ normalising

# A sub-agent's session id names its parent's (a durable session id; "agent" in-process).
_MADE_UP_IDS = {"entry_id", "first_kept_entry_id", "session_id"}
# Times each runtime reads from its own clock (an approval's expiry).
_CLOCK_TIMES = {"expires_at"}


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
        elif key in _CLOCK_TIMES and item is not None:
            out[key] = "<time>"
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


_DELTA_TYPES = ("text_delta", "thinking_delta", "toolcall_delta")


def _delta(event: dict[str, Any]) -> dict[str, Any] | None:
    inner = event.get("assistant_message_event") if event.get("type") == "message_update" else None
    return inner if inner is not None and inner.get("type") in _DELTA_TYPES else None


def merge_deltas(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The events with each run of deltas to one block merged into one delta carrying the text the
    run adds up to, and how many deltas each run had (one number per streamed block, in order)."""
    merged: list[dict[str, Any]] = []
    runs: list[int] = []
    for event in events:
        delta = _delta(event)
        last = _delta(merged[-1]) if merged and delta is not None else None
        if (
            delta is not None
            and last is not None
            and (last["type"], last["content_index"])
            == (
                delta["type"],
                delta["content_index"],
            )
        ):
            last["delta"] += delta["delta"]
            runs[-1] += 1
            continue
        if delta is not None:  # a copy: the merge grows it
            event = {**event, "assistant_message_event": dict(delta)}
            runs.append(1)
        merged.append(event)
    return merged, runs


# --------------------------------------------------------------------------------------- running


@dataclass
class Outcome:
    events: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tools_seen: list[list[str]]  # per model call, the tool names it was given
    # Model, thinking level, active tools and system prompt at the end.
    settings: dict[str, Any] = field(default_factory=dict)
    # Durable only: the active tool sets its session file records, in order.
    active_tools_recorded: list[list[str]] = field(default_factory=list)
    # Durable only, with ``Scenario.recover``: the conversation recovered from the session file
    # (its messages and settings), and the stats of the original and of the recovered one.
    recovered: dict[str, Any] = field(default_factory=dict)
    stats: list[SessionStats] = field(default_factory=list)
    # Per streamed block, how many deltas it arrived in (``merge_deltas``).
    delta_runs: list[int] = field(default_factory=list)
    # Whether the ``message_update`` events carried the partial message (True, False or both).
    update_partials: set[bool] = field(default_factory=set)
    # The durable-only events (``DURABLE_ONLY_EVENTS``) the stream had, left out of ``events``.
    durable_only: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.events, self.delta_runs = merge_deltas(self.events)


def _settings(state: AgentState | DurableState) -> dict[str, Any]:
    return {
        "model": state.model.model_dump(mode="json"),
        "thinking_level": state.thinking_level,
        "tools": [tool.name for tool in state.tools],
        "system_prompt": state.system_prompt,
    }


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


_DECISIONS = ("approve", "deny")


def _decision(action: str, arg: str) -> tuple[Any, ...]:
    """A trigger's approve / deny arguments: "CALL" or "CALL {json}" (edited), "CALL reason"."""
    call_id, _, rest = arg.partition(" ")
    if action == "approve":
        return (call_id, orjson.loads(rest)) if rest else (call_id,)
    return (call_id, rest)


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
        thinking_level=scenario.thinking_level,
        system_prompt=scenario.system_prompt,
    )
    events: list[dict[str, Any]] = []
    triggers = _Triggers(scenario.triggers)

    partials: set[bool] = set()

    def listener(event: AgentEvent, signal: Any) -> None:
        normalised = normalise_event(event, scenario.loose_content)
        if normalised is not None:  # snapshot now: a streaming partial changes in place
            events.append(normalised)
        if event.type == "message_update":
            partials.add(event.message is not None)
        for action, arg in triggers.due(event):
            if action == "abort":
                agent.abort()
            elif action in _DECISIONS:
                getattr(agent, action)(*_decision(action, arg))
            else:
                getattr(agent, action)(arg)

    agent.subscribe(listener)
    for command, arg in scenario.steps:
        if command in ("prompt", "continue_"):
            run = agent.prompt(arg) if command == "prompt" else agent.continue_()
            await asyncio.wait_for(run, 30)
        elif command == "reset":
            agent.reset()
        else:
            getattr(agent, command)(arg)
    await agent.wait_for_idle()
    state = agent.get_state()
    return Outcome(
        events,
        normalise_messages(state.messages, scenario.loose_content),
        [[t.name for t in call.tools] for call in model.calls],
        _settings(state),
        update_partials=partials,
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
                thinking_level=scenario.thinking_level,
                system_prompt=scenario.system_prompt,
            ),
            compaction=scenario.compaction,
        )
        events: list[dict[str, Any]] = []
        partials: set[bool] = set()
        durable_only: list[str] = []
        runs_ended = 0
        triggers = _Triggers(scenario.triggers)

        async def read() -> None:
            nonlocal runs_ended
            async for _, event in agent.events(0):
                normalised = normalise_event(event, scenario.loose_content)
                if normalised is not None:
                    events.append(normalised)
                elif event.type in DURABLE_ONLY_EVENTS:
                    durable_only.append(event.type)
                if event.type == "message_update":
                    partials.add(event.message is not None)
                for action, arg in triggers.due(event):
                    if action == "abort":
                        await agent.abort()
                    elif action in _DECISIONS:
                        await getattr(agent, action)(*_decision(action, arg))
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
                elif command == "reset":
                    await agent.reset()
                else:
                    await getattr(agent, command)(arg)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        await agent.wait_for_idle(timeout=30)  # everything in the session file
        state = await agent.get_state()
        session_file = h.session_path(agent.session_id)
        entries = [orjson.loads(line) for line in session_file.read_bytes().splitlines()]
        outcome = Outcome(
            events,
            normalise_messages(state.messages, scenario.loose_content),
            [[t.name for t in call.tools] for call in model.calls],
            _settings(state),
            [e["active_tools"] for e in entries if e.get("type") == "active_tools_change"],
            update_partials=partials,
            durable_only=durable_only,
        )
        if scenario.recover:
            copy = tmp_path / "copy.jsonl"  # the file alone: nothing the workflow held
            copy.write_bytes(session_file.read_bytes())
            recovered = await h.agents.recover(copy, session_id=f"{agent.session_id}-recovered")
            await recovered.wait_for_idle(timeout=30)
            recovered_state = await recovered.get_state()
            outcome.recovered = {
                "messages": normalise_messages(recovered_state.messages, scenario.loose_content),
                **_settings(recovered_state),
            }
            outcome.stats = [await agent.get_session_stats(), await recovered.get_session_stats()]
        return outcome


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_durable_matches_in_process(
    scenario: Scenario, temporal_client: Client, tmp_path: Path
) -> None:
    local = await run_in_process(scenario)
    durable = await run_durable(scenario, temporal_client, tmp_path)
    assert durable.events == local.events
    assert durable.messages == local.messages
    assert durable.tools_seen == local.tools_seen
    assert durable.settings == local.settings
    # In-process a delta comes with the partial message; durably without (a subscriber rebuilds it).
    assert local.update_partials <= {True} and durable.update_partials <= {False}
    assert durable.durable_only == []  # nothing was retried
    if scenario.name == "added_tool_names":  # the session file alone rebuilds the active tools
        assert durable.active_tools_recorded == [["unlock"], ["unlock", "multiply"]]
    if scenario.recover:  # ... and, after a reset, the messages and every setting
        assert durable.recovered == {"messages": local.messages, **local.settings}
        assert local.settings["thinking_level"] == ThinkingLevel.HIGH
        assert local.settings["tools"] == ["add", "multiply"]
        live, recovered = durable.stats
        assert live == recovered and live.message_count == 6  # the file's: before the reset too
    if scenario.name == "abort_mid_sequential_batch":  # the call after the aborted one never runs
        codes = [m["details"]["error_code"] for m in local.messages if m["role"] == "toolResult"]
        assert codes == ["EXECUTION_ABORTED", "EXECUTION_ABORTED"]
    if scenario.name in ("prepare_arguments", "bad_arguments_to_a_pydantic_tool"):
        codes = [(m["details"] or {}).get("error_code") for m in local.messages if m["role"] == "toolResult"]
        assert codes == (
            [None, "INVALID_PARAMETERS"] if scenario.name == "prepare_arguments" else ["INVALID_PARAMETERS"]
        )
    if scenario.name == "multi_chunk_streaming":
        # Four blocks (text, tool-call JSON; thinking, text) in several deltas each, in both.
        assert len(local.delta_runs) == len(durable.delta_runs) == 4
        assert min(local.delta_runs) > 1 and min(durable.delta_runs) > 1, (
            local.delta_runs,
            durable.delta_runs,
        )
    if scenario.name == "multi_chunk_within_one_interval":
        assert local.delta_runs == [6] and durable.delta_runs == [1]
    if scenario.name == "coerced_arguments":
        results = [m for m in durable.messages if m["role"] == "toolResult"]
        assert [r["content"][0]["text"] for r in results[:2]] == ["42", "2.0"]
        assert (
            results[2]["is_error"] and "/a: 'six' is not of type 'number'" in results[2]["content"][0]["text"]
        )


class FailingFirstCall(ScriptedModel):
    """The scripted replies, after a first call that fails as an overloaded provider does (529,
    retryable, before any token)."""

    def _reply(self, call_index: int, context: LlmContext) -> Reply:
        return super()._reply(call_index - 1, context)  # the replies begin with the second call

    async def _stream(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[StreamEvent]:
        if self.calls:
            async for event in super()._stream(model, context, options):
                yield event
            return
        self.calls.append(context)
        failed = AssistantMessage(
            api=model.api, provider=model.provider, model=model.id, timestamp=time.time_ns() // 1_000_000
        )
        yield StreamStart(partial=failed)
        failed = failed.model_copy(update={"stop_reason": "error", "error_message": "HTTP 529 overloaded"})
        yield StreamError(
            reason="error", error=failed, retryable=True, retry_after_seconds=0.1, status_code=529
        )


async def test_a_retryable_failure_is_retried_only_durably(temporal_client: Client, tmp_path: Path) -> None:
    """Temporal owns retries: durably a call that fails retryably is retried, announced by
    ``llm_retry``, and otherwise the run is the one that did not fail; in-process nothing retries
    it and the turn ends with the error."""
    replies: list[Reply | str] = [text("Hello there.")]
    unfailing = await run_in_process(Scenario("retried", _model(replies)))
    flaky = Scenario("retried", lambda: FailingFirstCall(list(replies)))
    local = await run_in_process(flaky)
    durable = await run_durable(flaky, temporal_client, tmp_path)
    assert durable.durable_only == ["llm_retry"]
    assert durable.events == unfailing.events and durable.messages == unfailing.messages
    assert [m["role"] for m in local.messages] == ["user", "assistant"]
    assert local.messages[-1]["stop_reason"] == "error"
    assert local.messages[-1]["error_message"] == "HTTP 529 overloaded"


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


# ------------------------------------------------------------------------------------------ wake-ups

_WAKEUP_TIMES = [
    (re.compile(r"[0-9a-f]{32}"), "<id>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?(\+00:00|Z| UTC)?"), "<time>"),
    (re.compile(r"\((due <time>)[^)]*\)"), "(due <time>, <lateness>)"),
    (re.compile(r'"late_seconds":[0-9.e-]+'), '"late_seconds":0'),
]


def _scrub_wakeup_event(event: dict[str, Any]) -> dict[str, Any]:
    """Wake-up ids and times are each runtime's own (and how late a timer fires is timing)."""
    text = orjson.dumps(event).decode()
    for pattern, marker in _WAKEUP_TIMES:
        text = pattern.sub(marker, text)
    scrubbed: dict[str, Any] = orjson.loads(text)
    return scrubbed


def _wakeup_replies() -> ScriptedModel:
    return ScriptedModel(
        [
            tool_calls([("schedule_wakeup", {"note": "look at the deploy", "delay_seconds": 2})]),
            text("I will check back."),
            text("Deploy looked at."),
        ]
    )


async def test_wakeup_events_match_in_both_runtimes(temporal_client: Client, tmp_path: Path) -> None:
    """The model schedules a wake-up with ``wakeup_tool``; the application schedules one and cancels
    it; the model's fires and runs the conversation: the same events, in the same order, in both."""
    tool = wakeup_tool(min_delay=timedelta(seconds=0.5))

    local: list[dict[str, Any]] = []
    agent = Agent(model=scripted_model(), tools=[tool], stream_fn=_wakeup_replies())
    agent.subscribe(
        lambda event, signal: local.append(_scrub_wakeup_event(normalise_event(event, False) or {}))
    )
    await agent.prompt("Deploy, then check on it.")
    cancelled = agent.schedule_wakeup("never mind", after=timedelta(hours=1))
    agent.cancel_wakeup(cancelled)
    deadline = time.monotonic() + 30
    while sum(1 for e in local if e.get("type") == "agent_end") < 2:
        assert time.monotonic() < deadline, "the wake-up did not run the conversation within 30 s"
        await asyncio.sleep(0.02)
    await agent.wait_for_idle()

    durable: list[dict[str, Any]] = []
    async with running_worker(temporal_client, tmp_path, _wakeup_replies(), tools=[tool]) as h:
        remote = await h.agents.start(
            "parity-wakeups", AgentOptions(model=scripted_model(), tools=["schedule_wakeup"])
        )
        await remote.prompt("Deploy, then check on it.")
        runs = 0
        async for _, event in remote.events(0):
            normalised = normalise_event(event, False)
            if normalised is not None:
                durable.append(_scrub_wakeup_event(normalised))
            if event.type == "agent_end":
                runs += 1
                if runs == 1:
                    await remote.cancel_wakeup(
                        await remote.schedule_wakeup("never mind", after=timedelta(hours=1))
                    )
                else:
                    break

    assert [e["type"] for e in durable] == [e["type"] for e in local]
    assert durable == local
    types = [e["type"] for e in local]
    assert types.count("wakeup_scheduled") == 2 and types.count("wakeup_cancelled") == 1
    assert types.index("wakeup_fired") == types.index("agent_start", types.index("wakeup_cancelled")) - 1
