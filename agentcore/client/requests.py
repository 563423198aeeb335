"""What a command sends: request ids, prompts as validated user messages, tool names."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from pydantic import BaseModel

from ..errors import AgentError, ValidationError
from ..messages import ImageContent, Message, TextContent, UserMessage, describe_validation_error
from ..tools import AgentTool, ToolSpec

PromptInput = str | Message | Sequence[Message]


def _now_ms() -> int:
    return int(time.time() * 1000)


def new_id() -> str:
    """A fresh request (or session) id."""
    return uuid.uuid4().hex


def user_messages(value: PromptInput, images: Sequence[ImageContent] | None = None) -> list[UserMessage]:
    """Turn a prompt argument into validated user messages (text plus images, a message, a list)."""
    try:
        messages: list[UserMessage] = []
        if isinstance(value, str):
            content: list[TextContent | ImageContent] = [TextContent(text=value), *(images or [])]
            messages.append(UserMessage(content=content, timestamp=_now_ms()))
        items = [] if isinstance(value, str) else [value] if isinstance(value, BaseModel) else list(value)
        for item in items:
            if not isinstance(item, UserMessage):
                role = getattr(item, "role", type(item).__name__)
                from ..errors import InvalidMessageRoleError

                raise InvalidMessageRoleError(f"a prompt takes user messages, not {role!r}")
            messages.append(item)
        # Validate again from plain data: a message or image built with ``model_construct`` (or
        # mutated after construction) skips pydantic's checks, and the workflow would refuse it with
        # an untyped decoding error instead.
        return [UserMessage.model_validate(message.model_dump()) for message in messages]
    except AgentError:
        raise
    except Exception as exc:
        raise ValidationError(describe_validation_error(exc)) from None


def tool_names(tools: Sequence[AgentTool | ToolSpec | str]) -> list[str]:
    """The names of ``tools`` (tools, specs or names), as a conversation's config holds them."""
    return [tool if isinstance(tool, str) else tool.name for tool in tools]
