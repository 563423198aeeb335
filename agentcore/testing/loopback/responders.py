"""Responders: a deterministic ``Script`` for a request when no script is queued."""

from __future__ import annotations

from typing import Any

from .script import Protocol, Script, ScriptToolCall


def last_turn(request: Any, protocol: Protocol) -> tuple[str, str]:
    """``("user"|"tool", text)`` of the request's newest message, in either protocol's format."""
    messages = request.get("messages") if isinstance(request, dict) else None
    if not messages:
        return "user", ""
    last = messages[-1]
    content = last.get("content")
    if protocol == "openai":
        if last.get("role") == "tool":
            return "tool", str(content)
        if isinstance(content, list):
            return "user", " ".join(part.get("text", "") for part in content if part.get("type") == "text")
        return "user", str(content or "")
    if isinstance(content, str):
        return "user", content
    blocks = content or []
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        texts = [
            inner.get("text", "")
            for inner in results[-1].get("content") or []
            if isinstance(inner, dict) and inner.get("type") == "text"
        ]
        return "tool", " ".join(texts)
    return "user", " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")


def demo_responder(request: Any, protocol: Protocol) -> Script:
    """An echo assistant. ``/tool NAME {json}`` makes it call that tool; it then reports the result."""
    kind, text = last_turn(request, protocol)
    pacing = 0.02
    if kind == "tool":
        return Script(text=f"The tool returned: {text}", delay=pacing)
    if text.startswith("/tool "):
        name, _, arguments = text[len("/tool ") :].partition(" ")
        return Script(
            text=f"Calling {name}.",
            tool_calls=[ScriptToolCall(name, arguments.strip() or "{}")],
            delay=pacing,
        )
    return Script(text=f"You said: {text}" if text else "Hello! Send me a message.", delay=pacing)
