"""OpenAI Chat Completions, streaming (``api="openai-completions"``), and every compatible server.

``base_url`` points it at Ollama (``http://localhost:11434/v1``), vLLM, llama.cpp, OpenRouter or
DeepSeek. Reasoning text, which OpenAI itself never streams, arrives from those servers in an extra
delta field (``reasoning_content`` or ``reasoning``); its field name is kept as the thinking block's
signature. Wire format and examples: providers.md section 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from ..events import StreamEvent
from ..messages import AssistantMessage, ImageContent, Message, TextContent, ToolResultMessage, Usage
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

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Servers differ in the field name; pi-mono reads the first non-empty one of these (chutes.ai sends two).
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")

_FINISH_REASONS: dict[str, Literal["stop", "length", "toolUse"]] = {
    "stop": "stop",
    "end": "stop",
    "length": "length",
    "model_context_window_exceeded": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
}


async def stream_openai_completions(
    model: Model, context: LlmContext, options: StreamOptions
) -> AsyncIterator[StreamEvent]:
    """The ``StreamFn`` for OpenAI Chat Completions and compatible servers."""

    def make_request(api_key: str | None) -> HttpRequest:
        headers = {"content-type": "application/json", "accept": "text/event-stream", **model.headers}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        base = (model.base_url or DEFAULT_BASE_URL).rstrip("/")
        return HttpRequest(f"{base}/chat/completions", build_body(model, context, options), headers)

    async for event in stream_sse_provider(model, options, _CompletionsHandler, make_request):
        yield event


# ---------------------------------------------------------------------------------------- request


def build_body(model: Model, context: LlmContext, options: StreamOptions) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model.id,
        "messages": convert_messages(model, context, options.conversion_memo),
        "stream": True,
        # Without this the stream carries no token counts at all.
        "stream_options": {"include_usage": True},
    }
    if options.max_tokens is not None:
        limit = min(options.max_tokens, model.max_tokens)
        # OpenAI's reasoning models reject the old name; compatible servers mostly know only it.
        body["max_completion_tokens" if model.provider == "openai" else "max_tokens"] = limit
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in context.tools
        ]
    effort = reasoning_effort(model, options.thinking_level)
    if effort is not None:
        body["reasoning_effort"] = effort
    return body


def reasoning_effort(model: Model, level: ThinkingLevel) -> str | None:
    """The ``reasoning_effort`` for a thinking level, or None to send none (the server's default)."""
    if not model.reasoning:
        return None
    if level == ThinkingLevel.OFF:
        # Ollama thinks by default on capable models; "none" is how it is told not to.
        return "none" if model.provider == "ollama" else None
    if level in (ThinkingLevel.XHIGH, ThinkingLevel.MAX):
        return "xhigh" if _supports_xhigh(model) else "high"
    return level.value


def _supports_xhigh(model: Model) -> bool:
    return any(tag in model.id for tag in ("gpt-5.2", "gpt-5.3", "gpt-5.4", "codex-max"))


def convert_messages(
    model: Model, context: LlmContext, memo: ConversionMemo | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` of a request. With a ``memo``, only what follows the previous call's
    messages is converted (see ``ConversionMemo``)."""
    # _convert depends on the message alone; normalizing, on whether the model takes images.
    key = ("openai-completions", "image" in model.input)
    state = carry_on(memo, key, context.messages, lambda: _Converted(Normalizer(model)))
    for message in state.normalizer.kept[state.converted :]:
        state.wire.extend(_convert(message))
    state.converted = len(state.normalizer.kept)
    if memo is not None:
        memo.keep(key, context.messages, state)
    wire: list[dict[str, Any]] = []
    if context.system_prompt:
        wire.append({"role": "system", "content": context.system_prompt})
    wire += state.wire
    for message in state.normalizer.unanswered():
        wire.extend(_convert(message))
    return wire


@dataclass
class _Converted(Conversion):
    """The wire entries of the first ``converted`` normalized messages."""

    wire: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    converted: int = 0


def _convert(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, AssistantMessage):
        # Thinking is not replayed: OpenAI has none to replay, and DeepSeek rejects
        # ``reasoning_content`` in input messages.
        entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": orjson.dumps(call.arguments).decode()},
                }
                for call in message.tool_calls
            ]
        elif entry["content"] is None:
            entry["content"] = ""
        return [entry]
    if isinstance(message, ToolResultMessage):
        # Chat Completions has no error flag on tool results; the text has to say it.
        text = message.text or ("(error, no output)" if message.is_error else "(no output)")
        if message.is_error and not text.lower().startswith("error"):
            text = f"Error: {text}"
        entries: list[dict[str, Any]] = [
            {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}
        ]
        images = [block for block in message.content if isinstance(block, ImageContent)]
        if images:
            # Tool messages cannot carry images; the model sees them in a user message right after.
            parts: list[dict[str, Any]] = [
                {"type": "text", "text": f"Images returned by {message.tool_name}:"}
            ]
            entries.append({"role": "user", "content": parts + [_image_part(image) for image in images]})
        return entries
    if all(isinstance(block, TextContent) for block in message.content):
        # Plain string content: some compatible servers do not accept the list form.
        return [
            {
                "role": "user",
                "content": "".join(b.text for b in message.content if isinstance(b, TextContent)),
            }
        ]
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": block.text} if isinstance(block, TextContent) else _image_part(block)
                for block in message.content
            ],
        }
    ]


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"}}


# --------------------------------------------------------------------------------------- response


class _CompletionsHandler:
    """Chunks -> builder calls. Text and reasoning stream into one "current" block at a time; tool
    calls are keyed by the ``index`` OpenAI gives each parallel call (id and name come only first)."""

    def __init__(self, builder: PartialMessageBuilder) -> None:
        self.builder = builder
        self.finished = False
        self._current: int | None = None  # content index of the open text/thinking block
        self._current_kind: str = ""
        self._tool_blocks: dict[int, int] = {}  # OpenAI tool index -> content index
        self._stop: Literal["stop", "length", "toolUse"] | None = None

    def on_event(self, event: SseEvent) -> list[StreamEvent]:
        data = event.data
        if data.startswith("[DONE]"):
            self.finished = True
            return self.builder.done(self._stop or "stop")
        chunk = orjson.loads(data)
        if not isinstance(chunk, dict):
            return []
        if chunk.get("error") is not None:
            # An error after HTTP 200 (OpenAI, OpenRouter): the message so far is kept.
            message = error_text_from_json(chunk) or "unknown error"
            error_type = error_type_from_json(chunk)
            label = f"{error_type}: {message}" if error_type else message
            raise ProviderFailure(
                self.builder.model.provider,
                label,
                retryable=classify_stream_error(error_type, message),
                kind="stream",
            )
        if self.builder.message.response_id is None and isinstance(chunk.get("id"), str):
            self.builder.message.response_id = chunk["id"]
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.builder.set_usage(_usage(usage))
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # n>1 is never requested; ignore any extra choices
            delta = choice.get("delta") or {}
            self._on_delta(delta, events)
            finish = choice.get("finish_reason")
            if finish:
                self._on_finish(finish)
        return events

    def on_end_of_stream(self) -> list[StreamEvent]:
        if self._stop is not None:
            # Finished but without "[DONE]": some compatible servers omit it.
            return self.builder.done(self._stop)
        raise ProviderFailure(
            self.builder.model.provider,
            "Stream ended before the response was complete",
            retryable=True,
            kind="truncated",
        )

    def _on_delta(self, delta: dict[str, Any], events: list[StreamEvent]) -> None:
        for field in REASONING_FIELDS:
            reasoning = delta.get(field)
            if isinstance(reasoning, str) and reasoning:
                if self._current_kind != "thinking":
                    self._switch("thinking", events, signature=field)
                assert self._current is not None
                events.append(self.builder.thinking(self._current, reasoning))
                break
        content = delta.get("content")
        if isinstance(content, str) and content:
            if self._current_kind != "text":
                self._switch("text", events)
            assert self._current is not None
            events.append(self.builder.text(self._current, content))
        for fragment in delta.get("tool_calls") or ():
            self._on_tool_fragment(fragment, events)

    def _on_tool_fragment(self, fragment: dict[str, Any], events: list[StreamEvent]) -> None:
        tool_index = fragment.get("index", len(self._tool_blocks))
        function = fragment.get("function") or {}
        content_index = self._tool_blocks.get(tool_index)
        if content_index is None:
            self._close_current(events)
            # A new call: parallel calls stream one after another, so the previous call is complete.
            for previous in self._tool_blocks.values():
                if self.builder.is_open(previous) and (end := self.builder.close(previous)) is not None:
                    events.append(end)
            content_index, start = self.builder.open_tool_call(
                fragment.get("id") or "", function.get("name") or ""
            )
            self._tool_blocks[tool_index] = content_index
            events.append(start)
        else:
            self.builder.tool_identity(content_index, call_id=fragment.get("id"), name=function.get("name"))
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            events.append(self.builder.tool_arguments(content_index, arguments))

    def _on_finish(self, finish: str) -> None:
        if finish in ("content_filter", "error"):
            reason = "content filter" if finish == "content_filter" else "provider error"
            raise ProviderFailure(
                self.builder.model.provider,
                f"Response stopped by the {reason} (finish_reason {finish})",
                retryable=False,
                kind="refusal",
            )
        self._stop = _FINISH_REASONS.get(finish, "stop")

    def _switch(self, kind: str, events: list[StreamEvent], *, signature: str | None = None) -> None:
        self._close_current(events)
        if kind == "thinking":
            self._current, start = self.builder.open_thinking(signature=signature)
        else:
            self._current, start = self.builder.open_text()
        self._current_kind = kind
        events.append(start)

    def _close_current(self, events: list[StreamEvent]) -> None:
        if self._current is not None and (end := self.builder.close(self._current)) is not None:
            events.append(end)
        self._current, self._current_kind = None, ""


def _usage(raw: dict[str, Any]) -> Usage:
    """OpenAI counts cached tokens inside ``prompt_tokens`` and reasoning inside ``completion_tokens``;
    we split out the cache (priced differently) and leave reasoning where it is (no double count)."""
    prompt = int(raw.get("prompt_tokens") or 0)
    details = raw.get("prompt_tokens_details") or {}
    cache_read = int(details.get("cached_tokens") or 0)
    cache_write = int(details.get("cache_write_tokens") or 0)
    return Usage(
        input=max(0, prompt - cache_read - cache_write),
        output=int(raw.get("completion_tokens") or 0),
        cache_read=cache_read,
        cache_write=cache_write,
    )
