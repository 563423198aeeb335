"""agentcore: a durable LLM agent runtime. The library half (no Temporal imports here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The public names load on first use (PEP 562), so ``import agentcore.cli`` (``agentcore --help``)
# does not load pydantic, httpx and the loop; type checkers read the imports below.
if TYPE_CHECKING:
    from .agent import Agent
    from .approvals import PendingApproval
    from .errors import (
        AGENT_BUSY,
        AGENT_NOT_FOUND,
        EXECUTION_ABORTED,
        EXECUTION_TIMEOUT,
        INVALID_MESSAGE_ROLE,
        INVALID_PARAMETERS,
        TOOL_DENIED,
        TOOL_NOT_FOUND,
        TOOL_NOT_SUPPORTED,
        AgentBusyError,
        AgentError,
        AgentNotFoundError,
        ApprovalAlreadyResolvedError,
        ApprovalNotFoundError,
        InvalidMessageRoleError,
        InvalidParametersError,
        NoWorkerError,
        RateLimitError,
        SessionError,
        ToolNotFoundError,
        ToolUnavailableError,
        ValidationError,
        WakeupInPastError,
        WakeupLimitError,
        WakeupNotFoundError,
        WorkflowTaskFailingError,
    )
    from .events import (
        AgentEndEvent,
        AgentEvent,
        AgentStartEvent,
        LlmRetryEvent,
        MessageEndEvent,
        MessageStartEvent,
        MessageUpdateEvent,
        StreamEvent,
        ToolApprovalRequestedEvent,
        ToolApprovalResolvedEvent,
        ToolExecutionEndEvent,
        ToolExecutionStartEvent,
        ToolExecutionUpdateEvent,
        TurnEndEvent,
        TurnStartEvent,
        WakeupCancelledEvent,
        WakeupFiredEvent,
        WakeupScheduledEvent,
    )
    from .inprocess import InProcessRuntime
    from .loop import (
        AgentContext,
        AgentLoopConfig,
        agent_loop,
        agent_loop_continue,
        stream_assistant_response,
    )
    from .messages import (
        AgentMessage,
        AssistantMessage,
        ImageContent,
        Message,
        TextContent,
        ThinkingContent,
        ToolCall,
        ToolResultMessage,
        Usage,
        UsageCost,
        UserMessage,
    )
    from .model import Model, ModelCost, QueueMode, ThinkingLevel, ToolExecutionMode
    from .runtime import AbortSignal, LlmContext, Runtime, StreamFn, StreamOptions
    from .state import AgentOptions, AgentState
    from .subagents import subagent_tool
    from .tools import AgentTool, AgentToolResult, ToolSpec
    from .wakeups import Wakeup, wakeup_tool

# Where each public name lives.
_EXPORTS = {
    "agent": ("Agent",),
    "approvals": ("PendingApproval",),
    "errors": (
        "AGENT_BUSY",
        "AGENT_NOT_FOUND",
        "EXECUTION_ABORTED",
        "EXECUTION_TIMEOUT",
        "INVALID_MESSAGE_ROLE",
        "INVALID_PARAMETERS",
        "TOOL_DENIED",
        "TOOL_NOT_FOUND",
        "TOOL_NOT_SUPPORTED",
        "AgentBusyError",
        "AgentError",
        "AgentNotFoundError",
        "ApprovalAlreadyResolvedError",
        "ApprovalNotFoundError",
        "InvalidMessageRoleError",
        "InvalidParametersError",
        "NoWorkerError",
        "RateLimitError",
        "SessionError",
        "ToolNotFoundError",
        "ToolUnavailableError",
        "ValidationError",
        "WakeupInPastError",
        "WakeupLimitError",
        "WakeupNotFoundError",
        "WorkflowTaskFailingError",
    ),
    "events": (
        "AgentEndEvent",
        "AgentEvent",
        "AgentStartEvent",
        "LlmRetryEvent",
        "MessageEndEvent",
        "MessageStartEvent",
        "MessageUpdateEvent",
        "StreamEvent",
        "ToolApprovalRequestedEvent",
        "ToolApprovalResolvedEvent",
        "ToolExecutionEndEvent",
        "ToolExecutionStartEvent",
        "ToolExecutionUpdateEvent",
        "TurnEndEvent",
        "TurnStartEvent",
        "WakeupCancelledEvent",
        "WakeupFiredEvent",
        "WakeupScheduledEvent",
    ),
    "inprocess": ("InProcessRuntime",),
    "loop": (
        "AgentContext",
        "AgentLoopConfig",
        "agent_loop",
        "agent_loop_continue",
        "stream_assistant_response",
    ),
    "messages": (
        "AgentMessage",
        "AssistantMessage",
        "ImageContent",
        "Message",
        "TextContent",
        "ThinkingContent",
        "ToolCall",
        "ToolResultMessage",
        "Usage",
        "UsageCost",
        "UserMessage",
    ),
    "model": (
        "Model",
        "ModelCost",
        "QueueMode",
        "ThinkingLevel",
        "ToolExecutionMode",
    ),
    "runtime": (
        "AbortSignal",
        "LlmContext",
        "Runtime",
        "StreamFn",
        "StreamOptions",
    ),
    "state": (
        "AgentOptions",
        "AgentState",
    ),
    "subagents": ("subagent_tool",),
    "tools": (
        "AgentTool",
        "AgentToolResult",
        "ToolSpec",
    ),
    "wakeups": (
        "Wakeup",
        "wakeup_tool",
    ),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once: later lookups find it without this call
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "AGENT_BUSY",
    "AGENT_NOT_FOUND",
    "EXECUTION_ABORTED",
    "EXECUTION_TIMEOUT",
    "INVALID_MESSAGE_ROLE",
    "INVALID_PARAMETERS",
    "TOOL_DENIED",
    "TOOL_NOT_FOUND",
    "TOOL_NOT_SUPPORTED",
    "AbortSignal",
    "Agent",
    "AgentBusyError",
    "AgentContext",
    "AgentEndEvent",
    "AgentError",
    "AgentEvent",
    "AgentLoopConfig",
    "AgentMessage",
    "AgentNotFoundError",
    "AgentOptions",
    "AgentStartEvent",
    "AgentState",
    "AgentTool",
    "AgentToolResult",
    "ApprovalAlreadyResolvedError",
    "ApprovalNotFoundError",
    "AssistantMessage",
    "ImageContent",
    "InProcessRuntime",
    "InvalidMessageRoleError",
    "InvalidParametersError",
    "NoWorkerError",
    "LlmContext",
    "LlmRetryEvent",
    "Message",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "Model",
    "ModelCost",
    "PendingApproval",
    "QueueMode",
    "RateLimitError",
    "Runtime",
    "SessionError",
    "StreamEvent",
    "StreamFn",
    "StreamOptions",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "ToolApprovalRequestedEvent",
    "ToolApprovalResolvedEvent",
    "ToolCall",
    "ToolExecutionEndEvent",
    "ToolExecutionMode",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolNotFoundError",
    "ToolUnavailableError",
    "ToolResultMessage",
    "ToolSpec",
    "TurnEndEvent",
    "TurnStartEvent",
    "Usage",
    "UsageCost",
    "UserMessage",
    "ValidationError",
    "Wakeup",
    "WakeupCancelledEvent",
    "WakeupFiredEvent",
    "WakeupInPastError",
    "WakeupLimitError",
    "WakeupNotFoundError",
    "WakeupScheduledEvent",
    "WorkflowTaskFailingError",
    "agent_loop",
    "agent_loop_continue",
    "stream_assistant_response",
    "subagent_tool",
    "wakeup_tool",
]
