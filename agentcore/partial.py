"""Rebuild a streaming assistant message from ``message_update`` deltas.

Durable deltas travel without the partial message (the log stays lean); whoever wants the message
so far (``get_state().streaming_message``, a chat UI) folds the deltas into one with ``apply_delta``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .messages import AssistantMessage, TextContent, ThinkingContent, ToolCall


def apply_delta(message: AssistantMessage, delta: dict[str, Any]) -> None:
    """Fold one ``assistant_message_event`` (as published in ``message_update``) into ``message``."""
    kind = delta.get("type", "")
    index = delta.get("content_index")
    if not isinstance(index, int) or index < 0:
        return
    blocks = message.content
    if kind == "text_start" or (kind == "text_delta" and index >= len(blocks)):
        _ensure(blocks, index, lambda: TextContent(text=""))
    elif kind == "thinking_start" or (kind == "thinking_delta" and index >= len(blocks)):
        _ensure(blocks, index, lambda: ThinkingContent(thinking=""))
    elif kind == "toolcall_start":
        _ensure(blocks, index, lambda: ToolCall(id="", name=""))
    if index >= len(blocks):
        return
    block = blocks[index]
    if kind == "text_delta" and isinstance(block, TextContent):
        block.text += str(delta.get("delta", ""))
    elif kind == "text_end" and isinstance(block, TextContent):
        block.text = str(delta.get("content", block.text))
    elif kind == "thinking_delta" and isinstance(block, ThinkingContent):
        block.thinking += str(delta.get("delta", ""))
    elif kind == "thinking_end" and isinstance(block, ThinkingContent):
        block.thinking = str(delta.get("content", block.thinking))
    elif kind == "toolcall_end" and isinstance(delta.get("tool_call"), dict):
        blocks[index] = ToolCall.model_validate(delta["tool_call"])


def _ensure(blocks: list[Any], index: int, make: Any) -> None:
    while len(blocks) <= index:
        blocks.append(make())


def apply_deltas(message: AssistantMessage, deltas: Iterable[dict[str, Any]]) -> None:
    """``apply_delta`` for each of ``deltas``, in linear time.

    A long answer streams as tens of thousands of small deltas; appending each to the block's string
    would copy the text so far every time (a 600 KB answer: ~30 GB copied, far past a workflow
    task's deadline when a query folds it). Runs of text and thinking deltas are joined once."""
    pending: dict[int, list[str]] = {}

    def flush() -> None:
        for index, parts in pending.items():
            block = message.content[index]
            if isinstance(block, TextContent):
                block.text += "".join(parts)
            elif isinstance(block, ThinkingContent):
                block.thinking += "".join(parts)
        pending.clear()

    for delta in deltas:
        kind, index = delta.get("type", ""), delta.get("content_index")
        if (
            kind in ("text_delta", "thinking_delta")
            and isinstance(index, int)
            and 0 <= index < len(message.content)
        ):
            block = message.content[index]
            wanted = TextContent if kind == "text_delta" else ThinkingContent
            if isinstance(block, wanted):
                pending.setdefault(index, []).append(str(delta.get("delta", "")))
                continue
        flush()
        apply_delta(message, delta)
    flush()
