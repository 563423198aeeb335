"""An MCP ``CallToolResult`` as an ``AgentToolResult``: what a model can read, and a note for the rest.

Text and images map one to one; an embedded resource becomes its text, or an image when it is one;
audio, other binary resources and resource links become a line of text saying what was there, since
no provider takes them in a tool result. ``isError`` makes an error result whose text starts with
``EXECUTION_ERROR`` like every failed tool; structured content is kept in ``details``.
"""

from __future__ import annotations

from typing import Any

import mcp_types
import orjson
from pydantic import ValidationError

from agentcore.errors import EXECUTION_ERROR
from agentcore.messages import ImageContent, TextContent
from agentcore.tools import AgentToolResult

__all__ = ["to_agent_tool_result"]

Block = TextContent | ImageContent


def to_agent_tool_result(result: mcp_types.CallToolResult, server: str, tool: str) -> AgentToolResult:
    content: list[Block] = [_block(item) for item in result.content]
    details: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool}
    if result.structured_content is not None:
        details["structured_content"] = result.structured_content
        if not content:
            content = [TextContent(text=orjson.dumps(result.structured_content).decode())]
    if result.is_error:
        details["error_code"] = EXECUTION_ERROR
        first = next((block for block in content if isinstance(block, TextContent)), None)
        reason = first.text if first is not None else "the tool reported an error"
        rest = [block for block in content if block is not first]
        content = [TextContent(text=f'{EXECUTION_ERROR}: Tool "{tool}" failed: {reason}'), *rest]
    return AgentToolResult(content=content, details=details, is_error=result.is_error)


def _block(item: mcp_types.ContentBlock) -> Block:
    if isinstance(item, mcp_types.TextContent):
        return TextContent(text=item.text)
    if isinstance(item, mcp_types.ImageContent):
        return _image(item.data, item.mime_type, "image")
    if isinstance(item, mcp_types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return TextContent(text=resource.text)
        mime = resource.mime_type or "application/octet-stream"
        if mime.startswith("image/"):
            return _image(resource.blob, mime, f"resource {resource.uri}")
        return TextContent(text=f"[resource {resource.uri} ({mime}), {_decoded_size(resource.blob)} bytes]")
    if isinstance(item, mcp_types.AudioContent):
        return TextContent(text=f"[audio ({item.mime_type}), {_decoded_size(item.data)} bytes]")
    if isinstance(item, mcp_types.ResourceLink):
        about = f": {item.description}" if item.description else ""
        return TextContent(text=f"[resource link {item.uri} ({item.name}){about}]")
    return TextContent(text=f"[{getattr(item, 'type', type(item).__name__)} content]")


def _image(data: str, mime: str, what: str) -> Block:
    try:
        return ImageContent(data=data, mime_type=mime)
    except ValidationError as exc:
        # A format no provider takes (image/svg+xml, say) or bad base64: say so rather than fail.
        reason = exc.errors()[0]["msg"]
        return TextContent(text=f"[{what} ({mime}) left out: {reason}]")


def _decoded_size(base64_text: str) -> int:
    return len(base64_text) * 3 // 4 - base64_text[-2:].count("=")
