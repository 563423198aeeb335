"""``LoopbackServer``: a raw asyncio HTTP/1.1 server on 127.0.0.1 that answers each request with the
next queued ``Script`` (else its responder's), plays a model's context window, and records what it
was sent; ``main`` serves the echo assistant from the command line."""

from __future__ import annotations

import argparse
import asyncio
import math
import threading
import time
from collections import deque
from dataclasses import replace
from typing import Any

import orjson

from ...model import Model
from .frames import (
    encode_anthropic,
    encode_openai,
    error_body,
    overflow_error_body,
    phrase,
    stream_error_frame,
    with_keepalives,
)
from .responders import demo_responder
from .script import Protocol, RecordedRequest, Responder, Script, ScriptUsage, protocol_for


def estimate_request_tokens(request: Any) -> int:
    """The loopback's token count for a request: four characters a token of the JSON of its system
    prompt, messages and tools (close to what real tokenisers make of English and JSON)."""
    if not isinstance(request, dict):
        return 0
    counted = [request.get("system"), request.get("messages"), request.get("tools")]
    return math.ceil(len(orjson.dumps(counted)) / 4)


def estimate_output_tokens(script: Script) -> int:
    chars = (
        len(script.text)
        + len(script.thinking)
        + sum(len(call.name) + len(call.argument_text()) for call in script.tool_calls)
    )
    return max(1, math.ceil(chars / 4))


KEEP_REQUESTS = 50


class LoopbackServer:
    """Raw asyncio HTTP/1.1 server on 127.0.0.1 (keep-alive, chunked SSE responses).

    ``requests`` holds the latest ``keep_requests`` requests it answered, for tests to inspect;
    ``requests_received`` counts them all."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        context_window: int | None = None,
        keep_requests: int = KEEP_REQUESTS,
    ) -> None:
        self.responder: Responder = responder or demo_responder
        self.context_window = context_window
        self.overflows = 0  # requests refused as longer than ``context_window``
        self.connections_accepted = 0  # TCP connections, over the server's life (keep-alive reuse)
        self.requests_received = 0  # over the server's life
        self.host = host
        self.port = port
        self.scripts: deque[Script] = deque()
        # The latest ``keep_requests`` requests, oldest first. Bounded: each body holds the whole
        # context, so a long conversation's record grew without end (and every garbage collection
        # of the server's process walked it: 80 ms pauses 270 turns in).
        self.requests: deque[RecordedRequest] = deque(maxlen=keep_requests)
        # perf_counter() just before each frame of the latest response was written (latency bench).
        self.frame_times: list[float] = []
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    # -- addresses

    @property
    def base_url(self) -> str:
        """Root URL; the Anthropic ``base_url``."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    def model(self, api: str = "openai-completions", model_id: str | None = None, **fields: Any) -> Model:
        """A ``Model`` whose provider talks to this server."""
        openai = api == "openai-completions"
        defaults: dict[str, Any] = {
            "id": model_id or ("loopback-gpt" if openai else "loopback-claude"),
            "provider": "openai" if openai else "anthropic",
            "api": api,
            "base_url": self.openai_base_url if openai else self.anthropic_base_url,
        }
        return Model(**{**defaults, **fields})

    # -- scripting

    def enqueue(self, *scripts: Script) -> None:
        self.scripts.extend(scripts)

    # -- lifecycle

    async def start(self) -> LoopbackServer:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> LoopbackServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def start_in_thread(self) -> LoopbackServer:
        """Serve from a daemon thread with its own event loop (for sync code); ``stop_thread`` ends it."""
        loop = asyncio.new_event_loop()
        self._thread_loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="loopback-server", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.start(), loop).result(timeout=10)
        return self

    def stop_thread(self) -> None:
        loop, thread = self._thread_loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._thread_loop = self._thread = None

    # -- HTTP

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections_accepted += 1
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away; nothing to answer
        except asyncio.CancelledError:
            # Only ``stop`` cancels a connection. Ending normally matters: asyncio's stream callback
            # (3.11) would otherwise report the cancelled task as an unhandled exception.
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must close."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _version = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        raw = await _read_body(reader, headers)
        try:
            body: Any = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        self.requests.append(RecordedRequest(method, path, headers, body))
        self.requests_received += 1
        protocol = protocol_for(path)
        if method != "POST" or protocol is None:
            await _write_json(writer, 404, {"error": {"message": f"no route for {method} {path}"}}, {})
            return True
        prompt_tokens = estimate_request_tokens(body)
        if self.context_window is not None and prompt_tokens > self.context_window:
            # Refused before generating: a queued script stays for the retry that follows.
            self.overflows += 1
            await _write_raw(
                writer, 400, overflow_error_body(protocol, prompt_tokens, self.context_window), {}
            )
            return True
        script = self.scripts.popleft() if self.scripts else self.responder(body, protocol)
        if self.context_window is not None and script.status == 200 and script.usage is not None:
            script = replace(
                script, usage=ScriptUsage(input=prompt_tokens, output=estimate_output_tokens(script))
            )
        if script.status != 200:
            payload = error_body(script, protocol, headers)
            await _write_raw(writer, script.status, payload, script.headers)
            return True
        return await self._stream(writer, script, protocol, body)

    async def _stream(
        self, writer: asyncio.StreamWriter, script: Script, protocol: Protocol, body: Any
    ) -> bool:
        frames = encode_openai(script, body) if protocol == "openai" else encode_anthropic(script, body)
        cut = next(
            (n for n in (script.drop_after, script.end_after, script.error_after) if n is not None), None
        )
        if cut is not None:
            frames = frames[:cut]
        if script.error_after is not None and script.drop_after is None and script.end_after is None:
            frames.append(stream_error_frame(script, protocol))
        if script.keepalives:
            frames = with_keepalives(frames, protocol)
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in script.headers.items())
            + "transfer-encoding: chunked\r\n\r\n"
        )
        writer.write(head.encode("latin-1"))
        self.frame_times = []
        for frame in frames:
            if script.delay:
                await asyncio.sleep(script.delay)
            self.frame_times.append(time.perf_counter())
            writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            await writer.drain()
        if script.drop_after is not None:
            # Abort, not close: the client sees a reset with the chunked body unfinished.
            writer.transport.abort()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return bytes(body)
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    length = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length else b""


async def _write_json(
    writer: asyncio.StreamWriter, status: int, payload: Any, headers: dict[str, str]
) -> None:
    await _write_raw(writer, status, orjson.dumps(payload), headers)


async def _write_raw(
    writer: asyncio.StreamWriter, status: int, payload: bytes, headers: dict[str, str]
) -> None:
    head = (
        f"HTTP/1.1 {status} {phrase(status)}\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n"
        + "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        + "\r\n"
    )
    writer.write(head.encode("latin-1") + payload)
    await writer.drain()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Loopback OpenAI/Anthropic server with an echo assistant.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--context-window", type=int, default=None, help="refuse prompts over this many tokens (overflow)"
    )
    args = parser.parse_args(argv)

    async def serve() -> None:
        async with LoopbackServer(
            host=args.host, port=args.port, context_window=args.context_window
        ) as server:
            print(f"OpenAI-compatible base_url: {server.openai_base_url}")
            print(f"Anthropic base_url:         {server.anthropic_base_url}")
            print("Any API key works. Ctrl-C stops.", flush=True)
            await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
