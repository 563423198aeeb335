"""A scripted model: a ``StreamFn`` that plays back replies, for tests, benchmarks and offline demos.

    model = ScriptedModel([tool_calls([("get_weather", {"city": "Paris"})]), text("Sunny.")])
    agent = Agent(model=scripted_model(), stream_fn=model, tools=[weather])

Replies are either a list, consumed one per model call, or a function of the ``LlmContext`` the call
received. Prefer the function for durable runs: a retried model call must get the same reply, and a
function of the context gives it, while a list would hand out the next one.

It streams like a provider (``start``, block start/delta/end events, then ``done`` or ``error``),
with zero latency unless ``delay`` is set, and honours the abort signal between deltas: the stream
then ends with an ``error`` event whose reason is ``aborted``, keeping what was streamed so far.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

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
from ..messages import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from ..model import Model
from ..runtime import AbortSignal, LlmContext, StreamOptions

__all__ = [
    "Reply",
    "ScriptedModel",
    "ScriptedStreamError",
    "error",
    "length",
    "scripted_model",
    "text",
    "thinking",
    "tool_calls",
]

CallSpec = ToolCall | tuple[str, Mapping[str, Any]] | Mapping[str, Any]


class ScriptedStreamError(RuntimeError):
    """What a scripted stream raises for ``error(..., raise_=True)``: a stream function that breaks
    the never-raise contract, as a buggy provider would."""


@dataclass(frozen=True)
class Reply:
    """One scripted assistant response. Combine with ``+``: ``thinking("hm") + text("Hi")``
    (content is concatenated, the right side's stop reason wins)."""

    content: tuple[AssistantContent, ...] = ()
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    usage: Usage | None = None
    raise_error: bool = False

    def __add__(self, other: Reply) -> Reply:
        return replace(other, content=self.content + other.content, usage=other.usage or self.usage)


def text(content: str, *, usage: Usage | None = None) -> Reply:
    return Reply(content=(TextContent(text=content),), usage=usage)


def thinking(thought: str, answer: str | None = None) -> Reply:
    """A thinking block, then (if given) the answer's text."""
    reply = Reply(content=(ThinkingContent(thinking=thought),))
    return reply + text(answer) if answer is not None else reply


def tool_calls(calls: Iterable[CallSpec], *, preamble: str | None = None) -> Reply:
    """Tool calls as ``ToolCall``s, ``(name, arguments)`` pairs or ``{"name", "arguments", "id"?}``
    dicts. Calls without an id get ``call_<assistant messages so far>_<index>`` when streamed: unique
    in a conversation and the same on a retry."""
    blocks: tuple[AssistantContent, ...] = tuple(_tool_call(call) for call in calls)
    if preamble:
        blocks = (TextContent(text=preamble), *blocks)
    return Reply(content=blocks, stop_reason="toolUse")


def error(message: str, *, raise_: bool = False, partial: str | None = None) -> Reply:
    """A failed call: an ``error`` event (or, with ``raise_``, an exception) after streaming
    ``partial`` text, if any."""
    content: tuple[AssistantContent, ...] = (TextContent(text=partial),) if partial else ()
    return Reply(content=content, stop_reason="error", error_message=message, raise_error=raise_)


def length(partial: str = "", calls: Iterable[CallSpec] = ()) -> Reply:
    """A response cut off by the output token limit, possibly with (incomplete) tool calls."""
    content: tuple[AssistantContent, ...] = (TextContent(text=partial),) if partial else ()
    return Reply(content=content + tuple(_tool_call(call) for call in calls), stop_reason="length")


def _tool_call(call: CallSpec) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, tuple):
        name, arguments = call
        return ToolCall(id="", name=name, arguments=dict(arguments))
    return ToolCall(id=str(call.get("id", "")), name=call["name"], arguments=dict(call.get("arguments", {})))


def scripted_model(model_id: str = "scripted", **fields: Any) -> Model:
    """A ``Model`` for the scripted provider (``api="scripted"``)."""
    return Model(id=model_id, provider=fields.pop("provider", "scripted"), api="scripted", **fields)


Respond = Callable[[LlmContext], "Reply | str"]


@dataclass
class ScriptedModel:
    """A ``StreamFn`` playing back ``replies`` (a list, or ``respond(context) -> Reply``; a plain
    string means ``text(string)``).

    ``chunks``: how many deltas each text/thinking block and each tool call's JSON is split into.
    ``delay``: seconds before each delta (0: never yields to the event loop while streaming).
    ``raise_errors``: every ``error`` reply raises ``ScriptedStreamError`` instead.
    ``calls`` records the context of every call, ``options`` its stream options.
    """

    replies: Sequence[Reply | str] | Respond
    chunks: int = 1
    delay: float = 0.0
    raise_errors: bool = False
    calls: list[LlmContext] = field(default_factory=list)
    options: list[StreamOptions] = field(default_factory=list)

    def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[StreamEvent]:
        return self._stream(model, context, options)

    def _reply(self, call_index: int, context: LlmContext) -> Reply:
        if callable(self.replies):
            reply = self.replies(context)
        elif call_index < len(self.replies):
            reply = self.replies[call_index]
        else:
            reply = error(
                f"ScriptedModel has no reply for call {call_index + 1} ({len(self.replies)} scripted)"
            )
        return text(reply) if isinstance(reply, str) else reply

    async def _stream(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[StreamEvent]:
        call_index = len(self.calls)
        self.calls.append(context)
        self.options.append(options)
        reply = self._reply(call_index, context)
        signal: AbortSignal | None = options.signal
        turn = sum(1 for message in context.messages if message.role == "assistant")
        partial = AssistantMessage(
            api=model.api,
            provider=model.provider,
            model=model.id,
            usage=reply.usage or Usage(),
            timestamp=time.time_ns() // 1_000_000,
        )
        yield StreamStart(partial=partial)
        for block in reply.content:
            if isinstance(block, ToolCall):
                events = self._stream_tool_call(partial, block, f"call_{turn}_{len(partial.content)}", signal)
            else:
                events = self._stream_prose(partial, block, signal)
            async for event in events:
                yield event
            if partial.stop_reason == "aborted":
                return
        if await self._aborted(signal):
            yield _abort(partial)
            return
        partial.stop_reason = reply.stop_reason
        if reply.stop_reason in ("error", "aborted"):
            partial.error_message = reply.error_message or "scripted error"
            if reply.raise_error or self.raise_errors:
                raise ScriptedStreamError(partial.error_message)
            yield StreamError(reason="aborted" if reply.stop_reason == "aborted" else "error", error=partial)
        else:
            yield StreamDone(reason=reply.stop_reason, message=partial)

    async def _stream_prose(
        self, partial: AssistantMessage, block: TextContent | ThinkingContent, signal: AbortSignal | None
    ) -> AsyncIterator[StreamEvent]:
        """A text or thinking block, grown in place in ``partial`` one delta at a time."""
        index = len(partial.content)
        is_text = isinstance(block, TextContent)
        full = block.text if isinstance(block, TextContent) else block.thinking
        live: TextContent | ThinkingContent = (
            TextContent(text="") if is_text else ThinkingContent(thinking="")
        )
        partial.content.append(live)
        yield (
            TextStart(content_index=index, partial=partial)
            if is_text
            else ThinkingStart(content_index=index, partial=partial)
        )
        for piece in _split(full, self.chunks):
            if await self._aborted(signal):
                yield _abort(partial)
                return
            if isinstance(live, TextContent):
                live.text += piece
                yield TextDelta(content_index=index, partial=partial, delta=piece)
            else:
                live.thinking += piece
                yield ThinkingDelta(content_index=index, partial=partial, delta=piece)
        if isinstance(live, TextContent):
            yield TextEnd(content_index=index, partial=partial, content=live.text)
        else:
            yield ThinkingEnd(content_index=index, partial=partial, content=live.thinking)

    async def _stream_tool_call(
        self, partial: AssistantMessage, block: ToolCall, default_id: str, signal: AbortSignal | None
    ) -> AsyncIterator[StreamEvent]:
        """A tool call whose arguments arrive as JSON fragments; they are parsed at the end, as a
        provider only knows them once the JSON is complete."""
        index = len(partial.content)
        call = ToolCall(id=block.id or default_id, name=block.name)
        partial.content.append(call)
        yield ToolCallStart(content_index=index, partial=partial)
        for piece in _split(orjson.dumps(block.arguments).decode(), self.chunks):
            if await self._aborted(signal):
                yield _abort(partial)
                return
            yield ToolCallDelta(content_index=index, partial=partial, delta=piece)
        call.arguments = dict(block.arguments)
        yield ToolCallEnd(content_index=index, partial=partial, tool_call=call)

    async def _aborted(self, signal: AbortSignal | None) -> bool:
        if self.delay > 0:
            if signal is None:
                await asyncio.sleep(self.delay)
            else:
                # Wake at once on abort rather than after the delay, like a real socket read would.
                try:
                    await asyncio.wait_for(signal.wait(), self.delay)
                except TimeoutError:
                    pass
        return signal is not None and signal.aborted


def _abort(partial: AssistantMessage) -> StreamError:
    partial.stop_reason = "aborted"
    partial.error_message = "Request was aborted"
    return StreamError(reason="aborted", error=partial)


def _split(value: str, parts: int) -> list[str]:
    if parts <= 1 or len(value) <= 1:
        return [value]
    size = -(-len(value) // parts)
    return [value[start : start + size] for start in range(0, len(value), size)]
