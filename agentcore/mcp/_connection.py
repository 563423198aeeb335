"""One worker's connection to one MCP server, kept alive for the worker's lifetime.

A supervising task owns the SDK's ``Client`` (its transport and task groups must be entered and left
in one task): it connects, lists the tools, refreshes them when the server says they changed, and
when the connection is lost (a stdio server's process died, an HTTP session broke) it connects again,
with a growing pause while the server stays down. Tool calls come from activity tasks and only wait
for the connection to be up.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp import Client, MCPError
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost

from agentcore.errors import ToolUnavailableError

from ._servers import MCPServerSpec

__all__ = ["MCPConnection"]

log = logging.getLogger("agentcore.mcp")

# How long a call waits for a server that is (re)starting before it fails as unavailable.
CONNECT_WAIT_SECONDS = 10.0
RESTART_DELAYS = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
# A tool listing that never ends (a server bug) is cut here rather than hanging the worker.
MAX_LIST_PAGES = 100

# Failures that mean the connection itself is gone (not that the server refused one request).
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    httpx2.TransportError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
)

Progress = Callable[[float, float | None, str | None], None]


class MCPConnection:
    def __init__(self, server: MCPServerSpec, on_tools_changed: Callable[[], None]) -> None:
        self.server = server
        self.tools: list[mcp_types.Tool] = []
        self.last_error: str | None = None
        self._on_tools_changed = on_tools_changed
        self._client: Client | None = None
        self._ready = asyncio.Event()  # connected and listed
        self._attempt_failed = asyncio.Event()  # set (and replaced) when an attempt to connect fails
        self._tried = asyncio.Event()  # the first connection attempt is over, whatever its outcome
        self._lost = asyncio.Event()  # the current connection is gone: reconnect
        self._changed = asyncio.Event()  # the server's tool list changed: list again
        self._stopping = False
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.server.name

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp server {self.name}")

    async def stop(self) -> None:
        self._stopping = True
        self._stopped.set()
        self._lost.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def wait_tried(self, timeout: float) -> None:
        """Until the first attempt to connect is over (or ``timeout``)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._tried.wait(), timeout)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], on_progress: Progress
    ) -> mcp_types.CallToolResult:
        """``tools/call``. Cancelling the calling task cancels the request (the SDK sends
        ``notifications/cancelled``). A connection that is down or breaks mid-call raises
        ``ToolUnavailableError``; the server's own refusals (``MCPError``) pass through."""
        client = await self._connected()

        # Progress arrives on the connection's own task; the caller's context (an activity's, which
        # its event publisher needs) is carried over so ``on_progress`` runs as if the caller ran it.
        caller_context = contextvars.copy_context()

        async def report(progress: float, total: float | None, message: str | None) -> None:
            caller_context.run(on_progress, progress, total, message)

        try:
            return await client.call_tool(name, arguments, progress_callback=report)
        except MCPError as exc:
            if exc.code != mcp_types.CONNECTION_CLOSED:
                raise
            self._lose("the connection closed")
            raise ToolUnavailableError(
                f'MCP server "{self.name}" went away during the call to "{name}" (restarting it)'
            ) from None
        except _CONNECTION_ERRORS as exc:
            self._lose(_describe(exc))
            raise ToolUnavailableError(
                f'MCP server "{self.name}" could not be reached during the call to "{name}": {_describe(exc)}'
            ) from None

    async def _connected(self) -> Client:
        self.start()
        if not self._ready.is_set():
            # Wait for the (re)start under way, but not past an attempt that failed: the server is down.
            waits = [asyncio.ensure_future(event.wait()) for event in (self._ready, self._attempt_failed)]
            try:
                await asyncio.wait(waits, timeout=CONNECT_WAIT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
        if self._client is None:
            why = f": {self.last_error}" if self.last_error else ""
            raise ToolUnavailableError(
                f'MCP server "{self.name}" ({self.server.where()}) is not running{why}'
            )
        return self._client

    def _lose(self, why: str) -> None:
        if self._ready.is_set() and not self._stopping:  # a live connection, not a failed attempt
            log.warning("MCP server %r: %s; reconnecting", self.name, why)
        # From now on calls wait for the next connection instead of writing to a dead one.
        self._ready.clear()
        self._client = None
        self._lost.set()

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping:
            self._lost.clear()
            try:
                async with self._client_for_server() as client:
                    await self._list(client)
                    self._client = client
                    self._ready.set()
                    self._tried.set()
                    failures = 0
                    log.info("MCP server %r: %d tool(s)", self.name, len(self.tools))
                    async with anyio.create_task_group() as group:
                        group.start_soon(self._relist_on_change, client)
                        group.start_soon(self._listen_for_changes, client)
                        await self._lost.wait()
                        group.cancel_scope.cancel()
            except Exception as exc:
                self.last_error = _describe(exc)
                if not self._stopping:
                    log.warning("MCP server %r (%s): %s", self.name, self.server.where(), self.last_error)
                self._attempt_failed.set()
                self._attempt_failed = asyncio.Event()
            finally:
                self._ready.clear()
                self._client = None
                self._tried.set()
            if not self._stopping:
                delay = RESTART_DELAYS[min(failures, len(RESTART_DELAYS) - 1)]
                failures += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), delay)

    @contextlib.asynccontextmanager
    async def _client_for_server(self) -> AsyncIterator[Client]:
        async def on_message(message: Any) -> None:
            if isinstance(message, mcp_types.ToolListChangedNotification):
                self._changed.set()

        transport = _Watched(self.server.transport(), lambda: self._lose("the connection closed"))
        async with Client(transport, message_handler=on_message) as client:
            yield client

    async def _list(self, client: Client) -> None:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = tools
        self._on_tools_changed()

    async def _relist_on_change(self, client: Client) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            await _logged(self._list(client), f"MCP server {self.name!r}: listing its changed tools failed")

    async def _listen_for_changes(self, client: Client) -> None:
        # Servers on the 2026-07-28 protocol announce changes on a ``subscriptions/listen`` stream;
        # earlier ones send ``notifications/tools/list_changed`` (``on_message`` above).
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._changed.set()
        except (ListenNotSupportedError, SubscriptionLost, MCPError) as exc:
            log.debug("MCP server %r: no change subscription (%s)", self.name, exc)


class _Watched:
    """A transport whose end is noticed: the SDK's client reports a closed connection only to the
    requests in flight, and a stdio server that dies while idle must be restarted before the next
    call reaches a dead pipe."""

    def __init__(self, transport: contextlib.AbstractAsyncContextManager[Any], on_end: Callable[[], None]):
        self._transport = transport
        self._on_end = on_end
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> tuple[Any, Any]:
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport)
            forward, receive = anyio.create_memory_object_stream[Any](0)
            group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(group.cancel_scope.cancel)
            group.start_soon(self._pump, read, forward)
            self._stack = stack.pop_all()
        return receive, write

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._stack.__aexit__(*exc_info)

    async def _pump(self, read: Any, forward: Any) -> None:
        try:
            async with forward:
                async for message in read:
                    await forward.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self._on_end()


async def _logged(work: Awaitable[None], what: str) -> None:
    try:
        await work
    except Exception as exc:
        log.warning("%s: %s", what, _describe(exc))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
