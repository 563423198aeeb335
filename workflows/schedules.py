"""Recurring messages (``agentcore.schedules``): a conversation's Temporal Schedules, and the tiny
workflow their actions start.

A Schedule can only start a workflow, so each action starts ``ScheduledMessageWorkflow``, which
signals the text to the conversation (``scheduled_message``) and ends: no activity, one short
workflow per action, listed under the schedule in the Web UI. The conversation takes the text as it
takes a fired wake-up. It creates and deletes its schedules itself, through activities
(``schedules.create`` / ``schedules.delete``), so it knows them: ``reset`` deletes them, and a
schedule whose conversation is gone (terminated) is deleted by its next action.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from agentcore import errors
    from agentcore.errors import AgentError
    from agentcore.protocol import Accepted
    from agentcore.schedules import (
        MAX_SCHEDULES,
        SIGNAL_SCHEDULED_MESSAGE,
        AddScheduleRequest,
        CreateScheduleInput,
        DeleteScheduleRequest,
        DeleteSchedulesInput,
        RecurringMessage,
        ScheduledMessage,
        ScheduledMessageInput,
        check_schedule,
    )
    from agentcore.wakeups import Wakeup

from . import policies
from .state import ConversationState, _failure, _refuse

CREATE_SCHEDULE_ACTIVITY = "schedules.create"  # don't rename: recorded in histories
DELETE_SCHEDULES_ACTIVITY = "schedules.delete"  # don't rename: recorded in histories


class ScheduleHandlers(ConversationState):
    # The conversation's schedules, carried across continue-as-new (``ConversationInput.schedules``).
    schedules: list[RecurringMessage]

    @workflow.update(name="add_schedule")
    async def add_schedule(self, request: AddScheduleRequest) -> RecurringMessage:
        existing = next((item for item in self.schedules if item.id == request.id), None)
        if existing is not None:
            return existing  # sent again: the first one stands
        message = RecurringMessage(
            id=request.id,
            text=request.text,
            every_seconds=request.every_seconds,
            cron=request.cron,
            created_at=workflow.now(),
        )
        try:
            await workflow.execute_activity(
                CREATE_SCHEDULE_ACTIVITY,
                CreateScheduleInput(
                    session_id=self.session_id,
                    task_queue=workflow.info().task_queue,
                    message=message,
                    search_attributes=self.visibility.enabled,
                ),
                start_to_close_timeout=policies.SCHEDULES.start_to_close,
                retry_policy=policies.SCHEDULES.retry,
                summary=f"schedule {message.describe()}",
            )
        except ActivityError as err:
            code, reason = _failure(err, errors.VALIDATION_ERROR)
            raise _refuse(code, f"the schedule could not be made: {reason}") from None
        if all(item.id != message.id for item in self.schedules):
            self.schedules.append(message)
            self._set_details()
        return message

    @add_schedule.validator
    def _validate_add_schedule(self, request: AddScheduleRequest) -> None:
        if any(item.id == request.id for item in self.schedules):
            return
        try:
            check_schedule(request)
        except AgentError as err:
            raise _refuse(err.code, err.message) from None
        if len(self.schedules) >= MAX_SCHEDULES:
            raise _refuse(errors.VALIDATION_ERROR, f"a conversation has at most {MAX_SCHEDULES} schedules")

    @workflow.update(name="delete_schedule")
    async def delete_schedule(self, request: DeleteScheduleRequest) -> Accepted:
        await self._delete_schedules([request.schedule_id])
        return self._accepted(request.id)

    @delete_schedule.validator
    def _validate_delete_schedule(self, request: DeleteScheduleRequest) -> None:
        if all(item.id != request.schedule_id for item in self.schedules):
            raise _refuse(errors.SCHEDULE_NOT_FOUND, f"no schedule with id {request.schedule_id!r}")

    async def _delete_schedules(self, schedule_ids: list[str]) -> None:
        """Delete Temporal Schedules of this conversation; none is asked for unless it has some."""
        self.schedules = [item for item in self.schedules if item.id not in schedule_ids]
        self._set_details()
        if schedule_ids:
            await workflow.execute_activity(
                DELETE_SCHEDULES_ACTIVITY,
                DeleteSchedulesInput(schedule_ids=schedule_ids),
                start_to_close_timeout=policies.SCHEDULES.start_to_close,
                retry_policy=policies.SCHEDULES.retry,
                summary=f"delete {len(schedule_ids)} schedule(s)",
            )

    async def _delete_all_schedules(self) -> None:
        if self.schedules:
            await self._delete_schedules([item.id for item in self.schedules])

    @workflow.signal(name=SIGNAL_SCHEDULED_MESSAGE)
    def scheduled_message(self, message: ScheduledMessage) -> None:
        # A schedule deleted (or reset away) whose last action was already under way: dropped.
        if self.inbox.seen(message.id) or all(item.id != message.schedule_id for item in self.schedules):
            return
        self.inbox.remember(message.id)
        refusal = self.inbox.refusal(1)
        if refusal is not None:  # a signal cannot be refused: dropped, as a hand-sent steer is
            workflow.logger.warning("scheduled message dropped (%s): %s", errors.RATE_LIMITED, refusal)
            return
        self._deliver_note(
            Wakeup(id=message.schedule_id, note=message.text, due_at=message.sent_at, source="schedule"),
            workflow.now(),
        )


@workflow.defn(name="agentcore.ScheduledMessage")
class ScheduledMessageWorkflow:
    """What a conversation's Schedule starts at each action: deliver the text, then end."""

    @workflow.run
    async def run(self, inp: ScheduledMessageInput) -> str:
        conversation = workflow.get_external_workflow_handle(inp.session_id)
        message = ScheduledMessage(
            id=workflow.info().workflow_id, schedule_id=inp.schedule_id, text=inp.text, sent_at=workflow.now()
        )
        try:
            await conversation.signal(SIGNAL_SCHEDULED_MESSAGE, message)
        except Exception:  # the conversation is gone (terminated, completed): so is its schedule
            await workflow.execute_activity(
                DELETE_SCHEDULES_ACTIVITY,
                DeleteSchedulesInput(schedule_ids=[inp.schedule_id]),
                start_to_close_timeout=policies.SCHEDULES.start_to_close,
                retry_policy=policies.SCHEDULES.retry,
                summary=f"delete {inp.schedule_id}: {inp.session_id} is not running",
            )
            return f"{inp.session_id} is not running; schedule {inp.schedule_id} deleted"
        return f"delivered to {inp.session_id}"


__all__ = ["ScheduleHandlers", "ScheduledMessageWorkflow"]
