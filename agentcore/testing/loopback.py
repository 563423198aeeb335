"""A loopback HTTP server that speaks OpenAI Chat Completions and Anthropic Messages, byte for byte.

It plays scripted responses over real HTTP/1.1 on 127.0.0.1, so provider tests exercise the same
sockets, chunked encoding and SSE framing a vendor's server produces (the frames follow the recorded
fixtures in providers.md). It is also what you point the agent at to try it without an API key::

    python -m agentcore.testing.loopback --port 8765
    # OpenAI-compatible:  base_url = http://127.0.0.1:8765/v1
    # Anthropic:          base_url = http://127.0.0.1:8765

In tests::

    async with LoopbackServer() as server:
        server.enqueue(Script(text="Hello"), Script(status=429, headers={"retry-after": "2"}))
        model = server.model("openai-completions")
        ...
        assert server.requests[0].body["stream"] is True

Each request takes the next queued ``Script``; with the queue empty the ``responder`` decides. A
responder must be deterministic in the request (durable runs retry and replay calls).

``LoopbackServer(context_window=N)`` plays a model with an N-token window: a request estimated (at
four characters a token of its JSON) above N is refused with the provider's real context-overflow
error, before any script is used, and successful responses report that estimate as the prompt's
token usage, so compaction logic sees the numbers a real provider would send.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import Any, Literal

import orjson

from ..model import Model

Protocol = Literal["openai", "anthropic"]
ScriptStop = Literal["stop", "length", "toolUse"]


@dataclass
class ScriptToolCall:
    """A tool call to stream. ``arguments`` as a string is sent verbatim (it may be invalid JSON)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def argument_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return orjson.dumps(self.arguments).decode()


@dataclass
class ScriptUsage:
    input: int = 100
    output: int = 20
    cache_read: int = 0
    cache_write: int = 0


@dataclass
class Script:
    """One scripted response. Content streams in the order thinking, text, tool calls.

    Failure modes (at most one applies, checked in this order): ``status`` other than 200 answers with
    the provider's JSON error body; ``drop_after`` closes the socket after that many SSE frames, mid
    body; ``end_after`` ends the body cleanly after that many frames, without the protocol's
    terminator; ``error_after`` sends an in-stream error event after that many frames.
    """

    text: str = ""
    thinking: str = ""
    thinking_signature: str = "loopback-signature"
    redacted_thinking: str | None = None  # Anthropic ``redacted_thinking`` data, streamed first
    reasoning_field: str = "reasoning_content"  # OpenAI-compatible servers: or "reasoning"
    tool_calls: list[ScriptToolCall] = field(default_factory=list)
    stop_reason: ScriptStop | None = None  # default: toolUse with tool calls, else stop
    wire_stop_reason: str | None = None  # send this provider value as is ("refusal", "content_filter")
    usage: ScriptUsage | None = field(default_factory=ScriptUsage)
    chunk_chars: int = 4  # characters per text/thinking delta
    fragment_chars: int = 5  # characters per tool-argument fragment
    delay: float = 0.0  # seconds before each frame (slow token pacing)
    keepalives: bool = False  # ``ping`` events (Anthropic) and ``:`` comment lines between frames
    status: int = 200
    error_message: str = ""
    error_type: str = ""  # provider error type; a default per status / protocol when empty
    headers: dict[str, str] = field(default_factory=dict)
    echo_request_headers: bool = False  # put the request's headers in the error message (leak tests)
    error_after: int | None = None
    end_after: int | None = None
    drop_after: int | None = None

    def resolved_stop(self) -> ScriptStop:
        return self.stop_reason or ("toolUse" if self.tool_calls else "stop")


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON, or None

    @property
    def protocol(self) -> Protocol | None:
        return _protocol_for(self.path)


Responder = Callable[[Any, Protocol], Script]


# ------------------------------------------------------------------------------------------ encoders

_OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests"}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, bytes) else orjson.dumps(data)
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + payload + b"\n\n"


def encode_openai(script: Script, request: Any) -> list[bytes]:
    """The SSE frames of an OpenAI Chat Completions stream (one ``data:`` event per frame)."""
    model = request.get("model", "loopback") if isinstance(request, dict) else "loopback"
    include_usage = bool(
        isinstance(request, dict) and (request.get("stream_options") or {}).get("include_usage")
    )
    envelope: dict[str, Any] = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": 1727346176,
        "model": model,
        "system_fingerprint": "fp_loopback",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            **envelope,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        return _sse(body)

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [
        chunk({"content": None, script.reasoning_field: piece})
        for piece in _pieces(script.thinking, script.chunk_chars)
    ]
    frames += [chunk({"content": piece}) for piece in _pieces(script.text, script.chunk_chars)]
    for index, call in enumerate(script.tool_calls):
        opening = {
            "index": index,
            "id": call.id or f"call_loopback_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        frames.append(chunk({"tool_calls": [opening]}))
        for fragment in _pieces(call.argument_text(), script.fragment_chars):
            frames.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}))
    finish = (
        script.wire_stop_reason
        or {"stop": "stop", "length": "length", "toolUse": "tool_calls"}[script.resolved_stop()]
    )
    frames.append(chunk({}, finish))
    if script.usage is not None and include_usage:
        usage = script.usage
        frames.append(
            _sse(
                {
                    **envelope,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": usage.input + usage.cache_read,
                        "completion_tokens": usage.output,
                        "total_tokens": usage.input + usage.cache_read + usage.output,
                        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
                        "completion_tokens_details": {"reasoning_tokens": 0},
                    },
                }
            )
        )
    frames.append(b"data: [DONE]\n\n")
    return frames


def encode_anthropic(script: Script, request: Any) -> list[bytes]:
    """The SSE frames of an Anthropic Messages stream (one ``event:``/``data:`` pair per frame)."""
    model = request.get("model", "loopback") if isinstance(request, dict) else "loopback"
    usage = script.usage
    message: dict[str, Any] = {
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
    }
    if usage is not None:
        message["usage"] = {
            "input_tokens": usage.input,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
            "output_tokens": 1,
            "service_tier": "standard",
        }
    frames = [_sse({"type": "message_start", "message": message}, "message_start")]
    stop = script.resolved_stop()
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]], *, close: bool = True) -> None:
        nonlocal index
        frames.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": start}, "content_block_start"
            )
        )
        for delta in deltas:
            frames.append(
                _sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
            )
        if close:
            frames.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1

    if script.redacted_thinking is not None:
        block({"type": "redacted_thinking", "data": script.redacted_thinking}, [])
    if script.thinking:
        deltas = [
            {"type": "thinking_delta", "thinking": piece}
            for piece in _pieces(script.thinking, script.chunk_chars)
        ]
        deltas.append({"type": "signature_delta", "signature": script.thinking_signature})
        block({"type": "thinking", "thinking": ""}, deltas)
    if script.text:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": piece} for piece in _pieces(script.text, script.chunk_chars)],
        )
    for number, call in enumerate(script.tool_calls):
        fragments = [""] + _pieces(call.argument_text(), script.fragment_chars)
        # A max_tokens cut leaves the last tool block without its content_block_stop (SDK fixture).
        truncated = stop == "length" and number == len(script.tool_calls) - 1
        block(
            {"type": "tool_use", "id": call.id or f"toolu_loopback_{number}", "name": call.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": fragment} for fragment in fragments],
            close=not truncated,
        )
    delta_usage: dict[str, Any] = {"output_tokens": usage.output} if usage is not None else {}
    stop_reason = (
        script.wire_stop_reason or {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}[stop]
    )
    message_delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
    }
    if delta_usage:
        message_delta["usage"] = delta_usage
    frames.append(_sse(message_delta, "message_delta"))
    frames.append(_sse({"type": "message_stop"}, "message_stop"))
    return frames


def error_body(script: Script, protocol: Protocol, request_headers: dict[str, str]) -> bytes:
    message = script.error_message or _phrase(script.status)
    if script.echo_request_headers:
        message += " (request headers: " + ", ".join(f"{k}: {v}" for k, v in request_headers.items()) + ")"
    if protocol == "openai":
        error_type = script.error_type or _OPENAI_ERROR_TYPES.get(script.status, "server_error")
        code = "rate_limit_exceeded" if script.status == 429 else None
        return orjson.dumps({"error": {"message": message, "type": error_type, "param": None, "code": code}})
    error_type = script.error_type or _ANTHROPIC_ERROR_TYPES.get(script.status, "api_error")
    return orjson.dumps(
        {"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_loopback"}
    )


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


def overflow_error_body(protocol: Protocol, prompt_tokens: int, context_window: int) -> bytes:
    """The HTTP 400 body each vendor sends for a prompt longer than the model's window."""
    if protocol == "openai":
        message = (
            f"This model's maximum context length is {context_window} tokens. However, your messages "
            f"resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
        )
        return orjson.dumps(
            {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        )
    return orjson.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {prompt_tokens} tokens > {context_window} maximum",
            },
            "request_id": "req_loopback",
        }
    )


def stream_error_frame(script: Script, protocol: Protocol) -> bytes:
    if protocol == "openai":
        message = (
            script.error_message or "The server had an error while processing your request. Sorry about that!"
        )
        return _sse({"error": {"message": message, "type": script.error_type or "server_error"}})
    error = {"type": script.error_type or "overloaded_error", "message": script.error_message or "Overloaded"}
    return _sse({"type": "error", "error": error}, "error")


def _with_keepalives(frames: list[bytes], protocol: Protocol) -> list[bytes]:
    keepalive = b": keep-alive\n\n" if protocol == "openai" else b'event: ping\ndata: {"type": "ping"}\n\n'
    spaced: list[bytes] = []
    for frame in frames:
        spaced.append(frame)
        spaced.append(keepalive)
    # OpenRouter's comment style too, mid-stream, to prove comments never reach a JSON parser.
    spaced.insert(1, b": OPENROUTER PROCESSING\n\n")
    return spaced


# -------------------------------------------------------------------------------------- responders


def last_turn(request: Any, protocol: Protocol) -> tuple[str, str]:
    """``("user"|"tool", text)`` of the request's newest message, in either protocol's format."""
    messages = request.get("messages") if isinstance(request, dict) else None
    if not messages:
        return "user", ""
    last = messages[-1]
    content = last.get("content")
    if protocol == "openai":
        if last.get("role") == "tool":
            return "tool", str(content)
        if isinstance(content, list):
            return "user", " ".join(part.get("text", "") for part in content if part.get("type") == "text")
        return "user", str(content or "")
    if isinstance(content, str):
        return "user", content
    blocks = content or []
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        texts = [
            inner.get("text", "")
            for inner in results[-1].get("content") or []
            if isinstance(inner, dict) and inner.get("type") == "text"
        ]
        return "tool", " ".join(texts)
    return "user", " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")


def demo_responder(request: Any, protocol: Protocol) -> Script:
    """An echo assistant. ``/tool NAME {json}`` makes it call that tool; it then reports the result."""
    kind, text = last_turn(request, protocol)
    pacing = 0.02
    if kind == "tool":
        return Script(text=f"The tool returned: {text}", delay=pacing)
    if text.startswith("/tool "):
        name, _, arguments = text[len("/tool ") :].partition(" ")
        return Script(
            text=f"Calling {name}.",
            tool_calls=[ScriptToolCall(name, arguments.strip() or "{}")],
            delay=pacing,
        )
    return Script(text=f"You said: {text}" if text else "Hello! Send me a message.", delay=pacing)


# ------------------------------------------------------------------------------------------ server


def _protocol_for(path: str) -> Protocol | None:
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/v1/messages"):
        return "anthropic"
    return None


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
        protocol = _protocol_for(path)
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
            frames = _with_keepalives(frames, protocol)
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
        f"HTTP/1.1 {status} {_phrase(status)}\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n"
        + "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        + "\r\n"
    )
    writer.write(head.encode("latin-1") + payload)
    await writer.drain()


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Error"


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


if __name__ == "__main__":
    main()
