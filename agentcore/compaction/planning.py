"""Planning a compaction: what to summarise, and where the kept part of the path starts."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from ..messages import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    Usage,
    WireModel,
)
from ..model import Model
from ..session.context import (
    branch_summary_message,
    compaction_summary_message,
)
from ..session.entries import BranchSummaryEntry, CompactionEntry, MessageEntry, SessionEntry
from .estimates import CompactionSettings, estimate_context_tokens, estimate_tokens

# ------------------------------------------------------------------------------------------- planning


class CompactionPlan(WireModel):
    """What one compaction does: summarise ``messages_to_summarize`` (and ``previous_summary``), keep
    the path from ``first_kept_entry_id`` on, and hang the new entry from ``leaf_id``."""

    messages_to_summarize: list[Message]
    previous_summary: str | None = None
    first_kept_entry_id: str
    kept_messages: list[Message] = Field(default_factory=list)
    tokens_before: int
    kept_tokens: int
    leaf_id: str


def _context_items(path: Sequence[SessionEntry]) -> tuple[CompactionEntry | None, list[tuple[str, Message]]]:
    """The latest compaction on ``path`` and the (entry id, message) pairs the context shows after
    its summary, in order: mirrors ``session.context.build_context``."""
    compaction_index = next(
        (index for index in range(len(path) - 1, -1, -1) if isinstance(path[index], CompactionEntry)), None
    )
    previous: CompactionEntry | None = None
    if compaction_index is None:
        live: Sequence[SessionEntry] = path
    else:
        found = path[compaction_index]
        assert isinstance(found, CompactionEntry)
        previous = found
        before = path[:compaction_index]
        before_ids = [entry.id for entry in before]
        kept_from = (
            before_ids.index(previous.first_kept_entry_id)
            if previous.first_kept_entry_id in before_ids
            else len(before)
        )
        live = [*before[kept_from:], *path[compaction_index + 1 :]]
    items: list[tuple[str, Message]] = []
    for entry in live:
        if isinstance(entry, MessageEntry):
            items.append((entry.id, entry.message))
        elif isinstance(entry, BranchSummaryEntry):
            items.append((entry.id, branch_summary_message(entry.summary, entry.timestamp)))
    return previous, items


def _valid_cuts(messages: Sequence[Message]) -> list[int]:
    """Indices the kept part may start at: never a tool result, and never while a tool call made
    before it still waits for its result (the pair must stay together on one side of the cut). A
    new assistant message closes earlier calls: by then they were answered or abandoned. A failed or
    aborted assistant message is no place to start either: providers never send it, so the kept part
    would start with nothing the model can use."""
    cuts: list[int] = []
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.stop_reason in ("error", "aborted"):
            continue
        if isinstance(message, ToolResultMessage):
            open_calls.discard(message.tool_call_id)
            continue
        if isinstance(message, AssistantMessage):
            open_calls.clear()
        if not open_calls:
            cuts.append(index)
        if isinstance(message, AssistantMessage):
            open_calls.update(call.id for call in message.tool_calls)
    return cuts


def plan_compaction(
    path_entries: Sequence[SessionEntry],
    settings: CompactionSettings | None,
    model: Model,
    *,
    last_usage: Usage | None = None,
) -> CompactionPlan | None:
    """Choose what to summarise on the path root -> leaf; None when there is nothing worth it.

    The kept part is the shortest suffix that starts at a valid cut (see ``_valid_cuts``) and holds
    at most ``settings.keep_tokens(model)``; when even the last turn is bigger than that, the cut
    goes just before the last turn. Everything before the cut is summarised, together with the
    previous compaction's summary if one is on the path (pi folds it in, so summaries chain).
    """
    settings = settings or CompactionSettings()
    if not path_entries:
        return None
    previous, items = _context_items(path_entries)
    messages = [message for _, message in items]
    context = (
        [compaction_summary_message(previous.summary, previous.timestamp), *messages]
        if previous is not None
        else messages
    )
    tokens_before = estimate_context_tokens(context, last_usage)

    sizes = [estimate_tokens(message) for message in messages]
    suffix = [0] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + sizes[index]
    cuts = _valid_cuts(messages)
    budget = settings.keep_tokens(model)
    within_budget = [cut for cut in cuts if suffix[cut] <= budget]
    if within_budget:
        cut = within_budget[0]
    elif cuts:
        cut = cuts[-1]
    else:
        return None
    if cut == 0:
        return None  # everything already fits in the kept part: a summary would not shrink anything
    return CompactionPlan(
        messages_to_summarize=messages[:cut],
        previous_summary=previous.summary if previous is not None else None,
        first_kept_entry_id=items[cut][0],
        kept_messages=messages[cut:],
        tokens_before=tokens_before,
        kept_tokens=suffix[cut],
        leaf_id=path_entries[-1].id,
    )
