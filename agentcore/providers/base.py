"""What both providers share: the partial-message builder, the HTTP/SSE driver and message clean-up.

A provider module only knows its protocol: how to turn our context into a request body, and how to
turn each SSE event into builder calls. Everything else is here, written once:

* ``PartialMessageBuilder`` owns the ``AssistantMessage`` under construction and emits the
  ``StreamEvent``s (``text_start``/``delta``/``end``, ``thinking_*``, ``toolcall_*``, ``done``,
  ``error``). Tool arguments are re-parsed leniently on every delta and strictly at the end.
* ``drive_sse`` posts the request on a shared ``httpx.AsyncClient`` (aiohttp's pooled transport), reads
  the body in a producer task, parses SSE, and guarantees the contract: the stream never raises, it
  ends with exactly one ``done`` or ``error`` event, and an abort closes the HTTP stream at once while
  keeping the partial content.
* ``normalize_messages`` repairs a transcript so any provider accepts it (drops failed turns, answers
  orphaned tool calls).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import logging
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import aiohttp
import httpx
import orjson
from httpx_aiohttp import HttpxAiohttpClient

from ..events import (
    StreamDone,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from ..messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ..model import Model
from ..runtime import AbortSignal, StreamOptions
from .catalog import calculate_cost
from .errors import (
    ProviderFailure,
    classify_http_status,
    classify_stream_error,
    error_text_from_body,
    redact,
)
from .keys import env_var_for, resolve_api_key
from .partial_json import parse_final_arguments, parse_partial_json
from .sse import SseEvent, SseParser

logger = logging.getLogger("agentcore.providers")

ABORTED_MESSAGE = "Request was aborted"
# Connect fails fast; reads may legitimately pause for minutes while a model thinks.
HTTP_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=30.0)
# Every open connection may be kept for the next call (httpx keeps 20 of its 100): a worker running
# more than 20 model calls at once otherwise closes and reopens connections on every call.
HTTP_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100)
_MAX_ERROR_BODY_BYTES = 64 * 1024
# With the optional ``h2`` package installed, the shared client is httpx's own (see ``_new_client``).
_HTTP2 = importlib.util.find_spec("h2") is not None

BlockKind = Literal["text", "thinking", "toolCall"]


# ------------------------------------------------------------------------------------------ builder


class PartialMessageBuilder:
    """Builds one ``AssistantMessage`` from protocol deltas and emits the matching ``StreamEvent``s.

    Content indexes are positions in ``message.content``. Every event carries ``partial``, the message
    itself (a reference, so building it costs nothing per delta).
    """

    def __init__(self, model: Model) -> None:
        self.model = model
        self.message = AssistantMessage(
            api=model.api, provider=model.provider, model=model.id, timestamp=int(time.time() * 1000)
        )
        self._open: dict[int, BlockKind] = {}
        self._raw_arguments: dict[int, str] = {}

    def start(self) -> StreamStart:
        return StreamStart(partial=self.message)

    def is_open(self, index: int) -> bool:
        return index in self._open

    # -- opening blocks

    def open_text(self) -> tuple[int, StreamEvent]:
        index = self._append(TextContent(text=""), "text")
        return index, TextStart(content_index=index, partial=self.message)

    def open_thinking(
        self, *, signature: str | None = None, redacted: bool = False
    ) -> tuple[int, StreamEvent]:
        block = ThinkingContent(thinking="", thinking_signature=signature, redacted=redacted)
        index = self._append(block, "thinking")
        return index, ThinkingStart(content_index=index, partial=self.message)

    def open_tool_call(self, call_id: str, name: str) -> tuple[int, StreamEvent]:
        index = self._append(ToolCall(id=call_id, name=name), "toolCall")
        self._raw_arguments[index] = ""
        return index, ToolCallStart(content_index=index, partial=self.message)

    def _append(self, block: TextContent | ThinkingContent | ToolCall, kind: BlockKind) -> int:
        self.message.content.append(block)
        index = len(self.message.content) - 1
        self._open[index] = kind
        return index

    # -- deltas

    def text(self, index: int, delta: str) -> TextDelta:
        block = self.message.content[index]
        assert isinstance(block, TextContent)
        block.text += delta
        return TextDelta(content_index=index, delta=delta, partial=self.message)

    def thinking(self, index: int, delta: str) -> ThinkingDelta:
        block = self.message.content[index]
        assert isinstance(block, ThinkingContent)
        block.thinking += delta
        return ThinkingDelta(content_index=index, delta=delta, partial=self.message)

    def thinking_signature(self, index: int, signature: str) -> None:
        block = self.message.content[index]
        assert isinstance(block, ThinkingContent)
        block.thinking_signature = (block.thinking_signature or "") + signature

    def tool_arguments(self, index: int, delta: str) -> ToolCallDelta:
        block = self.message.content[index]
        assert isinstance(block, ToolCall)
        raw = self._raw_arguments.get(index, "") + delta
        self._raw_arguments[index] = raw
        block.arguments = parse_partial_json(raw)
        return ToolCallDelta(content_index=index, delta=delta, partial=self.message)

    def tool_identity(self, index: int, *, call_id: str | None = None, name: str | None = None) -> None:
        """Fill in an id or name that arrived after the call opened (some compatible servers)."""
        block = self.message.content[index]
        assert isinstance(block, ToolCall)
        if call_id and not block.id:
            block.id = call_id
        if name and not block.name:
            block.name = name

    # -- closing

    def close(self, index: int) -> StreamEvent | None:
        """End a block; returns its end event (None when it was not open)."""
        kind = self._open.pop(index, None)
        block = self.message.content[index]
        if kind == "text" and isinstance(block, TextContent):
            return TextEnd(content_index=index, content=block.text, partial=self.message)
        if kind == "thinking" and isinstance(block, ThinkingContent):
            return ThinkingEnd(content_index=index, content=block.thinking, partial=self.message)
        if kind == "toolCall" and isinstance(block, ToolCall):
            # Strict parse: a tool runs only on arguments the model actually finished.
            block.arguments = parse_final_arguments(self._raw_arguments.get(index, ""))
            return ToolCallEnd(content_index=index, tool_call=block, partial=self.message)
        return None

    def close_all(self) -> list[StreamEvent]:
        return [event for index in sorted(self._open) if (event := self.close(index)) is not None]

    def set_usage(self, usage: Usage) -> None:
        self.message.usage = calculate_cost(self.model, usage)

    def done(self, stop_reason: Literal["stop", "length", "toolUse"]) -> list[StreamEvent]:
        events = self.close_all()
        # Some compatible servers (Ollama) report "stop" for a turn that called tools; the loop
        # decides whether to run tools from the stop reason, so trust the content.
        if stop_reason == "stop" and self.message.tool_calls:
            stop_reason = "toolUse"
        self.message.stop_reason = stop_reason
        events.append(StreamDone(reason=stop_reason, message=self.message))
        return events

    def failed(self, failure: ProviderFailure, api_key: str | None) -> StreamError:
        self.close_all()  # finalise partial blocks (tool arguments) without emitting end events
        self.message.stop_reason = "error"
        self.message.error_message = redact(failure.describe(), api_key)
        return StreamError(
            reason="error",
            error=self.message,
            retryable=failure.retryable,
            retry_after_seconds=failure.retry_after_seconds,
            status_code=failure.status_code,
        )

    def aborted(self) -> StreamError:
        self.close_all()
        self.message.stop_reason = "aborted"
        self.message.error_message = ABORTED_MESSAGE
        return StreamError(reason="aborted", error=self.message)


# ------------------------------------------------------------------------------------------- driver


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


@dataclass
class HttpRequest:
    url: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncGenerator[None, None]]
] = weakref.WeakKeyDictionary()


async def shared_client() -> httpx.AsyncClient:
    """One client per event loop: keep-alive connections save a TLS handshake on every model call.

    A client's connections belong to the loop that opened them, hence one per loop (tests, Temporal
    workers and the in-process agent may each run their own loop); the client is closed as its loop
    shuts down. ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY`` and ``SSL_CERT_FILE`` are honoured
    (httpx's ``trust_env``). The requests go through aiohttp's transport (``httpx-aiohttp``):
    httpx's own pool costs a call 0.4-1.7 ms of CPU more, growing with its open connections. With
    the ``h2`` package installed (``pip install 'agentcore[http2]'``) HTTPS endpoints speak HTTP/2
    through httpx's transport instead."""
    loop = asyncio.get_running_loop()
    held = _clients.get(loop)
    if held is not None and not held[0].is_closed:
        return held[0]
    client = _new_client()
    closer = _closed_with_the_loop(client)
    await anext(closer)
    _clients[loop] = (client, closer)
    return client


def _new_client() -> httpx.AsyncClient:
    if _HTTP2:
        return httpx.AsyncClient(timeout=HTTP_TIMEOUT, limits=HTTP_LIMITS, http2=True, trust_env=True)
    return HttpxAiohttpClient(timeout=HTTP_TIMEOUT, limits=HTTP_LIMITS, trust_env=True)


async def _closed_with_the_loop(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    """Parked at its ``yield`` until the loop's ``shutdown_asyncgens()`` (``asyncio.run`` and
    pytest-asyncio call it) closes it, and with it the client: aiohttp reports a session that is
    collected unclosed as an error."""
    try:
        yield
    finally:
        await client.aclose()


async def aclose_shared_client() -> None:
    """Close this loop's shared client (the next model call opens a new one)."""
    held = _clients.pop(asyncio.get_running_loop(), None)
    if held is not None:
        await held[1].aclose()


# How long a finished stream waits for the rest of its body (the chunked terminator) to arrive.
_DRAIN_SECONDS = 1.0


class _Sentinel:
    pass


_END = _Sentinel()
_ABORTED = _Sentinel()
_QueueItem = list[SseEvent] | ProviderFailure | _Sentinel


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

    queue: asyncio.Queue[_QueueItem] = asyncio.Queue()
    producer = asyncio.create_task(_produce(request, builder.model.provider, queue))

    def on_abort() -> None:
        # Wake the consumer at once and tear the connection down; don't wait for the next chunk.
        producer.cancel()
        queue.put_nowait(_ABORTED)

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
    queue: asyncio.Queue[_QueueItem],
    producer: asyncio.Task[None],
    signal: AbortSignal | None,
    api_key: str | None,
) -> AsyncGenerator[StreamEvent, None]:
    """The events of what the producer queues, to the stream's final one."""
    provider = builder.model.provider
    while True:
        item = await queue.get()
        if item is _ABORTED or (signal is not None and signal.aborted):
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
            else:  # _END: the body ended without the protocol's terminator
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


async def _produce(request: HttpRequest, provider: str, queue: asyncio.Queue[_QueueItem]) -> None:
    client = await shared_client()
    try:
        async with client.stream(
            "POST", request.url, content=orjson.dumps(request.body), headers=request.headers
        ) as response:
            logger.debug("%s responded %s to POST %s", provider, response.status_code, request.url)
            if response.status_code >= 300:
                body = await _read_limited(response)
                retryable, delay, text = classify_http_status(response.status_code, body, response.headers)
                queue.put_nowait(
                    ProviderFailure(
                        provider,
                        text,
                        retryable=retryable,
                        status_code=response.status_code,
                        retry_after_seconds=delay,
                    )
                )
                return
            if response.headers.get("content-type", "").startswith("application/json"):
                # A server that answers a streaming request with a JSON body (a model still loading,
                # a proxy's error page) said something; it is not a stream that broke off.
                body = await _read_limited(response)
                text = error_text_from_body(body) or "an empty JSON body"
                queue.put_nowait(
                    ProviderFailure(
                        provider,
                        f"expected an event stream, got JSON: {text}",
                        retryable=classify_stream_error("", text),
                        status_code=response.status_code,
                        kind="stream",
                    )
                )
                return
            parser = SseParser()
            async for chunk in response.aiter_bytes():
                events = parser.feed(chunk)
                if events:
                    queue.put_nowait(events)
            tail = parser.finish()
            if tail:
                queue.put_nowait(tail)
            queue.put_nowait(_END)
    except (httpx.TransportError, aiohttp.ClientError) as exc:
        # Connection refused, reset, timed out, dropped mid-body, or a malformed response (which
        # aiohttp raises as its own error): the request may well succeed next time.
        queue.put_nowait(ProviderFailure(provider, _wire_failure(exc), retryable=True, kind="connection"))
    except httpx.HTTPError as exc:
        queue.put_nowait(
            ProviderFailure(provider, str(exc) or type(exc).__name__, retryable=False, kind="connection")
        )


def _wire_failure(exc: Exception) -> str:
    """What went wrong on the wire. aiohttp's own error says it best: the httpx name its transport
    gives it can mislead (a refused connection arrives as ``ConnectTimeout``)."""
    cause = exc.__cause__ if isinstance(exc.__cause__, aiohttp.ClientError) else None
    if isinstance(cause, TimeoutError) or (cause is None and isinstance(exc, httpx.TimeoutException)):
        return f"timed out ({type(exc).__name__})"
    named = cause or exc
    return str(named) or type(named).__name__


async def _read_limited(response: httpx.Response) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= _MAX_ERROR_BODY_BYTES:
            break
    return bytes(body)


# ------------------------------------------------------------------------------------ transcripts

NO_RESULT_TEXT = "No result provided"


def normalize_messages(messages: Sequence[Message], model: Model) -> list[Message]:
    """A transcript every provider accepts.

    * Failed or aborted assistant turns are dropped: their partial content may end mid tool call, and
      the provider never produced them as a whole.
    * A tool result whose call is gone (dropped with such a turn) is dropped too.
    * A tool call left without a result (the run was interrupted) gets an error result, because both
      APIs reject a transcript where a call is never answered.
    * Images go to a model that cannot see them as a short text note instead.
    """
    normalizer = Normalizer(model)
    normalizer.feed(messages)
    return normalizer.kept + normalizer.unanswered()


class Normalizer:
    """``normalize_messages`` fed a piece at a time: ``kept`` never changes once a message is fed
    past it, so a conversion of it can be kept too (see ``ConversionMemo``). Only the calls still
    waiting for their results at the end (``unanswered``) depend on what comes next."""

    def __init__(self, model: Model) -> None:
        self.kept: list[Message] = []
        self._images = "image" in model.input
        self._known_calls: set[str] = set()
        self._pending: list[ToolCall] = []
        self._pending_timestamp = 0

    def feed(self, messages: Iterable[Message]) -> None:
        kept, images = self.kept, self._images
        for message in messages:
            if isinstance(message, ToolResultMessage):
                call_id = message.tool_call_id
                if call_id not in self._known_calls:
                    continue
                if self._pending:
                    self._pending = [call for call in self._pending if call.id != call_id]
                kept.append(message if images else _without_images(message))
                continue
            if self._pending:
                kept += self.unanswered()
                self._pending = []
            if isinstance(message, AssistantMessage):
                if message.stop_reason in ("error", "aborted"):
                    continue
                calls = message.tool_calls
                if calls:
                    self._pending = calls
                    self._pending_timestamp = message.timestamp
                    self._known_calls.update(call.id for call in calls)
                kept.append(message)
            else:
                kept.append(message if images else _without_images(message))

    def unanswered(self) -> list[Message]:
        """Error results for the calls still waiting for theirs."""
        return [
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=[TextContent(text=NO_RESULT_TEXT)],
                is_error=True,
                timestamp=self._pending_timestamp,
            )
            for call in self._pending
        ]


class ConversionMemo:
    """A conversation's last conversion, for the next call to carry on from.

    Converting a context to a request body takes time in proportion to its length on every model
    call, though a conversation's calls mostly differ by their last few messages. A caller whose
    message objects never change once built passes one memo per conversation as
    ``StreamOptions.conversion_memo``: when a call's messages begin with the previous call's, the
    provider converts only the rest. The worker does (its session store hands every call of a
    conversation the same message objects). Messages are matched by identity (the last few also by
    equality: the worker rebuilds the newest ones per call), so a caller that may change a message
    after a call must pass none; the in-process ``Agent`` passes none.

    A provider asks ``resume`` for its state, feeds it what follows, and gives it back with ``keep``.
    What a provider keeps is shared with later calls and must not change once returned in a request.
    """

    # The previous call's last messages may be equal copies; past this many it converts afresh.
    RECHECK = 32

    __slots__ = ("_key", "_messages", "_state")

    def __init__(self) -> None:
        self._key: Hashable = None
        self._messages: list[Message] = []  # held: their ids stay theirs while kept
        self._state: Any = None

    def resume(self, key: Hashable, messages: Sequence[Message]) -> tuple[Any, int]:
        """The state kept by the last conversion and how many of ``messages`` it covers, or (None,
        0) when ``messages`` do not begin with that conversion's or ``key`` (what the conversion
        depends on besides the messages) differs. The memo is empty afterwards, so a conversion
        that fails half way leaves nothing half done behind."""
        state, previous, same_key = self._state, self._messages, self._key == key
        self._key, self._messages, self._state = None, [], None
        count = len(previous)
        if state is None or not same_key or len(messages) < count:
            return None, 0
        head = max(0, count - self.RECHECK)
        if list(map(id, messages[:head])) != list(map(id, previous[:head])):
            return None, 0
        for old, new in zip(previous[head:], messages[head:count], strict=True):
            if old is not new and old != new:
                return None, 0
        return state, count

    def keep(self, key: Hashable, messages: Sequence[Message], state: Any) -> None:
        """Remember ``state``: the conversion of ``messages``, for ``key``."""
        self._key, self._messages, self._state = key, list(messages), state


@dataclass
class Conversion:
    """A provider's conversion so far (a provider adds its wire entries): ``normalizer`` holds the
    messages it normalized."""

    normalizer: Normalizer


_Conversion = TypeVar("_Conversion", bound=Conversion)


def carry_on(
    memo: ConversionMemo | None, key: Hashable, messages: Sequence[Message], start: Callable[[], _Conversion]
) -> _Conversion:
    """The conversion of ``messages`` so far as normalizing goes: the memo's, fed what followed its
    messages, or ``start()`` fed them all. The provider converts what its normalizer added, then
    gives the state back with ``memo.keep``."""
    state, done = memo.resume(key, messages) if memo is not None else (None, 0)
    if state is None:
        state, done = start(), 0
    state.normalizer.feed(itertools.islice(messages, done, None))
    return state


_WithImages = TypeVar("_WithImages", UserMessage, ToolResultMessage)


def _without_images(message: _WithImages) -> _WithImages:
    """``message`` with each image replaced by a note (for a model that takes none)."""
    if not any(isinstance(block, ImageContent) for block in message.content):
        return message
    content = [
        TextContent(text="(image omitted: this model does not accept images)")
        if isinstance(block, ImageContent)
        else block
        for block in message.content
    ]
    return message.model_copy(update={"content": content})
