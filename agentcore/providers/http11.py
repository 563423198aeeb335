"""The providers' HTTP/1.1 transport: keep-alive connections on plain asyncio, under the httpx client.

Why not httpx's own transport: httpcore + h11 + anyio spend 1.0-2.3 ms of CPU on every streamed model
call against a zero-latency server (more the more connections the pool holds: each request start and
end checks every pooled socket for readability, a syscall each); the same client over this transport
spends 0.25-0.45 ms (``bench/RESULTS.md``, entry 24). A tool turn makes two model calls, so that is
about a tenth of the worker's CPU per turn.

Only the wire is ours. The ``httpx.AsyncClient`` still builds requests, decodes content (gzip, ...)
and raises its exception types; this transport carries ``http`` and ``https`` origins, one request at
a time per connection, bodies framed by ``Content-Length``, chunked, or the connection's end. That is
what every model API speaks; HTTP/2 buys nothing for one stream per request. A client given a
transport ignores proxy settings, so with a proxy configured the providers keep httpx's own
(``base._transport``).

Failures map to httpx's tree as httpcore's do: ``ConnectError`` / ``ConnectTimeout`` (nothing was
sent), ``WriteError`` / ``WriteTimeout``, ``ReadError`` / ``ReadTimeout``, ``RemoteProtocolError``
(a malformed response, or the peer closing mid-message), ``PoolTimeout`` (every connection busy for
the pool timeout), ``LocalProtocolError`` (a header value with a line break), ``UnsupportedProtocol``.
A request is never re-sent: an idle connection the server closed (or wrote to) is dropped before use.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import AsyncIterator
from typing import Literal

import httpx

_MAX_HEAD_BYTES = 64 * 1024
_READ_SIZE = 64 * 1024
# Past this much unread response data the socket stops being read (the consumer is slower than
# the server); below half of it reading resumes.
_READ_HIGH_WATER = 256 * 1024

# The blank line ending a response head; a bare LF is accepted as a line end, as h11 does.
_HEAD_END = re.compile(rb"\n\r?\n")

_Origin = tuple[str, str, int]
_Framing = Literal["length", "chunked", "close"]


def _wake(waiter: asyncio.Future[None] | None) -> None:
    """Resolve a reader's or writer's waiter, if one is still waiting."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


async def _wait(
    waiter: asyncio.Future[None], timeout: float | None, on_timeout: httpx.TimeoutException
) -> None:
    try:
        async with asyncio.timeout(timeout):
            await waiter
    except TimeoutError:
        raise on_timeout from None


class _Wire(asyncio.Protocol):
    """One socket's bytes: a receive buffer the response parser reads from, and write flow control."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self._reading_paused = False
        self._data_waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self._writing_paused = False

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _READ_HIGH_WATER and not self._reading_paused and self.transport is not None:
            self.transport.pause_reading()
            self._reading_paused = True
        self._wake_reader()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake_reader()
        return False  # close our side too: an HTTP/1.1 connection is never half-open for us

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        if exc is not None:
            self.error = exc
        self._wake_reader()
        self._writing_paused = False
        self._wake_drainer()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_drainer()

    def _wake_reader(self) -> None:
        waiter, self._data_waiter = self._data_waiter, None
        _wake(waiter)

    def _wake_drainer(self) -> None:
        waiter, self._drain_waiter = self._drain_waiter, None
        _wake(waiter)

    # -- used by the transport

    @property
    def reusable_when_idle(self) -> bool:
        """An idle connection may carry the next request: still open, and the server said nothing
        since the last response (a server about to close often sends a 408 first)."""
        return (
            not self.eof
            and not self.buffer
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def write(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            raise httpx.WriteError("connection closed before the request was sent")
        self.transport.write(data)

    async def drain(self, timeout: float | None) -> None:
        if not self._writing_paused:
            return
        self._drain_waiter = self._loop.create_future()
        await _wait(self._drain_waiter, timeout, httpx.WriteTimeout("timed out sending the request body"))
        if self.error is not None:
            raise httpx.WriteError(str(self.error) or type(self.error).__name__)

    async def _more(self, timeout: float | None) -> None:
        """Wait for data or the end of the connection."""
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        self._data_waiter = self._loop.create_future()
        await _wait(self._data_waiter, timeout, httpx.ReadTimeout("timed out waiting for the server"))

    def _consumed(self) -> None:
        if self._reading_paused and len(self.buffer) < _READ_HIGH_WATER // 2 and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()

    def _raise_if_broken(self) -> None:
        if self.error is not None:
            raise httpx.ReadError(str(self.error) or type(self.error).__name__)

    async def read_head(self, timeout: float | None) -> bytes | None:
        """The response head through its blank line, or None if the connection ended before it."""
        searched = 0
        while True:
            blank = _HEAD_END.search(self.buffer, max(0, searched - 2))
            if blank is not None:
                head = bytes(self.buffer[: blank.end()])
                del self.buffer[: blank.end()]
                self._consumed()
                return head
            if len(self.buffer) > _MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("response head larger than 64 KiB")
            searched = len(self.buffer)
            if self.eof:
                self._raise_if_broken()
                return None
            await self._more(timeout)

    async def read_line(self, timeout: float | None) -> bytes:
        """One CRLF-terminated line (chunk sizes, trailers), without its terminator."""
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[: end + 1]
                self._consumed()
                return line.rstrip(b"\r")
            if len(self.buffer) > _MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("chunk header longer than 64 KiB")
            if self.eof:
                self._raise_if_broken()
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            await self._more(timeout)

    async def read_some(self, limit: int, timeout: float | None) -> bytes:
        """Up to ``limit`` bytes, as soon as any are here; b"" at the connection's end."""
        while not self.buffer:
            if self.eof:
                self._raise_if_broken()
                return b""
            await self._more(timeout)
        if len(self.buffer) <= limit:
            data = bytes(self.buffer)
            self.buffer.clear()
        else:
            data = bytes(self.buffer[:limit])
            del self.buffer[:limit]
        self._consumed()
        return data

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _Connection:
    __slots__ = ("origin", "wire", "idle_since")

    def __init__(self, origin: _Origin, wire: _Wire) -> None:
        self.origin = origin
        self.wire = wire
        self.idle_since = 0.0


class Http11Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 with keep-alive for an ``httpx.AsyncClient`` (``transport=``); see the module docstring.

    ``max_connections`` bounds the requests in flight (a request waits up to the pool timeout for a
    slot), ``max_keepalive_connections`` the idle connections kept, ``keepalive_expiry`` how long one
    stays idle before it is closed rather than reused (servers drop idle connections too)."""

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int | None = 100,
        max_keepalive_connections: int | None = 100,
        keepalive_expiry: float | None = 5.0,
    ) -> None:
        self._ssl_context = ssl_context
        self._slots = asyncio.Semaphore(max_connections) if max_connections is not None else None
        self._max_idle = max_keepalive_connections
        self._expiry = keepalive_expiry
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._idle_count = 0
        self._closed = False

    @classmethod
    def from_limits(cls, limits: httpx.Limits, ssl_context: ssl.SSLContext | None = None) -> Http11Transport:
        return cls(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
        )

    @property
    def idle_connections(self) -> int:
        return self._idle_count

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r} (http and https are)")
        if not url.host:
            raise httpx.UnsupportedProtocol(f"request URL has no host: {url}")
        if self._closed:
            raise RuntimeError("the transport is closed")
        timeouts = request.extensions.get("timeout", {})
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        await self._acquire_slot(timeouts.get("pool"))
        try:
            connection = self._take_idle(origin) or await self._connect(origin, timeouts.get("connect"))
            try:
                await self._send(connection.wire, request, timeouts.get("write"))
                return await self._receive(connection, request, timeouts.get("read"))
            except BaseException:
                connection.wire.close()
                raise
        except BaseException:
            self._release_slot()
            raise

    async def aclose(self) -> None:
        self._closed = True
        for connections in self._idle.values():
            for connection in connections:
                connection.wire.close()
        self._idle.clear()
        self._idle_count = 0

    # -- the pool

    async def _acquire_slot(self, timeout: float | None) -> None:
        if self._slots is None:
            return
        if not self._slots.locked():
            await self._slots.acquire()
            return
        try:
            async with asyncio.timeout(timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout("no connection free within the pool timeout") from None

    def _release_slot(self) -> None:
        if self._slots is not None:
            self._slots.release()

    def _take_idle(self, origin: _Origin) -> _Connection | None:
        connections = self._idle.get(origin)
        now = time.monotonic()
        while connections:
            connection = connections.pop()  # the most recently used is the likeliest to be alive
            self._idle_count -= 1
            fresh = self._expiry is None or now - connection.idle_since < self._expiry
            if fresh and connection.wire.reusable_when_idle:
                return connection
            connection.wire.close()
        return None

    def _give_back(self, connection: _Connection, reusable: bool) -> None:
        self._release_slot()
        if not reusable or self._closed or not connection.wire.reusable_when_idle:
            connection.wire.close()
            return
        if self._max_idle is not None and self._idle_count >= self._max_idle:
            self._drop_oldest_idle()
            if self._idle_count >= self._max_idle:
                connection.wire.close()
                return
        connection.idle_since = time.monotonic()
        self._idle.setdefault(connection.origin, []).append(connection)
        self._idle_count += 1

    def _drop_oldest_idle(self) -> None:
        oldest = min(
            (connections for connections in self._idle.values() if connections),
            key=lambda connections: connections[0].idle_since,
            default=None,
        )
        if oldest:
            oldest.pop(0).wire.close()
            self._idle_count -= 1

    async def _connect(self, origin: _Origin, timeout: float | None) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        context = None
        if scheme == "https":
            if self._ssl_context is None:
                self._ssl_context = httpx.create_ssl_context()
                self._ssl_context.set_alpn_protocols(["http/1.1"])
            context = self._ssl_context
        try:
            async with asyncio.timeout(timeout):
                _, wire = await loop.create_connection(
                    lambda: _Wire(loop), host, port, ssl=context, server_hostname=host if context else None
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except OSError as exc:  # refused, unreachable, DNS, TLS (ssl.SSLError is an OSError)
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return _Connection(origin, wire)

    # -- one exchange

    async def _send(self, wire: _Wire, request: httpx.Request, timeout: float | None) -> None:
        head = bytearray(b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), request.url.raw_path))
        chunked = False
        for name, value in request.headers.raw:
            if b"\n" in value or b"\r" in value or b"\n" in name or b"\r" in name:
                raise httpx.LocalProtocolError(f"line break in request header {name!r}")
            head += name + b": " + value + b"\r\n"
            if name.lower() == b"transfer-encoding" and value.lower().endswith(b"chunked"):
                chunked = True
        head += b"\r\n"
        try:
            pending: bytearray | None = head  # the head and a first body part go out in one write
            stream = request.stream
            assert isinstance(stream, httpx.AsyncByteStream), "an httpx.AsyncClient request"
            async for part in stream:
                if not part:
                    continue
                framed = b"%x\r\n%s\r\n" % (len(part), part) if chunked else part
                if pending is not None:
                    wire.write(bytes(pending + framed))
                    pending = None
                else:
                    wire.write(framed)
                await wire.drain(timeout)
            if pending is not None:
                wire.write(bytes(pending) + (b"0\r\n\r\n" if chunked else b""))
            elif chunked:
                wire.write(b"0\r\n\r\n")
            await wire.drain(timeout)
        except OSError as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from exc

    async def _receive(
        self, connection: _Connection, request: httpx.Request, timeout: float | None
    ) -> httpx.Response:
        wire = connection.wire
        while True:
            head = await wire.read_head(timeout)
            if head is None:
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
            version, status, reason, headers = _parse_head(head)
            if status >= 200:
                break
            if status == 101:
                raise httpx.RemoteProtocolError("unexpected protocol switch (101)")
            # 1xx (103 Early Hints, an unasked-for 100 Continue): the real response follows.
        framing, length = _framing(request.method, status, headers)
        keep_alive = (
            version == b"HTTP/1.1"
            and framing != "close"
            and not _has_token(headers, b"connection", b"close")
            and not _has_token(request.headers.raw, b"connection", b"close")
        )
        body = _ResponseBody(self, connection, framing, length, keep_alive, timeout)
        return httpx.Response(
            status,
            headers=headers,
            stream=body,
            extensions={"http_version": version, "reason_phrase": reason},
        )


class _ResponseBody(httpx.AsyncByteStream):
    """A response's body as it arrives. Closing it gives the connection back to the pool if the
    body was read to its end (else the connection is closed: its remaining bytes are unknown)."""

    def __init__(
        self,
        transport: Http11Transport,
        connection: _Connection,
        framing: _Framing,
        length: int,
        keep_alive: bool,
        timeout: float | None,
    ) -> None:
        self._transport = transport
        self._connection = connection
        self._framing = framing
        self._length = length
        self._keep_alive = keep_alive
        self._timeout = timeout
        self._complete = framing == "length" and length == 0
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._complete:
            return
        wire = self._connection.wire
        timeout = self._timeout
        if self._framing == "length":
            remaining = self._length
            while remaining:
                data = await wire.read_some(min(remaining, _READ_SIZE), timeout)
                if not data:
                    raise httpx.RemoteProtocolError(
                        f"peer closed connection without sending complete message body "
                        f"(received {self._length - remaining} bytes, expected {self._length})"
                    )
                remaining -= len(data)
                yield data
        elif self._framing == "chunked":
            while True:
                size_line = await wire.read_line(timeout)
                try:
                    remaining = int(size_line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(f"malformed chunk size {size_line[:40]!r}") from None
                if remaining < 0:
                    raise httpx.RemoteProtocolError(f"malformed chunk size {size_line[:40]!r}")
                if remaining == 0:
                    while await wire.read_line(timeout):  # trailers, up to the blank line
                        pass
                    break
                while remaining:
                    data = await wire.read_some(min(remaining, _READ_SIZE), timeout)
                    if not data:
                        raise httpx.RemoteProtocolError(
                            "peer closed connection without sending complete message body (incomplete chunked read)"
                        )
                    remaining -= len(data)
                    yield data
                if await wire.read_line(timeout):
                    raise httpx.RemoteProtocolError("chunk data longer than its declared size")
        else:
            while data := await wire.read_some(_READ_SIZE, timeout):
                yield data
        self._complete = True

    async def aclose(self) -> None:
        # No await before the connection is settled: this runs in a cancelled task on an abort.
        if self._closed:
            return
        self._closed = True
        self._transport._give_back(self._connection, reusable=self._complete and self._keep_alive)


def _parse_head(head: bytes) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    lines = [line.rstrip(b"\r") for line in head.split(b"\n")]
    while lines and not lines[-1]:
        lines.pop()
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:80]!r}")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):  # obsolete line folding: a continuation of the previous value
            if not headers:
                raise httpx.RemoteProtocolError("response head starts with a continuation line")
            name, value = headers[-1]
            headers[-1] = (name, value + b" " + line.strip(b" \t"))
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip(b" \t"):
            raise httpx.RemoteProtocolError(f"malformed response header {line[:80]!r}")
        headers.append((name, value.strip(b" \t")))
    return version, int(code), reason, headers


def _framing(method: str, status: int, headers: list[tuple[bytes, bytes]]) -> tuple[_Framing, int]:
    """How the body ends (RFC 9112 section 6.3)."""
    if method == "HEAD" or status in (204, 304):
        return "length", 0
    codings = [value for name, value in headers if name.lower() == b"transfer-encoding"]
    if codings:
        last = b",".join(codings).split(b",")[-1].strip().lower()
        return ("chunked", 0) if last == b"chunked" else ("close", 0)
    # Repeated headers and comma-separated lists may repeat one length, never disagree.
    parts = [
        part.strip()
        for name, value in headers
        if name.lower() == b"content-length"
        for part in value.split(b",")
    ]
    if not parts:
        return "close", 0
    if not all(part.isdigit() for part in parts):
        raise httpx.RemoteProtocolError(f"invalid Content-Length {parts!r}")
    values = {int(part) for part in parts}
    if len(values) > 1:
        raise httpx.RemoteProtocolError(f"conflicting Content-Length values {sorted(values)!r}")
    return "length", values.pop()


def _has_token(headers: list[tuple[bytes, bytes]], name: bytes, token: bytes) -> bool:
    return any(
        key.lower() == name and token in (part.strip().lower() for part in value.split(b","))
        for key, value in headers
    )
