"""Anthropic Messages, streaming (``api="anthropic-messages"``). Wire format: providers.md section 2.

Events are dispatched on their ``event:`` name. ``ping`` and unknown events are ignored (Anthropic may
add event types); ``error`` ends the message. Usage arrives twice: input counts in ``message_start``
(so an aborted stream still reports them) and cumulative counts in each ``message_delta``, whose null
fields must not overwrite what we have.

Thinking blocks are replayed with their signatures, which Anthropic verifies; a block without one
(an aborted stream) or from another model cannot be verified and is replayed as plain text.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from ..events import StreamEvent
from ..messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from ..model import Model, ThinkingLevel
from ..runtime import LlmContext, StreamOptions
from .base import (
    Conversion,
    ConversionMemo,
    HttpRequest,
    Normalizer,
    PartialMessageBuilder,
    carry_on,
    stream_sse_provider,
)
from .errors import ProviderFailure, classify_stream_error, error_text_from_json, error_type_from_json
from .sse import SseEvent

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 32_000
# Budget per level for models with budget-style extended thinking (pi-mono's table; the API's
# minimum is 1024). xhigh has no bigger budget of its own.
THINKING_BUDGETS = {
    ThinkingLevel.MINIMAL: 1024,
    ThinkingLevel.LOW: 2048,
    ThinkingLevel.MEDIUM: 8192,
    ThinkingLevel.HIGH: 16384,
    ThinkingLevel.XHIGH: 16384,
    ThinkingLevel.MAX: 32000,
}
MIN_THINKING_BUDGET = 1024
_CACHE = {"type": "ephemeral"}
_TOOL_ID_RE = re.compile(r"[^a-zA-Z0-9_-]")

_STOP_REASONS: dict[str, Literal["stop", "length", "toolUse"]] = {
    "end_turn": "stop",
    "pause_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}


async def stream_anthropic_messages(
    model: Model, context: LlmContext, options: StreamOptions
) -> AsyncIterator[StreamEvent]:
    """The ``StreamFn`` for the Anthropic Messages API."""

    def make_request(api_key: str | None) -> HttpRequest:
        body = build_body(model, context, options)
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": API_VERSION,
            **model.headers,
        }
        if api_key:
            headers["x-api-key"] = api_key
        betas = []
        if context.tools:
            betas.append("fine-grained-tool-streaming-2025-05-14")
        if body.get("thinking", {}).get("type") == "enabled":
            # Adaptive models interleave on their own; budget-style ones need the beta to think
            # between tool calls.
            betas.append("interleaved-thinking-2025-05-14")
        if betas:
            headers["anthropic-beta"] = ",".join(betas)
        base = (model.base_url or DEFAULT_BASE_URL).rstrip("/")
        return HttpRequest(f"{base}/v1/messages", body, headers)

    async for event in stream_sse_provider(model, options, _MessagesHandler, make_request):
        yield event


# ---------------------------------------------------------------------------------------- request


def uses_adaptive_thinking(model: Model) -> bool:
    """Opus/Sonnet 4.6 take ``thinking:{type:"adaptive"}`` plus an effort; older models a budget."""
    return any(tag in model.id for tag in ("opus-4-6", "sonnet-4-6"))


def build_body(model: Model, context: LlmContext, options: StreamOptions) -> dict[str, Any]:
    max_tokens = min(options.max_tokens or DEFAULT_MAX_TOKENS, model.max_tokens)
    body: dict[str, Any] = {
        "model": model.id,
        "max_tokens": max_tokens,
        "stream": True,
        "messages": convert_messages(model, context, options.conversion_memo),
    }
    if context.system_prompt:
        # cache_control marks the prefix worth caching: system prompt (and, below, the newest turn).
        body["system"] = [{"type": "text", "text": context.system_prompt, "cache_control": _CACHE}]
    if context.tools:
        body["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            for tool in context.tools
        ]
    thinking = options.thinking_level != ThinkingLevel.OFF and model.reasoning
    if thinking and uses_adaptive_thinking(model):
        body["thinking"] = {"type": "adaptive"}
        body["output_config"] = {"effort": _adaptive_effort(model, options.thinking_level)}
    elif thinking:
        budget = THINKING_BUDGETS[options.thinking_level]
        # The budget comes out of max_tokens; raise it so the answer keeps its room, within the model.
        max_tokens = min(max_tokens + budget, model.max_tokens)
        if max_tokens <= budget:
            budget = max_tokens - MIN_THINKING_BUDGET
        if budget >= MIN_THINKING_BUDGET:
            body["max_tokens"] = max_tokens
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if options.temperature is not None and "thinking" not in body:
        # The API refuses a temperature together with thinking.
        body["temperature"] = options.temperature
    return body


def _adaptive_effort(model: Model, level: ThinkingLevel) -> str:
    if level in (ThinkingLevel.XHIGH, ThinkingLevel.MAX):
        return "max" if "opus" in model.id else "high"
    return {ThinkingLevel.MINIMAL: "low"}.get(level, level.value)


def convert_messages(
    model: Model, context: LlmContext, memo: ConversionMemo | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` of a request. With a ``memo``, only what follows the previous call's
    messages is converted (see ``ConversionMemo``): the entries kept for later calls are never
    changed, since merging a result into a group and the cache mark make new ones."""
    # Replayed thinking depends on the model asked (``_assistant_blocks``), normalizing on images.
    key = ("anthropic-messages", model.api, model.provider, model.id, "image" in model.input)
    state = carry_on(memo, key, context.messages, lambda: _Converted(Normalizer(model)))
    kept = state.normalizer.kept
    # Trailing tool results stay open: a result still to come joins their user message.
    open_from = len(kept)
    while open_from > state.closed_upto and isinstance(kept[open_from - 1], ToolResultMessage):
        open_from -= 1
    for message in kept[state.closed_upto : open_from]:
        _append(state.closed, model, message)
    state.closed_upto = open_from
    if memo is not None:
        memo.keep(key, context.messages, state)
    wire = list(state.closed)
    for message in itertools.chain(kept[open_from:], state.normalizer.unanswered()):
        _append(wire, model, message)
    if wire and wire[-1]["role"] == "user" and wire[-1]["content"]:
        # Cache everything up to the newest turn, so the next call reads it back cheaply.
        content = list(wire[-1]["content"])
        content[-1] = {**content[-1], "cache_control": _CACHE}
        wire[-1] = {**wire[-1], "content": content}
    return wire


@dataclass
class _Converted(Conversion):
    """The wire entries of the first ``closed_upto`` normalized messages (those no later message
    can change)."""

    closed: list[dict[str, Any]] = field(default_factory=list)
    closed_upto: int = 0


def _append(wire: list[dict[str, Any]], model: Model, message: Message) -> None:
    """Add ``message`` to ``wire``; never changes an entry already there (they may be shared)."""
    if isinstance(message, ToolResultMessage):
        block = _tool_result_block(message)
        # All results answering one assistant turn go in one user message.
        if wire and wire[-1]["role"] == "user" and wire[-1]["content"][-1:] and _is_tool_result(wire[-1]):
            wire[-1] = {"role": "user", "content": [*wire[-1]["content"], block]}
        else:
            wire.append({"role": "user", "content": [block]})
    elif isinstance(message, AssistantMessage):
        content = _assistant_blocks(model, message)
        if content:
            wire.append({"role": "assistant", "content": content})
    else:
        wire.append({"role": "user", "content": [_user_block(block) for block in message.content]})


def _is_tool_result(entry: dict[str, Any]) -> bool:
    return all(block.get("type") == "tool_result" for block in entry["content"])


def _user_block(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    return {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}


def _tool_result_block(message: ToolResultMessage) -> dict[str, Any]:
    content = [
        _user_block(block)
        for block in message.content
        if not (isinstance(block, TextContent) and not block.text)
    ]
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id(message.tool_call_id),
        "content": content or [{"type": "text", "text": "(no output)"}],
        "is_error": message.is_error,
    }


def _assistant_blocks(model: Model, message: AssistantMessage) -> list[dict[str, Any]]:
    same_model = message.api == model.api and message.provider == model.provider and message.model == model.id
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if block.redacted and same_model and block.thinking_signature:
                blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif same_model and block.thinking_signature:
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.thinking_signature}
                )
            elif block.thinking and not block.redacted:
                blocks.append({"type": "text", "text": block.thinking})
        elif isinstance(block, ToolCall):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": tool_use_id(block.id),
                    "name": block.name,
                    "input": block.arguments,
                }
            )
    return blocks


def tool_use_id(call_id: str) -> str:
    """Anthropic accepts ``^[a-zA-Z0-9_-]{1,64}$``; ids made by other providers may not fit."""
    cleaned = _TOOL_ID_RE.sub("_", call_id)[:64]
    return cleaned or "tool_call"


# --------------------------------------------------------------------------------------- response


class _MessagesHandler:
    def __init__(self, builder: PartialMessageBuilder) -> None:
        self.builder = builder
        self.finished = False
        self._blocks: dict[int, int] = {}  # Anthropic block index -> content index
        self._stop: Literal["stop", "length", "toolUse"] | None = None
        self._usage = Usage()

    def on_event(self, event: SseEvent) -> list[StreamEvent]:
        name = event.event
        if name == "ping":
            return []
        data = orjson.loads(event.data) if event.data else {}
        if not isinstance(data, dict):
            return []
        if name == "message":  # no ``event:`` line: fall back to the payload's type
            name = str(data.get("type", ""))
        handler = getattr(self, f"_on_{name}", None)
        if handler is None:
            return []  # an event type newer than this code
        result: list[StreamEvent] = handler(data)
        return result

    def on_end_of_stream(self) -> list[StreamEvent]:
        if self._stop is not None:
            return self.builder.done(self._stop)
        raise ProviderFailure(
            self.builder.model.provider,
            "Stream ended before the response was complete",
            retryable=True,
            kind="truncated",
        )

    def _on_message_start(self, data: dict[str, Any]) -> list[StreamEvent]:
        message = data.get("message") or {}
        if isinstance(message.get("id"), str):
            self.builder.message.response_id = message["id"]
        self._merge_usage(message.get("usage") or {})
        return []

    def _on_content_block_start(self, data: dict[str, Any]) -> list[StreamEvent]:
        block = data.get("content_block") or {}
        kind = block.get("type")
        if kind == "text":
            index, start = self.builder.open_text()
            events = [start]
            if block.get("text"):
                events.append(self.builder.text(index, block["text"]))
        elif kind == "thinking":
            index, start = self.builder.open_thinking(signature=block.get("signature") or None)
            events = [start]
            if block.get("thinking"):
                events.append(self.builder.thinking(index, block["thinking"]))
        elif kind == "redacted_thinking":
            # Opaque, encrypted reasoning: nothing to show, but it must be replayed as it came.
            index, start = self.builder.open_thinking(signature=block.get("data") or "", redacted=True)
            events = [start]
        elif kind == "tool_use":
            index, start = self.builder.open_tool_call(block.get("id") or "", block.get("name") or "")
            events = [start]
        else:
            return []  # server tools, citations etc. are not part of our content model
        self._blocks[int(data.get("index", len(self._blocks)))] = index
        return events

    def _on_content_block_delta(self, data: dict[str, Any]) -> list[StreamEvent]:
        index = self._blocks.get(int(data.get("index", -1)))
        delta = data.get("delta") or {}
        if index is None:
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            return [self.builder.text(index, delta.get("text") or "")]
        if kind == "thinking_delta":
            return [self.builder.thinking(index, delta.get("thinking") or "")]
        if kind == "signature_delta":
            self.builder.thinking_signature(index, delta.get("signature") or "")
            return []
        if kind == "input_json_delta":
            partial = delta.get("partial_json") or ""
            return [self.builder.tool_arguments(index, partial)] if partial else []
        return []

    def _on_content_block_stop(self, data: dict[str, Any]) -> list[StreamEvent]:
        index = self._blocks.get(int(data.get("index", -1)))
        end = self.builder.close(index) if index is not None else None
        return [end] if end is not None else []

    def _on_message_delta(self, data: dict[str, Any]) -> list[StreamEvent]:
        self._merge_usage(data.get("usage") or {})
        stop_reason = (data.get("delta") or {}).get("stop_reason")
        if stop_reason == "refusal":
            raise ProviderFailure(
                self.builder.model.provider,
                "The model refused to answer (stop_reason refusal)",
                retryable=False,
                kind="refusal",
            )
        if stop_reason:
            self._stop = _STOP_REASONS.get(stop_reason, "stop")
        return []

    def _on_message_stop(self, data: dict[str, Any]) -> list[StreamEvent]:
        self.finished = True
        return self.builder.done(self._stop or "stop")

    def _on_error(self, data: dict[str, Any]) -> list[StreamEvent]:
        message = error_text_from_json(data) or "unknown error"
        error_type = error_type_from_json(data)
        raise ProviderFailure(
            self.builder.model.provider,
            f"{error_type}: {message}" if error_type else message,
            retryable=classify_stream_error(error_type, message),
            kind="stream",
        )

    def _merge_usage(self, raw: dict[str, Any]) -> None:
        # Cumulative counts: each present field replaces ours; null or missing fields leave it alone.
        updates = {
            ours: int(raw[theirs])
            for ours, theirs in (
                ("input", "input_tokens"),
                ("output", "output_tokens"),
                ("cache_read", "cache_read_input_tokens"),
                ("cache_write", "cache_creation_input_tokens"),
            )
            if raw.get(theirs) is not None
        }
        if updates:
            self._usage = self._usage.model_copy(update=updates)
            self.builder.set_usage(self._usage)
