"""The OpenTelemetry GenAI semantic conventions' shapes for agentcore's messages and models.

Captured content (``AGENTCORE_OTEL_CAPTURE_CONTENT=true``) follows the conventions' message format:
a JSON array of ``{"role": ..., "parts": [...]}`` where a part is ``text``, ``reasoning``,
``tool_call``, ``tool_call_response`` or ``blob`` (an image: its type only, never its bytes), and an
output message carries its ``finish_reason``. ``server.address`` / ``server.port`` name the
endpoint a model call went to.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson

from ..messages import AssistantMessage, ImageContent, Message, TextContent, ThinkingContent, ToolCall
from ..model import Model
from ..providers.anthropic_messages import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from ..providers.openai_completions import DEFAULT_BASE_URL as OPENAI_BASE_URL

# GenAI finish reasons for the spec's stop reasons.
FINISH_REASONS = {"stop": "stop", "length": "length", "toolUse": "tool_calls", "error": "error"}
_DEFAULT_BASE_URLS = {"openai-completions": OPENAI_BASE_URL, "anthropic-messages": ANTHROPIC_BASE_URL}
_ROLES = {"user": "user", "assistant": "assistant", "toolResult": "tool"}


def finish_reason(message: AssistantMessage) -> str:
    return FINISH_REASONS.get(message.stop_reason, message.stop_reason)


def server_attributes(model: Model) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of the endpoint ``model`` is called at (none for a
    model that is not called over HTTP, a scripted one say)."""
    url = model.base_url or _DEFAULT_BASE_URLS.get(model.api)
    if not url:
        return {}
    parts = urlsplit(url)
    if not parts.hostname:
        return {}
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {"server.address": parts.hostname, "server.port": port}


def _parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, ThinkingContent):
            if not block.redacted:
                parts.append({"type": "reasoning", "content": block.thinking})
        elif isinstance(block, ToolCall):
            parts.append(
                {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments}
            )
        elif isinstance(block, ImageContent):
            parts.append({"type": "blob", "modality": "image", "mime_type": block.mime_type})
    if message.role == "toolResult":
        response = [part.get("content", part) for part in parts]
        return [{"type": "tool_call_response", "id": message.tool_call_id, "response": response}]
    return parts


def genai_message(message: Message) -> dict[str, Any]:
    shaped: dict[str, Any] = {"role": _ROLES[message.role], "parts": _parts(message)}
    if isinstance(message, AssistantMessage):
        shaped["finish_reason"] = finish_reason(message)
    return shaped


def input_messages(messages: list[Message]) -> str:
    """``gen_ai.input.messages``: every message the model was sent, in the conventions' format."""
    return orjson.dumps([genai_message(message) for message in messages]).decode()


def output_messages(message: AssistantMessage) -> str:
    """``gen_ai.output.messages``: the model's answer."""
    return orjson.dumps([genai_message(message)]).decode()


def system_instructions(system_prompt: str) -> str:
    """``gen_ai.system_instructions``."""
    return orjson.dumps([{"type": "text", "content": system_prompt}]).decode()
