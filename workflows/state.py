"""The conversation workflow's state and the helpers every handler shares (a base of the workflow class).

Split from the workflow class for reading's sake only: Temporal registers the handlers of the mixins
in ``commands.py`` and ``tree.py`` as if they were written on ``ConversationWorkflow``.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcore import errors
    from agentcore.approvals import ApprovalGate, PendingApproval
    from agentcore.budget import (
        EVENT_MAX_BYTES,
        EVENT_MAX_BYTES_UNDER_PRESSURE,
        HISTORY_PRESSURE_BYTES,
        shrink_to_fit,
    )
    from agentcore.events import (
        AgentEvent,
        CompactionEndEvent,
        CompactionStartEvent,
        LlmRetryEvent,
        MessageUpdateEvent,
    )
    from agentcore.messages import AssistantMessage, Message, ToolCall
    from agentcore.model import QueueMode
    from agentcore.partial import apply_deltas
    from agentcore.protocol import (
        ROLLING_OVER,
        ActivityEvents,
        BranchResult,
        ConversationConfig,
        ConversationLimits,
        DescribeToolsInput,
        DescribeToolsResult,
        PendingRun,
        QueuedMessage,
        RetryNote,
        SessionCreate,
        SubagentRun,
        within_last_minute,
    )
    from agentcore.runtime import AbortSignal
    from agentcore.schedules import RecurringMessage
    from agentcore.search_attributes import (
        AGENT_COST_USD,
        AGENT_MESSAGE_COUNT,
        AGENT_MODEL,
        AGENT_STATUS,
        AWAITING_APPROVAL,
    )
    from agentcore.session.entries import (
        SYSTEM_PROMPT_CUSTOM_TYPE,
        ActiveToolsChangeEntry,
        CustomEntry,
        ModelChangeEntry,
        ThinkingLevelChangeEntry,
    )
    from agentcore.session.stats import SessionStats
    from agentcore.temporal.search_attributes import search_attribute_keys
    from agentcore.tools import AgentToolResult, ToolSpec
    from agentcore.transcript import Transcript, newest_within
    from agentcore.wakeups import Wakeup

from . import policies
from .task_guard import TaskGuard

SEEN_IDS_KEPT = 2_000
DESCRIBE_TOOLS_ACTIVITY = "tools.describe"  # don't rename: recorded in histories


# How many retried model calls ``get_state`` remembers (``retries``): the newest.
RETRIES_KEPT = 200


def now_ms() -> int:
    """Workflow time in milliseconds: the same on replay."""
    return int(workflow.now().timestamp() * 1000)


def new_id() -> str:
    """An entry id from ``workflow.uuid4``: a replay makes the same one, so it appends the same entry."""
    return workflow.uuid4().hex


def _failure(err: ActivityError, default_code: str) -> tuple[str, str]:
    """An activity's failure as ``(code, message)``: its ApplicationError's type and message, else
    ``default_code`` and the error's text."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return cause.type or default_code, cause.message
    return default_code, str(cause or err)


def _fitted(item: Any, limit: int) -> Any:
    """``item`` (a carried log item: an event as base64 of its payload) with the event cut to
    ``limit`` bytes if it is larger."""
    if len(item.data) * 3 // 4 <= limit:
        return item
    raw = Payload()
    raw.ParseFromString(base64.b64decode(item.data))
    fitted = _fitted_payload(raw, limit)
    return dataclasses.replace(item, data=base64.b64encode(fitted.SerializeToString()).decode())


def _fitted_payload(payload: Payload, limit: int) -> Payload:
    """``payload`` (an event) with its longest strings cut to fit ``limit`` bytes, if it is larger."""
    if payload.ByteSize() <= limit:
        return payload
    converter = workflow.payload_converter()
    event = converter.from_payloads([payload], [AgentEvent])[0]  # type: ignore[list-item]
    return converter.to_payloads([shrink_to_fit(event, limit)])[0]


def _refuse(code: str, message: str) -> ApplicationError:
    # ``type`` carries the spec's code so the client rebuilds the same typed error.
    return ApplicationError(message, type=code, non_retryable=True)


class ConversationState:
    """What a conversation holds between events. ``ConversationWorkflow.__init__`` sets every field."""

    task_guard: TaskGuard
    stream: WorkflowStream
    events: Any
    session_id: str
    config: ConversationConfig
    limits: ConversationLimits
    session_created: bool
    session_metadata: dict[str, Any]
    transcript: Transcript
    stats: SessionStats
    steering: list[QueuedMessage]
    follow_up: list[QueuedMessage]
    pending_run: PendingRun | None
    seen_ids: OrderedDict[str, None]
    recent_message_times: list[int]
    error_message: str | None
    search_attributes: bool
    run_count: int
    running: bool
    abort_signal: AbortSignal | None
    streaming_message: AssistantMessage | None
    pending_tool_calls: set[str]
    write_blocked: bool
    # Why the session file a recovery named could not be placed (the conversation then ends).
    import_error: ApplicationError | None
    initialized: bool
    # Continuing as new: a new run (prompt, continue) is refused, for the client to send to the next.
    rolling_over: bool
    compacting: bool
    # Set when this conversation is a sub-agent's run (``subagents.py``).
    subagent: SubagentRun | None
    # The sub-agents (child workflows) this conversation's run waits for: child id -> what the
    # workflow's current details say of the wait.
    subagents_waiting: dict[str, str]
    # Pending wake-ups, soonest first (``wakeups.py``).
    wakeups: list[Wakeup]
    schedules: list[RecurringMessage]
    _forwarding: set[asyncio.Task[None]]
    # Tool calls waiting for a person (``workflows/approvals.py``); the lock keeps their waits from
    # writing the same entries twice at once.
    approvals: ApprovalGate
    # The calls of the current batch that ended, and the calls a run set aside asks again after
    # continue-as-new (``workflows/approvals.py``).
    batch_ended: set[str]
    approvals_to_carry: list[PendingApproval]
    _flush_lock: asyncio.Lock
    _flush: Callable[[], Awaitable[None]]
    _continue_as_new_due: Callable[[], bool]
    _indexed: tuple[Any, ...] | None
    # The events an activity published for the message being streamed (deltas, a retry notice), as
    # payloads: ``get_state`` folds them into the partial message, on demand.
    _streaming_payloads: list[Payload]
    # The last ``llm_retry`` of the message being streamed; at its end it becomes a ``RetryNote``.
    _retry: LlmRetryEvent | None
    # The newest messages whose model call was retried (``get_state``'s ``retries``), oldest first.
    retries: list[RetryNote]
    # The last batch applied per activity publisher (``ActivityEvents``): a batch sent twice counts once.
    _publishers: OrderedDict[str, int]
    runtime: Any  # the TemporalRuntime (model calls in flight)
    _indexer: asyncio.Task[None]
    # The history length when the current run started (see ``_index_runs_that_outlast_their_task``).
    _run_started_at: int
    idle_waiters: int
    waiting_prompts: dict[str, int]
    _index_running: bool
    _index_deferred: bool
    # The workflow is the stream's only writer, so it tracks the log itself: the offset the next
    # event gets, and the byte sizes of the retained events (offsets [_event_offset - len, _event_offset))
    # with their sum, for the retention budget (``_truncate_events``).
    _event_offset: int
    _log_sizes: deque[int]
    _log_bytes: int
    # Events made but not yet in the stream (``_release_events``).
    _held_events: list[Payload]
    _releaser: asyncio.Task[None]

    # Wake-ups (``WakeupHandlers`` in ``wakeups.py`` implements these).
    def _cancel_all_wakeups(self, reason: str) -> None:
        raise NotImplementedError

    def _wakeup_tool_call(self, spec: ToolSpec, call: ToolCall) -> AgentToolResult:
        raise NotImplementedError

    def _deliver_note(self, wakeup: Wakeup, now: datetime) -> None:
        raise NotImplementedError

    # Recurring messages (``ScheduleHandlers`` in ``schedules.py``).
    async def _delete_all_schedules(self) -> None:
        raise NotImplementedError

    def _publish(self, event: AgentEvent | CompactionStartEvent | CompactionEndEvent) -> None:
        """Put a loop event into the stream, where subscribers' polls see it.

        Converted here rather than by the stream, the same way, so that an event too large for a
        poll's answer can be cut first (``agentcore.budget``; the session file keeps it whole)."""
        if isinstance(event, LlmRetryEvent):
            self._retry = event
        if isinstance(event, MessageUpdateEvent) and event.message is not None:
            # Deltas travel without the partial message: a subscriber rebuilds it, the log stays lean.
            event = event.model_copy(update={"message": None})
        converter = workflow.payload_converter()
        payload = converter.to_payloads([event])[0]
        if payload.ByteSize() > EVENT_MAX_BYTES_UNDER_PRESSURE:
            limit = self._event_limit()
            if payload.ByteSize() > limit:
                payload = converter.to_payloads([shrink_to_fit(event, limit)])[0]
        self._append(payload)

    def _event_limit(self) -> int:
        """How large an event may be (``agentcore.budget``): smaller once the run's history is large.

        The events retained in the stream count as history already: a subscriber slower than the
        run reads them later, each poll answer recording them, so a run that releases large events
        faster than they are read would otherwise pass the pressure mark by all of its backlog."""
        if workflow.info().get_current_history_size() + self._log_bytes > HISTORY_PRESSURE_BYTES:
            return EVENT_MAX_BYTES_UNDER_PRESSURE
        return EVENT_MAX_BYTES

    def _append(self, payload: Payload) -> None:
        self._held_events.append(payload)
        self._event_offset += 1
        self._log_sizes.append(payload.ByteSize())
        self._log_bytes += payload.ByteSize()

    async def _release_held_events(self) -> None:
        """Put the events made into the stream once the workflow waits (``_release_events``)."""
        while True:
            await workflow.wait_condition(lambda: bool(self._held_events))
            # What woke with this may make more events in this activation: look once it ran.
            await workflow.wait_condition(lambda: True)
            self._release_events()

    def _release_events(self) -> None:
        """Events go into the stream when the workflow waits (where its task ends), not as they are
        made. A poll's answer leaves the worker with
        the task's end only, so it comes no later for that; but a poll woken by a run's first event
        would answer with that one alone, and the subscriber's next poll would cost a workflow task
        of its own to fetch the rest of a run made in one task."""
        for payload in self._held_events:
            self.events.publish(payload)
        self._held_events.clear()

    async def _index_runs_that_outlast_their_task(self) -> None:
        """A run still going in a later workflow task shows as running in the index; one that ends in
        the task it started in (a quick answer) goes straight to its idle upsert: one upsert, not two
        (each is a history event and a visibility write)."""
        while True:
            await workflow.wait_condition(
                lambda: self._index_running and self.runtime.task() > self._run_started_at
            )
            self._index_running = False
            self._index()

    def _add_activity_events(self, batch: ActivityEvents) -> None:
        """Events an activity published (model deltas, tool progress) go into the stream.

        An event too large for a poll's answer (a tool's progress can carry anything) is cut first."""
        if batch.call_id and not self.runtime.takes_events_of(batch.call_id, batch.attempt):
            return  # a model call's late deltas: that call ended, or a later attempt streams it
        last = self._publishers.get(batch.publisher_id)
        if last is not None and batch.sequence <= last:
            return  # sent again after a failed send: applied already
        self._publishers[batch.publisher_id] = batch.sequence
        self._publishers.move_to_end(batch.publisher_id)
        while len(self._publishers) > SEEN_IDS_KEPT:
            self._publishers.popitem(last=False)
        for item in batch.items:
            payload = Payload()
            payload.ParseFromString(base64.b64decode(item))
            if payload.ByteSize() > EVENT_MAX_BYTES_UNDER_PRESSURE:
                payload = _fitted_payload(payload, self._event_limit())
            self._append(payload)
            if self.streaming_message is not None:
                self._streaming_payloads.append(payload)
                if b"llm_retry" in payload.data:  # a cheap look before decoding (deltas are many)
                    self._note_retry(payload)

    def _note_retry(self, payload: Payload) -> None:
        event = workflow.payload_converter().from_payloads([payload])[0]
        if isinstance(event, dict) and event.get("type") == "llm_retry":
            self._retry = LlmRetryEvent.model_validate(event)

    def _record_retry(self, entry_id: str | None) -> None:
        """The message being streamed ended as ``entry_id``: keep its retry, if its call had one."""
        retry, self._retry = self._retry, None
        if retry is None or entry_id is None:
            return
        self.retries.append(
            RetryNote(entry_id=entry_id, attempt=retry.attempt, error_message=retry.error_message)
        )
        del self.retries[:-RETRIES_KEPT]

    def streamed_message(self, *, deltas_only: bool = False) -> AssistantMessage | None:
        """What subscribers were shown of the message being streamed: the deltas its model activity
        published since the last ``llm_retry``, folded into a copy of it; None if there are none.
        ``deltas_only``: a block's text as its deltas make it, not as its ``*_end`` event restates it
        (a UI that shows deltas shows that)."""
        if self.streaming_message is None:
            return None
        converter = workflow.payload_converter()
        deltas: list[dict[str, Any]] = []
        for payload in self._streaming_payloads:
            event = converter.from_payloads([payload])[0]
            if not isinstance(event, dict):
                continue
            if event.get("type") == "message_update":
                delta = event.get("assistant_message_event") or {}
                if not (deltas_only and delta.get("type") in ("text_end", "thinking_end")):
                    deltas.append(delta)
            elif event.get("type") == "llm_retry":
                deltas.clear()  # the failed attempt's text is void: the retry streams the message afresh
        if not deltas:
            return None
        partial = self.streaming_message.model_copy(deep=True)
        apply_deltas(partial, deltas)
        return partial

    def _take_steering(self) -> list[Message]:
        return self._take(self.steering, self.config.steering_mode)

    def _take_follow_up(self) -> list[Message]:
        return self._take(self.follow_up, self.config.follow_up_mode)

    @staticmethod
    def _take(queue: list[QueuedMessage], mode: QueueMode) -> list[Message]:
        if not queue:
            return []
        taken = queue[:] if mode == QueueMode.ALL else queue[:1]
        del queue[: len(taken)]
        return [item.message for item in taken]

    def session_create(self) -> SessionCreate | None:
        """How to create the session file, until an activity has created it."""
        if self.session_created:
            return None
        metadata = {"system_prompt": self.config.system_prompt, **self.session_metadata}
        return SessionCreate(cwd=metadata.pop("cwd", None), metadata=metadata)

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

    def _truncate_events(self, keep: int | None = None, keep_bytes: int | None = None) -> None:
        """Bound the retained event log by count and by bytes (events can carry large tool output;
        the log is memory now and continue-as-new input later, which must stay far below 2 MB):
        keep its longest tail within both."""
        self._release_events()
        max_events = self.limits.retained_events if keep is None else keep
        max_bytes = self.limits.retained_event_bytes if keep_bytes is None else keep_bytes
        sizes = self._log_sizes
        dropped = 0
        while sizes and (len(sizes) > max_events or self._log_bytes > max_bytes):
            self._log_bytes -= sizes.popleft()
            dropped += 1
        if dropped:
            self.stream.truncate(self._event_offset - len(sizes))

    def _carried_events(self, max_bytes: int) -> WorkflowStreamState:
        """The stream's state for continue-as-new: its newest events within ``max_bytes``.

        A large event is cut (to a twentieth of the budget) rather than dropped whole: a subscriber still
        reading the run that just ended then gets each of its events, ``agent_end`` included, with
        large tool output shortened (the session file has it), instead of waiting for events that
        never come."""
        state = self.stream.get_state()
        log = [_fitted(item, max_bytes // 20) for item in state.log]
        kept = newest_within(log, max_bytes, lambda item: len(item.data) * 3 // 4)
        return dataclasses.replace(state, log=kept, base_offset=state.base_offset + len(log) - len(kept))

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

    def _busy(self) -> bool:
        return self.running or self.compacting or self.pending_run is not None

    def _seen(self, request_id: str) -> bool:
        return bool(request_id) and request_id in self.seen_ids

    def _remember(self, request_id: str) -> None:
        if not request_id:
            return
        self.seen_ids[request_id] = None
        while len(self.seen_ids) > SEEN_IDS_KEPT:
            self.seen_ids.popitem(last=False)

    def _check_rate(self, incoming: int) -> None:
        """RATE_LIMITED (SPEC-9.1) unless ``incoming`` more messages fit; queued messages count as held
        (each becomes a message of the conversation)."""
        refusal = self._refusal(incoming)
        if refusal is not None:
            raise _refuse(errors.RATE_LIMITED, refusal)

    def _refusal(self, incoming: int) -> str | None:
        """Why ``incoming`` more messages do not fit (SPEC-9.1), or None."""
        return self.limits.refusal(self._held(), self.recent_message_times, now_ms(), incoming)

    def _held(self) -> int:
        return self.transcript.message_count + len(self.steering) + len(self.follow_up)

    def _count_messages(self, count: int) -> None:
        now = now_ms()
        self.recent_message_times = [*within_last_minute(self.recent_message_times, now), *[now] * count]

    def _refuse_if_rolling_over(self) -> None:
        if self.rolling_over:
            raise _refuse(ROLLING_OVER, "The conversation is continuing as new; send this again.")

    def _refuse_if_busy(self, what: str) -> None:
        if self._busy():
            raise _refuse(errors.AGENT_BUSY, f"Cannot {what} while the agent is running.")

    def _status(self) -> Any:
        if self.abort_signal is not None and self.abort_signal.aborted:
            return "aborting"
        if self.running and self.approvals.is_waiting():
            return AWAITING_APPROVAL
        return "running" if self.running else "idle"

    def _index(self) -> None:
        """Keep the conversation findable in the UI: status, model, message count, cost."""
        self._index_deferred = False
        if not self.search_attributes:
            return
        model = self.config.model
        values = (
            self._status(),
            f"{model.provider}/{model.id}",
            self.transcript.message_count,
            self.stats.cost_total,
        )
        if values == self._indexed:
            return
        self._indexed = values
        keys = search_attribute_keys()
        workflow.upsert_search_attributes(
            [
                keys[AGENT_STATUS].value_set(values[0]),
                keys[AGENT_MODEL].value_set(values[1]),
                keys[AGENT_MESSAGE_COUNT].value_set(values[2]),
                keys[AGENT_COST_USD].value_set(values[3]),
            ]
        )

    def _set_details(self) -> None:
        model = self.config.model
        lines = [
            f"**{self._status()}** · `{model.provider}/{model.id}` · {self.transcript.message_count} messages "
            f"· ${self.stats.cost_total:.4f}",
        ]
        if self.error_message:
            lines.append(f"error: {self.error_message}")
        if self.steering or self.follow_up:
            lines.append(f"queued: {len(self.steering)} steering, {len(self.follow_up)} follow-up")
        lines.extend(self.subagents_waiting.values())
        if self.wakeups:
            lines.append(
                f"next wake-up {self.wakeups[0].due_at:%Y-%m-%d %H:%M:%S} UTC · {len(self.wakeups)} pending"
            )
        if self.running:
            for pending in self.approvals.pending():
                since = datetime.fromtimestamp(pending.requested_at / 1000, UTC)
                lines.append(
                    f"waiting for approval: `{pending.tool_name}` (call `{pending.tool_call_id}`) "
                    f"since {since:%Y-%m-%d %H:%M:%S} UTC"
                )
        workflow.set_current_details("\n\n".join(lines))
