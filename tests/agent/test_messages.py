"""SPEC-8 validation rules and the JSON round trip of every message type."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from pydantic import ValidationError as PydanticValidationError

from agentcore import (
    AbortSignal,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UsageCost,
    UserMessage,
    ValidationError,
)
from agentcore.errors import INVALID_TOOL_RESULT
from agentcore.messages import message_from_json, message_to_json, parse_message
from agentcore.tool_exec import execute_tool

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00").decode()
TS = 1_700_000_000_000


def every_message() -> list[Any]:
    usage = Usage(input=10, output=5, cache_read=2, total_tokens=17, cost=UsageCost(input=0.1, total=0.1))
    return [
        UserMessage(
            content=[TextContent(text="hi"), ImageContent(data=PNG, mime_type="image/png")], timestamp=TS
        ),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="hmm", thinking_signature="sig"),
                ThinkingContent(thinking="", thinking_signature="opaque", redacted=True),
                TextContent(text="calling", text_signature="t1"),
                ToolCall(id="c1", name="search", arguments={"q": "wine", "n": [1, 2.5, None, True]}),
            ],
            api="anthropic-messages",
            provider="anthropic",
            model="claude",
            usage=usage,
            stop_reason="toolUse",
            timestamp=TS + 1,
            response_id="r1",
        ),
        AssistantMessage(content=[], stop_reason="error", error_message="overloaded", timestamp=TS + 2),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="search",
            content=[TextContent(text="3 wines"), ImageContent(data=PNG, mime_type="image/webp")],
            details={"rows": [{"id": 1}]},
            usage=usage,
            added_tool_names=["buy"],
            is_error=False,
            timestamp=TS + 3,
        ),
    ]


@pytest.mark.parametrize("message", every_message(), ids=lambda m: f"{m.role}-{m.timestamp}")
def test_json_round_trip_with_orjson(message: Any) -> None:
    raw = message_to_json(message)
    assert message_from_json(raw) == message
    # Through plain orjson too: what a session file or an activity payload holds.
    assert parse_message(orjson.loads(orjson.dumps(message.model_dump(mode="json")))) == message


@pytest.mark.parametrize("message", every_message(), ids=lambda m: f"{m.role}-{m.timestamp}")
def test_unknown_fields_from_a_newer_writer_are_ignored(message: Any) -> None:
    data = message.model_dump(mode="json")
    data["added_in_v9"] = {"anything": True}
    for block in data["content"]:
        block["future_field"] = 1
    assert parse_message(data) == message


def test_role_discriminates_and_unknown_roles_are_refused() -> None:
    with pytest.raises(ValidationError, match="role|tag"):
        parse_message({"role": "system", "content": "x", "timestamp": TS})


# -------------------------------------------------------------------------------- SPEC-8.1


def test_empty_text_is_refused_naming_the_block() -> None:
    with pytest.raises(ValidationError, match=r"content\[0\]\.text|content\.0\.text|content\[0\].text"):
        parse_message({"role": "user", "content": [{"type": "text", "text": ""}], "timestamp": TS})
    with pytest.raises(ValidationError, match="at least one"):
        parse_message({"role": "user", "content": [], "timestamp": TS})


@pytest.mark.parametrize("data", ["not base64!", "abc", ""])
def test_bad_base64_is_refused_naming_data(data: str) -> None:
    with pytest.raises(ValidationError, match=r"content\.0\.image\.data"):
        parse_message(
            {
                "role": "user",
                "content": [{"type": "image", "data": data, "mime_type": "image/png"}],
                "timestamp": TS,
            }
        )


@pytest.mark.parametrize("mime", ["png", "image/", "text/plain", "IMAGE/PNG", "image/png; charset=x"])
def test_bad_mime_type_is_refused_naming_mime_type(mime: str) -> None:
    with pytest.raises(PydanticValidationError, match="mime_type"):
        ImageContent(data=PNG, mime_type=mime)


@pytest.mark.parametrize("timestamp", [0, -1])
@pytest.mark.parametrize("role", ["user", "assistant", "toolResult"])
def test_timestamp_must_be_positive(role: str, timestamp: int) -> None:
    data: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": "x"}], "timestamp": timestamp}
    if role == "toolResult":
        data.update(tool_call_id="c", tool_name="t")
    with pytest.raises(ValidationError, match=r"timestamp.*greater than 0"):
        parse_message(data)


def test_timestamp_must_be_an_integer() -> None:
    with pytest.raises(ValidationError, match="timestamp"):
        parse_message({"role": "user", "content": "x", "timestamp": 1.5})


# -------------------------------------------------------------------------------- SPEC-8.2


async def _noop(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
    return AgentToolResult.text("ok")


@pytest.mark.parametrize("name", ["1abc", "has-dash", "has space", "", "ünïcode", "a.b"])
def test_bad_tool_name_is_refused_naming_name(name: str) -> None:
    with pytest.raises(PydanticValidationError, match="name"):
        AgentTool(name=name, description="d", execute=_noop)
    with pytest.raises(PydanticValidationError, match="name"):
        ToolSpec(name=name, description="d")


@pytest.mark.parametrize("name", ["a", "_private", "search_wines2", "CamelCase"])
def test_good_tool_names(name: str) -> None:
    assert AgentTool(name=name, description="d", execute=_noop).label == name


@pytest.mark.parametrize("description", ["", "   "])
def test_empty_description_is_refused_naming_description(description: str) -> None:
    with pytest.raises(PydanticValidationError, match="description"):
        AgentTool(name="t", description=description, execute=_noop)
    with pytest.raises(PydanticValidationError, match="description"):
        ToolSpec(name="t", description=description)


async def test_execute_returning_the_wrong_type_is_an_error_result() -> None:
    async def wrong(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> Any:
        return ["not", "a", "result"]

    tool = AgentTool(name="t", description="d", execute=wrong)
    result = await execute_tool(tool, ToolCall(id="c", name="t"), AbortSignal(), lambda _: None)
    assert result.is_error and result.details["error_code"] == INVALID_TOOL_RESULT
    assert "returned list" in result.content[0].text  # type: ignore[union-attr]
