"""Tool approvals in the conversation workflow: the wait, the decisions (Updates) and the record.

A call of a tool that ``requires_approval`` waits in ``workflow.wait_condition``: no activity in
flight and no workflow task held, so queries, abort and steering act at once and a wait of days
costs nothing. Its request and its decision become custom session entries (written before the wait
starts), its status shows as ``AgentStatus = "awaiting_approval"`` and in the workflow's current
details. ``approve`` / ``deny`` are Updates whose validators refuse (APPROVAL_NOT_FOUND,
APPROVAL_ALREADY_RESOLVED, INVALID_PARAMETERS) before anything reaches history.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcore.approvals import (
        APPROVAL_DECISION_CUSTOM_TYPE,
        APPROVAL_REQUEST_CUSTOM_TYPE,
        ApprovalDecision,
        ApprovalGate,
        ApprovalWaitSetAside,
        PendingApproval,
        approval,
        decision_entry_data,
        request_entry_data,
    )
    from agentcore.errors import AgentError
    from agentcore.protocol import (
        Accepted,
        ApprovalsState,
        ApproveRequest,
        ConversationInput,
        DenyRequest,
    )
    from agentcore.session.entries import CustomEntry

from .state import ConversationState, _refuse


class ApprovalHandlers(ConversationState):
    def _approval_gate(self, inp: ConversationInput) -> ApprovalGate:
        return ApprovalGate(
            wait_until=self._wait_for_decision,
            on_requested=self._approval_requested,
            on_resolved=self._approval_resolved,
            restored=list(inp.pending_approvals),
            persist=self._write_request,
        )

    async def _write_request(self) -> None:
        """The request entry (and whatever precedes it) is written before the wait begins, so the
        session file holds it while the conversation waits: a conversation recovered from the file
        asks again."""
        async with self.session.lock:
            if self.transcript.unwritten and not self.session.blocked:
                await self._flush()

    async def _wait_for_decision(self, decided: Callable[[], bool], timeout: float | None) -> bool:
        if timeout is not None and timeout <= 0:
            return decided()
        try:
            await workflow.wait_condition(
                lambda: decided() or self._set_aside_for_continue_as_new(),
                timeout=None if timeout is None else timedelta(seconds=timeout),
            )
        except TimeoutError:
            return decided()
        if not decided() and self._set_aside_for_continue_as_new():
            raise ApprovalWaitSetAside()
        return True

    def _set_aside_for_continue_as_new(self) -> bool:
        """Whether the run ends here so the conversation continues as new: its history is due for
        it (a wait of days gathers polls, signals and updates) and every call of the batch waits,
        none ran, so the next run asks for them all again, keeping their request time and expiry
        (``ConversationInput.pending_approvals``). A run must have grown half the limit itself, so
        a run that resumed calls never sets them aside again at once."""
        if self.subagents.run is not None:
            return False  # a sub-agent's conversation is its parent's call: it ends with its run
        if self.subagents.waiting:
            return False  # a child workflow of this run is going: the run waits for it whole
        waiting = {pending.tool_call_id for pending in self.approvals.pending()}
        length = self.runtime.task()
        return (
            bool(waiting)
            and waiting == self.runs.tool_calls
            and not self.runs.batch_ended
            and self._continue_as_new_due()
            and length - self.visibility.run_started_at >= self.limits.continue_as_new_after_events // 2
        )

    def _approval_requested(self, pending: PendingApproval) -> None:
        self.transcript.add(
            CustomEntry(custom_type=APPROVAL_REQUEST_CUSTOM_TYPE, data=request_entry_data(pending))
        )
        self._index()
        self._set_details()

    def _approval_resolved(self, pending: PendingApproval, decision: ApprovalDecision) -> None:
        self.transcript.add(
            CustomEntry(
                custom_type=APPROVAL_DECISION_CUSTOM_TYPE, data=decision_entry_data(pending, decision)
            )
        )
        self._index()
        self._set_details()

    def _check_decision(self, tool_call_id: str, decision: ApprovalDecision) -> None:
        try:
            self.approvals.check(tool_call_id, decision)
        except AgentError as err:
            raise _refuse(err.code, err.message) from None

    def _decide(self, request_id: str, tool_call_id: str, decision: ApprovalDecision) -> Accepted:
        new = self.approvals.check(tool_call_id, decision)
        if new:
            self.approvals.decide(tool_call_id, decision)
        status = "accepted" if new else "duplicate"
        return Accepted(id=request_id, status=status, message_count=self.transcript.message_count)

    @workflow.update(name="approve")
    async def approve(self, request: ApproveRequest) -> Accepted:
        return self._decide(request.id, request.tool_call_id, approval(request.args))

    @approve.validator
    def _validate_approve(self, request: ApproveRequest) -> None:
        self._check_decision(request.tool_call_id, approval(request.args))

    @workflow.update(name="deny")
    async def deny(self, request: DenyRequest) -> Accepted:
        decision = ApprovalDecision(decision="denied", reason=request.reason)
        return self._decide(request.id, request.tool_call_id, decision)

    @deny.validator
    def _validate_deny(self, request: DenyRequest) -> None:
        self._check_decision(request.tool_call_id, ApprovalDecision(decision="denied", reason=request.reason))

    @workflow.query(name="get_approvals")
    def get_approvals(self) -> ApprovalsState:
        return ApprovalsState(pending=self.approvals.pending())
