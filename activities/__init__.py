"""The Temporal activities: all I/O of a conversation (provider streams, tool calls, session writes)."""

from __future__ import annotations

from .llm import LlmActivities
from .session import SessionActivities, SessionStore
from .tools import ToolActivities

__all__ = ["LlmActivities", "SessionActivities", "SessionStore", "ToolActivities"]
