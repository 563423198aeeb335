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
- **An attempt the server gave up on** (its heartbeats or result lost in a network cut) leaves its
  call running in this worker, parked: the retry takes it over when it lands in this process,
  instead of calling the model again; a parked call nobody takes over is stopped after
  ``HANDOFF_WAIT_SECONDS``. Always a regular activity, never a local one (docs/versioning.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agentcore.events import LlmRetryEvent, MessageUpdateEvent, StreamDone, StreamError, delta_payload
from agentcore.messages import AssistantMessage
from agentcore.protocol import StreamInput, StreamResult
from agentcore.providers.base import ConversionMemo
from agentcore.providers.errors import MAX_RETRY_AFTER_SECONDS, is_context_overflow
from agentcore.providers.keys import resolve_api_key
from agentcore.runtime import AbortSignal, LlmContext, StreamFn, StreamOptions
from agentcore.session import JsonlSessionStorage, MessageEntry
from agentcore.state import GetApiKey
from agentcore.temporal.observe import model_context_seen
from agentcore.tools import ToolRegistry

from .events import ActivityEventPublisher
from .session import KEPT_SESSIONS, SessionStore, heartbeating, retrieve_exception

T = TypeVar("T")

logger = logging.getLogger(__name__)

PROVIDER_RETRYABLE = "PROVIDER_RETRYABLE"
PROVIDER_ERROR = "PROVIDER_ERROR"
# An aborted stream must wind down quickly; past this the partial message is taken as it is.
ABORT_GRACE_SECONDS = 2.0
# A parked call (left by an attempt the server gave up on) that no llm.stream has come for by then is
# stopped (the activity ran on another worker, which called the model again). Well
# past a lost workflow task's return: a network cut, then the workflow task timeout.
HANDOFF_WAIT_SECONDS = 120.0
# Answers kept for an attempt that asks again (see ``LlmActivities._finished``).
KEPT_RESULTS = 1024


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
        # Calls in flight in this worker, by result entry id: a retry takes over the one its
        # timed-out earlier attempt still runs.
        self._calls: dict[str, _Call] = {}
        # Answers this worker got, by result entry id (most recently used last): a workflow task or
        # an attempt whose result was lost asks again and gets the answer, not a new model call.
        self._finished: OrderedDict[str, AssistantMessage] = OrderedDict()
        # Per session, what the provider made of each message: the session store hands every call
        # the same message objects, so each is converted once, not on every call (most recently
        # used last, as many as the store keeps writers for).
        self._memos: OrderedDict[str, ConversionMemo] = OrderedDict()
        # Why the last attempt of a call failed, by result entry id, for the retry's ``llm_retry``
        # event (a retry in another worker says only that it failed).
        self._failures: OrderedDict[str, str] = OrderedDict()

    def _memo(self, session_id: str) -> ConversionMemo:
        memo = self._memos.pop(session_id, None) or ConversionMemo()
        self._memos[session_id] = memo
        if len(self._memos) > KEPT_SESSIONS:
            self._memos.popitem(last=False)
        return memo

    def _stream_fn(self) -> StreamFn:
        return resolve_stream_fn(self.stream_fn)

    @activity.defn(name="llm.stream")  # don't rename: recorded in histories
    async def stream(self, inp: StreamInput) -> StreamResult:
        key = inp.result_entry_id
        attempt = activity.info().attempt + inp.prior_attempts
        # The call an earlier attempt of this call still runs here (its result or heartbeats did not
        # reach the server during a network cut, and the server gave up on it): carried on from here.
        call = self._adopt(key)
        if call is None and key in self._finished:
            return await self._reuse(inp, attempt)
        if call is not None:
            await self._take_over(inp, call, attempt)
        else:
            started = await self._begin(inp, attempt)
            if isinstance(started, StreamResult):
                return started
            call = started
        owner = call.owner = object()
        await self._follow(call, key, owner)
        message = self._final_message(inp, call)
        if call.owner is not owner:
            # A later attempt of this call took it over (this one's result would not be taken): it
            # writes and reports the answer.
            return StreamResult(message=message, attempt=attempt)
        if self._calls.get(key) is call:
            del self._calls[key]
        return await self._conclude(inp, call, message, attempt)

    async def _take_over(self, inp: StreamInput, call: _Call, attempt: int) -> None:
        """Carry on an earlier attempt's call: its deltas go out through this attempt's publisher."""
        publisher = _DeltaPublisher(self.publish_interval, call_id=inp.result_entry_id, attempt=attempt)
        publisher.take_over(call.publisher)
        call.publisher = publisher
        if inp.entries:  # again (appends are idempotent by id): durable before the answer is
            await self._beating(self.store.write(inp.session_id, inp.create, self._appending(inp)))
        if not call.task.done():
            await publisher.tick()  # the deltas held since the earlier attempt go out now

    async def _begin(self, inp: StreamInput, attempt: int) -> _Call | StreamResult:
        """Start the model call on the context the session file holds, or return the answer the
        file already has under the result id (the worker died after writing it)."""
        prepared = await self._beating(
            self.store.write(inp.session_id, inp.create, lambda storage: self._prepare(storage, inp))
        )
        if isinstance(prepared, AssistantMessage):
            return StreamResult(message=prepared, attempt=attempt)
        report_context = model_context_seen.get()
        if report_context is not None:
            report_context(prepared)
        publisher = _DeltaPublisher(self.publish_interval, call_id=inp.result_entry_id, attempt=attempt)
        if attempt > 1:
            publisher.announce_retry(attempt, self._failures.pop(inp.result_entry_id, None))
        call = self._start_call(inp, prepared, publisher)
        self._calls[inp.result_entry_id] = call
        return call

    def _prepare(self, storage: JsonlSessionStorage, inp: StreamInput) -> AssistantMessage | LlmContext:
        # Not synced yet: the workflow keeps these entries until this activity succeeds, and
        # every successful return of ``stream`` syncs first (the result's append, or ``sync()``).
        storage.append_entries(inp.entries, sync=False)
        done = storage.get_entry(inp.result_entry_id)
        if isinstance(done, MessageEntry) and isinstance(done.message, AssistantMessage):
            storage.sync()
            return done.message
        context = storage.build_context(inp.leaf_id) if inp.leaf_id else storage.build_context()
        # Not validated again: the messages come validated from the store, the specs from
        # the registry (validating a long context's messages costs as much as converting them).
        return LlmContext.model_construct(
            system_prompt=inp.system_prompt,
            messages=context.messages if inp.leaf_id else [],
            tools=self.tools.describe(inp.tool_names)[0],
        )

    async def _follow(self, call: _Call, key: str, owner: object) -> None:
        """Wait for the call to end (``_wait_call``), forgetting it if it failed."""
        try:
            await self._wait_call(call, key, owner)
        except asyncio.CancelledError:
            raise
        except BaseException:
            if self._calls.get(key) is call:  # the call failed: the next attempt makes it afresh
                del self._calls[key]
            raise

    async def _conclude(
        self, inp: StreamInput, call: _Call, message: AssistantMessage, attempt: int
    ) -> StreamResult:
        """The call's outcome: a retryable failure raised, an overflow reported, else its message
        recorded in the session file; buffered deltas are delivered (or dropped) either way."""
        retry = None if call.signal.aborted else call.state["retry"]
        try:
            if retry is not None:
                activity.logger.warning(
                    "model call attempt %d failed, to be retried: %s", attempt, message.error_message
                )
                self._failures[inp.result_entry_id] = message.error_message or str(retry)
                if len(self._failures) > KEPT_SESSIONS:
                    self._failures.popitem(last=False)
                raise retry
            if inp.compact_on_overflow and is_context_overflow(message):
                # Not recorded: the workflow compacts the conversation and calls again on the summary.
                await self._sync(inp)
                return StreamResult(message=message, overflow=True, attempt=attempt)
            if not call.signal.aborted:
                self._remember(inp.result_entry_id, message)
            message = await self._beating(
                self.store.write(inp.session_id, None, lambda storage: self._record(storage, inp, message))
            )
        finally:
            await call.publisher.close()
        deltas = call.state["deltas"] if call.publisher.started else 0
        return StreamResult(message=message, deltas_published=deltas, attempt=attempt)

    async def _reuse(self, inp: StreamInput, attempt: int) -> StreamResult:
        """The answer this worker already got for this call, again, without calling the model: the
        result did not reach the server (a network cut). It is recorded as the attempt's own."""
        message = self._finished[inp.result_entry_id]
        self._finished.move_to_end(inp.result_entry_id)

        def write(storage: JsonlSessionStorage) -> AssistantMessage:
            self._appending(inp)(storage)
            return self._record(storage, inp, message)

        reused = await self._beating(self.store.write(inp.session_id, inp.create, write))
        activity.logger.info("model call answered again from this worker's result (not called again)")
        return StreamResult(message=reused, attempt=attempt)

    def _remember(self, key: str, message: AssistantMessage) -> None:
        self._finished[key] = message
        self._finished.move_to_end(key)
        while len(self._finished) > KEPT_RESULTS:
            self._finished.popitem(last=False)

    def _appending(self, inp: StreamInput) -> Callable[[JsonlSessionStorage], None]:
        """Append the entries the workflow sent."""

        def append(storage: JsonlSessionStorage) -> None:
            storage.append_entries(inp.entries)

        return append

    def _record(
        self, storage: JsonlSessionStorage, inp: StreamInput, message: AssistantMessage
    ) -> AssistantMessage:
        """Write the call's answer as its result entry; return what the file holds under that id."""
        entry = MessageEntry(id=inp.result_entry_id, parent_id=inp.leaf_id, message=message)
        stored = storage.append_entry(entry)
        # Another attempt (a stalled worker that woke up) may have written this entry first: the
        # file wins, so the workflow records exactly what the session holds.
        if isinstance(stored, MessageEntry) and isinstance(stored.message, AssistantMessage):
            return stored.message
        return message

    async def _sync(self, inp: StreamInput) -> None:
        """Make the entries this call appended (unsynced) durable."""
        if inp.entries:
            await self._beating(self.store.write(inp.session_id, None, lambda storage: storage.sync()))

    async def _beating(self, write: Awaitable[T]) -> T:
        """Await a session write, heartbeating if it takes a publish interval or more.

        A write can wait on the file's lock (another worker mid-write, up to ``LOCK_WAIT_SECONDS``)
        or behind other writes on a busy worker; without beats the call would look dead to the
        server, which times it out after ``llm_heartbeat_seconds`` and runs it again elsewhere.
        A quick write sends none (bench/log/012-no-heartbeat-per-stream-event.md: each beat is a server
        write).
        """
        return await heartbeating(write, self.publish_interval.total_seconds())

    def _start_call(self, inp: StreamInput, context: LlmContext, publisher: _DeltaPublisher) -> _Call:
        signal = AbortSignal()
        call = _Call(signal=signal, publisher=publisher)

        async def consume() -> None:
            # No heartbeat per event: the ticker beats once the call outlives one publish interval.
            # A call that ends sooner sends none (a first heartbeat goes out at once, and each one
            # is a history write on the server, two per tool turn for nothing).
            api_key = await resolve_api_key(inp.model.provider, callback=self.get_api_key)
            options = StreamOptions(
                thinking_level=inp.thinking_level,
                api_key=api_key,
                max_tokens=inp.max_tokens,
                temperature=inp.temperature,
                session_id=inp.session_id,
                signal=signal,
                conversion_memo=self._memo(inp.session_id),
            )
            state = call.state
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
                        # The current publisher: a remote activity that adopts the call swaps in its own.
                        call.publisher.publish(
                            MessageUpdateEvent(assistant_message_event=delta_payload(event))
                        )

        call.task = asyncio.create_task(consume())
        return call

    async def _wait_call(self, call: _Call, key: str, owner: object) -> None:
        """Wait for the call to end, heartbeating; an abort stops it (its partial is kept)."""
        interval = self.publish_interval.total_seconds()
        ticker = asyncio.create_task(_heartbeat_ticker(interval, call.publisher))
        try:
            await asyncio.shield(call.task)
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is not None and not details.cancel_requested:
                # Not the user's abort (worker shutdown, or this attempt timed out / was superseded,
                # e.g. a SIGSTOPped worker that woke up, or a network cut): write nothing and let
                # Temporal's retry own the call. Taken as an abort, the stale attempt would store an
                # "aborted" partial under the result id, and the live retry would then return that
                # stored partial. The model call goes on, parked: a retry in this worker takes it
                # over instead of calling the model again.
                if call.owner is owner:
                    self._park(key, call)
                raise
            call.signal.abort("aborted by user")
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(call.task), ABORT_GRACE_SECONDS)
            call.task.cancel()
        finally:
            ticker.cancel()

    def _final_message(self, inp: StreamInput, call: _Call) -> AssistantMessage:
        """The call's message: its final one, or its partial marked aborted / errored."""
        final: AssistantMessage | None = call.state["final"]
        signal = call.signal
        if final is not None and not (signal.aborted and final.stop_reason != "aborted"):
            return final
        partial: AssistantMessage | None = final or call.state["partial"]
        base = partial or AssistantMessage(
            api=inp.model.api, provider=inp.model.provider, model=inp.model.id, timestamp=_now_ms()
        )
        reason = "aborted" if signal.aborted else "error"
        return base.model_copy(
            update={
                "stop_reason": reason,
                "error_message": "Request was aborted" if signal.aborted else "Stream ended without a result",
            }
        )

    def _park(self, key: str, call: _Call) -> None:
        call.task.add_done_callback(retrieve_exception)
        if call.expiry is not None:
            call.expiry.cancel()
        call.expiry = asyncio.get_running_loop().call_later(HANDOFF_WAIT_SECONDS, self._expire, key, call)
        self._calls[key] = call

    def _adopt(self, key: str) -> _Call | None:
        call = self._calls.pop(key, None)
        if call is not None and call.expiry is not None:
            call.expiry.cancel()
            call.expiry = None
        return call

    def _expire(self, key: str, call: _Call) -> None:
        """No llm.stream came for a parked call (it ran on another worker): stop the call, keeping
        its answer if it has one (a workflow task run again much later may still ask for it)."""
        if self._calls.get(key) is call:
            del self._calls[key]
        final = call.state["final"]
        if call.task.done() and final is not None and call.state["retry"] is None and not call.signal.aborted:
            if not is_context_overflow(final):  # (answered by compacting, then a call of its own)
                self._remember(key, final)
            return
        call.signal.abort("parked call expired")
        asyncio.get_running_loop().call_later(ABORT_GRACE_SECONDS, call.task.cancel)


@dataclass(eq=False)
class _Call:
    """One provider call in flight: its task, what it produced so far, and where its deltas go."""

    signal: AbortSignal
    publisher: _DeltaPublisher
    state: dict[str, Any] = field(
        default_factory=lambda: {"final": None, "partial": None, "deltas": 0, "retry": None}
    )
    task: asyncio.Task[None] = field(init=False)
    expiry: asyncio.TimerHandle | None = None
    # The attempt (``llm.stream`` run) that reports the call's result: the latest to take it over.
    owner: object | None = None


def _retryable_error(message: AssistantMessage, delay: float | None) -> ApplicationError:
    # Benign: an expected failure Temporal retries; the SDK then logs no traceback for it (the
    # activity logs one line, the subscriber gets ``llm_retry``).
    return ApplicationError(
        message.error_message or "provider error",
        type=PROVIDER_RETRYABLE,
        category=ApplicationErrorCategory.BENIGN,
        # A custom stream function may ask for any delay: a finite one, at most the providers' cap.
        next_retry_delay=(
            timedelta(seconds=min(delay, MAX_RETRY_AFTER_SECONDS)) if delay and math.isfinite(delay) else None
        ),
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
    """Batches deltas into ``activity_events`` signals, but only once a call outlives one interval.

    A call that finishes within the first interval publishes nothing: the workflow derives the deltas
    from the final message, saving a signal (and a workflow task) per model call.
    """

    def __init__(self, interval: timedelta, *, call_id: str = "", attempt: int = 0) -> None:
        self.interval = interval.total_seconds()
        self.started = False
        self._events = ActivityEventPublisher(call_id=call_id, attempt=attempt)

    def take_over(self, other: _DeltaPublisher) -> None:
        """Publish what ``other`` (the call's previous publisher) holds, as this one's first."""
        self._events.take_over(other._events)

    @property
    def pending(self) -> list[Any]:
        return self._events.pending

    @pending.setter
    def pending(self, events: list[Any]) -> None:
        self._events.pending = events

    def announce_retry(self, attempt: int, cause: str | None) -> None:
        self.started = True
        reason = f"attempt {attempt - 1} failed: {cause}" if cause else "the previous attempt failed"
        self.publish(LlmRetryEvent(attempt=attempt, error_message=reason))

    def publish(self, event: Any) -> None:
        self._events.publish(event)

    async def tick(self) -> None:
        self.started = True
        await self._events.flush()

    async def close(self) -> None:
        """Deliver what is buffered if streaming started; else drop it (the workflow derives it)."""
        if self.started:
            await self._events.flush()
        self.pending = []
