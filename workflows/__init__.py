"""The Temporal workflow of agentcore: one ``ConversationWorkflow`` per conversation."""

from __future__ import annotations

from .conversation import ConversationWorkflow

__all__ = ["ConversationWorkflow"]
