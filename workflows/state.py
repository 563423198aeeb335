"""The conversation workflow's components and the helpers every handler shares (a base of the workflow class).

The handlers of the mixins (``commands.py``, ``tree.py``, ...) are registered by Temporal as if they
were written on ``ConversationWorkflow``; they hold no state of their own: it lives in the components
this class declares (``event_log.py`` lists them), beside the settings, transcript and stats.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcore import errors
    from agentcore.approvals import ApprovalGate
    from agentcore.events import AgentEvent, CompactionEndEvent, CompactionStartEvent, LlmRetryEvent
    from agentcore.messages import AssistantMessage, Message, ToolCall
    from agentcore.protocol import (
        ROLLING_OVER,
        Accepted,
        ActivityEvents,
        BranchResult,
        ConversationConfig,
        ConversationLimits,
        DescribeToolsInput,
        DescribeToolsResult,
        SessionCreate,
    )
    from agentcore.schedules import RecurringMessage
    from agentcore.session.entries import (
        SYSTEM_PROMPT_CUSTOM_TYPE,
        ActiveToolsChangeEntry,
        CustomEntry,
        ModelChangeEntry,
        ThinkingLevelChangeEntry,
    )
    from agentcore.session.stats import SessionStats
    from agentcore.tools import AgentToolResult, ToolSpec
    from agentcore.transcript import Transcript
    from agentcore.wakeups import Wakeup

from . import policies
from .event_log import EventLog
from .inbox import Inbox
from .runs import Runs
from .runtime import TemporalRuntime
from .session_writer import SessionWriter
from .shared import failure as _failure
from .shared import new_id, now_ms
from .shared import refuse as _refuse
from .streaming import StreamedMessage
from .subagent_links import Subagents
from .task_guard import TaskGuard
from .visibility import Details, IndexValues, Visibility
from .wakeup_timers import PendingWakeups

__all__ = ["ConversationState", "_failure", "_refuse", "new_id", "now_ms"]

DESCRIBE_TOOLS_ACTIVITY = "tools.describe"  # don't rename: recorded in histories


class ConversationState:
    """What a conversation holds between events: its settings, transcript and stats, and the
    components that hold the rest. ``ConversationWorkflow.__init__`` sets every field."""

    task_guard: TaskGuard
    # The components (``event_log.py`` says what each holds).
    event_log: EventLog
    streaming: StreamedMessage
    inbox: Inbox
    visibility: Visibility
    session_id: str
    config: ConversationConfig
    limits: ConversationLimits
    session: SessionWriter
    transcript: Transcript
    stats: SessionStats
    runs: Runs
    # Its sub-agents, or its parent (``subagents.py``).
    subagents: Subagents
    # Pending wake-ups, soonest first (``wakeups.py``).
    wakeups: PendingWakeups
    schedules: list[RecurringMessage]
    # Tool calls waiting for a person (``workflows/approvals.py``).
    approvals: ApprovalGate
    _flush: Callable[[], Awaitable[None]]
    _continue_as_new_due: Callable[[], bool]
    runtime: TemporalRuntime  # model calls and tool calls in flight
    _indexer: asyncio.Task[None]
    _releaser: asyncio.Task[None]

    # Wake-ups (``WakeupHandlers`` in ``wakeups.py`` implements these).
    def _cancel_all_wakeups(self, reason: str) -> None:
        raise NotImplementedError

    def wakeup_tool_call(self, spec: ToolSpec, call: ToolCall) -> AgentToolResult:
        raise NotImplementedError

    def _deliver_note(self, wakeup: Wakeup, now: datetime) -> None:
        raise NotImplementedError

    # Recurring messages (``ScheduleHandlers`` in ``schedules.py``).
    async def _delete_all_schedules(self) -> None:
        raise NotImplementedError

    def publish(self, event: AgentEvent | CompactionStartEvent | CompactionEndEvent) -> None:
        """Put a loop event into the event log (subscribers see it once the workflow waits)."""
        if isinstance(event, LlmRetryEvent):
            self.streaming.note_retry(event)
        self.event_log.publish(event)

    async def _index_runs_that_outlast_their_task(self) -> None:
        """A run still going in a later workflow task shows as running in the index; one that ends in
        the task it started in (a quick answer) goes straight to its idle upsert: one upsert, not two
        (each is a history event and a visibility write)."""
        while True:
            await workflow.wait_condition(lambda: self.visibility.running_due(self.runtime.task))
            self.visibility.run_indexed()
            self._index()

    def _add_activity_events(self, batch: ActivityEvents) -> None:
        """Events an activity published (model deltas, tool progress) go into the event log, and the
        deltas of the message being streamed into its partial."""
        if batch.call_id and not self.runtime.takes_events_of(batch.call_id, batch.attempt):
            return  # a model call's late deltas: that call ended, or a later attempt streams it
        self.streaming.add(self.event_log.add_batch(batch))

    def streamed_message(self, *, deltas_only: bool = False) -> AssistantMessage | None:
        """What subscribers were shown of the message being streamed (``StreamedMessage.partial``)."""
        return self.streaming.partial(deltas_only=deltas_only)

    def session_create(self) -> SessionCreate | None:
        """How to create the session file, until an activity has created it."""
        return self.session.create(self.config.system_prompt)

    def session_written(self) -> None:
        """An activity wrote to the session file: it exists now."""
        self.session.written()

    async def _describe_tools(self, names: list[str]) -> tuple[list[ToolSpec], list[str]]:
        """Specs for ``names`` from the workers' registry, and the names none of them registers."""
        result: DescribeToolsResult = await workflow.execute_activity(
            DESCRIBE_TOOLS_ACTIVITY,
            DescribeToolsInput(names=names),
            result_type=DescribeToolsResult,
            start_to_close_timeout=policies.DESCRIBE_TOOLS.start_to_close,
            retry_policy=policies.DESCRIBE_TOOLS.retry,
            summary=f"describe {', '.join(names)}",
        )
        return result.tools, result.unknown

    def _record_settings_off_path(self, result: BranchResult) -> None:
        """The conversation keeps its settings across a branch or a reset; the file must say so on
        the new path (recovery reads only the path): record each setting the path does not hold as
        it is now. A branch back to the start, or a reset, holds none (``BranchResult()``)."""
        config = self.config
        if result.model != config.model:
            self.transcript.add(ModelChangeEntry(model=config.model))
        if result.thinking_level != config.thinking_level:
            self.transcript.add(ThinkingLevelChangeEntry(thinking_level=config.thinking_level))
        names = [tool.name for tool in config.tools] or list(config.tool_names)
        if (result.active_tools or []) != names:
            self.transcript.add(ActiveToolsChangeEntry(active_tools=names))
        if (result.system_prompt or "") != config.system_prompt:
            self.transcript.add(CustomEntry(custom_type=SYSTEM_PROMPT_CUSTOM_TYPE, data=config.system_prompt))

    def _accepted(self, request_id: str, *, duplicate: bool = False) -> Accepted:
        """An update's answer: accepted (or a duplicate of one), with the conversation's message count."""
        if duplicate:
            return Accepted(id=request_id, status="duplicate", message_count=self.transcript.message_count)
        return Accepted(id=request_id, message_count=self.transcript.message_count)

    def _refuse_if_rolling_over(self) -> None:
        if self.runs.rolling_over:
            raise _refuse(ROLLING_OVER, "The conversation is continuing as new; send this again.")

    def _refuse_if_busy(self, what: str) -> None:
        if self.runs.busy:
            raise _refuse(errors.AGENT_BUSY, f"Cannot {what} while the agent is running.")

    def _status(self) -> str:
        return self.runs.status(self.approvals.is_waiting())

    def _index_values(self) -> IndexValues:
        model = self.config.model
        return IndexValues(
            self._status(),
            f"{model.provider}/{model.id}",
            self.transcript.message_count,
            self.stats.cost_total,
        )

    def _index(self) -> None:
        """Keep the conversation findable in the UI: status, model, message count, cost."""
        self.visibility.index(self._index_values())

    def _set_details(self) -> None:
        steering, follow_up = self.inbox.queued
        self.visibility.show(
            Details(
                values=self._index_values(),
                error_message=self.runs.error_message,
                steering=steering,
                follow_up=follow_up,
                subagents=self.subagents.waiting,
                wakeups=self.wakeups.pending,
                approvals=self.approvals.pending() if self.runs.running else [],
            )
        )

    def _take_steering(self) -> list[Message]:
        return self.inbox.take_steering(self.config.steering_mode)

    def _take_follow_up(self) -> list[Message]:
        return self.inbox.take_follow_up(self.config.follow_up_mode)
