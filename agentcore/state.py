"""Agent state and options (SPEC-1.1, SPEC-10.1)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .approvals import PendingApproval
from .events import (
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
)
from .messages import AssistantMessage, Message
from .model import Model, QueueMode, ThinkingLevel, ToolExecutionMode
from .tools import AgentTool, ToolSpec
from .wakeups import Wakeup

TransformContext = Callable[[list[Message], Any], "list[Message] | Awaitable[list[Message]]"]
ConvertToLlm = Callable[[list[Message]], "list[Message] | Awaitable[list[Message]]"]
GetApiKey = Callable[[str], "str | None | Awaitable[str | None]"]

MAX_CONCURRENT_TOOL_CALLS = 10  # SPEC-9.1: tool calls per turn, concurrent


class AgentState(BaseModel):
    """The conversation's state (SPEC-1.1). The durable runtime holds tools as ``ToolSpec``s."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="ignore")

    system_prompt: str = ""
    model: Model
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    tools: list[AgentTool | ToolSpec] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    is_streaming: bool = False
    streaming_message: AssistantMessage | None = None
    pending_tool_calls: set[str] = Field(default_factory=set)
    error_message: str | None = None
    # Pending wake-ups, soonest first (``schedule_wakeup``, ``wakeup_tool``).
    wakeups: list[Wakeup] = Field(default_factory=list)
    # Tool calls waiting for a person to approve them (tools with ``requires_approval``).
    pending_approvals: list[PendingApproval] = Field(default_factory=list)

    def apply(self, event: AgentEvent) -> None:
        """Fold one of the loop's events into the state (the in-process ``Agent``'s reducer)."""
        if isinstance(event, AgentStartEvent):
            self.is_streaming = True
        elif isinstance(event, MessageStartEvent | MessageUpdateEvent):
            if isinstance(event.message, AssistantMessage):
                self.streaming_message = event.message
        elif isinstance(event, MessageEndEvent):
            self.streaming_message = None
            self.messages.append(event.message)
        elif isinstance(event, ToolExecutionStartEvent):
            self.pending_tool_calls.add(event.tool_call_id)
        elif isinstance(event, ToolExecutionEndEvent):
            self.pending_tool_calls.discard(event.tool_call_id)
        elif isinstance(event, TurnEndEvent):
            if isinstance(event.message, AssistantMessage) and event.message.error_message:
                self.error_message = event.message.error_message


class AgentOptions(BaseModel):
    """How to build an agent (SPEC-10.1 with its defaults), plus pi's hooks.

    ``tools`` holds ``AgentTool``s in-process; a durable conversation may also name tools registered
    on its workers (``"search_wines"``) or give their ``ToolSpec``s.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    system_prompt: str = ""
    model: Model
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    tools: list[AgentTool | ToolSpec | str] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    steering_mode: QueueMode = QueueMode.ONE_AT_A_TIME
    follow_up_mode: QueueMode = QueueMode.ONE_AT_A_TIME
    tool_execution: ToolExecutionMode = ToolExecutionMode.PARALLEL
    # In-process hooks (pi's names in snake_case); a durable conversation cannot carry callables.
    transform_context: TransformContext | None = None
    convert_to_llm: ConvertToLlm | None = None
    get_api_key: GetApiKey | None = None
    stream_fn: Any = None  # StreamFn | None; None: the provider the model's ``api`` names
    max_tokens: int | None = None
    temperature: float | None = None
