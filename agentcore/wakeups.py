"""Wake-ups: a conversation that runs again later, with a note for itself.

``schedule_wakeup(note, at=..., after=...)`` on either runtime (or the model, through
``wakeup_tool()``) asks for a user message carrying ``note`` at a future time. When it comes due the
conversation runs with that message, or, if a run is going, takes it as a follow-up. The durable
conversation waits on a workflow timer (no activity, no held workflow task; carried across
continue-as-new; a timer that came due while no worker ran fires once a worker is back); the
in-process ``Agent`` waits on an asyncio timer, which does not survive the process.

The session file records each wake-up as ``custom`` entries (``wakeup_scheduled``, ``wakeup_fired``,
``wakeup_cancelled``), so a conversation recovered from its file has its pending wake-ups again.

Everything here is pure (no clock, no ids of its own): both runtimes, the workflow included, call it.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

from pydantic import Field

from .errors import WAKEUP_LIMIT, ValidationError, WakeupInPastError
from .events import WakeupScheduledEvent
from .messages import TextContent, ToolCall, UserMessage, WireModel
from .session.entries import CustomEntry, SessionEntry
from .tool_exec import check_arguments_by_schema, error_result
from .tools import AgentTool, AgentToolResult, ToolSpec

__all__ = [
    "WAKEUP_TOOL_NAME",
    "Wakeup",
    "due_time",
    "pending_wakeups",
    "wakeup_message",
    "wakeup_tool",
]

WAKEUP_TOOL_NAME = "schedule_wakeup"
# ``ToolSpec.runtime_tool`` of ``wakeup_tool()``: the conversation carries the call out itself.
WAKEUP_RUNTIME_TOOL = "wakeup"
# Custom entry types in the session file (``recover`` reads them back).
WAKEUP_SCHEDULED = "wakeup_scheduled"
WAKEUP_FIRED = "wakeup_fired"
WAKEUP_CANCELLED = "wakeup_cancelled"
MAX_NOTE_CHARS = 4_000

WakeupSource = Literal["user", "tool", "schedule"]
_T = TypeVar("_T")


class Wakeup(WireModel):
    """A pending wake-up: ``get_state().wakeups`` lists them, soonest first."""

    type: Literal["wakeup"] = "wakeup"
    id: str
    note: str
    due_at: datetime
    scheduled_at: datetime | None = None
    # Who asked: the application (``schedule_wakeup``), the model (``wakeup_tool``), or a recurring
    # schedule (``agentcore.schedules``; then ``id`` is the schedule's).
    source: WakeupSource = "user"
    tool_call_id: str | None = None


class ScheduleWakeupRequest(WireModel):
    """The durable ``schedule_wakeup`` update: ``due_at``, or ``delay_seconds`` from the workflow's now
    (so a client's clock skew does not move it)."""

    id: str
    note: str
    due_at: datetime | None = None
    delay_seconds: float | None = None


class CancelWakeupRequest(WireModel):
    id: str = ""
    wakeup_id: str


def check_note(note: str) -> str:
    if not isinstance(note, str) or not note.strip():
        raise ValidationError("note: a wake-up needs a non-empty note")
    if len(note) > MAX_NOTE_CHARS:
        raise ValidationError(f"note: at most {MAX_NOTE_CHARS} characters ({len(note)} given)")
    return note


def aware(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is taken as local time, as ``datetime.now()`` makes it."""
    return moment.astimezone(UTC)


def due_time(now: datetime, at: datetime | None, after: timedelta | float | None) -> datetime:
    """When a wake-up asked for with ``at`` or ``after`` (exactly one) comes due; a time not after
    ``now`` is refused with ``WakeupInPastError``."""
    if (at is None) == (after is None):
        raise ValidationError("schedule_wakeup takes exactly one of at= (a datetime) or after= (a timedelta)")
    if at is not None:
        due = aware(at)
    else:
        seconds = after.total_seconds() if isinstance(after, timedelta) else float(after or 0)
        due = now + timedelta(seconds=seconds)
    if due <= now:
        raise WakeupInPastError(
            f"the wake-up time {due.isoformat()} is not in the future (now {now.isoformat()})"
        )
    return due


def describe_delay(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def lateness(wakeup: Wakeup, fired_at: datetime) -> float:
    """Seconds between when ``wakeup`` was due and when it fired (0 when on time)."""
    return max(0.0, (fired_at - wakeup.due_at).total_seconds())


def wakeup_message(wakeup: Wakeup, fired_at: datetime) -> UserMessage:
    """The user message a wake-up runs the conversation with: its note, and when it was due (and how
    late it fired: a timer that came due while nothing ran fires when something runs again)."""
    late = lateness(wakeup, fired_at)
    due = wakeup.due_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    lag = f"{late:.1f} s" if late < 10 else describe_delay(late)
    timing = f"due {due}, fired {lag} late"
    label = "scheduled message" if wakeup.source == "schedule" else "wake-up"
    text = f"[{label}] {wakeup.note}\n({timing})"
    return UserMessage(content=[TextContent(text=text)], timestamp=int(fired_at.timestamp() * 1000))


def scheduled_event(wakeup: Wakeup) -> WakeupScheduledEvent:
    return WakeupScheduledEvent(id=wakeup.id, note=wakeup.note, due_at=wakeup.due_at, source=wakeup.source)


def insert_sorted(wakeups: list[Wakeup], wakeup: Wakeup) -> None:
    wakeups.append(wakeup)
    wakeups.sort(key=lambda item: item.due_at)


# ------------------------------------------------------------------------------------ session file


def scheduled_entry(wakeup: Wakeup) -> CustomEntry:
    return CustomEntry(custom_type=WAKEUP_SCHEDULED, data=wakeup.model_dump(mode="json"))


def fired_entry(wakeup: Wakeup, fired_at: datetime) -> CustomEntry:
    return CustomEntry(custom_type=WAKEUP_FIRED, data={"id": wakeup.id, "fired_at": fired_at.isoformat()})


def cancelled_entry(wakeup: Wakeup, reason: str) -> CustomEntry:
    return CustomEntry(custom_type=WAKEUP_CANCELLED, data={"id": wakeup.id, "reason": reason})


def pending_wakeups(entries: Iterable[SessionEntry]) -> list[Wakeup]:
    """The wake-ups a session file records as scheduled and neither fired nor cancelled, soonest first
    (what ``recover`` gives the new conversation)."""
    pending: dict[str, Wakeup] = {}
    for entry in entries:
        if not isinstance(entry, CustomEntry) or not isinstance(entry.data, dict):
            continue
        if entry.custom_type == WAKEUP_SCHEDULED:
            wakeup = Wakeup.model_validate(entry.data)
            pending[wakeup.id] = wakeup
        elif entry.custom_type in (WAKEUP_FIRED, WAKEUP_CANCELLED):
            pending.pop(str(entry.data.get("id")), None)
    return sorted(pending.values(), key=lambda item: item.due_at)


# ------------------------------------------------------------------------------------------ the tool


class _WakeupArgs(WireModel):
    note: str
    delay_seconds: float = Field(gt=0)


def wakeup_tool(
    *,
    name: str = WAKEUP_TOOL_NAME,
    min_delay: timedelta = timedelta(seconds=60),
    max_delay: timedelta = timedelta(days=30),
    description: str | None = None,
) -> AgentTool:
    """A tool the model calls to check back later: ``{"note": ..., "delay_seconds": ...}``.

    The conversation carries the call out itself (durably a workflow timer, no activity), within its
    limits: nothing sooner than ``min_delay`` or later than ``max_delay``, and at most
    ``ConversationLimits.max_pending_wakeups`` pending. A refused call is an error result the model
    reads. Register it like any tool: in ``Agent(tools=[...])``, or on a worker and named in
    ``AgentOptions.tools``."""
    low, high = min_delay.total_seconds(), max_delay.total_seconds()

    def execute(tool_call_id: str, arguments: Any, signal: Any, on_update: Any) -> AgentToolResult:
        # Reached only outside a conversation (the runtimes intercept the call by its spec).
        return error_result(
            "TOOL_NOT_SUPPORTED", f'"{name}" is carried out by an agent conversation, not on its own.'
        )

    return AgentTool(
        name=name,
        label="Schedule a wake-up",
        description=description
        or (
            "Schedule a check-back: after delay_seconds you get a user message carrying your note "
            "(for example: look at the deploy again in 30 minutes). Use it instead of waiting. "
            f"delay_seconds between {low:.0f} and {high:.0f}."
        ),
        parameters={
            "type": "object",
            "properties": {
                "note": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_NOTE_CHARS,
                    "description": "What to do when you wake up: written for yourself, it is all you get.",
                },
                "delay_seconds": {
                    "type": "number",
                    "minimum": low,
                    "maximum": high,
                    "description": "How many seconds from now.",
                },
            },
            "required": ["note", "delay_seconds"],
            "additionalProperties": False,
        },
        execute=execute,
        runtime_tool=WAKEUP_RUNTIME_TOOL,
    )


def is_wakeup_tool(tool: AgentTool | ToolSpec) -> bool:
    return tool.runtime_tool == WAKEUP_RUNTIME_TOOL


def subagent_refusal(tool: AgentTool | ToolSpec) -> AgentToolResult:
    """What a sub-agent's ``wakeup_tool`` call gets: its conversation ends with its task, so a wake-up
    would never reach anyone."""
    return error_result(
        "TOOL_NOT_SUPPORTED",
        f'"{tool.name}" is not available to a sub-agent: its conversation ends with its task. Say in '
        "your answer what should be checked again, and when.",
    )


def plan_tool_wakeup(
    tool: AgentTool | ToolSpec,
    call: ToolCall,
    *,
    now: datetime,
    new_id: str,
    pending: int,
    max_pending: int,
) -> tuple[Wakeup | None, AgentToolResult]:
    """The wake-up a ``wakeup_tool`` call asks for and the result the model reads, or None and an
    error result (bad arguments, too many pending). Both runtimes call this; they then hold the
    wake-up as if ``schedule_wakeup`` had been called."""
    spec = tool if isinstance(tool, ToolSpec) else tool.spec()
    refused = check_arguments_by_schema(spec.model_copy(update={"schema_checks_arguments": True}), call)
    if refused is not None:
        return None, refused
    if pending >= max_pending:
        return None, error_result(
            WAKEUP_LIMIT,
            f"{pending} wake-ups are pending already; the limit is {max_pending}. "
            "Wait for one to fire before scheduling another.",
        )
    args = _WakeupArgs.model_validate(call.arguments)
    wakeup = Wakeup(
        id=new_id,
        note=args.note,
        due_at=now + timedelta(seconds=args.delay_seconds),
        scheduled_at=now,
        source="tool",
        tool_call_id=call.id,
    )
    due = wakeup.due_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    result = AgentToolResult.text(
        f"Wake-up {wakeup.id} scheduled for {due} (in {describe_delay(args.delay_seconds)}). "
        "You will get a user message with your note then.",
        details={"wakeup_id": wakeup.id, "due_at": wakeup.due_at.isoformat(), "note": wakeup.note},
    )
    return wakeup, result


# ------------------------------------------------------------------------------ in-process results


class WakeupId(str):
    """A wake-up's id, as the in-process ``Agent.schedule_wakeup`` returns it: a plain ``str`` that
    can also be awaited (giving itself), so code written for a ``DurableAgent``, whose methods are
    coroutines, runs on an ``Agent`` unchanged."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, str]:
        return _value(str(self)).__await__()


class Cancelled:
    """What the in-process ``Agent.cancel_wakeup`` returns: nothing to use, but awaitable (giving
    None) for the same reason as ``WakeupId``."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return _value(None).__await__()

    def __repr__(self) -> str:
        return "Cancelled()"


async def _value(value: _T) -> _T:
    return value
