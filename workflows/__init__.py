"""The Temporal workflow of agentcore: one ``ConversationWorkflow`` per conversation."""

from __future__ import annotations

from .conversation import ConversationWorkflow
from .schedules import ScheduledMessageWorkflow

__all__ = ["ConversationWorkflow", "ScheduledMessageWorkflow"]
