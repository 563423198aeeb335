"""Recurring messages to a durable conversation, through Temporal Schedules.

``DurableAgent.schedule(text, every=timedelta(hours=1))`` (or ``cron="0 9 * * MON-FRI"``; the CLI's
``agentcore schedule SESSION --every 1h TEXT``) makes a Temporal Schedule, visible and pausable in the
Web UI, whose action starts a tiny workflow (``agentcore.ScheduledMessage``) that signals the text to
the conversation; the conversation takes it as it takes a fired wake-up (a run, or a follow-up when a
run is going). Overlapping actions are skipped and missed ones caught up for a minute only, so a
conversation that was down for a day gets one message, not twenty-four.

The conversation creates and deletes its schedules itself (the ``schedules.create`` /
``schedules.delete`` activities), so it knows them: ``reset`` deletes them, and a schedule whose
conversation is gone (terminated) deletes itself the next time it fires.

These are the wire models; the workflow and activities live in ``workflows/`` and ``activities/``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Literal

from .errors import ValidationError
from .messages import WireModel

SCHEDULED_MESSAGE_WORKFLOW = "agentcore.ScheduledMessage"  # don't rename: recorded in schedules
SIGNAL_SCHEDULED_MESSAGE = "scheduled_message"
UPDATE_ADD_SCHEDULE = "add_schedule"
UPDATE_DELETE_SCHEDULE = "delete_schedule"
# Missed actions (the server was down) are caught up within this window only.
CATCHUP_WINDOW = timedelta(minutes=1)
# Temporal refuses intervals under a second; a conversation prompted more often than this is a loop.
MIN_EVERY = timedelta(seconds=1)
MAX_SCHEDULES = 20

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$")
_UNIT_SECONDS = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_every(text: str) -> timedelta:
    """``30s``, ``15m``, ``1h``, ``2d`` (a bare number is seconds)."""
    match = _DURATION.match(text)
    if match is None:
        raise ValidationError(f"every: {text!r} is not a duration like 30s, 15m, 1h or 1d")
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


class RecurringMessage(WireModel):
    """One of a conversation's schedules (``get_state().schedules``)."""

    type: Literal["recurring_message"] = "recurring_message"
    id: str  # the Temporal Schedule's id
    text: str
    every_seconds: float | None = None
    cron: str | None = None
    created_at: datetime | None = None

    def describe(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron}"
        seconds = self.every_seconds or 0
        return f"every {timedelta(seconds=seconds)}"


class AddScheduleRequest(WireModel):
    id: str
    text: str
    every_seconds: float | None = None
    cron: str | None = None


class DeleteScheduleRequest(WireModel):
    id: str = ""
    schedule_id: str


class ScheduledMessageInput(WireModel):
    """What a schedule's action starts ``agentcore.ScheduledMessage`` with."""

    session_id: str
    schedule_id: str
    text: str


class ScheduledMessage(WireModel):
    """The signal a schedule's run sends the conversation (``id``: that run's workflow id, unique per
    action, so a signal sent twice is taken once)."""

    id: str
    schedule_id: str
    text: str
    sent_at: datetime


class CreateScheduleInput(WireModel):
    """``schedules.create``: the Temporal Schedule for ``message`` on ``session_id``."""

    session_id: str
    task_queue: str
    message: RecurringMessage
    search_attributes: bool = False


class DeleteSchedulesInput(WireModel):
    schedule_ids: list[str]


def check_schedule(request: AddScheduleRequest) -> None:
    if not request.text.strip():
        raise ValidationError("text: a scheduled message needs text")
    if (request.every_seconds is None) == (request.cron is None):
        raise ValidationError("a schedule takes exactly one of every (a duration) or cron (an expression)")
    if request.every_seconds is not None and request.every_seconds < MIN_EVERY.total_seconds():
        raise ValidationError(f"every: at least {MIN_EVERY.total_seconds():.0f} s")
    cron = request.cron
    if cron is not None and not cron.startswith("@") and len(cron.split()) not in (5, 6, 7):
        raise ValidationError(f"cron: {request.cron!r} is not a cron expression (5 fields: m h dom mon dow)")
