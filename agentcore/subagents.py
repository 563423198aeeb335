"""Sub-agents: a tool that hands a task to another agent and answers with that agent's final answer.

    researcher = subagent_tool("researcher", "Looks things up and reports.", AgentOptions(model=model, tools=[search]))
    agent = Agent(model=model, tools=[researcher])        # in-process: a nested Agent per call
    create_worker(client, tools=[researcher])             # durable: a child workflow per call

The model calls it with ``{"task": "..."}``. The result's text is the sub-agent's final answer; its
``details`` hold the child's ``session_id``, ``usage``, ``cost`` (USD) and ``stop_reason``; its
``usage`` is everything the child spent, so the caller's statistics count it. While the child works,
its turns and tool calls reach the caller's subscribers as ``tool_execution_update`` progress. An
abort of the caller aborts the child, which ends its run and keeps its partial answer (the result is
then an ``EXECUTION_ABORTED`` error carrying that answer); a child that fails is an error result.

Durably (``agentcore.workflows.subagents``) the child is a child workflow of the caller's
conversation, the same conversation workflow, id ``{parent session}.sub.{tool call id}``, with its
own session file whose metadata names the parent. Sub-agents nest up to ``max_depth`` deep.

Everything here is shared by both runtimes, so they give the same results and progress.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .approvals import ApprovalGate
from .errors import EXECUTION_ABORTED, EXECUTION_ERROR, SUBAGENT_DEPTH_EXCEEDED, TOOL_NOT_SUPPORTED
from .events import AgentEvent
from .messages import AssistantMessage, Message, TextContent, Usage, UsageCost
from .runtime import AbortSignal
from .session.paths import SESSION_ID_RE
from .state import AgentOptions
from .tool_exec import aborted_result, error_result
from .tools import AgentTool, AgentToolResult, SubagentSpec, ToolExecute

__all__ = [
    "SUBAGENT_TIMEOUT_SECONDS",
    "SubagentCall",
    "SubagentHost",
    "SubagentPlace",
    "TASK_PARAMETERS",
    "depth_limit",
    "depth_refusal",
    "subagent_progress",
    "subagent_result",
    "subagent_session_id",
    "subagent_tool",
]

# The model's argument. ``pattern`` refuses a blank task before any child starts, in both runtimes
# (a durable conversation checks a JSON schema itself, before it schedules anything).
TASK_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "minLength": 1,
            "pattern": r"\S",
            "description": "The task for the sub-agent, with everything it needs to know.",
        }
    },
    "required": ["task"],
    "additionalProperties": False,
}
# A sub-agent's run is a whole conversation: bounded by its own model calls and tools, or an abort.
SUBAGENT_TIMEOUT_SECONDS = 24 * 3600.0
# Progress carries the child's words as a preview; the child's session file holds them all.
PROGRESS_TEXT_CHARS = 2_000
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def subagent_tool(name: str, description: str, options: AgentOptions, *, max_depth: int = 2) -> AgentTool:
    """A tool that runs a sub-agent built from ``options`` on the ``task`` the model gives it.

    ``options.tools`` are the sub-agent's tools (``AgentTool``s; durably, a worker registering this
    tool registers them too, or names of tools the workers register). The sub-agent starts from its
    task alone (``options.messages`` are not used). In-process it uses the caller's stream function
    and ``get_api_key`` unless ``options`` name their own. ``max_depth``: how deep sub-agents may
    nest below the conversation a person talks to, through this tool and any sub-agent tool its
    child has (1: the child may not start another; a call past the limit is an error result)."""
    if max_depth < 1:
        raise ValueError("max_depth must be at least 1")
    spec = SubagentSpec(
        system_prompt=options.system_prompt,
        model=options.model,
        thinking_level=options.thinking_level,
        tool_names=[tool if isinstance(tool, str) else tool.name for tool in options.tools],
        tool_execution=options.tool_execution,
        max_tokens=options.max_tokens,
        temperature=options.temperature,
        max_depth=max_depth,
    )

    return AgentTool(
        name=name,
        description=description,
        parameters=TASK_PARAMETERS,
        execute=SubagentCall(name, options, spec),
        subagent=spec,
        timeout_seconds=SUBAGENT_TIMEOUT_SECONDS,
        nested_tools=[tool for tool in options.tools if isinstance(tool, AgentTool)],
    )


# ------------------------------------------------------------------------------ shared by both runtimes


def subagent_session_id(parent_session_id: str, tool_call_id: str) -> str:
    """``{parent}.sub.{tool call id}``, made a valid session id (characters replaced, and a digest
    instead when it would be too long): the same on every replay of the call."""
    candidate = f"{parent_session_id}.sub.{_UNSAFE_ID_CHARS.sub('_', tool_call_id)}"
    if SESSION_ID_RE.match(candidate):
        return candidate
    digest = hashlib.sha1(f"{parent_session_id}\0{tool_call_id}".encode()).hexdigest()[:16]
    return f"{_UNSAFE_ID_CHARS.sub('_', parent_session_id)[:96]}.sub.{digest}"


def depth_limit(tool_max_depth: int, inherited: int | None) -> int:
    """How deep a child may run: the tool's ``max_depth``, or less if a sub-agent tool that led to
    this call allowed less (a sub-agent limited to one level cannot delegate through another tool)."""
    return tool_max_depth if inherited is None else min(tool_max_depth, inherited)


def depth_refusal(name: str, depth: int, max_depth: int) -> AgentToolResult | None:
    """The error result for a child that would run at ``depth`` past ``max_depth``, else None."""
    if depth <= max_depth:
        return None
    return error_result(
        SUBAGENT_DEPTH_EXCEEDED,
        f'Sub-agent "{name}" was not started: it would run at depth {depth}, and sub-agents nest at most '
        f"{max_depth} deep. Do the task yourself or with your other tools.",
        max_depth=max_depth,
    )


def run_usage(messages: Sequence[Message]) -> Usage:
    """Everything a run spent: its model calls, and the sub-agents its tools ran (their results'
    ``usage``), as the session statistics count them."""
    total = Usage()
    cost = total.cost
    for message in messages:
        usage = getattr(message, "usage", None)
        if usage is None or message.role == "user":
            continue
        total.input += usage.input
        total.output += usage.output
        total.cache_read += usage.cache_read
        total.cache_write += usage.cache_write
        total.total_tokens += usage.total_tokens
        cost.input += usage.cost.input
        cost.output += usage.cost.output
        cost.cache_read += usage.cost.cache_read
        cost.cache_write += usage.cost.cache_write
        cost.total += usage.cost.total
    return Usage(
        input=total.input,
        output=total.output,
        cache_read=total.cache_read,
        cache_write=total.cache_write,
        total_tokens=total.total_tokens,
        cost=UsageCost(**cost.model_dump()),
    )


def _text(message: AssistantMessage) -> str:
    return "".join(block.text for block in message.content if isinstance(block, TextContent))


def subagent_result(name: str, session_id: str, messages: Sequence[Message]) -> AgentToolResult:
    """The tool result of a sub-agent whose run made ``messages``: its final answer (for a run that
    was aborted or failed, the last words it had said), and what it spent."""
    usage = run_usage(messages)
    assistants = [message for message in messages if isinstance(message, AssistantMessage)]
    final = assistants[-1] if assistants else None
    stop_reason = final.stop_reason if final is not None else "error"
    details: dict[str, Any] = {
        "session_id": session_id,
        "usage": usage.model_dump(mode="json"),
        "cost": usage.cost.total,
        "stop_reason": stop_reason,
    }
    if final is not None and stop_reason not in ("aborted", "error"):
        result = AgentToolResult.text(_text(final), details=details)
    else:
        answer = next((text for message in reversed(assistants) if (text := _text(message))), "")
        said = f"\nIts partial answer:\n{answer}" if answer else ""
        if stop_reason == "aborted":
            result = error_result(EXECUTION_ABORTED, f'Sub-agent "{name}" was aborted.{said}', **details)
        else:
            why = (final.error_message if final is not None else None) or "it gave no answer"
            result = error_result(EXECUTION_ERROR, f'Sub-agent "{name}" failed: {why}{said}', **details)
    result.usage = usage
    return result


def subagent_progress(session_id: str, event: AgentEvent, turn: int) -> AgentToolResult | None:
    """The progress (``tool_execution_update``'s partial result) a child's ``event`` makes, if any:
    its turns (``turn``: how many it has ended, this one included), its tool calls, and its calls'
    approval requests and decisions."""
    base: dict[str, Any] = {"session_id": session_id, "event": event.type}
    if event.type == "turn_end" and isinstance(event.message, AssistantMessage):
        said = _text(event.message)[:PROGRESS_TEXT_CHARS]
        details = {**base, "turn": turn, "stop_reason": event.message.stop_reason}
        return AgentToolResult.text(said or f"turn {turn} ended", details=details)
    if event.type == "tool_execution_start":
        details = {**base, "tool_call_id": event.tool_call_id, "tool_name": event.tool_name}
        return AgentToolResult.text(f"calling {event.tool_name}", details=details)
    if event.type == "tool_approval_requested":
        details = {**base, "tool_call_id": event.tool_call_id, "tool_name": event.tool_name}
        return AgentToolResult.text(f"waiting for approval: {event.tool_name}", details=details)
    if event.type == "tool_approval_resolved":
        details = {**base, "tool_call_id": event.tool_call_id, "decision": event.decision}
        return AgentToolResult.text(f"approval: {event.decision}", details=details)
    if event.type == "tool_execution_end":
        details = {
            **base,
            "tool_call_id": event.tool_call_id,
            "tool_name": event.tool_name,
            "is_error": event.is_error,
        }
        return AgentToolResult.text(
            f"{event.tool_name} {'failed' if event.is_error else 'done'}", details=details
        )
    return None


# ------------------------------------------------------------------------------------------ in-process


@dataclass(frozen=True)
class SubagentPlace:
    """Where an in-process agent runs among sub-agents: its session id (its children's ids derive
    from it), its depth (0: the agent a person talks to) and the depth limit the sub-agent tools
    above it allow (None: only its own tools' ``max_depth``)."""

    session_id: str = "agent"
    depth: int = 0
    limit: int | None = None


class NestedAgent(Protocol):
    """What a sub-agent tool needs of the nested agent it runs (an ``Agent``)."""

    @property
    def messages(self) -> list[Message]: ...

    @property
    def approval_gate(self) -> ApprovalGate: ...

    def subscribe(self, listener: Callable[[AgentEvent, AbortSignal], Any]) -> Callable[[], None]: ...

    def abort(self) -> None: ...

    async def prompt(self, text: str) -> Any: ...


class SubagentHost(Protocol):
    """The in-process agent whose tool starts a sub-agent: where it runs, and how it makes a child
    (with its stream function and keys unless the tool's options name their own)."""

    @property
    def place(self) -> SubagentPlace: ...

    @property
    def approval_gate(self) -> ApprovalGate: ...

    def nested(self, options: AgentOptions, place: SubagentPlace) -> NestedAgent: ...


class SubagentCall:
    """A sub-agent tool's ``execute``. In-process the agent that calls the tool binds itself as
    ``host`` (its runtime dispatches on ``tool.subagent``, as a durable conversation does, which
    starts a child workflow instead), so the child knows its caller without any ambient state."""

    def __init__(self, name: str, options: AgentOptions, spec: SubagentSpec) -> None:
        self.name = name
        self.options = options
        self.spec = spec

    def under(self, host: SubagentHost) -> ToolExecute:
        """This call's ``execute`` for a run of ``host``: the child runs under that agent."""

        async def execute(
            tool_call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: Any
        ) -> AgentToolResult:
            return await self(tool_call_id, args, signal, on_update, host=host)

        return execute

    async def __call__(
        self,
        tool_call_id: str,
        args: dict[str, Any],
        signal: AbortSignal,
        on_update: Any,
        host: SubagentHost | None = None,
    ) -> AgentToolResult:
        if host is None:
            return error_result(
                TOOL_NOT_SUPPORTED,
                f'Sub-agent tool "{self.name}" runs inside an Agent or a durable conversation, which '
                "start its child; it cannot be called on its own.",
            )
        caller = host.place
        depth = caller.depth + 1
        limit = depth_limit(self.spec.max_depth, caller.limit)
        refused = depth_refusal(self.name, depth, limit)
        if refused is not None:
            return refused
        session_id = subagent_session_id(caller.session_id, tool_call_id)
        child = host.nested(self.options, SubagentPlace(session_id, depth, limit))
        turns = 0

        def forward(event: AgentEvent, _signal: AbortSignal) -> None:
            nonlocal turns
            if event.type == "turn_end":
                turns += 1
            update = subagent_progress(session_id, event, turns)
            if update is not None:
                on_update(update)

        child.subscribe(forward)
        # The abort ends the child's run (its partial answer kept), and the result says so: the
        # pipeline waits for it rather than racing the abort (``tool_exec.execute_tool``).
        remove = signal.add_listener(lambda: child.abort())
        if signal.aborted:
            return aborted_result(self.name)
        # The child's calls waiting for a person show in the caller's list and are decided there too.
        detach = host.approval_gate.add_child(session_id, child.approval_gate)
        try:
            await child.prompt(args["task"])
        except asyncio.CancelledError:
            child.abort()
            raise
        finally:
            remove()
            detach()
        return subagent_result(self.name, session_id, child.messages)
