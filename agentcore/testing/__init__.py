"""Test helpers: a scripted model that streams like a provider (no network, zero latency)."""

from __future__ import annotations

from .scripted import (
    Reply,
    ScriptedModel,
    ScriptedStreamError,
    error,
    length,
    scripted_model,
    text,
    thinking,
    tool_calls,
)

__all__ = [
    "Reply",
    "ScriptedModel",
    "ScriptedStreamError",
    "error",
    "length",
    "scripted_model",
    "text",
    "thinking",
    "tool_calls",
]
