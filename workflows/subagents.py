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
import contextlib
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from agentcore.approvals import ApprovalDecision
    from agentcore.errors import EXECUTION_ERROR, AgentError
    from agentcore.messages import TextContent, ToolCall, UserMessage
    from agentcore.protocol import (
        SIGNAL_DECIDE_APPROVAL,
        SIGNAL_SUBAGENT_APPROVALS,
        WORKFLOW_NAME,
        ConversationConfig,
        ConversationInput,
        ForwardedDecision,
        PendingRun,
        SubagentApprovals,
        SubagentRun,
    )
    from agentcore.search_attributes import AGENT_MODEL, AGENT_SESSION_ID, AGENT_STATUS
    from agentcore.session.branching import PARENT_SESSION_METADATA_KEY
    from agentcore.subagents import depth_limit, depth_refusal, subagent_session_id
    from agentcore.temporal.search_attributes import search_attribute_keys
    from agentcore.tool_exec import error_result
    from agentcore.tools import AgentToolResult, ToolSpec

from .state import ConversationState, now_ms
from .subagent_links import ParentProgress, Subagents

if TYPE_CHECKING:
    from agentcore.runtime import AbortSignal


SUBAGENT_ABORT_REASON = "the parent conversation was aborted"


class SubagentHandlers(ConversationState):
    """A conversation's side of its sub-agents' approvals: their waiting calls show in its
    ``pending_approvals`` (with their session id), and a decision taken here goes on to them. As a
    sub-agent, it reports its own waiting calls (and its sub-agents') to its parent."""

    async def run_subagent(self, spec: ToolSpec, call: ToolCall, signal: AbortSignal) -> AgentToolResult:
        """The result of ``call`` to the sub-agent tool ``spec``: its child conversation's answer."""
        sub = spec.subagent
        assert sub is not None
        parent_run = self.subagents.run
        depth = (parent_run.depth if parent_run is not None else 0) + 1
        limit = depth_limit(sub.max_depth, parent_run.max_depth if parent_run is not None else None)
        refused = depth_refusal(spec.name, depth, limit)
        if refused is not None:
            return refused
        child_id = subagent_session_id(self.session_id, call.id)
        child = self._child_input(spec, call, child_id, depth, limit)
        model = sub.model
        # Waited for from before its start: the child may report a call awaiting approval in the very
        # activation that resolves its start (signals are applied first), and a report from a child not
        # waited for is dropped (``subagent_approvals``).
        self.subagents.wait_for(
            child_id,
            f"waiting for sub-agent `{spec.name}` (child workflow `{child_id}`) "
            f"since {workflow.now():%Y-%m-%d %H:%M:%S} UTC",
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
                task_timeout=timedelta(seconds=self.limits.workflow_task_timeout_seconds),
                search_attributes=self._child_search_attributes(child_id, f"{model.provider}/{model.id}"),
                static_summary=f"sub-agent {spec.name} · {model.provider}/{model.id}",
            )
        except WorkflowAlreadyStartedError:
            self.subagents.done_waiting(child_id)
            return error_result(
                EXECUTION_ERROR,
                f'Sub-agent "{spec.name}" was not started: a conversation {child_id!r} exists already.',
                session_id=child_id,
            )
        except BaseException:  # (cancelled before it started: an abort)
            self.subagents.done_waiting(child_id)
            raise
        remove = signal.add_listener(lambda: handle.cancel(SUBAGENT_ABORT_REASON))
        self._set_details()
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
            self.subagents.done_waiting(child_id)
            self.approvals.set_child_pending(child_id, [])
            self._set_details()

    def _child_input(
        self, spec: ToolSpec, call: ToolCall, child_id: str, depth: int, limit: int | None
    ) -> ConversationInput:
        """The child conversation's start: the sub-agent's settings, the task as its first prompt."""
        sub = spec.subagent
        assert sub is not None
        return ConversationInput(
            session_id=child_id,
            config=ConversationConfig(
                system_prompt=sub.system_prompt,
                model=sub.model,
                thinking_level=sub.thinking_level,
                tool_names=list(sub.tool_names),
                tool_execution=sub.tool_execution,
                max_tokens=sub.max_tokens,
                temperature=sub.temperature,
                compaction=self.config.compaction,
            ),
            limits=self.limits,
            session_metadata={
                PARENT_SESSION_METADATA_KEY: {"id": self.session_id, "tool_call_id": call.id},
                "subagent": spec.name,
            },
            pending_run=PendingRun(
                id=call.id,
                kind="prompt",
                messages=[
                    UserMessage(content=[TextContent(text=call.arguments["task"])], timestamp=now_ms())
                ],
            ),
            search_attributes=self.visibility.enabled,
            subagent=SubagentRun(
                parent_session_id=self.session_id,
                tool_call_id=call.id,
                tool_name=call.name,
                arguments=call.arguments,
                depth=depth,
                max_depth=limit,
            ),
        )

    def _child_search_attributes(self, child_id: str, model: str) -> TypedSearchAttributes | None:
        if not self.visibility.enabled:
            return None
        keys = search_attribute_keys()
        return TypedSearchAttributes(
            [
                SearchAttributePair(keys[AGENT_SESSION_ID], child_id),
                SearchAttributePair(keys[AGENT_MODEL], model),
                SearchAttributePair(keys[AGENT_STATUS], "running"),
            ]
        )

    def _link_approvals(self) -> None:
        self.approvals.forward = self._forward_decision
        if self.subagents.progress is not None:
            self.approvals.add_listener(self._report_approvals)

    def _report_approvals(self) -> None:
        progress = self.subagents.progress
        assert progress is not None
        progress.report_approvals(
            [
                p if p.session_id else p.model_copy(update={"session_id": self.session_id})
                for p in self.approvals.pending()
            ]
        )

    def _forward_decision(self, session_id: str, tool_call_id: str, decision: ApprovalDecision) -> None:
        child = workflow.get_external_workflow_handle(session_id)
        request = ForwardedDecision(tool_call_id=tool_call_id, decision=decision)

        async def send() -> None:
            with contextlib.suppress(Exception):  # the child ended meanwhile: nothing waits any more
                await child.signal(SIGNAL_DECIDE_APPROVAL, request)

        self.subagents.keep(asyncio.create_task(send()))

    @workflow.signal(name=SIGNAL_SUBAGENT_APPROVALS)
    def subagent_approvals(self, report: SubagentApprovals) -> None:
        if self.subagents.waits_for(report.session_id):  # a child of the run going on
            self.approvals.set_child_pending(report.session_id, report.pending)
            self._index()
            self._set_details()

    @workflow.signal(name=SIGNAL_DECIDE_APPROVAL)
    def decide_approval(self, request: ForwardedDecision) -> None:
        # Checked here as an Update's validator would; a decision that does not apply is dropped
        # (the parent's client sends the Update to this conversation itself, and gets the refusal).
        with contextlib.suppress(AgentError):
            self.approvals.decide(request.tool_call_id, request.decision)


__all__ = ["SUBAGENT_ABORT_REASON", "ParentProgress", "SubagentHandlers", "Subagents"]
