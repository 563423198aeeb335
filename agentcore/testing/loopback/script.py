"""What the loopback server plays and records: ``Script`` (one scripted response), its tool calls and
usage, ``RecordedRequest``, the ``Responder`` that answers when no script is queued, and which
protocol a request path speaks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

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
        return protocol_for(self.path)


Responder = Callable[[Any, Protocol], Script]


def protocol_for(path: str) -> Protocol | None:
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/v1/messages"):
        return "anthropic"
    return None
