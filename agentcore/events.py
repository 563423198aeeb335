"""Events: what a provider stream yields (``StreamEvent``) and what the agent emits (``AgentEvent``).

Provider stream events follow pi-ai: ``start``, ``text_start|delta|end``, ``thinking_start|delta|end``,
``toolcall_start|delta|end``, then exactly one ``done`` or ``error``. Each carries the partial
``AssistantMessage`` built so far (in-process this is a reference, not a copy).

Agent events are SPEC-5.1's eight plus ``message_update`` (a streaming delta) and
``tool_execution_update`` (``on_update`` progress) and ``llm_retry`` (a retried model call: a UI
drops the failed attempt's partial text), ``tool_approval_requested``/``tool_approval_resolved``
around a call that waits for a person, ``compaction_start``/``compaction_end`` around an
automatic or manual compaction (``agentcore.compaction``), and ``wakeup_scheduled`` /
``wakeup_fired`` / ``wakeup_cancelled`` for wake-ups (``agentcore.wakeups``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, TypeAdapter

from .messages import AssistantMessage, Message, ToolCall, ToolResultMessage, WireModel
from .tools import AgentToolResult

# ---------------------------------------------------------------------------------- provider stream


class StreamStart(WireModel):
    type: Literal["start"] = "start"
    partial: AssistantMessage


class _BlockEvent(WireModel):
    content_index: int
    partial: AssistantMessage


class TextStart(_BlockEvent):
    type: Literal["text_start"] = "text_start"


class TextDelta(_BlockEvent):
    type: Literal["text_delta"] = "text_delta"
    delta: str


class TextEnd(_BlockEvent):
    type: Literal["text_end"] = "text_end"
    content: str


class ThinkingStart(_BlockEvent):
    type: Literal["thinking_start"] = "thinking_start"


class ThinkingDelta(_BlockEvent):
    type: Literal["thinking_delta"] = "thinking_delta"
    delta: str


class ThinkingEnd(_BlockEvent):
    type: Literal["thinking_end"] = "thinking_end"
    content: str


class ToolCallStart(_BlockEvent):
    type: Literal["toolcall_start"] = "toolcall_start"


class ToolCallDelta(_BlockEvent):
    type: Literal["toolcall_delta"] = "toolcall_delta"
    delta: str


class ToolCallEnd(_BlockEvent):
    type: Literal["toolcall_end"] = "toolcall_end"
    tool_call: ToolCall


class StreamDone(WireModel):
    type: Literal["done"] = "done"
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage


class StreamError(WireModel):
    type: Literal["error"] = "error"
    reason: Literal["error", "aborted"]
    error: AssistantMessage
    # Provider failure classification, for a caller (Temporal's retry policy) that can act on it.
    retryable: bool = False
    retry_after_seconds: float | None = None
    status_code: int | None = None


StreamEvent = Annotated[
    StreamStart
    | TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | StreamDone
    | StreamError,
    Field(discriminator="type"),
]
STREAM_EVENT_ADAPTER: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)

# ------------------------------------------------------------------------------------- agent events


class AgentStartEvent(WireModel):
    type: Literal["agent_start"] = "agent_start"


class AgentEndEvent(WireModel):
    type: Literal["agent_end"] = "agent_end"
    messages: list[Message] = Field(default_factory=list)


class TurnStartEvent(WireModel):
    type: Literal["turn_start"] = "turn_start"


class TurnEndEvent(WireModel):
    type: Literal["turn_end"] = "turn_end"
    message: Message
    tool_results: list[ToolResultMessage] = Field(default_factory=list)


class MessageStartEvent(WireModel):
    type: Literal["message_start"] = "message_start"
    message: Message


class MessageUpdateEvent(WireModel):
    """A streaming delta. ``assistant_message_event`` is the provider event without its ``partial``
    (deltas are cheap to ship); ``message`` is the partial message where the runtime has it."""

    type: Literal["message_update"] = "message_update"
    assistant_message_event: dict[str, Any]
    message: AssistantMessage | None = None


class MessageEndEvent(WireModel):
    type: Literal["message_end"] = "message_end"
    message: Message


class ToolExecutionStartEvent(WireModel):
    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: Any = None


def _tool_result_or_as_given(value: Any) -> Any:
    """A progress report shaped like an ``AgentToolResult`` (as every tool's ``on_update`` sends and
    as it arrives from a durable conversation, in JSON) becomes one; anything else stays as given."""
    if isinstance(value, dict) and value.keys() <= AgentToolResult.model_fields.keys():
        return AgentToolResult.model_validate(value)
    return value


class ToolExecutionUpdateEvent(WireModel):
    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    args: Any = None
    partial_result: Annotated[Any, BeforeValidator(_tool_result_or_as_given)] = None


class ToolExecutionEndEvent(WireModel):
    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: AgentToolResult | None = None
    is_error: bool = False


ApprovalDecisionKind = Literal["approved", "edited", "denied", "expired", "aborted"]


class ToolApprovalRequestedEvent(WireModel):
    """A call of a tool that ``requires_approval`` waits for a person (after its
    ``tool_execution_start``); ``expires_at`` (ms since the epoch) is when it times out, if ever."""

    type: Literal["tool_approval_requested"] = "tool_approval_requested"
    tool_call_id: str
    tool_name: str
    args: Any = None
    expires_at: int | None = None


class ToolApprovalResolvedEvent(WireModel):
    """The wait ended: ``approved``, ``edited`` (runs with ``args``), ``denied`` (with ``reason``),
    ``expired`` or ``aborted``."""

    type: Literal["tool_approval_resolved"] = "tool_approval_resolved"
    tool_call_id: str
    decision: ApprovalDecisionKind
    args: Any = None
    reason: str = ""


class LlmRetryEvent(WireModel):
    """A model call is being retried: discard the partial text streamed by the failed attempt."""

    type: Literal["llm_retry"] = "llm_retry"
    attempt: int
    error_message: str | None = None


CompactionReason = Literal["threshold", "overflow", "manual"]


class CompactionStartEvent(WireModel):
    """The conversation is being compacted: ``threshold`` (the context passed its share of the window),
    ``overflow`` (the provider refused the context as too long) or ``manual`` (``compact()``)."""

    type: Literal["compaction_start"] = "compaction_start"
    reason: CompactionReason = "threshold"


class CompactionEndEvent(WireModel):
    """A compaction finished. On success ``summary`` and ``first_kept_entry_id`` describe the new
    ``compaction`` entry and ``tokens_after`` estimates the context the next model call sees. With
    ``aborted`` or ``error_message`` nothing was written; ``will_retry`` says the model call that
    overflowed is tried again (once) on the compacted context."""

    type: Literal["compaction_end"] = "compaction_end"
    reason: CompactionReason = "threshold"
    tokens_before: int = 0
    tokens_after: int | None = None
    summary: str | None = None
    first_kept_entry_id: str | None = None
    entry_id: str | None = None
    aborted: bool = False
    error_message: str | None = None
    will_retry: bool = False


class WakeupScheduledEvent(WireModel):
    """A wake-up was scheduled (``schedule_wakeup``, or the model's ``wakeup_tool`` call, after its
    ``tool_execution_end``). ``source`` says who asked: ``user`` or ``tool``."""

    type: Literal["wakeup_scheduled"] = "wakeup_scheduled"
    id: str
    note: str
    due_at: datetime
    source: Literal["user", "tool", "schedule"] = "user"


class WakeupFiredEvent(WireModel):
    """A wake-up came due: the conversation runs with a user message carrying ``note`` (or takes it
    as a follow-up when a run is going). ``late_seconds``: how long after ``due_at`` it fired."""

    type: Literal["wakeup_fired"] = "wakeup_fired"
    id: str
    note: str
    due_at: datetime
    late_seconds: float = 0.0


class WakeupCancelledEvent(WireModel):
    """A pending wake-up was cancelled (``cancel_wakeup``; ``reason`` "reset" when the conversation
    was reset)."""

    type: Literal["wakeup_cancelled"] = "wakeup_cancelled"
    id: str
    note: str
    due_at: datetime
    reason: str = "cancelled"


AgentEvent = Annotated[
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
    | ToolApprovalRequestedEvent
    | ToolApprovalResolvedEvent
    | LlmRetryEvent
    | CompactionStartEvent
    | CompactionEndEvent
    | WakeupScheduledEvent
    | WakeupFiredEvent
    | WakeupCancelledEvent,
    Field(discriminator="type"),
]
AGENT_EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)

# Events only a durable conversation emits; otherwise both runtimes emit the same stream (the
# parity test holds them to it). ``llm_retry``: Temporal retries a failed model call, and the
# subscriber must drop the failed attempt's streamed text; the in-process runtime does not retry.
DURABLE_ONLY_EVENTS: frozenset[str] = frozenset({"llm_retry"})


def delta_payload(event: StreamEvent) -> dict[str, Any]:
    """The provider event without its partial message: what a ``message_update`` ships."""
    return event.model_dump(mode="json", exclude={"partial"})
