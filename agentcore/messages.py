"""Message and content types (SPEC-1.4, SPEC-2, SPEC-8.1).

Every wire type is a pydantic model with a literal discriminator (``type`` for content, ``role`` for
messages) and one module-level ``TypeAdapter`` per union. Models ignore unknown fields so files and
histories written by a newer version still decode; new fields always get defaults.

Timestamps are milliseconds since the Unix epoch (SPEC-8.1: a positive integer).
"""

from __future__ import annotations

import binascii
import re
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from .errors import ValidationError


class WireModel(BaseModel):
    """Base of every serialised agentcore type: unknown fields are ignored, not fatal."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


# ---------------------------------------------------------------------------------------------- content

IMAGE_MIME_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_MIME_RE = re.compile(r"^[a-z]+/[a-z0-9][a-z0-9.+-]*$")


class TextContent(WireModel):
    type: Literal["text"] = "text"
    text: str
    # Opaque provider data replayed verbatim (e.g. OpenAI Responses item ids); never shown to users.
    text_signature: str | None = None


class ImageContent(WireModel):
    """A base64-encoded image. Both fields are checked (SPEC-8.1)."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str

    @field_validator("data")
    @classmethod
    def _valid_base64(cls, value: str) -> str:
        if not value:
            raise ValueError("image data must be non-empty base64")
        try:
            binascii.a2b_base64(value.encode("ascii"), strict_mode=True)
        except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
            raise ValueError(f"image data is not valid base64 ({exc})") from None
        return value

    @field_validator("mime_type")
    @classmethod
    def _valid_mime(cls, value: str) -> str:
        if not _MIME_RE.match(value):
            raise ValueError(f"{value!r} is not a valid MIME type")
        if value not in IMAGE_MIME_TYPES:
            raise ValueError(f"unsupported image MIME type {value!r}; use one of {sorted(IMAGE_MIME_TYPES)}")
        return value


class ThinkingContent(WireModel):
    type: Literal["thinking"] = "thinking"
    thinking: str
    # Provider signature that must be replayed with the block (Anthropic), or the field name the
    # reasoning text came from (OpenAI-compatible servers).
    thinking_signature: str | None = None
    # Anthropic ``redacted_thinking``: ``thinking_signature`` holds the encrypted data, no text.
    redacted: bool = False


class ToolCall(WireModel):
    type: Literal["toolCall"] = "toolCall"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


UserContent = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantContent = Annotated[TextContent | ThinkingContent | ToolCall, Field(discriminator="type")]
ToolResultContent = Annotated[TextContent | ImageContent, Field(discriminator="type")]


# ------------------------------------------------------------------------------------------------ usage


class UsageCost(WireModel):
    """Dollars spent, broken down like ``Usage``'s token counts."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


class Usage(WireModel):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: UsageCost = Field(default_factory=UsageCost)


# --------------------------------------------------------------------------------------------- messages

StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]
Timestamp = Annotated[int, Field(gt=0, description="milliseconds since the Unix epoch")]


class UserMessage(WireModel):
    role: Literal["user"] = "user"
    content: list[UserContent]
    timestamp: Timestamp

    @field_validator("content", mode="before")
    @classmethod
    def _text_shorthand(cls, value: Any) -> Any:
        return [{"type": "text", "text": value}] if isinstance(value, str) else value

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextContent))

    @model_validator(mode="after")
    def _non_empty_text(self) -> UserMessage:
        # SPEC-8.1 applies to what users send. Assistant and tool text are what a model or tool
        # produced and are kept as they came (an empty text block from a provider is not an error).
        if not self.content:
            raise ValueError("content must hold at least one text or image block")
        for index, block in enumerate(self.content):
            if isinstance(block, TextContent) and not block.text:
                raise ValueError(f"content[{index}].text must be a non-empty string")
        return self


class AssistantMessage(WireModel):
    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    api: str = ""
    provider: str = ""
    model: str = ""
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    timestamp: Timestamp
    # Provider's response id, when it gives one (useful in logs; never needed for replay).
    response_id: str | None = None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [block for block in self.content if isinstance(block, ToolCall)]

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


class ToolResultMessage(WireModel):
    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: list[ToolResultContent] = Field(default_factory=list)
    details: Any = None
    usage: Usage | None = None
    added_tool_names: list[str] | None = None
    is_error: bool = False
    timestamp: Timestamp

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


Message = Annotated[UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")]
# The spec's name for the union.
AgentMessage = Message

MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)
MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def message_to_json(message: Message) -> bytes:
    return orjson.dumps(message.model_dump(mode="json"))


def message_from_json(data: bytes | str) -> Message:
    return MESSAGE_ADAPTER.validate_json(data)


def parse_message(value: Any) -> Message:
    """Validate a dict (or message) into a ``Message``; raise ``ValidationError`` naming the field."""
    try:
        return MESSAGE_ADAPTER.validate_python(value)
    except Exception as exc:  # pydantic.ValidationError, but keep the public tree ours
        raise ValidationError(describe_validation_error(exc)) from None


def describe_validation_error(exc: BaseException) -> str:
    """One readable line per failing field: ``content.0.text: must be ...``."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    lines = []
    for err in errors():
        path = ".".join(str(part) for part in err.get("loc", ()))
        lines.append(f"{path or '<root>'}: {err.get('msg', 'invalid')}")
    return "; ".join(lines)
