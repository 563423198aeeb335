"""``tools.execute`` (one activity per tool call) and ``tools.describe`` (specs for tool names).

The tool's function lives in this worker's ``ToolRegistry``; the workflow only knows its spec. A
tool sees its call id as an idempotency key and the attempt number (``current_tool_context()``).
Progress from ``on_update`` is sent to the conversation as ``tool_execution_update`` events.

**Local attempt** (as ``llm.stream``'s): a retry-safe call the workflow expects to be quick runs
first as a local activity, inside the workflow task, bounded to one publish interval (80 ms). A tool
that ends by then comes back with its result and the progress it reported, which the workflow
publishes; one still running is left running in this worker (``ToolAttemptResult.handoff``) and the
remote ``tools.execute`` the workflow then schedules with the same input takes it over (its progress
and heartbeats, and an abort) instead of running it again; in another worker it runs the tool anew,
as a retry would. A handed-off tool nobody takes over is stopped after ``HANDOFF_WAIT_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
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
    ToolAttemptResult,
    ToolCallInput,
)
from agentcore.runtime import AbortSignal
from agentcore.tool_context import ToolContext, reset_tool_context, set_tool_context
from agentcore.tool_exec import aborted_result, error_result, execute_tool_with_timeout
from agentcore.tools import AgentToolResult, ToolRegistry

from .events import ActivityEventPublisher
from .session import retrieve_exception

# A result must fit in an activity completion (Temporal refuses payloads over 2 MB) and is read by a
# model anyway: longer text is cut, with a note saying so.
MAX_RESULT_TEXT_BYTES = 512 * 1024
HEARTBEAT_SECONDS = 1.0
# An aborted tool gets this long to hand back what it has before the aborted result is returned.
ABORT_GRACE_SECONDS = 2.0
# A handed-off tool that no remote ``tools.execute`` came for is stopped after this long (as a
# model call's, ``agentcore.activities.llm.HANDOFF_WAIT_SECONDS``).
HANDOFF_WAIT_SECONDS = 120.0
# A local attempt's result bigger than this goes to the server through the remote activity (handed
# off, already finished), in a workflow task of its own: local results ride in their task's
# completion, and the events one task publishes share the event stream's budget (six 500 KB results
# in one task left a subscriber none of their ``tool_execution_end`` events).
LOCAL_RESULT_MAX_BYTES = 64 * 1024


class ToolActivities:
    def __init__(
        self,
        registry: ToolRegistry,
        *,
        update_interval: timedelta = timedelta(milliseconds=100),
        local_wait: timedelta = timedelta(milliseconds=80),
    ) -> None:
        self.registry = registry
        self.update_interval = update_interval
        # A local attempt's wait (the model calls' publish interval): a tool still running then is
        # handed off (``ToolAttemptResult.handoff``).
        self.local_wait = local_wait
        # Tools handed off by a local attempt and not yet taken over, by workflow id and call id.
        self._running: dict[tuple[str, str], _Running] = {}

    @activity.defn(name="tools.describe")  # don't rename: recorded in histories
    async def describe(self, inp: DescribeToolsInput) -> DescribeToolsResult:
        if activity.info().is_local:
            # Inside the conversation's workflow task: from what this worker knows, at once; the
            # remote activity connects MCP servers, and may run where other tools are registered.
            specs, unknown = self.registry.describe(inp.names)
            return DescribeToolsResult(tools=[] if unknown else specs, declined=bool(unknown))
        await self.registry.prepare(inp.names)  # MCP servers named here: connected and listed
        specs, unknown = self.registry.describe(inp.names)
        return DescribeToolsResult(tools=specs, unknown=unknown)

    @activity.defn(name="tools.execute")  # don't rename: recorded in histories
    async def execute(self, inp: ToolCallInput) -> AgentToolResult | ToolAttemptResult:
        info = activity.info()
        key = (info.workflow_id or "", inp.tool_call_id)
        # The call a local attempt handed off (or left when its workflow task was lost and is run
        # again): carried on from here, not run a second time.
        running = self._adopt(key)
        if info.is_local:
            started = time.monotonic()
            attempt = await self._attempt_locally(inp, key, running)
            return attempt.model_copy(update={"local_seconds": time.monotonic() - started})
        call = ToolCall(id=inp.tool_call_id, name=inp.tool_name, arguments=inp.arguments)
        updates = _UpdatePublisher(call, self.update_interval)
        try:
            if running is None:
                started_call = await self._start(inp, call)
                if isinstance(started_call, AgentToolResult):
                    return started_call
                running = started_call
            else:
                updates.start()  # (here: the tool's own task was made by the local attempt)
            running.send_to(updates)
            return await self._wait(inp, running)
        finally:
            await updates.close()

    async def _start(self, inp: ToolCallInput, call: ToolCall) -> AgentToolResult | _Running:
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
        running = _Running(signal=AbortSignal())
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

    async def _attempt_locally(
        self, inp: ToolCallInput, key: tuple[str, str], running: _Running | None
    ) -> ToolAttemptResult:
        """The local attempt: the tool's result if it ends within the wait (one publish interval at
        most), else a handoff, the tool left running here for the remote activity to take over."""
        wait = self.local_wait.total_seconds()
        if inp.local_wait_seconds is not None:
            wait = min(wait, inp.local_wait_seconds)
        if inp.stop:
            if running is not None:
                running.signal.abort("aborted by user")
                await asyncio.wait({running.task}, timeout=wait)
                running.task.cancel()
            return ToolAttemptResult(result=aborted_result(inp.tool_name))
        if running is None:
            if self.registry.get(inp.tool_name) is None:
                # Not listed here yet (an MCP server's tool on a worker just started): connecting may
                # take long, so the remote activity does it.
                return ToolAttemptResult(handoff=True)
            call = ToolCall(id=inp.tool_call_id, name=inp.tool_name, arguments=inp.arguments)
            started = await self._start(inp, call)
            if isinstance(started, AgentToolResult):
                return ToolAttemptResult(result=started)
            running = started
        try:
            done, _ = await asyncio.wait({running.task}, timeout=wait)
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is None or not details.cancel_requested:
                # Not the workflow's abort (its task was lost or evicted): the tool goes on, for the
                # attempt that runs the task again to take over.
                self._park(key, running)
                raise
            running.signal.abort("aborted by user")
            await asyncio.wait({running.task}, timeout=wait)
            return ToolAttemptResult(
                result=aborted_result(inp.tool_name), updates=_newest_updates(running.updates)
            )
        if not done:
            self._park(key, running)
            return ToolAttemptResult(handoff=True)
        try:
            result = running.task.result()
        except ToolUnavailableError as exc:
            raise ApplicationError(exc.message, type=TOOL_UNAVAILABLE) from None
        if _content_bytes(result) > LOCAL_RESULT_MAX_BYTES:
            self._park(key, running)
            return ToolAttemptResult(handoff=True)
        return ToolAttemptResult(result=_capped(result), updates=_newest_updates(running.updates))

    def _park(self, key: tuple[str, str], running: _Running) -> None:
        running.task.add_done_callback(retrieve_exception)
        if running.expiry is not None:
            running.expiry.cancel()
        running.expiry = asyncio.get_running_loop().call_later(
            HANDOFF_WAIT_SECONDS, self._expire, key, running
        )
        self._running[key] = running

    def _adopt(self, key: tuple[str, str]) -> _Running | None:
        running = self._running.pop(key, None)
        if running is not None and running.expiry is not None:
            running.expiry.cancel()
            running.expiry = None
        return running

    def _expire(self, key: tuple[str, str], running: _Running) -> None:
        """No ``tools.execute`` came for a handed-off call (it ran on another worker, or the call was
        aborted before one did): stop the tool."""
        if self._running.get(key) is running:
            del self._running[key]
        running.signal.abort("handoff expired")
        asyncio.get_running_loop().call_later(ABORT_GRACE_SECONDS, running.task.cancel)


@dataclass(eq=False)
class _Running:
    """A tool's run in this worker: its task, abort signal, and where its progress goes (kept until
    a remote activity sends it, or handed back with a local attempt's result)."""

    signal: AbortSignal
    task: asyncio.Task[AgentToolResult] = field(init=False)
    updates: list[AgentToolResult] = field(default_factory=list)
    publisher: _UpdatePublisher | None = None
    expiry: asyncio.TimerHandle | None = None

    def on_update(self, partial: AgentToolResult) -> None:
        if self.publisher is None:
            self.updates.append(partial)
        else:
            self.publisher.on_update(partial)

    def send_to(self, publisher: _UpdatePublisher) -> None:
        """Progress goes to ``publisher`` from now on, what was kept first."""
        kept, self.updates = self.updates, []
        self.publisher = publisher
        for partial in kept:
            publisher.on_update(partial)


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


def _newest_updates(updates: list[AgentToolResult]) -> list[AgentToolResult]:
    """The progress a local attempt hands back with its result: the newest reports that fit in
    ``MAX_RESULT_TEXT_BYTES`` (progress is a preview; a local activity's result must stay small)."""
    kept: list[AgentToolResult] = []
    room = MAX_RESULT_TEXT_BYTES
    for partial in reversed(updates):
        room -= len(partial.model_dump_json())
        if room < 0:
            break
        kept.append(partial)
    kept.reverse()
    return kept


def _content_bytes(result: AgentToolResult) -> int:
    """About what the result's content weighs: its text and image data (``details`` left out)."""
    return sum(
        len(block.text) if isinstance(block, TextContent) else len(block.data) for block in result.content
    )


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
