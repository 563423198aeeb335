"""A conversation's sub-agent links: to its parent (a child's progress and result) and to its children
(the ones its run waits for). ``subagents.py`` starts the children and handles their reports."""

from __future__ import annotations

import asyncio
import base64

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcore.approvals import PendingApproval
    from agentcore.events import AgentEvent, ToolExecutionUpdateEvent
    from agentcore.protocol import (
        SIGNAL_ACTIVITY_EVENTS,
        SIGNAL_SUBAGENT_APPROVALS,
        ActivityEvents,
        SubagentApprovals,
        SubagentRun,
    )
    from agentcore.subagents import subagent_progress
    from agentcore.tools import AgentToolResult


class ParentProgress:
    """What a child tells its parent, in order, one signal at a time: its turns and tool calls as
    ``tool_execution_update`` events of the call that started it (``activity_events``; a batch
    carries what came meanwhile), and the calls it waits on for approval (``subagent_approvals``)."""

    def __init__(self, session_id: str, run: SubagentRun) -> None:
        self.session_id = session_id
        self.run = run
        self.turns = 0
        # Serialized progress events (base64 payloads) and approval reports, in the order they came.
        self._outbox: list[str | SubagentApprovals] = []
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
        self._send_soon(base64.b64encode(payload.SerializeToString()).decode())

    def report_approvals(self, pending: list[PendingApproval]) -> None:
        self._send_soon(SubagentApprovals(session_id=self.session_id, pending=pending))

    def _send_soon(self, item: str | SubagentApprovals) -> None:
        self._outbox.append(item)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())

    async def _send(self) -> None:
        parent = workflow.get_external_workflow_handle(self.run.parent_session_id)
        while self._outbox:
            first = self._outbox[0]
            arg: SubagentApprovals | ActivityEvents
            if isinstance(first, SubagentApprovals):
                del self._outbox[0]
                name, arg = SIGNAL_SUBAGENT_APPROVALS, first
            else:
                count = next(
                    (i for i, item in enumerate(self._outbox) if not isinstance(item, str)), len(self._outbox)
                )
                items = [item for item in self._outbox[:count] if isinstance(item, str)]
                del self._outbox[:count]
                self._sequence += 1
                name = SIGNAL_ACTIVITY_EVENTS
                arg = ActivityEvents(
                    publisher_id=f"subagent:{self.session_id}", sequence=self._sequence, items=items
                )
            try:
                await parent.signal(name, arg)
            except Exception:  # the parent is gone; nobody is left to read the progress
                self._outbox = []
                return

    async def drained(self) -> None:
        """Return once everything was delivered: it must reach the parent before the call's result."""
        while self._sender is not None and not self._sender.done():
            await self._sender


class Subagents:
    """A conversation's sub-agent side. As a child: its run (the call that started it), the progress it
    sends its parent and the call's result. As a parent: the children its run waits for and the
    approval decisions on their way to them."""

    def __init__(self, session_id: str, run: SubagentRun | None) -> None:
        self._run = run
        # Its progress goes to the parent; its run's result is the workflow's.
        self._progress = ParentProgress(session_id, run) if run is not None else None
        self._outcome: AgentToolResult | None = None
        # Child id -> what the workflow's current details say of the wait.
        self._waiting: dict[str, str] = {}
        self._forwarding: set[asyncio.Task[None]] = set()

    @property
    def run(self) -> SubagentRun | None:
        """Set when this conversation is a sub-agent's run."""
        return self._run

    @property
    def progress(self) -> ParentProgress | None:
        return self._progress

    @property
    def outcome(self) -> AgentToolResult | None:
        """The call's result, once this sub-agent's run ended."""
        return self._outcome

    @property
    def waiting(self) -> list[str]:
        """One line per child the run waits for (the current details')."""
        return list(self._waiting.values())

    def ended(self, outcome: AgentToolResult) -> None:
        self._outcome = outcome

    def waits_for(self, child_id: str) -> bool:
        return child_id in self._waiting

    def wait_for(self, child_id: str, line: str) -> None:
        self._waiting[child_id] = line

    def done_waiting(self, child_id: str) -> None:
        del self._waiting[child_id]

    def keep(self, sending: asyncio.Task[None]) -> None:
        """Hold a decision on its way to a child (the event loop keeps only a weak reference)."""
        self._forwarding.add(sending)
        self._forwarding = {task for task in self._forwarding if not task.done()}


__all__ = ["ParentProgress", "Subagents"]
