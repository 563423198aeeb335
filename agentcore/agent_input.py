"""What a person hands an in-process ``Agent``: prompts, steering and follow-up messages made user
messages (SPEC-7.1: nothing else is accepted), its tools checked, and its queues drained by mode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import InvalidMessageRoleError, ValidationError
from .messages import ImageContent, Message, TextContent, UserMessage, parse_message
from .model import QueueMode
from .tools import AgentTool, ToolSpec

__all__ = ["PromptInput", "drain", "in_process_tools", "prompt_messages", "queued_message", "user_message"]

PromptInput = str | Message | dict[str, Any] | Sequence[Message | dict[str, Any]]


def drain(queue: list[Message], mode: QueueMode) -> list[Message]:
    """What a queue hands the run now: everything (``ALL``) or its oldest message."""
    if not queue:
        return []
    if mode == QueueMode.ALL:
        taken = list(queue)
        queue.clear()
        return taken
    return [queue.pop(0)]


def user_message(text: str, images: Sequence[ImageContent | dict[str, Any]], now_ms: int) -> UserMessage:
    content: list[Any] = [TextContent(text=text), *images] if text or not images else list(images)
    message = parse_message({"role": "user", "content": content, "timestamp": now_ms})
    assert isinstance(message, UserMessage)
    return message


def queued_message(message: str | Message | dict[str, Any], now_ms: int) -> Message:
    """A steering or follow-up message."""
    if isinstance(message, str):
        return user_message(message, (), now_ms)
    return _user_only(parse_message(message), "a steering or follow-up message")


def prompt_messages(
    input: PromptInput, images: Sequence[ImageContent | dict[str, Any]] | None, now_ms: int
) -> list[Message]:
    """A prompt's messages: a text (with ``images``), or user messages."""
    if isinstance(input, str):
        return [user_message(input, images or (), now_ms)]
    if images:
        raise TypeError("images go with a text prompt: prompt(text, images=[...])")
    if isinstance(input, dict) or not isinstance(input, Sequence):
        return [_user_only(parse_message(input), "a prompt")]
    messages = [_user_only(parse_message(message), "a prompt") for message in input]
    if not messages:
        raise ValidationError("prompt: at least one message is required")
    return messages


def in_process_tools(tools: Sequence[Any]) -> list[AgentTool | ToolSpec]:
    checked: list[AgentTool | ToolSpec] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, AgentTool | ToolSpec):
            raise ValidationError(
                f"tools.{index}: expected an AgentTool (a tool name like {tool!r} needs a durable runtime)"
            )
        checked.append(tool)
    return checked


def _user_only(message: Message, what: str) -> Message:
    """SPEC-7.1: what a person sends is a user message (as the durable client refuses too)."""
    if message.role != "user":
        raise InvalidMessageRoleError(f"{what} takes user messages, not {message.role!r}")
    return message
