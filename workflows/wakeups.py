"""Wake-ups in the conversation workflow: each pending one is a workflow timer (``workflow.sleep`` in a
task), so a waiting conversation holds no activity and no open workflow task.

A timer that comes due while no worker runs is recorded by the server; the next worker's task sees it
fired and the wake-up fires then, once (a replay takes the same path). Pending wake-ups are carried
across continue-as-new (``ConversationInput.wakeups``) and become timers again in the next run; the
session file records each one (``agentcore.wakeups``) so ``recover`` rebuilds them.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcore import errors
    from agentcore.errors import AgentError
    from agentcore.events import WakeupCancelledEvent, WakeupFiredEvent
    from agentcore.messages import ToolCall
    from agentcore.protocol import Accepted, PendingRun, QueuedMessage
    from agentcore.tools import AgentToolResult, ToolSpec
    from agentcore.wakeups import (
        CancelWakeupRequest,
        ScheduleWakeupRequest,
        Wakeup,
        cancelled_entry,
        check_note,
        due_time,
        fired_entry,
        lateness,
        plan_tool_wakeup,
        scheduled_entry,
        scheduled_event,
        subagent_refusal,
        wakeup_message,
    )

from .state import ConversationState, _refuse, now_ms


class WakeupHandlers(ConversationState):
    def _start_wakeups(self, carried: list[Wakeup]) -> None:
        """Timers for the wake-ups a previous run (or ``recover``) handed over."""
        for wakeup in carried:
            self._hold_wakeup(wakeup, record=False)

    @workflow.update(name="schedule_wakeup")
    async def schedule_wakeup(self, request: ScheduleWakeupRequest) -> Wakeup:
        existing = self.wakeups.find(request.id)
        if existing is not None or self.inbox.seen(request.id):
            # Sent again (same id): the first one stands.
            return existing or Wakeup(id=request.id, note=request.note, due_at=workflow.now())
        self.inbox.remember(request.id)
        now = workflow.now()
        wakeup = Wakeup(
            id=request.id,
            note=request.note,
            due_at=due_time(now, request.due_at, request.delay_seconds),
            scheduled_at=now,
        )
        self._hold_wakeup(wakeup)
        self.publish(scheduled_event(wakeup))
        return wakeup

    @schedule_wakeup.validator
    def _validate_schedule_wakeup(self, request: ScheduleWakeupRequest) -> None:
        if self.inbox.seen(request.id) or self.wakeups.find(request.id) is not None:
            return
        try:
            check_note(request.note)
            due_time(workflow.now(), request.due_at, request.delay_seconds)
        except AgentError as err:
            raise _refuse(err.code, err.message) from None
        if not request.id:
            raise _refuse(errors.VALIDATION_ERROR, "id: a wake-up needs an id")
        if len(self.wakeups) >= self.limits.max_pending_wakeups:
            raise _refuse(
                errors.WAKEUP_LIMIT,
                f"{len(self.wakeups)} wake-ups are pending; the limit is {self.limits.max_pending_wakeups}",
            )

    @workflow.update(name="cancel_wakeup")
    async def cancel_wakeup(self, request: CancelWakeupRequest) -> Accepted:
        if self.inbox.first_time(request.id):
            self._cancel_wakeup(request.wakeup_id, "cancelled")
        return self._accepted(request.id)

    @cancel_wakeup.validator
    def _validate_cancel_wakeup(self, request: CancelWakeupRequest) -> None:
        if self.inbox.seen(request.id):
            return
        if self.wakeups.find(request.wakeup_id) is None:
            raise _refuse(errors.WAKEUP_NOT_FOUND, f"no pending wake-up with id {request.wakeup_id!r}")

    def _cancel_wakeup(self, wakeup_id: str, reason: str) -> None:
        wakeup = self.wakeups.cancel(wakeup_id)
        self.transcript.add(cancelled_entry(wakeup, reason))
        self.publish(
            WakeupCancelledEvent(id=wakeup.id, note=wakeup.note, due_at=wakeup.due_at, reason=reason)
        )
        self._set_details()

    def _cancel_all_wakeups(self, reason: str) -> None:
        for wakeup in self.wakeups.pending:
            self._cancel_wakeup(wakeup.id, reason)

    def _hold_wakeup(self, wakeup: Wakeup, *, record: bool = True) -> None:
        self.wakeups.add(wakeup)
        if record:
            self.transcript.add(scheduled_entry(wakeup))
        self.wakeups.time(wakeup.id, asyncio.create_task(self._wake_at(wakeup), name=f"wake-up {wakeup.id}"))
        self._set_details()

    async def _wake_at(self, wakeup: Wakeup) -> None:
        delay = wakeup.due_at - workflow.now()
        if delay > timedelta(0):
            # A timer: the server fires it whether or not a worker runs then.
            await workflow.sleep(delay, summary=f"wake-up: {wakeup.note[:100]}")
        # Not while a compaction rewrites the context: the run it starts would race it.
        await workflow.wait_condition(lambda: not self.runs.compacting)
        # Its note is a message like any other (SPEC-9.1): past the per-minute rate it waits for the
        # window to free; with the conversation full it cannot come, and is cancelled, saying why.
        while (refusal := self.inbox.refusal(1)) is not None:
            if self.inbox.held() + 1 > self.limits.max_messages:
                self._cancel_wakeup(wakeup.id, f"{errors.RATE_LIMITED}: {refusal}")
                return
            opens = self.inbox.rate_window_opens_at()
            await workflow.sleep(max(0.001, (opens - now_ms()) / 1000), summary="wake-up: rate limit")
            await workflow.wait_condition(lambda: not self.runs.compacting)
        self._fire(wakeup, workflow.now())

    def _fire(self, wakeup: Wakeup, now: datetime) -> None:
        self.wakeups.fired(wakeup)
        self.transcript.add(fired_entry(wakeup, now))
        self._deliver_note(wakeup, now)

    def _deliver_note(self, wakeup: Wakeup, now: datetime) -> None:
        """Run the conversation with ``wakeup``'s note (a fired wake-up, a schedule's message)."""
        self.publish(
            WakeupFiredEvent(
                id=wakeup.id, note=wakeup.note, due_at=wakeup.due_at, late_seconds=lateness(wakeup, now)
            )
        )
        message = wakeup_message(wakeup, now)
        self.inbox.count_messages(1)
        if self.runs.running or self.runs.pending is not None:
            # A run is going (or about to start): it takes the note when it would otherwise stop.
            self.inbox.add_follow_up(
                QueuedMessage(id=f"wakeup-{wakeup.id}-{now.timestamp()}", message=message)
            )
        else:
            # Idle, or continuing as new (the pending run is carried over and starts in the next run).
            self.runs.request(
                PendingRun(id=f"wakeup-{wakeup.id}-{now.timestamp()}", kind="prompt", messages=[message])
            )
        self._set_details()

    def wakeup_tool_call(self, spec: ToolSpec, call: ToolCall) -> AgentToolResult:
        """A ``wakeup_tool`` call, carried out here: a timer, no activity."""
        if self.subagents.run is not None:
            return subagent_refusal(spec)
        wakeup, result = plan_tool_wakeup(
            spec,
            call,
            now=workflow.now(),
            new_id=workflow.uuid4().hex,
            pending=len(self.wakeups),
            max_pending=self.limits.max_pending_wakeups,
        )
        if wakeup is not None:
            self._hold_wakeup(wakeup)
            self.wakeups.scheduled_by_tool(call.id, wakeup)
        return result

    def _announce_tool_wakeup(self, tool_call_id: str) -> None:
        """After a ``wakeup_tool`` call's end event: the wake-up it scheduled (as in-process)."""
        wakeup = self.wakeups.announce(tool_call_id)
        if wakeup is not None:
            self.publish(scheduled_event(wakeup))
