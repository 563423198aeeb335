"""``schedules.create`` and ``schedules.delete``: a conversation's Temporal Schedules
(``agentcore.schedules``), made and removed through the worker's client (``activity.client()``)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agentcore.errors import VALIDATION_ERROR
from agentcore.schedules import (
    CATCHUP_WINDOW,
    SCHEDULED_MESSAGE_WORKFLOW,
    CreateScheduleInput,
    DeleteSchedulesInput,
    ScheduledMessageInput,
)
from agentcore.search_attributes import AGENT_SESSION_ID
from agentcore.temporal.search_attributes import search_attribute_keys


@activity.defn(name="schedules.create")  # don't rename: recorded in histories
async def create_schedule(inp: CreateScheduleInput) -> None:
    message = inp.message
    spec = (
        ScheduleSpec(cron_expressions=[message.cron])
        if message.cron is not None
        else ScheduleSpec(
            intervals=[ScheduleIntervalSpec(every=timedelta(seconds=message.every_seconds or 0))]
        )
    )
    search_attributes = None
    if inp.search_attributes:
        key = search_attribute_keys()[AGENT_SESSION_ID]
        search_attributes = TypedSearchAttributes([SearchAttributePair(key, inp.session_id)])
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            SCHEDULED_MESSAGE_WORKFLOW,
            ScheduledMessageInput(session_id=inp.session_id, schedule_id=message.id, text=message.text),
            id=message.id,
            task_queue=inp.task_queue,
            execution_timeout=timedelta(minutes=10),
            static_summary=f"to {inp.session_id}: {message.text[:80]}",
        ),
        spec=spec,
        # One message at a time, and a short catch-up: a conversation whose server was down for a
        # day gets one message, not one per missed interval.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP, catchup_window=CATCHUP_WINDOW),
        state=ScheduleState(note=f"agentcore: {message.describe()} to {inp.session_id}"),
    )
    try:
        await activity.client().create_schedule(message.id, schedule, search_attributes=search_attributes)
    except ScheduleAlreadyRunningError:
        return  # a retried attempt: the first one made it
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise ApplicationError(err.message, type=VALIDATION_ERROR, non_retryable=True) from None
        raise


@activity.defn(name="schedules.delete")  # don't rename: recorded in histories
async def delete_schedules(inp: DeleteSchedulesInput) -> None:
    client = activity.client()
    for schedule_id in inp.schedule_ids:
        try:
            await client.get_schedule_handle(schedule_id).delete()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:  # gone already: what was asked
                raise
