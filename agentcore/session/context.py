"""Rebuild what the model sees at a position of the session tree (pi's ``buildSessionContext``).

The context at an entry is read off the path from the root to it:

- the model, thinking level, active tools and system prompt are the last change of each on the path
  (the system prompt starts as the header's ``metadata["system_prompt"]``);
- messages are the ``message`` entries of the path, with two substitutions: the latest ``compaction``
  on the path replaces everything before its ``first_kept_entry_id`` with a summary message, and a
  ``branch_summary`` becomes a user message carrying the summary.

``custom``, ``label``, ``session_info`` and ``leaf`` entries never reach the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import Field

from ..messages import Message, TextContent, UserMessage, WireModel
from ..model import Model, ThinkingLevel
from .entries import (
    SYSTEM_PROMPT_CUSTOM_TYPE,
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
)

COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n<summary>\n"
)
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n<summary>\n"
)
SUMMARY_SUFFIX = "\n</summary>"


class SessionContext(WireModel):
    """Everything recovery needs to resume a conversation at ``leaf_id``."""

    messages: list[Message] = Field(default_factory=list)
    model: Model | None = None
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    active_tools: list[str] | None = None
    system_prompt: str | None = None
    leaf_id: str | None = None
    # The entry each message comes from (a compaction's or branch summary's own id for its summary).
    message_entry_ids: list[str] = Field(default_factory=list)


def _summary_message(prefix: str, summary: str, timestamp: int) -> UserMessage:
    # Entry timestamps are always set by append; ``max`` only guards hand-written files with 0.
    return UserMessage(
        content=[TextContent(text=prefix + summary + SUMMARY_SUFFIX)], timestamp=max(timestamp, 1)
    )


def compaction_summary_message(summary: str, timestamp: int) -> UserMessage:
    """The user message that stands in for compacted history."""
    return _summary_message(COMPACTION_SUMMARY_PREFIX, summary, timestamp)


def branch_summary_message(summary: str, timestamp: int) -> UserMessage:
    """The user message that tells the model about a branch the conversation left."""
    return _summary_message(BRANCH_SUMMARY_PREFIX, summary, timestamp)


# Only these entry types are loaded (and so validated) when a context is built; on a long path the
# others are never touched, which keeps recovery of a large session fast.
_SETTING_TYPES = ("model_change", "thinking_level_change", "active_tools_change", "custom")
_CONTEXT_TYPES = ("message", "branch_summary")


def build_context(
    path_ids: Sequence[str],
    entry_type: Callable[[str], str],
    load_entry: Callable[[str], SessionEntry],
    *,
    system_prompt: str | None = None,
) -> SessionContext:
    """The context at the last id of ``path_ids`` (root first).

    ``entry_type`` must be cheap (the storage answers it from its index); ``load_entry`` validates an
    entry and is only called for the entries that shape the context.
    """
    context = SessionContext(system_prompt=system_prompt, leaf_id=path_ids[-1] if path_ids else None)
    compaction_index = -1
    for index, entry_id in enumerate(path_ids):
        kind = entry_type(entry_id)
        if kind == "compaction":
            compaction_index = index
        elif kind in _SETTING_TYPES:
            _apply_setting(context, load_entry(entry_id))

    if compaction_index < 0:
        pairs = _messages(path_ids, entry_type, load_entry)
        context.messages = [message for _, message in pairs]
        context.message_entry_ids = [entry_id for entry_id, _ in pairs]
        return context

    compaction = load_entry(path_ids[compaction_index])
    assert isinstance(compaction, CompactionEntry)
    before = path_ids[:compaction_index]
    # A first kept entry that is not on the path (or none) keeps nothing from before the compaction.
    kept_from = (
        before.index(compaction.first_kept_entry_id) if compaction.first_kept_entry_id in before else None
    )
    kept = before[kept_from:] if kept_from is not None else []
    pairs = [
        (compaction.id, compaction_summary_message(compaction.summary, compaction.timestamp)),
        *_messages(kept, entry_type, load_entry),
        *_messages(path_ids[compaction_index + 1 :], entry_type, load_entry),
    ]
    context.messages = [message for _, message in pairs]
    context.message_entry_ids = [entry_id for entry_id, _ in pairs]
    return context


def extend_context(
    context: SessionContext,
    ids: Sequence[str],
    entry_type: Callable[[str], str],
    load_entry: Callable[[str], SessionEntry],
) -> SessionContext | None:
    """The context at the last of ``ids``, from ``context`` at the entry just before the first (a
    new object; ``context`` is left as it was). None when one of ``ids`` changes more than the
    messages (a setting, a compaction), for ``build_context`` to rebuild instead.

    What ``build_context`` gives for the longer path: no compaction or setting in between means
    everything but the messages carries over, and the new messages come after the old ones.
    """
    for entry_id in ids:
        kind = entry_type(entry_id)
        if kind == "compaction" or kind in _SETTING_TYPES and _changes_setting(load_entry(entry_id)):
            return None
    pairs = _messages(ids, entry_type, load_entry)
    extended = own_copy(context)
    extended.messages += [message for _, message in pairs]
    extended.message_entry_ids += [entry_id for entry_id, _ in pairs]
    if ids:
        extended.leaf_id = ids[-1]
    return extended


def own_copy(context: SessionContext) -> SessionContext:
    """A copy whose lists are its own (the messages and the model are shared: they never change)."""
    return context.model_copy(
        update={
            "messages": list(context.messages),
            "message_entry_ids": list(context.message_entry_ids),
            "active_tools": None if context.active_tools is None else list(context.active_tools),
        }
    )


def _changes_setting(entry: SessionEntry) -> bool:
    # A custom entry only counts when it carries the system prompt (see ``_apply_setting``).
    return not isinstance(entry, CustomEntry) or entry.custom_type == SYSTEM_PROMPT_CUSTOM_TYPE


def context_from_entries(
    entries: Sequence[SessionEntry], *, system_prompt: str | None = None
) -> SessionContext:
    """``build_context`` over a path that is already in memory (root first)."""
    by_id = {entry.id: entry for entry in entries}
    return build_context(
        [entry.id for entry in entries],
        lambda entry_id: by_id[entry_id].type,
        by_id.__getitem__,
        system_prompt=system_prompt,
    )


def _apply_setting(context: SessionContext, entry: SessionEntry) -> None:
    if isinstance(entry, ModelChangeEntry):
        context.model = entry.model
    elif isinstance(entry, ThinkingLevelChangeEntry):
        context.thinking_level = entry.thinking_level
    elif isinstance(entry, ActiveToolsChangeEntry):
        context.active_tools = list(entry.active_tools)
    elif isinstance(entry, CustomEntry) and entry.custom_type == SYSTEM_PROMPT_CUSTOM_TYPE:
        context.system_prompt = entry.data if isinstance(entry.data, str) else None


def _messages(
    path_ids: Sequence[str], entry_type: Callable[[str], str], load_entry: Callable[[str], SessionEntry]
) -> list[tuple[str, Message]]:
    """(entry id, message) for each entry on the path that puts a message in the context."""
    messages: list[tuple[str, Message]] = []
    for entry_id in path_ids:
        if entry_type(entry_id) not in _CONTEXT_TYPES:
            continue
        entry = load_entry(entry_id)
        if isinstance(entry, MessageEntry):
            messages.append((entry_id, entry.message))
        elif isinstance(entry, BranchSummaryEntry):
            messages.append((entry_id, branch_summary_message(entry.summary, entry.timestamp)))
    return messages
