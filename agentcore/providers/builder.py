"""``PartialMessageBuilder``: the ``AssistantMessage`` under construction, and the ``StreamEvent``s
(``text_start``/``delta``/``end``, ``thinking_*``, ``toolcall_*``, ``done``, ``error``) a provider
emits as protocol deltas arrive. Tool arguments are re-parsed leniently on every delta and strictly
at the end; usage is priced with the catalog's costs."""

from __future__ import annotations

import time
from typing import Literal

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
from ..messages import AssistantMessage, TextContent, ThinkingContent, ToolCall, Usage
from ..model import Model
from .catalog import calculate_cost
from .errors import ProviderFailure, redact
from .partial_json import parse_final_arguments, parse_partial_json

ABORTED_MESSAGE = "Request was aborted"

BlockKind = Literal["text", "thinking", "toolCall"]


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
