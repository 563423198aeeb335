"""``llm.stream``: one model call. Reads its context from the session file, streams, writes the result.

Its input carries references (session id, leaf id, the few entries the workflow made since the last
write), never the transcript, so the history a turn adds stays flat however long the conversation is.

- **Retries**: a retryable provider failure (429, 5xx, 529, dropped connection) raises a retryable
  ``ApplicationError`` with the delay the server asked for; Temporal's retry policy acts on it. A
  retried attempt first publishes ``llm_retry`` so a UI drops the failed attempt's partial text.
- **Exactly one assistant message**: the result is appended under an id the workflow chose; an
  attempt that finds that id already in the file (the worker died after writing) returns the stored
  message instead of calling the model again.
- **Abort**: cancellation arrives through heartbeats; the stream is stopped and the partial message
  comes back with ``stop_reason="aborted"`` (the workflow uses ``WAIT_CANCELLATION_COMPLETED``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError

from agentcore.events import LlmRetryEvent, MessageUpdateEvent, StreamDone, StreamError, delta_payload
from agentcore.messages import AssistantMessage
from agentcore.protocol import EVENTS_TOPIC, SIGNAL_MODEL_WAITING, StreamInput, StreamResult
from agentcore.providers.errors import is_context_overflow
from agentcore.providers.keys import resolve_api_key
from agentcore.runtime import AbortSignal, LlmContext, StreamFn, StreamOptions
from agentcore.session import JsonlSessionStorage, MessageEntry
from agentcore.state import GetApiKey
from agentcore.tools import ToolRegistry

from .session import SessionStore

T = TypeVar("T")

PROVIDER_RETRYABLE = "PROVIDER_RETRYABLE"
PROVIDER_ERROR = "PROVIDER_ERROR"
# An aborted stream must wind down quickly; past this the partial message is taken as it is.
ABORT_GRACE_SECONDS = 2.0


def resolve_stream_fn(stream_fn: StreamFn | None) -> StreamFn:
    """The worker's stream function: the one it was given, else the provider ``model.api`` names."""
    if stream_fn is not None:
        return stream_fn
    from agentcore.inprocess import default_stream_fn

    return default_stream_fn()


class LlmActivities:
    def __init__(
        self,
        store: SessionStore,
        tools: ToolRegistry,
        *,
        stream_fn: StreamFn | None = None,
        get_api_key: GetApiKey | None = None,
        publish_interval: timedelta = timedelta(milliseconds=80),
    ) -> None:
        self.store = store
        self.tools = tools
        self.stream_fn = stream_fn
        self.get_api_key = get_api_key
        self.publish_interval = publish_interval

    def _stream_fn(self) -> StreamFn:
        return resolve_stream_fn(self.stream_fn)

    @activity.defn(name="llm.stream")  # don't rename: recorded in histories
    async def stream(self, inp: StreamInput) -> StreamResult:
        info = activity.info()

        def prepare(storage: JsonlSessionStorage) -> AssistantMessage | LlmContext:
            # Not synced yet: the workflow keeps these entries until this activity succeeds, and
            # every successful return below syncs first (the result's append, or ``sync()``).
            storage.append_entries(inp.entries, sync=False)
            done = storage.get_entry(inp.result_entry_id)
            if isinstance(done, MessageEntry) and isinstance(done.message, AssistantMessage):
                storage.sync()
                return done.message
            context = storage.build_context(inp.leaf_id) if inp.leaf_id else storage.build_context()
            return LlmContext(
                system_prompt=inp.system_prompt,
                messages=context.messages if inp.leaf_id else [],
                tools=self.tools.describe(inp.tool_names)[0],
            )

        prepared = await self._beating(self.store.write(inp.session_id, inp.create, prepare))
        if isinstance(prepared, AssistantMessage):
            return StreamResult(message=prepared)

        publisher = _DeltaPublisher(self.publish_interval, announce_waiting=inp.events_held)
        if info.attempt > 1:
            publisher.announce_retry(info.attempt)
        message, deltas, retry = await self._call_model(inp, prepared, publisher)
        try:
            if retry is not None:
                raise retry
            if inp.compact_on_overflow and is_context_overflow(message):
                # Not recorded: the workflow compacts the conversation and calls again on the summary.
                await self._beating(self.store.write(inp.session_id, None, lambda storage: storage.sync()))
                return StreamResult(message=message, overflow=True)
            entry = MessageEntry(id=inp.result_entry_id, parent_id=inp.leaf_id, message=message)
            stored = await self._beating(
                self.store.write(inp.session_id, None, lambda storage: storage.append_entry(entry))
            )
            # Another attempt (a stalled worker that woke up) may have written this entry first: the
            # file wins, so the workflow records exactly what the session holds.
            if isinstance(stored, MessageEntry) and isinstance(stored.message, AssistantMessage):
                message = stored.message
        finally:
            await publisher.close()
        return StreamResult(message=message, deltas_published=deltas if publisher.started else 0)

    async def _beating(self, write: Awaitable[T]) -> T:
        """Await a session write, heartbeating if it takes a publish interval or more.

        A write can wait on the file's lock (another worker mid-write, up to ``LOCK_WAIT_SECONDS``)
        or behind other writes on a busy worker; without beats the call would look dead to the
        server, which times it out after ``llm_heartbeat_seconds`` and runs it again elsewhere.
        A quick write sends none (entry 12 of bench/RESULTS.md: each beat is a server write).
        """

        beater = asyncio.create_task(_heartbeat_ticker(self.publish_interval.total_seconds()))
        try:
            return await write
        finally:
            beater.cancel()

    async def _call_model(
        self, inp: StreamInput, context: LlmContext, publisher: _DeltaPublisher
    ) -> tuple[AssistantMessage, int, ApplicationError | None]:
        signal = AbortSignal()
        api_key = await resolve_api_key(inp.model.provider, callback=self.get_api_key)
        options = StreamOptions(
            thinking_level=inp.thinking_level,
            api_key=api_key,
            max_tokens=inp.max_tokens,
            temperature=inp.temperature,
            session_id=inp.session_id,
            signal=signal,
        )
        state: dict[str, Any] = {"final": None, "partial": None, "deltas": 0, "retry": None}

        async def consume() -> None:
            # No heartbeat per event: the ticker beats once the call outlives one publish interval.
            # A call that ends sooner sends none (a first heartbeat goes out at once, and each one
            # is a history write on the server, two per tool turn for nothing).
            async for event in self._stream_fn()(inp.model, context, options):
                if isinstance(event, StreamDone):
                    state["final"] = event.message
                elif isinstance(event, StreamError):
                    state["final"] = event.error
                    if event.retryable and event.error.stop_reason == "error":
                        state["retry"] = _retryable_error(event.error, event.retry_after_seconds)
                else:
                    state["partial"] = event.partial if hasattr(event, "partial") else state["partial"]
                    if event.type != "start":
                        state["deltas"] += 1
                        publisher.publish(MessageUpdateEvent(assistant_message_event=delta_payload(event)))

        task = asyncio.create_task(consume())
        ticker = asyncio.create_task(_heartbeat_ticker(publisher.interval, publisher))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is not None and not details.cancel_requested:
                # Not the user's abort (worker shutdown, or this attempt timed out / was superseded,
                # e.g. a SIGSTOPped worker that woke up): write nothing and let Temporal's retry own
                # the call. Taken as an abort, the stale attempt would store an "aborted" partial
                # under the result id, and the live retry would then return that stored partial.
                task.cancel()
                raise
            signal.abort("aborted by user")
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), ABORT_GRACE_SECONDS)
            task.cancel()
        finally:
            ticker.cancel()
        final = state["final"]
        if final is None or (signal.aborted and final.stop_reason != "aborted"):
            partial: AssistantMessage | None = final or state["partial"]
            base = partial or AssistantMessage(
                api=inp.model.api, provider=inp.model.provider, model=inp.model.id, timestamp=_now_ms()
            )
            reason = "aborted" if signal.aborted else "error"
            final = base.model_copy(
                update={
                    "stop_reason": reason,
                    "error_message": "Request was aborted"
                    if signal.aborted
                    else "Stream ended without a result",
                }
            )
        return final, state["deltas"], None if signal.aborted else state["retry"]


def _retryable_error(message: AssistantMessage, delay: float | None) -> ApplicationError:
    return ApplicationError(
        message.error_message or "provider error",
        type=PROVIDER_RETRYABLE,
        next_retry_delay=timedelta(seconds=delay) if delay else None,
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _heartbeat_ticker(interval: float, publisher: _DeltaPublisher | None = None) -> None:
    # Heartbeats carry cancellation to us and prove we are alive while a model thinks silently (or a
    # session write waits); the same tick moves a publisher's buffered deltas out.
    while True:
        await asyncio.sleep(interval)
        activity.heartbeat()
        if publisher is not None:
            await publisher.tick()


class _DeltaPublisher:
    """Batches deltas into stream signals, but only once a call outlives one interval.

    A call that finishes within the first interval publishes nothing: the workflow derives the deltas
    from the final message, saving a signal (and a workflow task) per model call. One still quiet at
    its first tick while the workflow holds the turn's events for it (``events_held``) signals
    ``model_waiting`` instead, so they go out then.
    """

    def __init__(self, interval: timedelta, *, announce_waiting: bool = False) -> None:
        self.interval = interval.total_seconds()
        self.announce_waiting = announce_waiting
        self.pending: list[Any] = []
        self.started = False
        self._client: WorkflowStreamClient | None = None

    def _topic(self) -> Any:
        if self._client is None:
            self._client = WorkflowStreamClient.from_within_activity(batch_interval=timedelta(hours=1))
        return self._client.topic(EVENTS_TOPIC)

    def announce_retry(self, attempt: int) -> None:
        self.started = True
        self.pending.append(LlmRetryEvent(attempt=attempt, error_message="the previous attempt failed"))

    def publish(self, event: Any) -> None:
        self.pending.append(event)

    async def tick(self) -> None:
        first = not self.started
        self.started = True
        if first and not self.pending and self.announce_waiting:
            await self._announce_waiting()
        await self._send()

    async def _announce_waiting(self) -> None:
        """Tell the workflow this call is slow to stream: it holds the turn's events until then."""
        info = activity.info()
        if info.workflow_id is None:
            return
        try:
            handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
            await handle.signal(SIGNAL_MODEL_WAITING)
        except Exception as err:  # the workflow then releases them with the result: later, not lost
            activity.logger.warning("model_waiting signal failed: %s", err)

    async def _send(self) -> None:
        if not self.pending:
            return
        topic = self._topic()
        batch, self.pending = self.pending, []
        for event in batch:
            topic.publish(event)
        assert self._client is not None
        await self._client.flush()

    async def close(self) -> None:
        """Deliver what is buffered if streaming started; else drop it (the workflow derives it)."""
        if self.started:
            await self._send()
        self.pending = []
