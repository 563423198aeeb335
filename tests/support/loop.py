"""Shared helpers for the loop, agent and tool pipeline tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from agentcore import (
    AbortSignal,
    AgentEvent,
    AgentTool,
    AgentToolResult,
    LlmContext,
    StreamOptions,
    ToolCall,
    ToolExecutionMode,
    UserMessage,
)
from agentcore.events import StreamEvent
from agentcore.inprocess import InProcessRuntime
from agentcore.messages import AssistantMessage, Message, TextContent
from agentcore.model import Model
from agentcore.runtime import ToolUpdate
from agentcore.testing import scripted_model
from agentcore.tools import ToolSpec

MODEL = scripted_model()
OBJECT = {"type": "object", "properties": {}}


def long_history(model: Model) -> list[Message]:
    """Six exchanges of about 45 tokens each: most of a 400-token window, so the next model call
    compacts first (with ``keep_recent_tokens=60``, the last exchange is kept)."""
    history: list[Message] = []
    for index in range(6):
        history.append(UserMessage(content=f"question {index} " + "word " * 40, timestamp=1))
        history.append(
            AssistantMessage(
                content=[TextContent(text=f"answer {index} " + "word " * 40)],
                api=model.api,
                provider=model.provider,
                model=model.id,
                timestamp=1,
            )
        )
    return history


def user(text: str, timestamp: int = 1_700_000_000_000) -> UserMessage:
    return UserMessage(content=text, timestamp=timestamp)


async def collect(events: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    return [event async for event in events]


def kinds(events: list[AgentEvent]) -> list[str]:
    """Event types, with message events tagged by role: ``message_end:assistant``."""
    out = []
    for event in events:
        message = getattr(event, "message", None)
        if event.type in ("message_start", "message_end") and message is not None:
            out.append(f"{event.type}:{message.role}")
        else:
            out.append(event.type)
    return out


def of_type(events: list[AgentEvent], kind: str) -> list[Any]:
    return [event for event in events if event.type == kind]


def make_tool(
    name: str,
    execute: Callable[..., Any] | None = None,
    *,
    parameters: Any = None,
    execution_mode: ToolExecutionMode | None = None,
    timeout_seconds: float = 120.0,
) -> AgentTool:
    async def echo(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        return AgentToolResult.text(f"{name} ok")

    return AgentTool(
        name=name,
        description=f"the {name} tool",
        parameters=parameters if parameters is not None else OBJECT,
        execute=execute or echo,
        execution_mode=execution_mode,
        timeout_seconds=timeout_seconds,
    )


def sleeper(seconds: float, log: list[str] | None = None, label: str = "") -> Callable[..., Any]:
    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        if log is not None:
            log.append(f"start {label or tool_call_id}")
        await asyncio.sleep(seconds)
        if log is not None:
            log.append(f"end {label or tool_call_id}")
        return AgentToolResult.text(f"slept {seconds}")

    return execute


class RecordingRuntime:
    """A runtime with a fake clock and counters: proves the loop takes time and tools from it."""

    def __init__(self, stream_fn: Any, clock_ms: int = 42_000) -> None:
        self.inner = InProcessRuntime(stream_fn)
        self.clock_ms = clock_ms
        self.tool_runs: list[str] = []
        self.ids = 0

    def now_ms(self) -> int:
        return self.clock_ms

    def new_id(self) -> str:
        self.ids += 1
        return f"id{self.ids}"

    def stream(self, model: Model, context: LlmContext, options: StreamOptions) -> AsyncIterator[StreamEvent]:
        return self.inner.stream(model, context, options)

    async def run_tool(
        self, tool: AgentTool | ToolSpec, call: ToolCall, signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        self.tool_runs.append(call.name)
        return await self.inner.run_tool(tool, call, signal, on_update)
