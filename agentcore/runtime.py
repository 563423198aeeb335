"""The seams the agent loop runs against: ``Runtime``, ``StreamFn`` and ``AbortSignal``.

The loop (``agentcore.loop``) is written once. In-process it runs with ``InProcessRuntime`` (calls the
provider and the tool directly, wall clock, random ids). Inside a Temporal workflow it runs with a
runtime whose ``stream`` and ``run_tool`` are activities and whose clock and ids come from
``workflow.now()`` / ``workflow.uuid4()``, so a replay takes exactly the same path.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from pydantic import Field

from .events import StreamEvent
from .messages import Message, ToolCall, WireModel
from .model import Model, ThinkingLevel
from .tools import AgentTool, AgentToolResult, ToolSpec


class AbortSignal:
    """A one-shot abort flag that async code can wait on (the spec's ``AbortSignal``)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason: str | None = None
        self._listeners: list[Callable[[], Any]] = []

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def abort(self, reason: str | None = None) -> None:
        if self._event.is_set():
            return
        self.reason = reason or "aborted"
        self._event.set()
        for listener in list(self._listeners):
            listener()

    async def wait(self) -> None:
        await self._event.wait()

    def add_listener(self, listener: Callable[[], Any]) -> Callable[[], None]:
        """Call ``listener`` once on abort (at once if already aborted); returns a remover."""
        if self.aborted:
            listener()
            return lambda: None
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove


class LlmContext(WireModel):
    """What a model call sees: system prompt, messages (after ``convert_to_llm``) and tool specs."""

    system_prompt: str = ""
    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)


class StreamOptions(WireModel):
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    # Never serialised into histories, events or logs; resolved at call time in the process that calls.
    api_key: str | None = Field(default=None, exclude=True, repr=False)
    max_tokens: int | None = None
    temperature: float | None = None
    session_id: str | None = None
    signal: Any = Field(default=None, exclude=True, repr=False)  # AbortSignal | None
    # A ``providers.base.ConversionMemo`` for a caller whose messages never change once built (the
    # worker passes one per conversation): the provider converts each message object once.
    conversion_memo: Any = Field(default=None, exclude=True, repr=False)


class StreamFn(Protocol):
    """``stream_fn(model, context, options)``: yields provider events, ends with ``done`` or ``error``.

    Must not raise: failures arrive as a final ``error`` event carrying an ``AssistantMessage`` with
    ``stop_reason`` ``error`` or ``aborted`` and an ``error_message``.
    """

    def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[StreamEvent]: ...


ToolUpdate = Callable[[AgentToolResult], None]


class Runtime(Protocol):
    """Everything nondeterministic the loop needs, injected."""

    def now_ms(self) -> int:
        """Current time in milliseconds since the epoch."""
        ...

    def new_id(self) -> str:
        """A fresh unique id (tool result ids, entry ids)."""
        ...

    def stream(self, model: Model, context: LlmContext, options: StreamOptions) -> AsyncIterator[StreamEvent]:
        """Stream one assistant response (same contract as ``StreamFn``)."""
        ...

    async def run_tool(
        self, tool: AgentTool | ToolSpec, call: ToolCall, signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        """Run one known tool call (in-process an ``AgentTool``; in a workflow a ``ToolSpec`` whose
        function lives on the worker) (prepare, validate, execute, timeout); failures come back as
        ``AgentToolResult(is_error=True)`` whose text names the SPEC-7.2 code. Never raises."""
        ...
