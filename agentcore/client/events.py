"""A durable conversation's event stream: polled, resumed after failures that pass, and fanned out
to listeners (``DurableAgent.events``, ``subscribe``)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError

from ..errors import EXECUTION_ABORTED
from ..events import AGENT_EVENT_ADAPTER, AgentEvent
from ..messages import AssistantMessage
from ..protocol import EVENTS_TOPIC
from ..runtime import AbortSignal
from .calls import TRANSIENT_RPC_STATUSES, UNPROCESSED_UPDATE, ConversationCalls

# The module's name before ``agentcore.client`` became a package: logging set up for it still applies.
logger = logging.getLogger("agentcore.client")

Listener = Callable[[AgentEvent, AbortSignal], Any]

# ``DurableAgent.events``: how long a subscription keeps polling again through failures that pass
# (the server restarting, overloaded), and its pauses in between.
RECONNECT_TIMEOUT = timedelta(minutes=2)
RECONNECT_FIRST_PAUSE = 0.1
RECONNECT_MAX_PAUSE = 2.0


class _RunSignal:
    """The ``signal`` a durable listener gets with each event (SPEC-5.2): the abort of the run the
    event belongs to, as the in-process ``Agent`` passes its run's signal.

    A new run (``agent_start``) gets a fresh signal. It fires when this handle's ``abort`` is called
    during the run, and, for an abort sent from elsewhere, when the events show it (an assistant
    message or a tool result that ended aborted)."""

    def __init__(self, live: set[AbortSignal]) -> None:
        self._live = live
        self._current = AbortSignal()
        live.add(self._current)

    def for_event(self, event: AgentEvent) -> AbortSignal:
        """The signal to pass with ``event``: a fresh one from each ``agent_start`` on."""
        if event.type == "agent_start":
            self.close()
            self._current = AbortSignal()
            self._live.add(self._current)
        signal = self._current
        if _shows_abort(event):
            signal.abort()
        if event.type == "agent_end":
            self._live.discard(signal)  # the run is over: a later abort is not this run's
        return signal

    def close(self) -> None:
        """Let go of the current run's signal: this handle's ``abort`` no longer fires it."""
        self._live.discard(self._current)


def _shows_abort(event: AgentEvent) -> bool:
    if event.type == "message_end" and isinstance(event.message, AssistantMessage):
        return event.message.stop_reason == "aborted"
    if event.type == "tool_execution_end" and event.result is not None:
        details = event.result.details
        return isinstance(details, dict) and details.get("error_code") == EXECUTION_ABORTED
    return False


class EventStream:
    """One ``DurableAgent``'s event stream and its subscriptions (see ``DurableAgent.events``)."""

    def __init__(self, calls: ConversationCalls) -> None:
        self._calls = calls
        self.session_id = calls.session_id
        self._subscriptions: set[asyncio.Task[None]] = set()
        # The signals this handle's listeners hold for the run they are seeing (see ``_RunSignal``).
        self._run_signals: set[AbortSignal] = set()

    async def events(
        self,
        from_offset: int = 0,
        *,
        poll_cooldown: timedelta = timedelta(0),
        reconnect_timeout: timedelta | None = RECONNECT_TIMEOUT,
    ) -> AsyncIterator[tuple[int, AgentEvent]]:
        """Every event from ``from_offset`` on, with its offset (``DurableAgent.events``)."""
        offset = from_offset
        failing_since: float | None = None
        pause = RECONNECT_FIRST_PAUSE
        while True:
            stream = WorkflowStreamClient.create(self._calls.client, self.session_id)
            items = stream.subscribe([EVENTS_TOPIC], from_offset=offset, poll_cooldown=poll_cooldown)
            try:
                while True:
                    # Each poll is an Update: with no worker it would wait for one until the
                    # reconnect timeout; NoWorkerError says so within seconds, as for every call.
                    try:
                        item = await self._calls.answered(
                            anext(items), f"the event stream from offset {offset} has no answer"
                        )
                    except StopAsyncIteration:
                        break
                    failing_since, pause = None, RECONNECT_FIRST_PAUSE
                    if item.offset > offset:
                        # The workflow keeps the newest events only (``ConversationLimits``): say what
                        # this subscriber will never see rather than skip it silently.
                        logger.warning(
                            "%r: events %d-%d are no longer retained; continuing from %d",
                            self.session_id, offset, item.offset - 1, item.offset,
                        )  # fmt: skip
                    offset = item.offset + 1
                    yield item.offset, AGENT_EVENT_ADAPTER.validate_python(item.data)
                return
            except (WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, RPCError) as err:
                # A poll refused as UNPROCESSED_UPDATE went to a workflow task whose worker never saw
                # it (``ConversationCalls.update``): polled again from the same offset, as after a
                # transient failure.
                if (
                    isinstance(err, WorkflowUpdateFailedError)
                    and getattr(err.cause, "type", None) != UNPROCESSED_UPDATE
                ):
                    raise
                if isinstance(err, RPCError) and err.status not in TRANSIENT_RPC_STATUSES:
                    raise
                now = time.monotonic()
                failing_since = now if failing_since is None else failing_since
                if reconnect_timeout is not None and now - failing_since >= reconnect_timeout.total_seconds():
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, RECONNECT_MAX_PAUSE)

    async def offset(self) -> int:
        """The offset the next event will have (``DurableAgent.event_offset``)."""
        offset = WorkflowStreamClient.create(self._calls.client, self.session_id).get_offset()
        return await self._calls.answered(offset, "event_offset has no answer")

    async def subscribe(self, listener: Listener, *, from_offset: int | None = None) -> Callable[[], None]:
        """Call ``listener(event, signal)`` for every event from now on (``DurableAgent.subscribe``)."""
        start = await self.offset() if from_offset is None else from_offset
        run = _RunSignal(self._run_signals)

        async def pump() -> None:
            try:
                async for offset, event in self.events(start):
                    try:
                        result = listener(event, run.for_event(event))
                        if inspect.isawaitable(result):
                            await result
                    except Exception:
                        logger.exception(
                            "listener of %r failed on event %d (%s)", self.session_id, offset, event.type
                        )
            except Exception:  # the conversation ended or could not be reached for too long
                logger.exception("subscription to %r ended", self.session_id)

        task = asyncio.create_task(pump())
        self._subscriptions.add(task)
        task.add_done_callback(self._subscriptions.discard)
        task.add_done_callback(lambda _: run.close())

        def unsubscribe() -> None:
            task.cancel()

        return unsubscribe

    def abort_runs(self, reason: str | None = None) -> None:
        """Fire the signal of each run the listeners are seeing (this handle's ``abort`` was called)."""
        for signal in list(self._run_signals):
            signal.abort(reason)

    async def close(self) -> None:
        """Stop every subscription."""
        for task in list(self._subscriptions):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
