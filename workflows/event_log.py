"""The conversation's event log: the events it publishes to its Workflow Stream, numbered and sized.

The conversation workflow keeps its state in components it holds, each owning its fields (no other
code assigns them); its handlers stay on the workflow class (Temporal registers them there) and
delegate to them:

- ``EventLog`` (here): the stream's topic, the offset the next event gets, the retained events'
  sizes and their sum, the events held until the workflow waits, the activity publishers' last
  batches; publishing, retention, and the state carried across continue-as-new.
- ``StreamedMessage`` (``streaming.py``): the message being streamed, the deltas published for it,
  its last retry, and the retries ``get_state`` lists.
- ``Inbox`` (``inbox.py``): the steering and follow-up queues, the request ids seen, the times of
  the last minute's messages, the ``prompt_and_wait`` calls waiting.
- ``Visibility`` (``visibility.py``): whether the namespace has the search attributes, the values
  last upserted, the run to index as running, the deferred idle upsert; the current details.
- ``Runs`` (``runs.py``): the run asked for, the one going on (its abort, its tool calls, the batch's
  ended calls), the run count, the last error, compaction and roll-over, the calls set aside.
- ``SessionWriter`` (``session_writer.py``): whether the session file exists and may be written, the
  import's failure, the flush's pacing and the ``wait_for_idle`` calls that want it now.
- ``Subagents`` (``subagent_links.py``): the sub-agent run this conversation is, its progress and
  outcome; the children its run waits for and the decisions on their way to them.
- ``PendingWakeups`` (``wakeup_timers.py``): the pending wake-ups with their timers.
- Already objects of their own: the transcript (``agentcore.transcript``), the approvals
  (``agentcore.approvals.ApprovalGate``), the stats, the schedules list.

``TemporalRuntime`` sees the workflow through a narrow protocol (``runtime.Conversation``). Every
``workflow.*`` call a component makes goes through a seam it is given (a payload converter, the
history's size, the clock, the upsert), so the components run under plain pytest; inside the
workflow the seams are the ``workflow`` functions, called at the same points as before, so a replay
makes the same commands.
"""

from __future__ import annotations

import base64
import dataclasses
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState
from temporalio.converter import PayloadConverter

with workflow.unsafe.imports_passed_through():
    from agentcore.budget import (
        EVENT_MAX_BYTES,
        EVENT_MAX_BYTES_UNDER_PRESSURE,
        HISTORY_PRESSURE_BYTES,
        shrink_to_fit,
    )
    from agentcore.events import AgentEvent, CompactionEndEvent, CompactionStartEvent, MessageUpdateEvent
    from agentcore.protocol import EVENTS_TOPIC, ActivityEvents, ConversationLimits
    from agentcore.transcript import newest_within

# Activity publishers whose last batch is remembered (the oldest give way).
PUBLISHERS_KEPT = 2_000


def history_size() -> int:
    """The run's history size in bytes (``workflow.info``), the event log's default seam."""
    return workflow.info().get_current_history_size()


def payload_size(item: Any) -> int:
    """A carried log item's payload size: base64 of the serialized payload, 4 characters for 3 bytes."""
    return len(item.data) * 3 // 4


class EventLog:
    """The events subscribers read: the workflow is the stream's only writer, so the log tracks itself
    (offsets and sizes) instead of reading the stream's internals."""

    def __init__(
        self,
        stream: WorkflowStream,
        limits: ConversationLimits,
        prior_state: WorkflowStreamState | None = None,
        *,
        converter: Callable[[], PayloadConverter] = workflow.payload_converter,
        history_size: Callable[[], int] = history_size,
    ) -> None:
        self._stream = stream
        self._topic = stream.topic(EVENTS_TOPIC)
        self._limits = limits
        self._converter = converter
        self._history_size = history_size
        carried = prior_state.log if prior_state is not None else []
        # The offset the next event gets, and the byte sizes of the retained events (offsets
        # [_offset - len, _offset)) with their sum, for the retention budget (``truncate``).
        self._offset = (prior_state.base_offset if prior_state is not None else 0) + len(carried)
        self._sizes = deque(payload_size(item) for item in carried)
        self._bytes = sum(self._sizes)
        # Events made but not yet in the stream (``release``).
        self._held: list[Payload] = []
        # The last batch applied per activity publisher (``ActivityEvents``): a batch sent twice counts once.
        self._publishers: OrderedDict[str, int] = OrderedDict()

    @property
    def offset(self) -> int:
        """The offset the next event gets (``get_state``'s ``event_offset``)."""
        return self._offset

    @property
    def retained_bytes(self) -> int:
        """The bytes of the retained events, released or held."""
        return self._bytes

    @property
    def held(self) -> list[Payload]:
        """The events made and not yet in the stream, oldest first (a copy)."""
        return list(self._held)

    def publish(self, event: AgentEvent | CompactionStartEvent | CompactionEndEvent) -> Payload:
        """Put a loop event into the log, where subscribers' polls see it once it is released.

        Converted here rather than by the stream, the same way, so that an event too large for a
        poll's answer can be cut first (``agentcore.budget``; the session file keeps it whole)."""
        if isinstance(event, MessageUpdateEvent) and event.message is not None:
            # Deltas travel without the partial message: a subscriber rebuilds it, the log stays lean.
            event = event.model_copy(update={"message": None})
        converter = self._converter()
        payload = converter.to_payloads([event])[0]
        if payload.ByteSize() > EVENT_MAX_BYTES_UNDER_PRESSURE:
            limit = self.event_limit()
            if payload.ByteSize() > limit:
                payload = converter.to_payloads([shrink_to_fit(event, limit)])[0]
        self.append(payload)
        return payload

    def event_limit(self) -> int:
        """How large an event may be (``agentcore.budget``): smaller once the run's history is large.

        The events retained in the stream count as history already: a subscriber slower than the
        run reads them later, each poll answer recording them, so a run that releases large events
        faster than they are read would otherwise pass the pressure mark by all of its backlog."""
        if self._history_size() + self._bytes > HISTORY_PRESSURE_BYTES:
            return EVENT_MAX_BYTES_UNDER_PRESSURE
        return EVENT_MAX_BYTES

    def append(self, payload: Payload) -> None:
        self._held.append(payload)
        self._offset += 1
        self._sizes.append(payload.ByteSize())
        self._bytes += payload.ByteSize()

    def add_batch(self, batch: ActivityEvents) -> list[Payload]:
        """The events of an activity's batch (model deltas, tool progress), appended; none if the
        batch was applied already (sent again after a failed send).

        An event too large for a poll's answer (a tool's progress can carry anything) is cut first."""
        last = self._publishers.get(batch.publisher_id)
        if last is not None and batch.sequence <= last:
            return []
        self._publishers[batch.publisher_id] = batch.sequence
        self._publishers.move_to_end(batch.publisher_id)
        while len(self._publishers) > PUBLISHERS_KEPT:
            self._publishers.popitem(last=False)
        added: list[Payload] = []
        for item in batch.items:
            payload = Payload()
            payload.ParseFromString(base64.b64decode(item))
            if payload.ByteSize() > EVENT_MAX_BYTES_UNDER_PRESSURE:
                payload = self._fitted_payload(payload, self.event_limit())
            self.append(payload)
            added.append(payload)
        return added

    async def release_when_waiting(self) -> None:
        """Put the events made into the stream once the workflow waits (``release``)."""
        while True:
            await workflow.wait_condition(lambda: bool(self._held))
            # What woke with this may make more events in this activation: look once it ran.
            await workflow.wait_condition(lambda: True)
            self.release()

    def release(self) -> None:
        """Events go into the stream when the workflow waits (where its task ends), not as they are
        made. A poll's answer leaves the worker with the task's end only, so it comes no later for
        that; but a poll woken by a run's first event would answer with that one alone, and the
        subscriber's next poll would cost a workflow task of its own to fetch the rest of a run made
        in one task."""
        for payload in self._held:
            self._topic.publish(payload)
        self._held.clear()

    def truncate(self, keep: int | None = None, keep_bytes: int | None = None) -> None:
        """Bound the retained event log by count and by bytes (events can carry large tool output;
        the log is memory now and continue-as-new input later, which must stay far below 2 MB):
        keep its longest tail within both."""
        self.release()
        max_events = self._limits.retained_events if keep is None else keep
        max_bytes = self._limits.retained_event_bytes if keep_bytes is None else keep_bytes
        sizes = self._sizes
        dropped = 0
        while sizes and (len(sizes) > max_events or self._bytes > max_bytes):
            self._bytes -= sizes.popleft()
            dropped += 1
        if dropped:
            self._stream.truncate(self._offset - len(sizes))

    def detach_pollers(self) -> None:
        """Continuing as new: answer the pollers waiting now (they go on with the next run)."""
        self._stream.detach_pollers()

    def carried(self, max_bytes: int) -> WorkflowStreamState:
        """The stream's state for continue-as-new: its newest events within ``max_bytes``.

        A large event is cut (to a twentieth of the budget) rather than dropped whole: a subscriber still
        reading the run that just ended then gets each of its events, ``agent_end`` included, with
        large tool output shortened (the session file has it), instead of waiting for events that
        never come."""
        state = self._stream.get_state()
        log = [self._fitted(item, max_bytes // 20) for item in state.log]
        kept = newest_within(log, max_bytes, payload_size)
        return dataclasses.replace(state, log=kept, base_offset=state.base_offset + len(log) - len(kept))

    def _fitted(self, item: Any, limit: int) -> Any:
        """``item`` (a carried log item: an event as base64 of its payload) with the event cut to
        ``limit`` bytes if it is larger."""
        if payload_size(item) <= limit:
            return item
        raw = Payload()
        raw.ParseFromString(base64.b64decode(item.data))
        fitted = self._fitted_payload(raw, limit)
        return dataclasses.replace(item, data=base64.b64encode(fitted.SerializeToString()).decode())

    def _fitted_payload(self, payload: Payload, limit: int) -> Payload:
        """``payload`` (an event) with its longest strings cut to fit ``limit`` bytes, if it is larger."""
        if payload.ByteSize() <= limit:
            return payload
        converter = self._converter()
        event = converter.from_payloads([payload], [AgentEvent])[0]  # type: ignore[list-item]
        return converter.to_payloads([shrink_to_fit(event, limit)])[0]


__all__ = ["PUBLISHERS_KEPT", "EventLog"]
