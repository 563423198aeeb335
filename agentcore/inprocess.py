"""``InProcessRuntime``: the loop's runtime when there is no Temporal: wall clock, random ids, the
stream function called directly and tools run through the shared pipeline with their timeout."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

from .errors import TOOL_NOT_SUPPORTED, TOOL_UNAVAILABLE, ToolUnavailableError
from .events import StreamEvent
from .messages import ToolCall
from .model import Model
from .runtime import AbortSignal, LlmContext, StreamFn, StreamOptions, ToolUpdate
from .tool_exec import error_result, execute_tool_with_timeout
from .tools import AgentTool, AgentToolResult, ToolSpec

__all__ = ["InProcessRuntime", "default_stream_fn"]


def default_stream_fn() -> StreamFn:
    """``agentcore.providers.stream``, which dispatches on ``model.api``.

    Imported at call time: the providers package is optional for users who bring their own stream
    function, and importing it here would make every loop import pay for httpx and the catalog.
    """
    from . import providers

    stream: StreamFn | None = getattr(providers, "stream", None)
    if stream is None:
        raise RuntimeError("agentcore.providers.stream is not available; pass a stream_fn")
    return stream


class InProcessRuntime:
    """Runs everything in this process. ``stream_fn=None`` means the provider the model's ``api`` names."""

    def __init__(self, stream_fn: StreamFn | None = None) -> None:
        self.stream_fn = stream_fn

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def new_id(self) -> str:
        return uuid.uuid4().hex

    def stream(self, model: Model, context: LlmContext, options: StreamOptions) -> AsyncIterator[StreamEvent]:
        stream_fn = self.stream_fn if self.stream_fn is not None else default_stream_fn()
        return stream_fn(model, context, options)

    async def run_tool(
        self, tool: AgentTool | ToolSpec, call: ToolCall, signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        if not isinstance(tool, AgentTool):
            return error_result(
                TOOL_NOT_SUPPORTED,
                f'Tool "{tool.name}" is only a spec here; its execute function lives on a worker. '
                "Give the in-process agent an AgentTool.",
            )
        try:
            return await execute_tool_with_timeout(tool, call, signal, on_update)
        except ToolUnavailableError as exc:
            return error_result(TOOL_UNAVAILABLE, exc.message)
