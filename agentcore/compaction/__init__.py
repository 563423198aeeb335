"""Compaction: keep a long conversation inside the model's context window (pi's compaction).

When the context at the leaf grows past ``CompactionSettings.threshold`` of the window (or the provider
refuses it as too long), the older part of the path is summarised by a model call and a ``compaction``
entry is appended. ``session.context.build_context`` then sends the summary plus the recent messages
kept after ``first_kept_entry_id``. Nothing is deleted: the full history stays in the file and in the
session stats; only what the *model* sees shrinks.

    settings = CompactionSettings()
    if should_compact(context.messages, model, settings):
        entry = await compact_session(storage, model, stream_fn, settings=settings, reason="threshold")

The pieces are public so a durable caller can split them across activities:

    plan_compaction(path entries)      -> CompactionPlan: what to summarise, where the kept part starts
    build_summary_context(plan ...)    -> LlmContext for the summary request
    summarize(model, context, ...)     -> (summary text, usage); raises ``CompactionError``
    compaction_entry(plan, ...)        -> the CompactionEntry to append

Token counts follow pi: the provider's reported usage of the last assistant message covers everything
up to it; messages after it are estimated at four characters a token (an image counts a fixed amount).
"""

from __future__ import annotations

from ..errors import CompactionError
from .branch import branch_summary_context, summarize_branch
from .compact import compact_messages, compact_session, compaction_end_event, compaction_entry, summarize_plan
from .estimates import (
    CHARS_PER_TOKEN,
    IMAGE_TOKENS,
    CompactionSettings,
    estimate_context_tokens,
    estimate_tokens,
    should_compact,
)
from .planning import CompactionPlan, plan_compaction
from .summary import (
    BRANCH_SUMMARY_SYSTEM_PROMPT,
    COMPACTION_SYSTEM_PROMPT,
    build_summary_context,
    serialize_conversation,
    summarize,
)

__all__ = [
    "BRANCH_SUMMARY_SYSTEM_PROMPT",
    "CHARS_PER_TOKEN",
    "COMPACTION_SYSTEM_PROMPT",
    "IMAGE_TOKENS",
    "CompactionError",
    "CompactionPlan",
    "CompactionSettings",
    "branch_summary_context",
    "build_summary_context",
    "compact_messages",
    "compact_session",
    "compaction_end_event",
    "compaction_entry",
    "estimate_context_tokens",
    "estimate_tokens",
    "plan_compaction",
    "serialize_conversation",
    "should_compact",
    "summarize",
    "summarize_branch",
    "summarize_plan",
]
