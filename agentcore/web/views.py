"""What the page is sent: messages and events as plain JSON, with model text already rendered.

The browser never turns model text into markup itself: text arrives either as ``html`` made by
``render_markdown`` (sanitised) or as plain strings the page sets with ``textContent``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..events import AgentEvent
from ..messages import AssistantMessage, Message, TextContent, ThinkingContent, ToolCall, ToolResultMessage
from ..protocol import DurableState, QueuedMessage
from ..session import JsonlSessionStorage
from ..tools import tool_result_text
from ..wakeups import Wakeup
from .markdown import render_markdown


def message_view(message: Message, index: int | None = None, entry_id: str | None = None) -> dict[str, Any]:
    view: dict[str, Any] = {
        "index": index,
        "entry_id": entry_id,
        "role": message.role,
        "timestamp": message.timestamp,
    }
    if isinstance(message, AssistantMessage):
        text = message.text
        view.update(
            text=text,
            html=render_markdown(text) if text else "",
            thinking=[
                block.thinking
                for block in message.content
                if isinstance(block, ThinkingContent) and not block.redacted
            ],
            tool_calls=[
                {"id": block.id, "name": block.name, "args": block.arguments}
                for block in message.content
                if isinstance(block, ToolCall)
            ],
            stop_reason=message.stop_reason,
            error_message=message.error_message,
            model=f"{message.provider}/{message.model}" if message.provider else message.model,
            tokens=message.usage.total_tokens,
            cost=message.usage.cost.total,
        )
    elif isinstance(message, ToolResultMessage):
        view.update(
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            text=message.text,
            html=render_markdown(message.text),
            is_error=message.is_error,
        )
    else:
        text = "".join(block.text for block in message.content if isinstance(block, TextContent))
        view.update(text=text, html=render_markdown(text), images=len(message.content) - (1 if text else 0))
    return view


def queued_view(kind: str, item: QueuedMessage) -> dict[str, Any]:
    return {"id": item.id, "kind": kind, "text": item.message.text}


def state_view(state: DurableState, entry_ids: list[str | None]) -> dict[str, Any]:
    """The chat page's snapshot: the transcript and where the event stream continues from.

    ``get_state`` answers the messages, the partial answer being streamed and the next event offset
    in one query, so the page shows the snapshot and then applies events from exactly that offset."""
    first = state.first_message_index
    return {
        "session_id": state.session_id,
        "status": state.status,
        "model": f"{state.model.provider}/{state.model.id}",
        "thinking_level": str(state.thinking_level),
        "tools": [tool.name for tool in state.tools],
        "system_prompt": state.system_prompt,
        "message_count": state.message_count,
        "first_message_index": first,
        "messages": [
            message_view(message, first + i, entry_ids[i] if i < len(entry_ids) else None)
            for i, message in enumerate(state.messages)
        ],
        "streaming_message": (
            message_view(state.streaming_message) if state.streaming_message is not None else None
        ),
        "pending_tool_calls": state.pending_tool_calls,
        "pending_approvals": [pending.model_dump(mode="json") for pending in state.pending_approvals],
        "error_message": state.error_message,
        "event_offset": state.event_offset,
        "wakeups": [wakeup_view(wakeup) for wakeup in state.wakeups],
        # Messages whose model call was retried, by entry id: the page shows the live notice again.
        "retries": {
            note.entry_id: {"attempt": note.attempt, "error_message": note.error_message}
            for note in state.retries
        },
    }


def wakeup_view(wakeup: Wakeup) -> dict[str, Any]:
    return {"id": wakeup.id, "note": wakeup.note, "due_at": wakeup.due_at.isoformat()}


def ended_view(session_id: str, status: str, reason: str, session_path: Path | None) -> dict[str, Any]:
    """The snapshot of a conversation whose workflow ended: what its session file holds, read only
    (``ended`` is true; there is no event stream to follow)."""
    messages: list[Message] = []
    entry_ids: list[str] = []
    model = ""
    if session_path is not None and session_path.is_file():
        with JsonlSessionStorage.open(session_path) as storage:
            context = storage.build_context()
        messages, entry_ids = context.messages, list(context.message_entry_ids)
        if context.model is not None:
            model = f"{context.model.provider}/{context.model.id}"
    return {
        "session_id": session_id,
        "status": status,
        "ended": True,
        "end_reason": reason,
        "model": model,
        "thinking_level": "off",
        "tools": [],
        "system_prompt": "",
        "message_count": len(messages),
        "first_message_index": 0,
        "messages": [
            message_view(message, i, entry_ids[i] if i < len(entry_ids) else None)
            for i, message in enumerate(messages)
        ],
        "streaming_message": None,
        "pending_tool_calls": [],
        "error_message": None,
        "event_offset": 0,
        "queued": [],
    }


def event_view(event: AgentEvent) -> dict[str, Any]:
    """An event for the page. Deltas go without the partial message they may carry (the page holds
    the text so far: shipping it with every delta would grow quadratically); finished messages get
    their rendered HTML; tool results their text."""
    if event.type == "message_update":
        return {"type": event.type, "delta": event.assistant_message_event}
    if event.type in ("message_start", "message_end"):
        return {"type": event.type, "message": message_view(event.message)}
    if event.type == "tool_execution_update":
        return {
            "type": event.type,
            "tool_call_id": event.tool_call_id,
            "tool_name": event.tool_name,
            "text": tool_result_text(event.partial_result),
        }
    if event.type == "tool_execution_end":
        text = tool_result_text(event.result)
        return {
            "type": event.type,
            "tool_call_id": event.tool_call_id,
            "tool_name": event.tool_name,
            "text": text,
            "html": render_markdown(text),
            "is_error": event.is_error,
        }
    if event.type in ("agent_end", "turn_end"):
        return {"type": event.type}  # the messages arrived one by one already
    view: dict[str, Any] = event.model_dump(mode="json")
    return view


__all__ = ["ended_view", "event_view", "message_view", "queued_view", "state_view", "wakeup_view"]
