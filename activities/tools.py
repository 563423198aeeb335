"""``tools.execute`` (one activity per tool call) and ``tools.describe`` (specs for tool names).

The tool's function lives in this worker's ``ToolRegistry``; the workflow only knows its spec. A
tool sees its call id as an idempotency key and the attempt number (``current_tool_context()``).
Progress from ``on_update`` is sent to the conversation as ``tool_execution_update`` events.

Both are regular activities, never local ones (docs/versioning.md, "No local activities, by design").
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcore.budget import EVENT_MAX_BYTES_UNDER_PRESSURE, shrink_to_fit
from agentcore.errors import OUTCOME_UNKNOWN, TOOL_NOT_FOUND, TOOL_UNAVAILABLE, ToolUnavailableError
from agentcore.events import ToolExecutionUpdateEvent
from agentcore.messages import TextContent, ToolCall
from agentcore.protocol import (
    DescribeToolsInput,
    DescribeToolsResult,
    ToolCallInput,
)
from agentcore.runtime import AbortSignal
from agentcore.tool_context import ToolContext, reset_tool_context, set_tool_context
from agentcore.tool_exec import aborted_result, error_result, execute_tool_with_timeout
from agentcore.tools import AgentToolResult, ToolRegistry

from .events import ActivityEventPublisher

# A result must fit in an activity completion (Temporal refuses payloads over 2 MB) and is read by a
# model anyway: longer text is cut, with a note saying so.
MAX_RESULT_TEXT_BYTES = 512 * 1024
HEARTBEAT_SECONDS = 1.0
# An aborted tool gets this long to hand back what it has before the aborted result is returned.
ABORT_GRACE_SECONDS = 2.0


class ToolActivities:
    def __init__(
        self,
        registry: ToolRegistry,
        *,
        update_interval: timedelta = timedelta(milliseconds=100),
    ) -> None:
        self.registry = registry
        self.update_interval = update_interval

    @activity.defn(name="tools.describe")  # don't rename: recorded in histories
    async def describe(self, inp: DescribeToolsInput) -> DescribeToolsResult:
        await self.registry.prepare(inp.names)  # MCP servers named here: connected and listed
        specs, unknown = self.registry.describe(inp.names)
        return DescribeToolsResult(tools=specs, unknown=unknown)

    @activity.defn(name="tools.execute")  # don't rename: recorded in histories
    async def execute(self, inp: ToolCallInput) -> AgentToolResult:
        call = ToolCall(id=inp.tool_call_id, name=inp.tool_name, arguments=inp.arguments)
        updates = _UpdatePublisher(call, self.update_interval)
        try:
            running = await self._start(inp, call, updates)
            if isinstance(running, AgentToolResult):
                return running
            return await self._wait(inp, running)
        finally:
            await updates.close()

    async def _start(
        self, inp: ToolCallInput, call: ToolCall, updates: _UpdatePublisher
    ) -> AgentToolResult | _Running:
        """The tool's run, started (or the result of a call that cannot run)."""
        tool = self.registry.get(inp.tool_name)
        if tool is None:
            # A worker that just started may not have listed its MCP servers' tools yet.
            await self.registry.prepare([inp.tool_name])
            tool = self.registry.get(inp.tool_name)
        if tool is None:
            return error_result(TOOL_NOT_FOUND, f'Tool "{inp.tool_name}" is not registered on this worker.')
        info = activity.info()
        if info.attempt > 1 and not inp.retry_safe:
            # Defensive: the retry policy gives such tools one attempt, but never run one twice.
            return error_result(
                OUTCOME_UNKNOWN, f'Tool "{inp.tool_name}" was interrupted; its outcome is unknown.'
            )
        running = _Running(signal=AbortSignal(), publisher=updates)
        token = set_tool_context(
            ToolContext(
                tool_call_id=inp.tool_call_id,
                tool_name=inp.tool_name,
                session_id=inp.session_id,
                attempt=info.attempt,
            )
        )
        try:
            running.task = asyncio.create_task(
                execute_tool_with_timeout(tool, call, running.signal, running.on_update, inp.timeout_seconds)
            )
        finally:
            reset_tool_context(token)
        return running

    async def _wait(self, inp: ToolCallInput, running: _Running) -> AgentToolResult:
        """A remote activity's wait for the tool: heartbeating, and aborting it when cancelled."""
        task = running.task
        ticker = asyncio.create_task(_heartbeat_ticker())
        try:
            result = await asyncio.shield(task)
        except ToolUnavailableError as exc:
            # Retryable: the next attempt finds the server restarted (a tool that is not retry-safe
            # has one attempt, so its outcome is recorded as unknown instead).
            raise ApplicationError(exc.message, type=TOOL_UNAVAILABLE) from None
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is not None and details.worker_shutdown:
                raise  # not the user's abort: the call runs again elsewhere (if retry-safe)
            running.signal.abort("aborted by user")
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), ABORT_GRACE_SECONDS)
            result = aborted_result(inp.tool_name)
        finally:
            ticker.cancel()
        return _capped(result)


@dataclass(eq=False)
class _Running:
    """A tool's run in this worker: its task, its abort signal, where its progress goes."""

    signal: AbortSignal
    publisher: _UpdatePublisher
    task: asyncio.Task[AgentToolResult] = field(init=False)

    def on_update(self, partial: AgentToolResult) -> None:
        self.publisher.on_update(partial)


async def _heartbeat_ticker() -> None:
    # Beat well inside the heartbeat timeout: a fixed 1 s period against a 1 s timeout (a small
    # ``tool_heartbeat_seconds``) timed out healthy tools and re-ran them on every attempt.
    timeout = activity.info().heartbeat_timeout
    period = min(HEARTBEAT_SECONDS, timeout.total_seconds() / 3) if timeout else HEARTBEAT_SECONDS
    while True:
        activity.heartbeat()
        await asyncio.sleep(period)


class _UpdatePublisher:
    """``on_update`` -> ``tool_execution_update`` events, sent every ``interval`` while any wait.

    An event over the stream's budget is cut first (``agentcore.budget``): progress is a preview,
    the tool's result carries everything."""

    def __init__(self, call: ToolCall, interval: timedelta) -> None:
        self.call = call
        self.interval = interval.total_seconds()
        self._events = ActivityEventPublisher()
        self._sender: asyncio.Task[None] | None = None

    def on_update(self, partial: AgentToolResult) -> None:
        event = ToolExecutionUpdateEvent(
            tool_call_id=self.call.id,
            tool_name=self.call.name,
            args=self.call.arguments,
            partial_result=partial.model_dump(mode="json"),
        )
        self._events.publish(shrink_to_fit(event, EVENT_MAX_BYTES_UNDER_PRESSURE))
        self.start()

    def start(self) -> None:
        """Start sending (made in the activity's context: it signals as that activity)."""
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send_every_interval())

    async def _send_every_interval(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self._events.flush()

    async def close(self) -> None:
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
            await self._events.flush()


def _capped(result: AgentToolResult) -> AgentToolResult:
    size = sum(len(block.text.encode()) for block in result.content if isinstance(block, TextContent))
    if (
        size <= MAX_RESULT_TEXT_BYTES
        and len(orjson.dumps(result.details, default=str)) <= MAX_RESULT_TEXT_BYTES
    ):
        return result
    budget = MAX_RESULT_TEXT_BYTES
    content: list[Any] = []
    for block in result.content:
        if isinstance(block, TextContent):
            text = block.text.encode()[:budget].decode(errors="ignore")
            budget -= len(text.encode())
            if len(text) < len(block.text):
                text += f"\n[output truncated: {size} bytes in all, {MAX_RESULT_TEXT_BYTES} kept]"
            content.append(TextContent(text=text))
        else:
            content.append(block)
    return result.model_copy(
        update={"content": content, "details": {"truncated": True, "original_bytes": size}}
    )
