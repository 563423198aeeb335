"""Sub-agents in a durable conversation: each call of a sub-agent tool is a child workflow.

The parent (``run_subagent``) starts the child from its own workflow code: the same conversation
workflow, id ``{parent session}.sub.{tool call id}``, the task as its first prompt. It then waits
for the child as for any workflow future: no activity runs and no workflow task stays open, so
queries, steering and abort are answered at once, and the Web UI shows the child under its parent.
A worker that restarts replays the start from the history (ChildWorkflowExecutionStarted) instead
of starting another child; the id would refuse a second one anyway.

The child (``ConversationWorkflow.serve_as_subagent``) runs its task once, writes its session file (whose metadata names
the parent) and returns the call's result. Its progress (turns, tool calls) reaches the parent's
subscribers as ``tool_execution_update`` events, sent as ``activity_events`` signals, the way a tool
activity sends its progress (``ParentProgress``). The parent's abort cancels the child with
``WAIT_CANCELLATION_COMPLETED``: the child turns the cancellation into an abort of its run, ends it
and returns its result with the partial answer; the parent waits for that. A child that fails (an
operator terminated it) is an error result of the call, never a failure of the parent.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from agentcore.errors import EXECUTION_ERROR
    from agentcore.events import AgentEvent, ToolExecutionUpdateEvent
    from agentcore.messages import TextContent, ToolCall, UserMessage
    from agentcore.protocol import (
        SIGNAL_ACTIVITY_EVENTS,
        WORKFLOW_NAME,
        ActivityEvents,
        ConversationConfig,
        ConversationInput,
        PendingRun,
        SubagentRun,
    )
    from agentcore.search_attributes import AGENT_MODEL, AGENT_SESSION_ID, AGENT_STATUS
    from agentcore.session.branching import PARENT_SESSION_METADATA_KEY
    from agentcore.subagents import depth_limit, depth_refusal, subagent_progress, subagent_session_id
    from agentcore.temporal.connect import search_attribute_keys
    from agentcore.tool_exec import error_result
    from agentcore.tools import AgentToolResult, ToolSpec

from .state import now_ms

if TYPE_CHECKING:
    from agentcore.runtime import AbortSignal

    from .state import ConversationState

SUBAGENT_ABORT_REASON = "the parent conversation was aborted"


async def run_subagent(
    conversation: ConversationState, spec: ToolSpec, call: ToolCall, signal: AbortSignal
) -> AgentToolResult:
    """The result of ``call`` to the sub-agent tool ``spec``: its child conversation's answer."""
    sub = spec.subagent
    assert sub is not None
    parent_run = conversation.subagent
    depth = (parent_run.depth if parent_run is not None else 0) + 1
    limit = depth_limit(sub.max_depth, parent_run.max_depth if parent_run is not None else None)
    refused = depth_refusal(spec.name, depth, limit)
    if refused is not None:
        return refused
    child_id = subagent_session_id(conversation.session_id, call.id)
    model = sub.model
    child = ConversationInput(
        session_id=child_id,
        config=ConversationConfig(
            system_prompt=sub.system_prompt,
            model=model,
            thinking_level=sub.thinking_level,
            tool_names=list(sub.tool_names),
            tool_execution=sub.tool_execution,
            max_tokens=sub.max_tokens,
            temperature=sub.temperature,
            compaction=conversation.config.compaction,
        ),
        limits=conversation.limits,
        session_metadata={
            PARENT_SESSION_METADATA_KEY: {"id": conversation.session_id, "tool_call_id": call.id},
            "subagent": spec.name,
        },
        pending_run=PendingRun(
            id=call.id,
            kind="prompt",
            messages=[UserMessage(content=[TextContent(text=call.arguments["task"])], timestamp=now_ms())],
        ),
        search_attributes=conversation.search_attributes,
        subagent=SubagentRun(
            parent_session_id=conversation.session_id,
            tool_call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            depth=depth,
            max_depth=limit,
        ),
    )
    search_attributes = None
    if conversation.search_attributes:
        keys = search_attribute_keys()
        search_attributes = TypedSearchAttributes(
            [
                SearchAttributePair(keys[AGENT_SESSION_ID], child_id),
                SearchAttributePair(keys[AGENT_MODEL], f"{model.provider}/{model.id}"),
                SearchAttributePair(keys[AGENT_STATUS], "running"),
            ]
        )
    try:
        handle = await workflow.start_child_workflow(
            WORKFLOW_NAME,
            args=[child, None],
            id=child_id,
            result_type=AgentToolResult,
            # The child hands back its partial answer when cancelled: wait for it.
            cancellation_type=workflow.ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
            # A parent that ends (terminated, say) aborts its children rather than leaving them running.
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            task_timeout=timedelta(seconds=conversation.limits.workflow_task_timeout_seconds),
            search_attributes=search_attributes,
            static_summary=f"sub-agent {spec.name} · {model.provider}/{model.id}",
        )
    except WorkflowAlreadyStartedError:
        return error_result(
            EXECUTION_ERROR,
            f'Sub-agent "{spec.name}" was not started: a conversation {child_id!r} exists already.',
            session_id=child_id,
        )
    remove = signal.add_listener(lambda: handle.cancel(SUBAGENT_ABORT_REASON))
    conversation.subagents_waiting[child_id] = (
        f"waiting for sub-agent `{spec.name}` (child workflow `{child_id}`) "
        f"since {workflow.now():%Y-%m-%d %H:%M:%S} UTC"
    )
    conversation._set_details()
    try:
        result: AgentToolResult = await handle
        return result
    except ChildWorkflowError as err:
        return error_result(
            EXECUTION_ERROR,
            f'Sub-agent "{spec.name}" failed: {err.cause or err}',
            session_id=child_id,
        )
    finally:
        remove()
        del conversation.subagents_waiting[child_id]
        conversation._set_details()


class ParentProgress:
    """A child's turns and tool calls, sent to its parent as ``tool_execution_update`` events of the
    call that started it, in order, one signal at a time (``activity_events``; a batch carries what
    came meanwhile)."""

    def __init__(self, session_id: str, run: SubagentRun) -> None:
        self.session_id = session_id
        self.run = run
        self.turns = 0
        self._pending: list[str] = []
        self._sequence = 0
        self._sender: asyncio.Task[None] | None = None

    def forward(self, event: AgentEvent) -> None:
        if event.type == "turn_end":
            self.turns += 1
        update = subagent_progress(self.session_id, event, self.turns)
        if update is None:
            return
        progress = ToolExecutionUpdateEvent(
            tool_call_id=self.run.tool_call_id,
            tool_name=self.run.tool_name,
            args=self.run.arguments,
            partial_result=update,
        )
        payload = workflow.payload_converter().to_payloads([progress])[0]
        self._pending.append(base64.b64encode(payload.SerializeToString()).decode())
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())

    async def _send(self) -> None:
        parent = workflow.get_external_workflow_handle(self.run.parent_session_id)
        while self._pending:
            items, self._pending = self._pending, []
            self._sequence += 1
            batch = ActivityEvents(
                publisher_id=f"subagent:{self.session_id}", sequence=self._sequence, items=items
            )
            try:
                await parent.signal(SIGNAL_ACTIVITY_EVENTS, batch)
            except Exception:  # the parent is gone; nobody is left to read the progress
                self._pending = []
                return

    async def drained(self) -> None:
        """Return once every progress event was delivered: they must reach the parent before the
        call's result does."""
        while self._sender is not None and not self._sender.done():
            await self._sender
