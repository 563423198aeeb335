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

Modules::

    script.py      Script, ScriptToolCall, ScriptUsage, RecordedRequest, Responder
    frames.py      the SSE frames per protocol, error bodies, keep-alives
    responders.py  last_turn, demo_responder (the echo assistant)
    server.py      LoopbackServer (HTTP/1.1, context window, records), main
"""

from __future__ import annotations

from .frames import encode_anthropic, encode_openai, error_body, overflow_error_body, stream_error_frame
from .responders import demo_responder, last_turn
from .script import Protocol, RecordedRequest, Responder, Script, ScriptStop, ScriptToolCall, ScriptUsage
from .server import KEEP_REQUESTS, LoopbackServer, estimate_output_tokens, estimate_request_tokens, main

__all__ = [
    "KEEP_REQUESTS",
    "LoopbackServer",
    "Protocol",
    "RecordedRequest",
    "Responder",
    "Script",
    "ScriptStop",
    "ScriptToolCall",
    "ScriptUsage",
    "demo_responder",
    "encode_anthropic",
    "encode_openai",
    "error_body",
    "estimate_output_tokens",
    "estimate_request_tokens",
    "last_turn",
    "main",
    "overflow_error_body",
    "stream_error_frame",
]
