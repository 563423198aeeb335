"""Compacting: the entry a summary becomes, and the whole step for a session file or a list of messages."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CompactionError
from ..events import AgentEvent, CompactionEndEvent, CompactionReason, CompactionStartEvent
from ..messages import (
    Message,
    Usage,
    UserMessage,
)
from ..model import Model
from ..runtime import AbortSignal, StreamFn
from ..session.context import (
    COMPACTION_SUMMARY_PREFIX,
    SUMMARY_SUFFIX,
    compaction_summary_message,
)
from ..session.entries import CompactionEntry, MessageEntry, SessionEntry
from ..session.storage import GetEntriesOptions, JsonlSessionStorage
from .estimates import (
    CompactionSettings,
    estimate_context_tokens,
    estimate_tokens,
    is_compaction_summary,
    should_compact,
)
from .planning import CompactionPlan, plan_compaction
from .summary import build_summary_context, summarize

# --------------------------------------------------------------------------------------- the entry


def compaction_entry(
    plan: CompactionPlan,
    summary: str,
    usage: Usage | None,
    *,
    reason: CompactionReason = "manual",
    entry_id: str = "",
    timestamp: int = 0,
) -> CompactionEntry:
    """The entry that records ``plan``'s compaction, hanging from the leaf it was planned at.
    ``details`` keeps the figures the end event reports (``tokens_after`` is an estimate: no model
    has seen the compacted context yet)."""
    tokens_after = estimate_tokens(compaction_summary_message(summary, 1)) + plan.kept_tokens
    details: dict[str, Any] = {
        "reason": reason,
        "tokens_after": tokens_after,
        "summarized_messages": len(plan.messages_to_summarize),
        "kept_messages": len(plan.kept_messages),
    }
    return CompactionEntry(
        id=entry_id,
        parent_id=plan.leaf_id,
        timestamp=timestamp,
        summary=summary,
        first_kept_entry_id=plan.first_kept_entry_id,
        tokens_before=plan.tokens_before,
        usage=usage,
        details=details,
    )


def compaction_end_event(
    entry: CompactionEntry, *, reason: CompactionReason | None = None, will_retry: bool = False
) -> CompactionEndEvent:
    """The ``compaction_end`` event for a compaction that succeeded."""
    details = entry.details if isinstance(entry.details, dict) else {}
    tokens_after = details.get("tokens_after")
    return CompactionEndEvent(
        reason=reason or details.get("reason", "manual"),
        tokens_before=entry.tokens_before,
        tokens_after=tokens_after if isinstance(tokens_after, int) else None,
        summary=entry.summary,
        first_kept_entry_id=entry.first_kept_entry_id,
        entry_id=entry.id,
        will_retry=will_retry,
    )


async def compact_session(
    storage: JsonlSessionStorage,
    model: Model,
    stream_fn: StreamFn,
    *,
    instructions: str | None = None,
    settings: CompactionSettings | None = None,
    reason: CompactionReason = "manual",
    entry_id: str = "",
    timestamp: int = 0,
    signal: AbortSignal | None = None,
    api_key: str | None = None,
    last_usage: Usage | None = None,
) -> CompactionEntry | None:
    """Compact the session at its current leaf and append the ``compaction`` entry (returned).

    Returns None when there is nothing to compact. Raises ``CompactionError`` when the summary
    cannot be made; the file is then unchanged. ``storage`` must be open for writing. With an
    ``entry_id`` already in the file (a retried activity) the stored entry is returned and no model
    is called.
    """
    settings = settings or CompactionSettings()
    if entry_id:
        existing = storage.get_entry(entry_id)
        if isinstance(existing, CompactionEntry):
            return existing
    path = storage.get_entries(GetEntriesOptions(on_path=True))
    plan = plan_compaction(path, settings, model, last_usage=last_usage)
    if plan is None:
        return None
    summary, usage = await summarize_plan(
        plan,
        model,
        stream_fn,
        settings,
        instructions=instructions,
        signal=signal,
        api_key=api_key,
        session_id=storage.get_metadata().id,
    )
    stored = storage.append_entry(
        compaction_entry(plan, summary, usage, reason=reason, entry_id=entry_id, timestamp=timestamp)
    )
    assert isinstance(stored, CompactionEntry)
    return stored


async def summarize_plan(
    plan: CompactionPlan,
    model: Model,
    stream_fn: StreamFn,
    settings: CompactionSettings,
    *,
    instructions: str | None = None,
    signal: AbortSignal | None = None,
    api_key: str | None = None,
    session_id: str | None = None,
) -> tuple[str, Usage]:
    """The summary for ``plan``: its request built within the model's window, then ``summarize``."""
    context = build_summary_context(
        plan.messages_to_summarize,
        plan.previous_summary,
        instructions,
        max_input_tokens=settings.summary_input_budget(model),
        max_tool_result_chars=settings.max_tool_result_chars,
    )
    return await summarize(
        model,
        context,
        stream_fn,
        signal,
        max_tokens=settings.summary_max_tokens(model),
        api_key=api_key,
        session_id=session_id,
    )


async def compact_messages(
    messages: Sequence[Message],
    model: Model,
    stream_fn: StreamFn,
    emit: Callable[[AgentEvent], None],
    *,
    new_id: Callable[[], str],
    now_ms: Callable[[], int],
    settings: CompactionSettings | None = None,
    signal: AbortSignal | None = None,
    api_key: str | None = None,
    reason: CompactionReason = "threshold",
) -> list[Message] | None:
    """Auto-compaction without a session file (the in-process ``Agent``): when ``messages`` have
    passed the threshold (or, ``reason="overflow"``, the model refused them as too long), summarise
    their older part and return the context to go on with (the summary message, then the kept
    messages), as a durable conversation rebuilds it from its file.

    Emits ``compaction_start`` and ``compaction_end`` as a durable conversation does (the end event
    with ``error_message`` when the summary fails; the messages are then unchanged). Returns None
    when nothing was compacted. Entry ids are made up (``new_id``): there is no file to hold them.
    """
    settings = settings or CompactionSettings()
    if reason == "threshold" and not should_compact(messages, model, settings):
        return None
    will_retry = reason == "overflow"  # the call that overflowed is made again on the result
    emit(CompactionStartEvent(reason=reason))
    tokens_before = estimate_context_tokens(messages)
    plan = plan_compaction(_as_path(messages, new_id), settings, model)
    if plan is None:
        emit(CompactionEndEvent(reason=reason, tokens_before=tokens_before, tokens_after=tokens_before))
        return None
    try:
        summary, usage = await summarize_plan(
            plan, model, stream_fn, settings, signal=signal, api_key=api_key
        )
    except CompactionError as err:
        if err.aborted or (signal is not None and signal.aborted):
            # As pi: an aborted compaction is no error; nothing was recorded.
            emit(CompactionEndEvent(reason=reason, tokens_before=tokens_before, aborted=True))
        else:
            emit(CompactionEndEvent(reason=reason, tokens_before=tokens_before, error_message=str(err)))
        return None
    entry = compaction_entry(plan, summary, usage, reason=reason, entry_id=new_id(), timestamp=now_ms())
    emit(compaction_end_event(entry, reason=reason, will_retry=will_retry))
    return [compaction_summary_message(summary, entry.timestamp), *plan.kept_messages]


def _as_path(messages: Sequence[Message], new_id: Callable[[], str]) -> list[SessionEntry]:
    """``messages`` as the session path a file would hold: a leading compaction summary becomes the
    compaction entry it stands for (so the next summary folds it in, as pi's summaries chain)."""
    path: list[SessionEntry] = []
    rest = messages
    if messages and is_compaction_summary(messages[0]):
        assert isinstance(messages[0], UserMessage)
        text = messages[0].text
        summary = text[len(COMPACTION_SUMMARY_PREFIX) :].removesuffix(SUMMARY_SUFFIX)
        path.append(CompactionEntry(id=new_id(), summary=summary, timestamp=messages[0].timestamp))
        rest = messages[1:]
    path.extend(MessageEntry(id=new_id(), message=message) for message in rest)
    return path
