"""The conversation workflow's components under plain pytest: no Temporal server, no workflow.

Each component takes its ``workflow.*`` calls as seams (a payload converter, the history's size, the
clock, the search attribute upsert, the current details); the tests hand it plain functions instead.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import WorkflowStreamItem, WorkflowStreamState
from temporalio.converter import PayloadConverter
from temporalio.exceptions import ApplicationError

from agentcore import errors
from agentcore.approvals import PendingApproval
from agentcore.budget import EVENT_MAX_BYTES_UNDER_PRESSURE, HISTORY_PRESSURE_BYTES
from agentcore.events import LlmRetryEvent, MessageUpdateEvent, WakeupCancelledEvent
from agentcore.messages import AssistantMessage, TextContent, UserMessage
from agentcore.model import QueueMode
from agentcore.protocol import (
    ActivityEvents,
    ConversationLimits,
    PendingRun,
    QueuedMessage,
    RetryNote,
    SubagentRun,
)
from agentcore.temporal.connect import DATA_CONVERTER
from agentcore.tools import AgentToolResult
from agentcore.wakeups import Wakeup
from agentcore.workflows.event_log import PUBLISHERS_KEPT, EventLog
from agentcore.workflows.inbox import SEEN_IDS_KEPT, WAITING_PROMPTS_KEPT, Inbox
from agentcore.workflows.runs import Runs
from agentcore.workflows.session_writer import FLUSH_DELAY, SessionWriter
from agentcore.workflows.streaming import RETRIES_KEPT, StreamedMessage
from agentcore.workflows.subagent_links import Subagents
from agentcore.workflows.visibility import Details, IndexValues, Visibility
from agentcore.workflows.wakeup_timers import PendingWakeups

CONVERTER = DATA_CONVERTER.payload_converter
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def converter() -> PayloadConverter:
    return CONVERTER


class FakeStream:
    """``WorkflowStream`` and its topic handle as the event log uses them (the real one registers
    handlers on a running workflow)."""

    def __init__(self) -> None:
        self.published: list[Payload] = []
        self.base_offset = 0
        self.detached = False

    def topic(self, name: str) -> FakeStream:
        assert name == "events"
        return self

    def publish(self, payload: Payload) -> None:
        self.published.append(payload)

    def truncate(self, up_to_offset: int) -> None:
        del self.published[: up_to_offset - self.base_offset]
        self.base_offset = up_to_offset

    def detach_pollers(self) -> None:
        self.detached = True

    def get_state(self) -> WorkflowStreamState:
        log = [
            WorkflowStreamItem(topic="events", data=base64.b64encode(p.SerializeToString()).decode())
            for p in self.published
        ]
        return WorkflowStreamState(log=log, base_offset=self.base_offset)


def _log(
    history: int = 0, limits: ConversationLimits | None = None, **kw: Any
) -> tuple[EventLog, FakeStream]:
    stream = FakeStream()
    log = EventLog(
        stream,  # type: ignore[arg-type]
        limits or ConversationLimits(),
        converter=converter,
        history_size=lambda: history,
        **kw,
    )
    return log, stream


def _encoded(event: Any) -> str:
    return base64.b64encode(CONVERTER.to_payloads([event])[0].SerializeToString()).decode()


def _decoded(payload: Payload) -> Any:
    return CONVERTER.from_payloads([payload])[0]


# The event log.


def test_events_are_held_until_released_and_numbered_as_made() -> None:
    log, stream = _log()
    log.publish(LlmRetryEvent(attempt=2))
    log.publish(LlmRetryEvent(attempt=3))
    assert log.offset == 2 and stream.published == [] and len(log.held) == 2
    log.release()
    assert [_decoded(p)["attempt"] for p in stream.published] == [2, 3]
    assert log.held == [] and log.offset == 2
    assert log.retained_bytes == sum(p.ByteSize() for p in stream.published)


def test_a_delta_goes_without_its_partial_message() -> None:
    log, stream = _log()
    message = AssistantMessage(content=[TextContent(text="hello")], timestamp=1)
    log.publish(MessageUpdateEvent(assistant_message_event={"type": "text_delta"}, message=message))
    log.release()
    assert _decoded(stream.published[0])["message"] is None


def test_a_large_event_is_cut_harder_once_the_history_is_large() -> None:
    note = "x" * (EVENT_MAX_BYTES_UNDER_PRESSURE * 2)
    event = WakeupCancelledEvent(id="w", note=note, due_at=datetime(2025, 1, 1, tzinfo=UTC), reason="r")
    relaxed, _ = _log(history=0)
    pressed, _ = _log(history=HISTORY_PRESSURE_BYTES + 1)
    small = pressed.publish(event)
    assert small.ByteSize() <= EVENT_MAX_BYTES_UNDER_PRESSURE + 100  # the payload's metadata on top
    assert relaxed.publish(event).ByteSize() > small.ByteSize()


def test_a_batch_sent_again_applies_once_and_the_publishers_are_bounded() -> None:
    log, _ = _log()
    batch = ActivityEvents(publisher_id="p", sequence=1, items=[_encoded(LlmRetryEvent(attempt=2))])
    assert len(log.add_batch(batch)) == 1
    assert log.add_batch(batch) == []
    assert log.offset == 1
    for n in range(PUBLISHERS_KEPT):
        log.add_batch(ActivityEvents(publisher_id=f"q{n}", sequence=1, items=[]))
    # "p" was the oldest publisher: forgotten, its batch counts again.
    assert len(log.add_batch(batch)) == 1


def test_a_log_carried_over_goes_on_from_its_offset() -> None:
    log, stream = _log()
    for attempt in range(5):
        log.publish(LlmRetryEvent(attempt=attempt))
    log.truncate(keep=3)
    carried = log.carried(max_bytes=10_000)
    assert carried.base_offset == 2 and len(carried.log) == 3
    again = EventLog(stream, ConversationLimits(), carried, converter=converter)  # type: ignore[arg-type]
    assert again.offset == 5
    # Sized from base64 (4 characters for 3 bytes): within the padding of each event.
    assert abs(again.retained_bytes - sum(p.ByteSize() for p in stream.published)) <= 2 * 3
    log.detach_pollers()
    assert stream.detached


def test_carried_events_keep_the_newest_within_the_budget_and_cut_large_ones() -> None:
    log, _ = _log()
    log.publish(LlmRetryEvent(attempt=1))
    big = WakeupCancelledEvent(id="w", note="y" * 5_000, due_at=datetime(2025, 1, 1, tzinfo=UTC), reason="r")
    log.publish(big)
    log.release()
    carried = log.carried(max_bytes=2_000)
    # The large event is cut to a twentieth of the budget rather than dropped; the tail fits.
    assert sum(len(item.data) * 3 // 4 for item in carried.log) <= 2_000
    assert carried.base_offset + len(carried.log) == 2


# The message being streamed.


def _delta(text: str) -> Payload:
    event = MessageUpdateEvent(
        assistant_message_event={"type": "text_delta", "content_index": 0, "delta": text}
    )
    return CONVERTER.to_payloads([event])[0]


def _streaming() -> StreamedMessage:
    return StreamedMessage([], converter=converter)


def test_the_partial_message_folds_the_deltas_since_the_last_retry() -> None:
    streamed = _streaming()
    assert streamed.partial() is None
    streamed.add([_delta("lost")])  # nothing streams: dropped
    start = AssistantMessage(content=[TextContent(text="")], timestamp=1)
    streamed.start(start)
    streamed.add([_delta("Hel"), _delta("lo")])
    partial = streamed.partial()
    assert partial is not None and partial.content == [TextContent(text="Hello")]
    assert start.content == [TextContent(text="")]  # folded into a copy
    streamed.add([CONVERTER.to_payloads([LlmRetryEvent(attempt=2, error_message="boom")])[0]])
    assert streamed.partial() is None  # the failed attempt's text is void
    streamed.add([_delta("Hi")])
    partial = streamed.partial()
    assert partial is not None and partial.content == [TextContent(text="Hi")]
    streamed.end()
    streamed.record_retry("entry-1")
    assert streamed.message is None and streamed.partial() is None
    assert streamed.retries == [RetryNote(entry_id="entry-1", attempt=2, error_message="boom")]


def test_retries_are_bounded_and_a_message_without_one_records_none() -> None:
    streamed = StreamedMessage([RetryNote(entry_id=f"e{n}", attempt=2) for n in range(RETRIES_KEPT)])
    streamed.start(AssistantMessage(timestamp=1))
    streamed.record_retry("none")
    assert len(streamed.retries) == RETRIES_KEPT
    streamed.note_retry(LlmRetryEvent(attempt=3))
    streamed.record_retry("new")
    assert len(streamed.retries) == RETRIES_KEPT
    assert streamed.retries[0].entry_id == "e1" and streamed.retries[-1].entry_id == "new"


# The inbox.


def _queued(n: int) -> QueuedMessage:
    return QueuedMessage(id=f"m{n}", message=UserMessage(content=f"message {n}", timestamp=n))


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _inbox(limits: ConversationLimits | None = None, messages: int = 0) -> tuple[Inbox, Clock]:
    clock = Clock()
    return Inbox(limits or ConversationLimits(), lambda: messages, now_ms=clock), clock


def test_queued_messages_apply_once_and_are_taken_by_mode() -> None:
    inbox, _ = _inbox()
    assert inbox.queue_steering(_queued(1)) and not inbox.queue_steering(_queued(1))
    assert inbox.queue_follow_up(_queued(2)) and inbox.queue_follow_up(_queued(3))
    assert inbox.queued == (1, 2) and inbox.held() == 3
    assert [m.text for m in inbox.take_follow_up(QueueMode.ONE_AT_A_TIME)] == ["message 2"]
    assert [m.text for m in inbox.take_steering(QueueMode.ALL)] == ["message 1"]
    assert inbox.take_steering(QueueMode.ALL) == []
    assert inbox.recent_message_times == [1_000_000] * 3
    removed = inbox.clear("follow_up")
    assert [item.id for item in removed.follow_up] == ["m3"] and removed.steering == []
    assert inbox.queued == (0, 0)


def test_seen_ids_are_bounded_and_an_empty_id_is_never_seen() -> None:
    inbox, _ = _inbox()
    inbox.remember("")
    assert not inbox.seen("")
    assert inbox.first_time("a") and inbox.seen("a") and not inbox.first_time("a")
    for n in range(SEEN_IDS_KEPT + 1):
        inbox.remember(str(n))
    assert not inbox.seen("0") and inbox.seen("1") and len(inbox.seen_ids) == SEEN_IDS_KEPT


def test_the_rate_refuses_past_the_minute_and_the_window_opens_again() -> None:
    inbox, clock = _inbox(ConversationLimits(max_messages_per_minute=2))
    inbox.count_messages(1)
    clock.ms += 10_000
    inbox.count_messages(1)
    assert inbox.refusal(1) is not None
    with pytest.raises(ApplicationError) as refused:
        inbox.check_rate(1)
    assert refused.value.type == errors.RATE_LIMITED and refused.value.non_retryable
    assert inbox.rate_window_opens_at() == 1_060_000
    clock.ms = 1_060_000
    assert inbox.refusal(1) is None
    inbox.check_rate(1)


def test_queued_messages_count_toward_the_conversation_limit() -> None:
    inbox, _ = _inbox(ConversationLimits(max_messages=3), messages=2)
    assert inbox.refusal(1) is None
    inbox.queue_steering(_queued(1))
    assert inbox.refusal(1) is not None and "holds 3 messages" in (inbox.refusal(1) or "")


def test_waiting_prompts_are_bounded_oldest_first() -> None:
    inbox, _ = _inbox()
    for n in range(WAITING_PROMPTS_KEPT + 1):
        inbox.wait_for_run(f"p{n}", n)
    assert inbox.waiting_since("p0") is None and inbox.waiting_since("p1") == 1
    inbox.done_waiting("p1")
    assert inbox.waiting_since("p1") is None and len(inbox.waiting_prompts) == WAITING_PROMPTS_KEPT - 1


def test_an_inbox_carried_over_is_the_same() -> None:
    inbox, _ = _inbox()
    inbox.queue_steering(_queued(1))
    inbox.queue_follow_up(_queued(2))
    inbox.wait_for_run("p", 4)
    again = Inbox(
        ConversationLimits(),
        lambda: 0,
        steering=inbox.steering,
        follow_up=inbox.follow_up,
        seen_ids=inbox.seen_ids,
        recent_message_times=inbox.recent_message_times,
        waiting_prompts=inbox.waiting_prompts,
    )
    assert (again.steering, again.follow_up, again.seen_ids) == (
        inbox.steering,
        inbox.follow_up,
        inbox.seen_ids,
    )
    assert again.waiting_prompts == {"p": 4} and again.recent_message_times == inbox.recent_message_times


# Visibility.


def _visibility(enabled: bool = True) -> tuple[Visibility, list[IndexValues], list[str]]:
    upserts: list[IndexValues] = []
    details: list[str] = []
    return Visibility(enabled, upsert=upserts.append, set_details=details.append), upserts, details


def test_the_index_is_upserted_only_when_a_value_changed() -> None:
    visibility, upserts, _ = _visibility()
    idle = IndexValues("idle", "p/m", 0, 0.0)
    visibility.index(idle)
    visibility.index(idle)
    visibility.index(idle._replace(message_count=2))
    assert upserts == [idle, idle._replace(message_count=2)]
    off, none, _ = _visibility(enabled=False)
    off.index(idle)
    assert none == [] and not off.enabled


def test_a_run_is_indexed_as_running_only_once_it_outlasts_its_task() -> None:
    visibility, _, _ = _visibility()
    visibility.run_started(10)
    assert visibility.run_started_at == 10
    assert not visibility.running_due(lambda: 10) and visibility.running_due(lambda: 11)
    visibility.run_indexed()
    assert not visibility.running_due(lambda: 12)
    visibility.defer()
    assert visibility.deferred
    visibility.index(IndexValues("idle", "p/m", 1, 0.0))
    assert not visibility.deferred


def test_the_details_name_what_waits() -> None:
    visibility, _, details = _visibility()
    due = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    visibility.show(
        Details(
            values=IndexValues("running", "p/m", 3, 0.25),
            error_message="bad",
            steering=1,
            subagents=["waiting for sub-agent `s`"],
            wakeups=[Wakeup(id="w", note="n", due_at=due)],
            approvals=[PendingApproval(tool_call_id="c", tool_name="t", requested_at=0)],
        )
    )
    assert details == [
        "**running** · `p/m` · 3 messages · $0.2500\n\nerror: bad\n\nqueued: 1 steering, 0 follow-up"
        "\n\nwaiting for sub-agent `s`\n\nnext wake-up 2025-01-02 03:04:05 UTC · 1 pending"
        "\n\nwaiting for approval: `t` (call `c`) since 1970-01-01 00:00:00 UTC"
    ]


# Runs.


def test_a_run_goes_from_asked_for_to_ended() -> None:
    runs = Runs(count=2, error_message="old")
    assert not runs.busy and runs.status(awaiting_approval=True) == "idle"
    runs.request(PendingRun(id="r", kind="continue"))
    assert runs.busy and runs.pending is not None
    signal = runs.start()
    assert runs.pending is None and runs.running and runs.count == 3 and runs.error_message is None
    assert runs.status(awaiting_approval=False) == "running"
    assert runs.status(awaiting_approval=True) == "awaiting_approval"
    runs.tool_started("a")
    runs.tool_started("b")
    runs.tool_ended("a")
    assert runs.tool_calls == {"b"} and runs.batch_ended
    runs.batch_began()
    assert not runs.batch_ended
    assert runs.abort("stop") and signal.aborted and signal.reason == "stop"
    assert runs.status(awaiting_approval=False) == "aborting"
    runs.end()
    assert not runs.busy and runs.tool_calls == set() and runs.abort_signal is None
    assert not runs.abort("again")


def test_a_parent_abort_before_the_run_aborts_it_as_it_starts() -> None:
    runs = Runs(PendingRun(id="r", kind="prompt"))
    assert not runs.abort_from_parent("parent")
    assert runs.start().aborted


def test_a_manual_compaction_is_aborted_as_a_run_and_a_branch_is_not() -> None:
    runs = Runs()
    signal = runs.start_compaction(abortable=True)
    assert runs.busy and runs.abort_signal is signal
    runs.end_compaction(signal)
    assert not runs.busy and runs.abort_signal is None
    assert runs.start_compaction(abortable=False) is None and runs.compacting
    runs.end_compaction()
    assert not runs.compacting


def test_a_run_set_aside_resumes_in_the_next() -> None:
    runs = Runs(count=4)
    runs.start()
    waiting = [PendingApproval(tool_call_id="c", tool_name="t", requested_at=0)]
    runs.set_aside_for_approvals(waiting)
    runs.end()
    assert runs.set_aside == waiting
    assert runs.pending == PendingRun(id="resume-5", kind="resume")
    runs.roll_over()
    runs.ready()
    assert runs.rolling_over and runs.initialized


# The session file's writer.


def test_the_session_file_is_created_by_the_first_write_only() -> None:
    writer = SessionWriter(False, {"cwd": "/work", "title": "t"})
    create = writer.create("be brief")
    assert create is not None and create.cwd == "/work"
    assert create.metadata == {"system_prompt": "be brief", "title": "t"}
    assert writer.metadata == {"cwd": "/work", "title": "t"}  # the carried metadata keeps its cwd
    writer.written()
    assert writer.created and writer.create("be brief") is None


def test_a_failed_write_blocks_writes_until_the_next_run() -> None:
    writer = SessionWriter(True, {})
    writer.block()
    assert writer.blocked
    writer.run_started(T0)
    assert not writer.blocked
    error = ApplicationError("gone", type="SESSION_ERROR")
    writer.import_failed(error)
    assert writer.import_error is error


def test_idle_waiters_want_the_flush() -> None:
    writer = SessionWriter(True, {})
    writer.waiter_came()
    writer.waiter_came()
    writer.waiter_left()
    assert writer.waited_for
    writer.waiter_left()
    assert not writer.waited_for


def test_the_flush_is_paced_after_a_whole_pause_until_runs_come_back_to_back() -> None:
    writer = SessionWriter(True, {})
    writer.flush_waited(timed_out=True, run_came=False)
    assert writer.paced
    writer.run_ended(T0)
    writer.run_started(T0 + FLUSH_DELAY * 2)  # a pause: still paced
    assert writer.paced
    writer.run_ended(T0 + FLUSH_DELAY * 3)
    writer.run_started(T0 + FLUSH_DELAY * 3.5)  # back to back
    assert not writer.paced
    writer.flush_waited(timed_out=True, run_came=False)
    writer.flush_waited(timed_out=False, run_came=True)
    assert not writer.paced
    writer.flush_waited(timed_out=True, run_came=True)  # the run came in the task the timer fired in
    assert not writer.paced


# Sub-agent links.


def test_a_child_knows_its_run_and_its_result_and_a_parent_its_children() -> None:
    parent = Subagents("parent", None)
    assert parent.run is None and parent.progress is None and parent.outcome is None
    parent.wait_for("parent.sub.c1", "waiting for sub-agent `a`")
    assert parent.waits_for("parent.sub.c1") and parent.waiting == ["waiting for sub-agent `a`"]
    parent.done_waiting("parent.sub.c1")
    assert not parent.waits_for("parent.sub.c1") and parent.waiting == []
    run = SubagentRun(parent_session_id="parent", tool_call_id="c1", tool_name="a", arguments={"task": "t"})
    child = Subagents("parent.sub.c1", run)
    assert child.run is run and child.progress is not None
    result = AgentToolResult(content=[TextContent(text="done")])
    child.ended(result)
    assert child.outcome is result


# Wake-ups.


class FakeTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def _wakeup(wakeup_id: str, minutes: int) -> Wakeup:
    return Wakeup(id=wakeup_id, note=wakeup_id, due_at=T0 + timedelta(minutes=minutes))


def test_pending_wakeups_stay_soonest_first_with_their_timers() -> None:
    wakeups = PendingWakeups()
    timers = {name: FakeTimer() for name in ("late", "soon")}
    for name, minutes in (("late", 10), ("soon", 1)):
        wakeups.add(_wakeup(name, minutes))
        wakeups.time(name, timers[name])  # type: ignore[arg-type]
    assert [w.id for w in wakeups.pending] == ["soon", "late"] and len(wakeups) == 2
    assert wakeups.find("late") is not None and wakeups.find("none") is None
    assert wakeups.cancel("late").id == "late" and timers["late"].cancelled
    soon = wakeups.find("soon")
    assert soon is not None
    wakeups.fired(soon)
    assert not timers["soon"].cancelled and wakeups.pending == []


def test_a_tool_call_s_wakeup_is_announced_once() -> None:
    wakeups = PendingWakeups()
    wakeup = _wakeup("w", 5)
    wakeups.scheduled_by_tool("call", wakeup)
    assert wakeups.unannounced
    assert wakeups.announce("call") is wakeup and wakeups.announce("call") is None
    assert not wakeups.unannounced
