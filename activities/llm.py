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
- **Local attempt**: a call the workflow expects to be quick runs first as a local activity, inside
  the workflow task, where it can neither stream nor hear an abort. If it has not ended after one
  publish interval, it returns ``handoff=True`` and leaves the call running in this worker; the
  remote ``llm.stream`` the workflow then schedules (same input) takes it over and streams it when it
  lands in this process (``create_worker``'s remote activity worker shares these activities). In
  another worker process, or after a restart, it calls the model afresh, like a retry; a call nobody
  takes over is stopped after ``HANDOFF_WAIT_SECONDS``. Handoffs are rare: a conversation's first
  call starts local only when this worker's last call to its model was quick (else its local attempt
  declines at once and the remote activity makes the call), so only a model that was quick and
  turns slow pays one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agentcore.events import LlmRetryEvent, MessageUpdateEvent, StreamDone, StreamError, delta_payload
from agentcore.messages import AssistantMessage
from agentcore.model import Model
from agentcore.protocol import StreamInput, StreamResult
from agentcore.providers.base import ConversionMemo
from agentcore.providers.errors import MAX_RETRY_AFTER_SECONDS, is_context_overflow
from agentcore.providers.keys import resolve_api_key
from agentcore.runtime import AbortSignal, LlmContext, StreamFn, StreamOptions
from agentcore.session import JsonlSessionStorage, MessageEntry
from agentcore.state import GetApiKey
from agentcore.tools import ToolRegistry

from .events import ActivityEventPublisher
from .session import KEPT_SESSIONS, SessionStore, activity_lock_wait, heartbeating, retrieve_exception

# Set by whoever observes the call (``agentcore.temporal.observe``, for a span's captured input):
# called with the context the model is about to be sent, rebuilt from the session file.
model_context_seen: ContextVar[Callable[[LlmContext], None] | None] = ContextVar(
    "agentcore_model_context_seen", default=None
)

T = TypeVar("T")

logger = logging.getLogger(__name__)

PROVIDER_RETRYABLE = "PROVIDER_RETRYABLE"
PROVIDER_ERROR = "PROVIDER_ERROR"
# An aborted stream must wind down quickly; past this the partial message is taken as it is.
ABORT_GRACE_SECONDS = 2.0
# A parked call (handed off, or left by an attempt the server gave up on) that no llm.stream has come
# for by then is stopped (the activity ran on another worker, which called the model again). Well
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
        # Calls in flight in this worker, by result entry id: a remote llm.stream takes over the one
        # its local attempt handed off, or one its timed-out earlier attempt still runs.
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
        # Whether this worker's last call to each model ended within a publish interval (most
        # recently used last): a conversation's first call starts local only if it did.
        self._quick: OrderedDict[tuple[str, str, str, str | None], bool] = OrderedDict()

    def _note_speed(self, model: Model, quick: bool) -> None:
        key = (model.provider, model.api, model.id, model.base_url)
        self._quick.pop(key, None)
        self._quick[key] = quick
        if len(self._quick) > KEPT_SESSIONS:
            self._quick.popitem(last=False)

    def _known_quick(self, model: Model) -> bool:
        return self._quick.get((model.provider, model.api, model.id, model.base_url), False)

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
        if not activity.info().is_local:
            return await self._stream(inp)
        started = time.monotonic()
        result = await self._stream(inp)
        # What it took of its workflow task's publish interval (the workflow's local-attempt budget).
        return result.model_copy(update={"local_seconds": time.monotonic() - started})

    async def _stream(self, inp: StreamInput) -> StreamResult:
        info = activity.info()
        key = inp.result_entry_id
        attempt = info.attempt + inp.prior_attempts
        syncing: asyncio.Future[None] | None = None
        # The call a local attempt handed off (see ``StreamResult.handoff``), or one an earlier
        # attempt of this call still runs here (its result or heartbeats did not reach the server
        # during a network cut, and the server gave up on it): carried on from here. (A local
        # attempt finds one too when its workflow task was lost and is being run again.)
        call = self._adopt(key)
        if call is None and key in self._finished:
            return await self._reuse(inp, attempt)
        if call is None and info.is_local and inp.speed_unknown and not self._known_quick(inp.model):
            # A conversation's first call, to a model this worker has not seen answer quickly: made
            # by the remote activity from the start (a local attempt would only hand it off).
            message = AssistantMessage(
                api=inp.model.api, provider=inp.model.provider, model=inp.model.id, timestamp=_now_ms()
            )
            return StreamResult(message=message, handoff=True, declined=True)
        if call is not None:
            publisher = _DeltaPublisher(self.publish_interval, call_id=key, attempt=attempt)
            publisher.take_over(call.publisher)
            call.publisher = publisher
            if inp.entries:  # the ones the local attempt could not write
                await self._beating(self.store.write(inp.session_id, inp.create, self._appending(inp)))
            if not info.is_local and not call.task.done():
                await publisher.tick()  # the deltas held over the local attempt go out now
        else:

            def prepare(storage: JsonlSessionStorage) -> AssistantMessage | LlmContext:
                # Not synced yet: the workflow keeps these entries until this activity succeeds, and
                # every successful return below syncs first (the result's append, or ``sync()``).
                storage.append_entries(inp.entries, sync=False)
                self.store.answers.forget(inp.session_id, inp.entries)
                done = storage.get_entry(inp.result_entry_id)
                if isinstance(done, MessageEntry) and isinstance(done.message, AssistantMessage):
                    storage.sync()
                    return done.message
                # An earlier attempt's answer, kept by a local attempt whose workflow task was lost
                # (its worker died): recorded as a remote attempt records its own, not asked again.
                kept = self.store.answers.find(inp.session_id, inp.result_entry_id, inp.leaf_id)
                if kept is not None:
                    activity.logger.info("model call answered from an earlier attempt's kept answer")
                    if info.is_local:
                        storage.sync()
                        return kept
                    return self._record(storage, inp, kept)
                context = (
                    storage.build_context(inp.leaf_id, pending=inp.pending_entries)
                    if inp.leaf_id
                    else storage.build_context()
                )
                # Not validated again: the messages come validated from the store, the specs from
                # the registry (validating a long context's messages costs as much as converting them).
                return LlmContext.model_construct(
                    system_prompt=inp.system_prompt,
                    messages=context.messages if inp.leaf_id else [],
                    tools=self.tools.describe(inp.tool_names)[0],
                )

            # A local attempt does not wait on a busy session file; the remote attempt does.
            prepared = await self._beating(
                self.store.write(inp.session_id, inp.create, prepare, lock_wait=activity_lock_wait())
            )
            if isinstance(prepared, AssistantMessage):
                return StreamResult(message=prepared, attempt=attempt)
            report_context = model_context_seen.get()
            if report_context is not None:
                report_context(prepared)
            publisher = _DeltaPublisher(self.publish_interval, call_id=key, attempt=attempt)
            if attempt > 1 and not info.is_local:
                publisher.announce_retry(attempt, self._failures.pop(inp.result_entry_id, None))
            call = self._start_call(inp, prepared, publisher)
            self._calls[key] = call
            if info.is_local and inp.entries:
                # The entries just appended become durable while the model answers: the fsync is off
                # the call's critical path. Every successful return below waits for it.
                syncing = asyncio.ensure_future(self._sync(inp))
                syncing.add_done_callback(retrieve_exception)
        owner = call.owner = object()
        try:
            ended = await self._wait_call(call, key, owner, local=info.is_local, wait=inp.local_wait_seconds)
        except asyncio.CancelledError:
            raise
        except BaseException:
            if self._calls.get(key) is call:  # the call failed: the next attempt makes it afresh
                del self._calls[key]
            raise
        if not ended:
            # Still running after one publish interval: a local attempt hands the call to a remote
            # llm.stream, which can stream its deltas and be aborted while it runs.
            self._park(key, call)
            call.task.add_done_callback(lambda _: self._keep_parked(key, call, inp))
            self._note_speed(inp.model, False)
            await self._synced(inp, syncing)
            return StreamResult(message=self._final_message(inp, call, handoff=True), handoff=True)
        message = self._final_message(inp, call)
        if call.owner is not owner:
            # A later attempt of this call took it over (this one's result would not be taken): it
            # writes and reports the answer.
            return StreamResult(message=message, attempt=attempt)
        if self._calls.get(key) is call:
            del self._calls[key]
        retry = None if call.signal.aborted else call.state["retry"]
        try:
            if retry is not None:
                activity.logger.warning(
                    "model call attempt %d failed, to be retried: %s",
                    info.attempt + inp.prior_attempts,
                    message.error_message,
                )
                self._failures[inp.result_entry_id] = message.error_message or str(retry)
                if len(self._failures) > KEPT_SESSIONS:
                    self._failures.popitem(last=False)
                raise retry
            if inp.compact_on_overflow and is_context_overflow(message):
                # Not recorded: the workflow compacts the conversation and calls again on the summary.
                await self._synced(inp, syncing)
                return StreamResult(message=message, overflow=True, attempt=attempt)
            if not call.signal.aborted:
                self._remember(key, message)
            if info.is_local:
                self._note_speed(inp.model, True)
                # Not recorded: the workflow task this runs in may be lost and the call made again.
                # The workflow queues the message for writing (see ``StreamInput.pending_entries``);
                # until then the answer is kept beside the session file, for an attempt that runs
                # the lost task again in another worker (``KeptAnswers``).
                if call.signal.aborted:  # (a partial: nothing to keep)
                    await self._synced(inp, syncing)
                else:
                    keeping = asyncio.to_thread(self._keep, inp, message)
                    await asyncio.gather(self._synced(inp, syncing), keeping)
                return StreamResult(message=message, attempt=attempt)
            message = await self._beating(
                self.store.write(inp.session_id, None, lambda storage: self._record(storage, inp, message))
            )
        finally:
            await call.publisher.close()
        deltas = call.state["deltas"] if call.publisher.started else 0
        self._note_speed(inp.model, deltas == 0)
        return StreamResult(message=message, deltas_published=deltas, attempt=attempt)

    async def _reuse(self, inp: StreamInput, attempt: int) -> StreamResult:
        """The answer this worker already got for this call, again, without calling the model: the
        result did not reach the server (a network cut), or the workflow task that got it was lost
        and is being run again. A remote attempt records it as it would its own."""
        message = self._finished[inp.result_entry_id]
        self._finished.move_to_end(inp.result_entry_id)
        local = activity.info().is_local

        def write(storage: JsonlSessionStorage) -> AssistantMessage:
            self._appending(inp)(storage)
            return message if local else self._record(storage, inp, message)

        reused = await self._beating(
            self.store.write(inp.session_id, inp.create, write, lock_wait=activity_lock_wait())
        )
        activity.logger.info("model call answered again from this worker's result (not called again)")
        return StreamResult(message=reused, attempt=attempt)

    def _remember(self, key: str, message: AssistantMessage) -> None:
        self._finished[key] = message
        self._finished.move_to_end(key)
        while len(self._finished) > KEPT_RESULTS:
            self._finished.popitem(last=False)

    def _appending(self, inp: StreamInput) -> Callable[[JsonlSessionStorage], None]:
        """Append the entries the workflow sent (and forget the answers kept for them)."""

        def append(storage: JsonlSessionStorage) -> None:
            storage.append_entries(inp.entries)
            self.store.answers.forget(inp.session_id, inp.entries)

        return append

    def _record(
        self, storage: JsonlSessionStorage, inp: StreamInput, message: AssistantMessage
    ) -> AssistantMessage:
        """Write the call's answer as its result entry; return what the file holds under that id."""
        entry = MessageEntry(id=inp.result_entry_id, parent_id=inp.leaf_id, message=message)
        stored = storage.append_entry(entry)
        self.store.answers.forget(inp.session_id, [entry])
        # Another attempt (a stalled worker that woke up) may have written this entry first: the
        # file wins, so the workflow records exactly what the session holds.
        if isinstance(stored, MessageEntry) and isinstance(stored.message, AssistantMessage):
            return stored.message
        return message

    def _keep(self, inp: StreamInput, message: AssistantMessage) -> None:
        """Keep a local attempt's answer beside the session file (``KeptAnswers``) until it is
        written. Failing to is not the call's failure (the answer is good): it is only not kept."""
        entry = MessageEntry(id=inp.result_entry_id, parent_id=inp.leaf_id, message=message)
        try:
            self.store.answers.keep(inp.session_id, entry)
        except OSError as err:
            logger.warning("could not keep a model answer beside session %s: %s", inp.session_id, err)

    async def _synced(self, inp: StreamInput, syncing: asyncio.Future[None] | None) -> None:
        """The entries this call appended, durable: the sync started with the call, else one now."""
        if syncing is not None:
            await syncing
        else:
            await self._sync(inp)

    async def _sync(self, inp: StreamInput) -> None:
        """Make the entries this call appended (unsynced) durable."""
        if inp.entries:
            await self._beating(self.store.write(inp.session_id, None, lambda storage: storage.sync()))

    async def _beating(self, write: Awaitable[T]) -> T:
        """Await a session write, heartbeating if it takes a publish interval or more.

        A write can wait on the file's lock (another worker mid-write, up to ``LOCK_WAIT_SECONDS``)
        or behind other writes on a busy worker; without beats the call would look dead to the
        server, which times it out after ``llm_heartbeat_seconds`` and runs it again elsewhere.
        A quick write sends none (entry 12 of bench/TUNING.md: each beat is a server write).
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

    async def _wait_call(
        self, call: _Call, key: str, owner: object, *, local: bool, wait: float | None = None
    ) -> bool:
        """Wait for the call to end (True); a local attempt waits one publish interval at most (less
        when ``wait``, what its workflow task has left of one, is less)."""
        interval = self.publish_interval.total_seconds()
        ticker = None if local else asyncio.create_task(_heartbeat_ticker(interval, call.publisher))
        try:
            if local:
                timeout = interval if wait is None else min(interval, wait)
                done, _ = await asyncio.wait({call.task}, timeout=timeout)
                if not done:
                    return False
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
            if ticker is not None:
                ticker.cancel()
        return True

    def _final_message(self, inp: StreamInput, call: _Call, *, handoff: bool = False) -> AssistantMessage:
        """The call's message: its final one, or its partial marked aborted / errored (as it is, for
        a handoff: the call goes on)."""
        final: AssistantMessage | None = call.state["final"]
        signal = call.signal
        if final is not None and not (signal.aborted and final.stop_reason != "aborted"):
            return final
        partial: AssistantMessage | None = final or call.state["partial"]
        base = partial or AssistantMessage(
            api=inp.model.api, provider=inp.model.provider, model=inp.model.id, timestamp=_now_ms()
        )
        if handoff:
            return base
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

    def _keep_parked(self, key: str, call: _Call, inp: StreamInput) -> None:
        """A handed-off call that ended before a remote attempt took it over: its answer is kept as
        a local attempt's is (this worker may die before the remote attempt comes for it)."""
        final: AssistantMessage | None = call.state["final"]
        if self._calls.get(key) is not call or call.task.cancelled() or final is None:
            return
        if call.state["retry"] is not None or call.signal.aborted or is_context_overflow(final):
            return  # (no answer: the call is made again, or answered by compacting first)
        self._keep(inp, final)  # a small file, rarely: not worth a thread

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
        call.signal.abort("handoff expired")
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
