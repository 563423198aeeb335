"""The providers' HTTP/1.1 transport, against raw loopback servers that write every byte themselves:
body framings, keep-alive reuse and its limits, broken and malformed responses, timeouts, aborts,
TLS, and what the httpx client keeps doing on top (content decoding), and the proxy fallback."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import shutil
import ssl
import subprocess
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import orjson
import pytest

from agentcore.providers.http11 import Http11Transport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """Runs ``handler`` for each accepted connection; counts connections and requests."""

    def __init__(self, handler: Handler, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.accepted = 0
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self.ssl_context)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    def url(self, path: str = "/v1/chat", scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes | None:
        """One request, head and body (Content-Length or chunked), as received; None at EOF."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lower = head.lower()
        body = b""
        if b"content-length:" in lower:
            length = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
            body = await reader.readexactly(length)
        elif b"transfer-encoding: chunked" in lower:
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.strip(), 16)
                body += size_line + await reader.readexactly(size + 2)
                if size == 0:
                    break
        self.requests.append(head + body)
        return head + body


def keep_alive_server(responses: list[bytes]) -> Handler:
    """Answers each request on a connection with the next response of ``responses`` (cycling)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = 0
        while await server_of[0].read_request(reader) is not None:
            writer.write(responses[index % len(responses)])
            await writer.drain()
            index += 1

    server_of: list[RawServer] = []
    handler.bind = server_of  # type: ignore[attr-defined]
    return handler


async def serve(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> RawServer:
    server = RawServer(handler, ssl_context)
    bind = getattr(handler, "bind", None)
    if bind is not None:
        bind.append(server)
    return await server.__aenter__()


def client(**transport_options: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=Http11Transport(**transport_options),  # type: ignore[arg-type]
        timeout=httpx.Timeout(5.0),
    )


OK_LENGTH = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
OK_CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"4;ext=1\r\ndata\r\n6\r\n: more\r\n0\r\nX-Trailer: yes\r\n\r\n"
)


@pytest.fixture
async def servers() -> AsyncIterator[list[RawServer]]:
    started: list[RawServer] = []
    yield started
    for server in started:
        await server.__aexit__()


async def start(servers: list[RawServer], handler: Handler, **options: object) -> RawServer:
    server = await serve(handler, **options)  # type: ignore[arg-type]
    servers.append(server)
    return server


# ------------------------------------------------------------------------------------- framing


async def test_bodies_by_length_chunked_and_reuse_one_connection(servers):
    server = await start(servers, keep_alive_server([OK_LENGTH, OK_CHUNKED]))
    async with client() as http:
        first = await http.post(server.url(), content=b'{"a": 1}', headers={"authorization": "Bearer k"})
        second = await http.post(server.url(), content=b"{}")
        third = await http.get(server.url("/models?x=1"))
    assert (first.status_code, first.text, first.reason_phrase, first.http_version) == (
        200,
        "hello",
        "OK",
        "HTTP/1.1",
    )
    assert second.content == b"data: more"
    assert third.text == "hello"
    assert server.accepted == 1  # keep-alive: one connection carried all three
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat HTTP/1.1\r\n")
    assert b"\r\ncontent-length: 8" in head.lower() and b"\r\nauthorization: Bearer k" in head
    assert b"\r\nhost: 127.0.0.1:" in head.lower() and body == b'{"a": 1}'
    assert server.requests[2].startswith(b"GET /models?x=1 HTTP/1.1\r\n")


async def test_body_read_to_the_end_of_the_connection(servers):
    async def handler(reader, writer):
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\nuntil the end")
        await writer.drain()
        writer.close()

    server = await start(servers, handler)
    async with client() as http:
        responses = [await http.get(server.url()) for _ in range(2)]
    assert [r.text for r in responses] == ["until the end"] * 2
    assert server.accepted == 2  # a close-delimited body cannot leave the connection reusable


async def test_head_204_and_304_have_no_body(servers):
    no_body = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n",  # answer to HEAD: the length is the GET's
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 999\r\n\r\n",
        OK_LENGTH,
    ]
    server = await start(servers, keep_alive_server(no_body))
    async with client() as http:
        head = await http.head(server.url())
        empty = await http.delete(server.url())
        unchanged = await http.get(server.url())
        after = await http.get(server.url())
    assert (head.status_code, head.content) == (200, b"")
    assert (empty.status_code, empty.content) == (204, b"")
    assert (unchanged.status_code, unchanged.content) == (304, b"")
    assert after.text == "hello" and server.accepted == 1


async def test_informational_responses_are_skipped_and_folded_headers_joined(servers):
    response = (
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nX-Long: part one\r\n  part two\r\nContent-Length: 2\r\n\r\nok"
    )
    server = await start(servers, keep_alive_server([response]))
    async with client() as http:
        answer = await http.get(server.url())
    assert (answer.status_code, answer.text) == (200, "ok")
    assert answer.headers["x-long"] == "part one part two"


async def test_bare_line_feeds_end_lines_as_h11_accepts(servers):
    response = b"HTTP/1.1 200 OK\nContent-Length: 3\nX-Mixed: yes\r\n\nabc"
    server = await start(servers, keep_alive_server([response]))
    async with client() as http:
        answers = [await http.get(server.url()) for _ in range(2)]
    assert [(a.text, a.headers["x-mixed"]) for a in answers] == [("abc", "yes")] * 2
    assert server.accepted == 1


async def test_content_encoding_is_still_decoded_by_httpx(servers):
    packed = gzip.compress(b"compressed words")
    response = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (
        len(packed),
        packed,
    )
    server = await start(servers, keep_alive_server([response]))
    async with client() as http:
        answer = await http.get(server.url())
    assert answer.text == "compressed words"


async def test_chunked_request_body_and_streamed_response(servers):
    release = asyncio.Event()

    async def handler(reader, writer):
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"7\r\nsecond\n\r\n0\r\n\r\n")
        await writer.drain()
        await reader.read()

    async def parts() -> AsyncIterator[bytes]:
        yield b"one,"
        yield b""
        yield b"two"

    server = await start(servers, handler)
    async with client() as http:
        async with http.stream("POST", server.url(), content=parts()) as response:
            received = []
            async for chunk in response.aiter_bytes():
                received.append(chunk)
                release.set()  # the second part is only sent once the first was delivered
    assert received == [b"first\n", b"second\n"]
    assert server.requests[0].lower().count(b"transfer-encoding: chunked") == 1
    assert server.requests[0].endswith(b"\r\n\r\n4\r\none,\r\n3\r\ntwo\r\n0\r\n\r\n")


# ------------------------------------------------------------------------------- the pool


async def test_a_connection_closed_by_the_server_while_idle_is_not_reused(servers):
    async def handler(reader, writer):
        await server.read_request(reader)
        writer.write(OK_LENGTH)
        await writer.drain()
        writer.close()  # keep-alive was promised, the server drops the connection anyway

    server = await start(servers, handler)
    async with client() as http:
        first = await http.get(server.url())
        await asyncio.sleep(0.05)
        second = await http.get(server.url())
    assert first.text == second.text == "hello" and server.accepted == 2


async def test_an_idle_connection_the_server_wrote_to_is_not_reused(servers):
    async def handler(reader, writer):
        await server.read_request(reader)
        writer.write(OK_LENGTH)
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")  # then it would close
        await writer.drain()
        await reader.read()

    server = await start(servers, handler)
    async with client() as http:
        await http.get(server.url())
        await asyncio.sleep(0.1)
        again = await http.get(server.url())
    assert again.status_code == 200 and server.accepted == 2


async def test_connection_close_and_http10_end_keep_alive(servers):
    server = await start(
        servers,
        keep_alive_server(
            [
                b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\na",
                b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nb",
            ]
        ),
    )
    async with client() as http:
        texts = [(await http.get(server.url())).text for _ in range(3)]
    assert texts == ["a", "a", "a"] and server.accepted == 3


async def test_idle_connections_expire_and_are_capped(servers):
    server = await start(servers, keep_alive_server([OK_LENGTH]))
    async with client(keepalive_expiry=0.05, max_keepalive_connections=1) as http:
        await http.get(server.url())
        await asyncio.sleep(0.1)
        await http.get(server.url())  # the idle one expired: a new connection
        assert server.accepted == 2
        await asyncio.gather(*(http.get(server.url()) for _ in range(3)))
        transport = http._transport
        assert isinstance(transport, Http11Transport) and transport.idle_connections == 1


async def test_pool_timeout_when_every_connection_is_busy(servers):
    hold = asyncio.Event()

    async def handler(reader, writer):
        await server.read_request(reader)
        await hold.wait()
        writer.write(OK_LENGTH)
        await writer.drain()
        await reader.read()

    server = await start(servers, handler)
    http = httpx.AsyncClient(
        transport=Http11Transport(max_connections=1), timeout=httpx.Timeout(5.0, pool=0.1)
    )
    async with http:
        busy = asyncio.create_task(http.get(server.url()))
        await asyncio.sleep(0.05)
        with pytest.raises(httpx.PoolTimeout):
            await http.get(server.url())
        hold.set()
        assert (await busy).text == "hello"


# ----------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "complete message body"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc", "complete message body"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", "longer than"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "malformed status line"),
        (b"SPDY/3 200 OK\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed response header"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101"),
        (b"", "without sending a response"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000, "64 KiB"),
    ],
)
async def test_broken_responses_are_protocol_errors_and_the_next_request_works(servers, response, message):
    answered = 0

    async def handler(reader, writer):
        nonlocal answered
        await server.read_request(reader)
        answered += 1
        writer.write(response if answered == 1 else OK_LENGTH)
        await writer.drain()
        if answered == 1:
            writer.close()
        else:
            await reader.read()

    server = await start(servers, handler)
    async with client(max_connections=1) as http:
        with pytest.raises(httpx.RemoteProtocolError, match=message):
            await http.get(server.url())
        assert (await http.get(server.url())).text == "hello"  # the slot and the pool survived


async def test_refused_connection_is_a_connect_error():
    async with client() as http:
        probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = probe.sockets[0].getsockname()[1]
        probe.close()
        await probe.wait_closed()
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/")


async def test_read_timeout_mid_body_and_before_the_head(servers):
    async def handler(reader, writer):
        request = await server.read_request(reader)
        if request is not None and b"/mid" in request:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\npart")
            await writer.drain()
        await reader.read()

    server = await start(servers, handler)
    http = httpx.AsyncClient(transport=Http11Transport(), timeout=httpx.Timeout(5.0, read=0.1))
    async with http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(server.url("/head"))
        async with http.stream("GET", server.url("/mid")) as response:
            with pytest.raises(httpx.ReadTimeout):
                await response.aread()


async def test_cancelling_mid_body_closes_the_connection_and_frees_its_slot(servers):
    async def handler(reader, writer):
        if await server.read_request(reader) is None:
            return
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await reader.read()  # never finishes the body; returns when the client closes
        closed.set()

    closed = asyncio.Event()
    first_chunk = asyncio.Event()

    async def consume() -> None:
        async with http.stream("GET", server.url()) as response:
            async for _ in response.aiter_bytes():
                first_chunk.set()

    server = await start(servers, handler)
    async with client(max_connections=1) as http:
        task = asyncio.create_task(consume())
        await first_chunk.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(closed.wait(), 2)
        with pytest.raises(httpx.ReadTimeout):  # the one slot is free again (the server stalls)
            await http.get(server.url(), timeout=httpx.Timeout(5.0, read=0.1))


async def test_header_injection_and_unsupported_schemes_are_refused(servers):
    server = await start(servers, keep_alive_server([OK_LENGTH]))
    async with client() as http:
        with pytest.raises(httpx.LocalProtocolError):
            await http.get(server.url(), headers={"x-evil": "a\r\nInjected: yes"})
        assert (await http.get(server.url())).text == "hello"
        transport = http._transport
        with pytest.raises(httpx.UnsupportedProtocol):
            await transport.handle_async_request(httpx.Request("GET", "ftp://127.0.0.1/file"))
    assert not any(b"Injected" in request for request in server.requests)


# ---------------------------------------------------------------------------- TLS, proxies


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return key, cert


async def test_https_verifies_the_server_and_reuses_the_tls_connection(servers, certificate):
    key, cert = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    server = await start(servers, keep_alive_server([OK_CHUNKED]), ssl_context=server_side)
    trusting = ssl.create_default_context(cafile=str(cert))
    async with client(ssl_context=trusting) as http:
        answers = [await http.get(server.url(scheme="https")) for _ in range(2)]
    assert [a.content for a in answers] == [b"data: more"] * 2 and server.accepted == 1
    async with client() as http:  # the default trust store does not know this certificate
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await http.get(server.url(scheme="https"))


async def test_with_a_proxy_in_the_environment_the_shared_client_uses_httpx_own(servers, monkeypatch):
    """An httpx client given a transport ignores ``HTTP_PROXY`` and friends, so the providers' client
    only takes this one when no proxy is configured."""
    from agentcore.providers.base import aclose_shared_client, shared_client

    proxy = await start(servers, keep_alive_server([b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nproxied"]))
    await aclose_shared_client()
    for scheme in ("no", "all", "https", "http"):
        monkeypatch.delenv(f"{scheme}_proxy", raising=False)
        monkeypatch.delenv(f"{scheme.upper()}_PROXY", raising=False)
    assert isinstance(shared_client()._transport, Http11Transport)
    await aclose_shared_client()
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    try:
        answer = await shared_client().get("http://model.invalid/v1/models")
        assert not isinstance(shared_client()._transport, Http11Transport)
    finally:
        await aclose_shared_client()
    assert answer.text == "proxied"
    assert proxy.requests[0].startswith(b"GET http://model.invalid/v1/models HTTP/1.1")


class _StdlibSse(http.server.BaseHTTPRequestHandler):
    """What a hand-written test server often is: ``http.server``, HTTP/1.0, the body ending with
    the connection (no Content-Length, no chunking), SSE frames flushed one by one."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in ("Hel", "lo"):
            chunk = {"id": "c1", "choices": [{"index": 0, "delta": {"content": piece}}]}
            self.wfile.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
            self.wfile.flush()
        done = {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(b"data: " + orjson.dumps(done) + b"\n\ndata: [DONE]\n\n")

    def log_message(self, *args: object) -> None:
        pass


async def test_a_provider_streams_from_a_stdlib_http_server():
    from agentcore.model import Model
    from agentcore.providers import aclose_shared_client, stream
    from agentcore.runtime import LlmContext, StreamOptions

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StdlibSse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    model = Model(
        id="m",
        provider="local",
        api="openai-completions",
        base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
    )
    try:
        for _ in range(2):  # the second call cannot reuse the closed connection: a new one
            events = [e async for e in stream(model, LlmContext(), StreamOptions(api_key="k"))]
            assert [e.type for e in events if e.type in ("text_delta", "done")] == [
                "text_delta",
                "text_delta",
                "done",
            ]
            assert events[-1].message.text == "Hello"
    finally:
        await aclose_shared_client()
        server.shutdown()
        server.server_close()
