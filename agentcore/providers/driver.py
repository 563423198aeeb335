"""The stream driver: ``stream_sse_provider`` (a provider's whole ``StreamFn``) and ``drive_sse``, which
runs one streaming request through a protocol's ``SseHandler`` and guarantees the contract: the
stream never raises, it ends with exactly one ``done`` or ``error`` event, and an abort closes the
HTTP stream at once while keeping the partial content."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Protocol

from ..events import StreamEvent
from ..model import Model
from ..runtime import AbortSignal, StreamOptions
from .builder import PartialMessageBuilder
from .errors import ProviderFailure
from .keys import env_var_for, resolve_api_key
from .sse import SseEvent
from .transport import ABORTED, HttpRequest, QueueItem, produce

logger = logging.getLogger("agentcore.providers")


class SseHandler(Protocol):
    """The protocol half of a provider: SSE events in, builder calls and stream events out."""

    builder: PartialMessageBuilder
    #: Set once the protocol's terminator ([DONE], message_stop) has been handled.
    finished: bool

    def on_event(self, event: SseEvent) -> list[StreamEvent]:
        """May raise ``ProviderFailure`` (an error event inside the stream)."""
        ...

    def on_end_of_stream(self) -> list[StreamEvent]:
        """The body ended before the terminator: finish (ending with ``done``) or raise ``ProviderFailure``."""
        ...


# How long a finished stream waits for the rest of its body (the chunked terminator) to arrive.
_DRAIN_SECONDS = 1.0


async def stream_sse_provider(
    model: Model,
    options: StreamOptions,
    make_handler: Callable[[PartialMessageBuilder], SseHandler],
    make_request: Callable[[str | None], HttpRequest],
) -> AsyncIterator[StreamEvent]:
    """A provider's whole ``StreamFn``: resolve the key, build the request, drive the stream."""
    builder = PartialMessageBuilder(model)
    api_key = await resolve_api_key(model.provider, options.api_key)

    def build_request() -> HttpRequest:
        # Only the vendor's own endpoint certainly needs a key; local servers usually take none.
        if not api_key and model.base_url is None:
            hint = f"set {env_var_for(model.provider)} or pass StreamOptions.api_key"
            raise ProviderFailure(model.provider, f"no API key ({hint})", retryable=False, kind="config")
        return make_request(api_key)

    async for event in drive_sse(builder, make_handler(builder), build_request, options, api_key):
        yield event


async def drive_sse(
    builder: PartialMessageBuilder,
    handler: SseHandler,
    build_request: Callable[[], HttpRequest],
    options: StreamOptions,
    api_key: str | None,
) -> AsyncIterator[StreamEvent]:
    """Run one streaming request to its single final event. Never raises (except cancellation)."""
    signal: AbortSignal | None = options.signal
    yield builder.start()
    if signal is not None and signal.aborted:
        yield builder.aborted()
        return
    request = _build_request(builder, build_request, api_key)
    if not isinstance(request, HttpRequest):
        yield request  # why it could not be built
        return

    queue: asyncio.Queue[QueueItem] = asyncio.Queue()
    producer = asyncio.create_task(produce(request, builder.model.provider, queue))

    def on_abort() -> None:
        # Wake the consumer at once and tear the connection down; don't wait for the next chunk.
        producer.cancel()
        queue.put_nowait(ABORTED)

    remove_listener = signal.add_listener(on_abort) if signal is not None else None
    try:
        async with contextlib.aclosing(
            _consume(builder, handler, queue, producer, signal, api_key)
        ) as events:
            async for event in events:
                yield event
    finally:
        if remove_listener is not None:
            remove_listener()
        await _release(handler, producer)


def _build_request(
    builder: PartialMessageBuilder, build_request: Callable[[], HttpRequest], api_key: str | None
) -> HttpRequest | StreamEvent:
    """The request, or the stream's final event saying why it could not be built."""
    provider = builder.model.provider
    try:
        return build_request()
    except ProviderFailure as failure:
        return builder.failed(failure, api_key)
    except Exception as exc:  # a bug in request building must still end the stream properly
        logger.exception("building the %s request failed", provider)
        return builder.failed(
            ProviderFailure(provider, f"could not build request: {exc}", retryable=False, kind="config"),
            api_key,
        )


async def _consume(
    builder: PartialMessageBuilder,
    handler: SseHandler,
    queue: asyncio.Queue[QueueItem],
    producer: asyncio.Task[None],
    signal: AbortSignal | None,
    api_key: str | None,
) -> AsyncGenerator[StreamEvent, None]:
    """The events of what the producer queues, to the stream's final one."""
    provider = builder.model.provider
    while True:
        item = await queue.get()
        if item is ABORTED or (signal is not None and signal.aborted):
            await _settle(producer)
            yield builder.aborted()
            return
        if isinstance(item, ProviderFailure):
            yield builder.failed(item, api_key)
            return
        try:
            if isinstance(item, list):
                for sse in item:
                    for event in handler.on_event(sse):
                        yield event
                    if handler.finished:
                        return
                    if signal is not None and signal.aborted:
                        break  # the abort sentinel is already queued
            else:  # END: the body ended without the protocol's terminator
                for event in handler.on_end_of_stream():
                    yield event
                return
        except ProviderFailure as failure:
            yield builder.failed(failure, api_key)
            return
        except Exception as exc:
            logger.exception("parsing the %s stream failed", provider)
            garbled = ProviderFailure(
                provider, f"could not parse stream: {exc}", retryable=False, kind="stream"
            )
            yield builder.failed(garbled, api_key)
            return


async def _release(handler: SseHandler, producer: asyncio.Task[None]) -> None:
    """Let the producer finish reading a stream that ended, else stop it."""
    try:
        if handler.finished and not producer.done():
            # The body ends right after the protocol's terminator: let the producer read it to
            # the end so the connection goes back to the pool. Cancelling it there can catch
            # httpcore between end-of-message and releasing the connection, which leaves the
            # connection ACTIVE for good (measured: every call against a zero-latency server
            # leaked one, and a worker's 101st model call failed with PoolTimeout).
            await asyncio.wait({producer}, timeout=_DRAIN_SECONDS)
    finally:
        if not producer.done():
            producer.cancel()
            await _settle(producer)


async def _settle(task: asyncio.Task[None]) -> None:
    """Wait for a cancelled producer to finish closing its connection."""
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # our own caller is being cancelled: let that proceed
