"""Events published from inside an activity (model deltas, tool progress), batched into signals.

Each batch is one ``activity_events`` signal to the conversation's run (``ActivityEvents``); the
workflow puts its events into the conversation's event stream after the ones it published itself.
A batch that fails to send is kept and sent again with the next one, under the same sequence
number, so the workflow applies it once.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowHandle

from agentcore.protocol import SIGNAL_ACTIVITY_EVENTS, ActivityEvents


class ActivityEventPublisher:
    """Buffers events; ``flush`` sends what is buffered as one signal (nothing when empty)."""

    def __init__(self, *, call_id: str = "", attempt: int = 0) -> None:
        self.pending: list[Any] = []
        # Unique per publisher: the workflow keeps the last sequence number it applied per id.
        self._publisher_id = uuid.uuid4().hex
        self._sequence = 0
        self._unsent: ActivityEvents | None = None
        # A batch another publisher could not send (``take_over``), sent first, under this one's name.
        self._carried: list[str] = []
        # The signal being sent, if any: it is never cancelled (``flush``).
        self._sending: asyncio.Task[bool] | None = None
        self.call_id = call_id
        self.attempt = attempt

    def take_over(self, other: ActivityEventPublisher) -> None:
        """Send what ``other`` holds (its unsent batch, then its buffered events) as this one's."""
        if other._unsent is not None:
            self._carried = [*other._unsent.items, *self._carried]
            other._unsent = None
        self.pending = [*other.pending, *self.pending]
        other.pending = []

    def publish(self, event: Any) -> None:
        self.pending.append(event)

    async def flush(self) -> None:
        """Send what is buffered (and a batch that failed before), one signal at a time.

        A send is never cancelled half-way: the server may be writing the signal when its RPC is
        cancelled, and a write cut short makes it drop the run's state held in memory, a workflow
        task in flight with it. The SDK then gets "workflow task not found" for that task and
        evicts the run, and an eviction with a query and a workflow task waiting for the run loses
        that task (it times out): the run is rebuilt from the query's history, ahead of its
        workflow task (``docs/versioning.md``). So a flush cancelled mid-send leaves its signal
        going; the next flush waits for it before it sends."""
        while True:
            if self._sending is not None and not self._sending.done():
                await asyncio.shield(self._sending)
            self._batch()
            if self._unsent is None:
                return
            info = activity.info()
            if info.workflow_id is None:
                self._unsent = None
                return
            handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
            self._sending = asyncio.ensure_future(self._send(handle, self._unsent))
            if not await asyncio.shield(self._sending) or not self.pending:
                return

    def _batch(self) -> None:
        """The buffered events as the next batch, unless one is still unsent."""
        if self._unsent is not None or not (self.pending or self._carried):
            return
        converter = activity.payload_converter()
        batch, self.pending = self.pending, []
        carried, self._carried = self._carried, []
        self._sequence += 1
        self._unsent = ActivityEvents(
            publisher_id=self._publisher_id,
            sequence=self._sequence,
            items=carried
            + [
                base64.b64encode(converter.to_payloads([event])[0].SerializeToString()).decode()
                for event in batch
            ],
            call_id=self.call_id,
            attempt=self.attempt,
        )

    async def _send(self, handle: WorkflowHandle[Any, Any], batch: ActivityEvents) -> bool:
        try:
            await handle.signal(SIGNAL_ACTIVITY_EVENTS, batch)
        except Exception as err:  # subscribers miss these for now; the result carries the outcome
            activity.logger.warning("activity events not sent yet: %s", err)
            return False
        if self._unsent is batch:
            self._unsent = None
        return True
