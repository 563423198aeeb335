"""The HTTP half of a provider call: one shared ``httpx.AsyncClient`` per event loop, and the producer
that posts an ``HttpRequest``, reads the response body, parses its SSE events and queues them (or a
``ProviderFailure``, or ``END``) for ``driver.drive_sse``."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx
import orjson
from httpx_aiohttp import HttpxAiohttpClient

from .errors import ProviderFailure, classify_http_status, classify_stream_error, error_text_from_body
from .sse import SseEvent, SseParser

logger = logging.getLogger("agentcore.providers")

# Connect fails fast; reads may legitimately pause for minutes while a model thinks.
HTTP_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=30.0)
# Every open connection may be kept for the next call (httpx keeps 20 of its 100): a worker running
# more than 20 model calls at once otherwise closes and reopens connections on every call.
HTTP_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100)
_MAX_ERROR_BODY_BYTES = 64 * 1024
# With the optional ``h2`` package installed, the shared client is httpx's own (see ``_new_client``).
_HTTP2 = importlib.util.find_spec("h2") is not None


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


class _Sentinel:
    pass


END = _Sentinel()
ABORTED = _Sentinel()
QueueItem = list[SseEvent] | ProviderFailure | _Sentinel


async def produce(request: HttpRequest, provider: str, queue: asyncio.Queue[QueueItem]) -> None:
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
            queue.put_nowait(END)
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
