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

import math
from collections.abc import Callable, Sequence
from typing import Any, Final

import orjson
from pydantic import Field

from .errors import CompactionError
from .events import AgentEvent, CompactionEndEvent, CompactionReason, CompactionStartEvent
from .messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    WireModel,
)
from .model import Model, ThinkingLevel
from .providers.errors import is_context_overflow
from .runtime import AbortSignal, LlmContext, StreamFn, StreamOptions
from .session.context import (
    COMPACTION_SUMMARY_PREFIX,
    SUMMARY_SUFFIX,
    branch_summary_message,
    compaction_summary_message,
)
from .session.entries import BranchSummaryEntry, CompactionEntry, MessageEntry, SessionEntry
from .session.storage import GetEntriesOptions, JsonlSessionStorage

__all__ = [
    "BRANCH_SUMMARY_SYSTEM_PROMPT",
    "CHARS_PER_TOKEN",
    "COMPACTION_SYSTEM_PROMPT",
    "IMAGE_TOKENS",
    "CompactionError",
    "CompactionPlan",
    "CompactionSettings",
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
    "summarize_plan",
]

CHARS_PER_TOKEN: Final = 4
# Providers bill an image by its size; without decoding it, a fixed figure near a typical
# 1024x1024 image's cost keeps the estimate on the safe side.
IMAGE_TOKENS: Final = 1_200

COMPACTION_SYSTEM_PROMPT: Final = """\
You are a context summariser. You read the transcript of a conversation between a user and an AI \
assistant that uses tools, and write the summary that will replace that part of the conversation in \
the assistant's memory. The assistant will continue the work from your summary and the most recent \
messages alone, so anything you leave out is lost to it.

Do not continue the conversation and do not answer questions in it. Output only the summary, in this \
structure (omit a section only when there is nothing for it):

## Goal
What the user is trying to achieve, including constraints and preferences they stated.

## Decisions
What was decided or agreed, and why, when the reason matters later.

## State
What has been done so far, what worked, what failed (with the error), and where things stand.

## Files and data
Names, paths, ids, numbers, values and tool results the assistant will need again, quoted exactly.

## Next steps
What remains to be done, in order, including anything the assistant promised to do.

Be concise and factual; prefer lists. When a previous summary is given, merge it with the new \
messages into one updated summary: keep what is still true, update what changed, drop nothing the \
assistant still needs."""

BRANCH_SUMMARY_SYSTEM_PROMPT: Final = """\
You are a context summariser. The conversation below is a branch that an AI assistant explored and \
then abandoned: the user moved the conversation back to an earlier point. Write a short summary of \
that branch so the assistant keeps what was learned there without repeating it.

Do not continue the conversation. Output only the summary, in this structure (omit empty sections):

## Tried
What was attempted in the branch.

## Learned
Facts, results, values and errors discovered, quoted exactly where they matter.

## Outcome
Where the branch ended and why it may have been abandoned."""

_TRANSCRIPT_OPEN = "<conversation>\n"
_TRANSCRIPT_CLOSE = "\n</conversation>"


class CompactionSettings(WireModel):
    """When and how much to compact. Shares are of ``Model.context_window``.

    The token figures are pi's defaults for large models; on a small window each is capped at a
    share of it, so the summary and the kept messages always leave room to work.
    """

    enabled: bool = True
    threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    keep_recent_tokens: int = Field(default=20_000, ge=0)
    keep_recent_share: float = Field(default=0.3, gt=0.0, lt=1.0)
    # Room for the summary the model writes (its ``max_tokens``).
    reserve_tokens: int = Field(default=16_384, gt=0)
    reserve_share: float = Field(default=0.25, gt=0.0, lt=1.0)
    # Tool output is often long and mostly noise by the time it is summarised.
    max_tool_result_chars: int = Field(default=2_000, gt=0)

    def trigger_tokens(self, model: Model) -> int:
        """Context size above which ``should_compact`` says yes."""
        return int(model.context_window * self.threshold)

    def keep_tokens(self, model: Model) -> int:
        """About how many tokens of recent messages a compaction keeps verbatim."""
        return min(self.keep_recent_tokens, int(model.context_window * self.keep_recent_share))

    def summary_max_tokens(self, model: Model) -> int:
        return max(
            1, min(self.reserve_tokens, model.max_tokens, int(model.context_window * self.reserve_share))
        )

    def summary_input_budget(self, model: Model) -> int:
        """The most the summary request may send: the window minus the summary's own output."""
        return max(1, model.context_window - self.summary_max_tokens(model))


# ------------------------------------------------------------------------------------------ estimates


def _tokens_for_chars(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def estimate_tokens(message: Message) -> int:
    """A provider-independent estimate of one message's size: characters / 4, images a fixed amount."""
    chars = 0
    images = 0
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, TextContent):
                chars += len(block.text)
            elif isinstance(block, ThinkingContent):
                chars += len(block.thinking)
            elif isinstance(block, ToolCall):
                chars += len(block.name) + len(orjson.dumps(block.arguments))
    else:
        for part in message.content:
            if isinstance(part, TextContent):
                chars += len(part.text)
            elif isinstance(part, ImageContent):
                images += 1
        if isinstance(message, ToolResultMessage):
            chars += len(message.tool_name)
    return _tokens_for_chars(chars) + images * IMAGE_TOKENS


def _usage_tokens(usage: Usage) -> int:
    return usage.total_tokens or (usage.input + usage.output + usage.cache_read + usage.cache_write)


def _is_compaction_summary(message: Message) -> bool:
    return isinstance(message, UserMessage) and message.text.startswith(COMPACTION_SUMMARY_PREFIX)


def _last_usage_index(messages: Sequence[Message]) -> int | None:
    """Index of the newest assistant message whose reported usage describes the *current* context.

    A compacted context starts with the summary, followed by kept messages that were answered before
    the compaction: their usage counts the history the summary replaced, and trusting it would trigger
    another compaction at once. Kept messages are older than the summary (its timestamp is the
    compaction's), so only assistant messages at or after that time are trusted. Failed and aborted
    calls report no usable usage.
    """
    trusted_from = messages[0].timestamp if messages and _is_compaction_summary(messages[0]) else 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if (
            isinstance(message, AssistantMessage)
            and message.stop_reason not in ("error", "aborted")
            and message.timestamp >= trusted_from
            and _usage_tokens(message.usage) > 0
        ):
            return index
    return None


def estimate_context_tokens(messages: Sequence[Message], last_usage: Usage | None = None) -> int:
    """The size of ``messages`` as the model will see them: the last trusted assistant message's
    reported usage (input + output + cache) for everything up to it, plus an estimate of what came
    after. ``last_usage`` overrides that message's own usage (a caller tracking a fresher figure).
    Without any usage everything is estimated."""
    index = _last_usage_index(messages)
    if index is None:
        return sum(estimate_tokens(message) for message in messages)
    if last_usage is None:
        last = messages[index]
        assert isinstance(last, AssistantMessage)
        last_usage = last.usage
    return _usage_tokens(last_usage) + sum(estimate_tokens(message) for message in messages[index + 1 :])


def should_compact(
    messages: Sequence[Message],
    model: Model,
    settings: CompactionSettings | None = None,
    *,
    last_usage: Usage | None = None,
) -> bool:
    """Whether the context has passed ``settings.threshold`` of the model's window."""
    settings = settings or CompactionSettings()
    return settings.enabled and estimate_context_tokens(messages, last_usage) > settings.trigger_tokens(model)


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


# ------------------------------------------------------------------------------ the summary request


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters truncated]"


def serialize_conversation(messages: Sequence[Message], *, max_tool_result_chars: int = 2_000) -> list[str]:
    """The messages as labelled plain-text lines. The summariser reads a transcript instead of the
    messages themselves so that it describes the conversation rather than carrying it on."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            images = sum(isinstance(part, ImageContent) for part in message.content)
            text = message.text + (f" [{images} image(s)]" if images else "")
            lines.append(f"[User]: {text}")
        elif isinstance(message, AssistantMessage):
            if message.stop_reason == "error" and not message.content:
                continue  # a failed call left nothing the model said
            for block in message.content:
                if isinstance(block, ThinkingContent) and block.thinking:
                    lines.append(f"[Assistant thinking]: {_clip(block.thinking, max_tool_result_chars)}")
                elif isinstance(block, TextContent) and block.text:
                    lines.append(f"[Assistant]: {block.text}")
                elif isinstance(block, ToolCall):
                    arguments = orjson.dumps(block.arguments).decode()
                    lines.append(f"[Assistant tool call]: {block.name}({arguments})")
            if message.stop_reason == "aborted":
                lines.append("[Assistant]: (response aborted)")
        else:
            status = " (error)" if message.is_error else ""
            text = _clip(message.text, max_tool_result_chars)
            lines.append(f"[Tool result {message.tool_name}{status}]: {text}")
    return lines


def _fit(lines: list[str], budget_chars: int) -> list[str]:
    """Shrink the transcript to ``budget_chars``: first clip the longest lines to a fair share,
    then drop the oldest lines (the previous summary still covers the start of the story)."""
    if sum(len(line) + 1 for line in lines) <= budget_chars:
        return lines
    share = max(200, budget_chars // max(1, len(lines)))
    lines = [_clip(line, share) for line in lines]
    total = sum(len(line) + 1 for line in lines)
    dropped = 0
    while lines and total > budget_chars:
        total -= len(lines[0]) + 1
        lines = lines[1:]
        dropped += 1
    if dropped:
        lines.insert(0, f"[... {dropped} earlier messages omitted to fit the summariser's context ...]")
    return lines


def build_summary_context(
    messages_to_summarize: Sequence[Message],
    previous_summary: str | None = None,
    instructions: str | None = None,
    *,
    max_input_tokens: int | None = None,
    system_prompt: str = COMPACTION_SYSTEM_PROMPT,
    max_tool_result_chars: int = 2_000,
    timestamp: int = 1,
) -> LlmContext:
    """The request that asks a model for the summary: ``system_prompt`` plus one user message holding
    the previous summary, the transcript and the task (and the user's ``instructions`` for a manual
    compaction). With ``max_input_tokens`` the transcript is shortened to fit it."""
    head = ""
    if previous_summary:
        head = f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    task = (
        "\n\nUpdate the previous summary with the conversation above, following the structure."
        if previous_summary
        else "\n\nSummarise the conversation above, following the structure."
    )
    if instructions:
        task += f"\nAdditional instructions from the user: {instructions}"
    lines = serialize_conversation(messages_to_summarize, max_tool_result_chars=max_tool_result_chars)
    if max_input_tokens is not None:
        fixed = len(system_prompt) + len(head) + len(task) + len(_TRANSCRIPT_OPEN) + len(_TRANSCRIPT_CLOSE)
        # 10% slack: providers count tokens on the encoded request, with its JSON and role overhead.
        budget_chars = int(max_input_tokens * CHARS_PER_TOKEN * 0.9) - fixed
        lines = _fit(lines, max(0, budget_chars))
    text = head + _TRANSCRIPT_OPEN + "\n".join(lines) + _TRANSCRIPT_CLOSE + task
    return LlmContext(
        system_prompt=system_prompt,
        messages=[UserMessage(content=[TextContent(text=text)], timestamp=max(1, timestamp))],
    )


async def summarize(
    model: Model,
    context: LlmContext,
    stream_fn: StreamFn,
    signal: AbortSignal | None = None,
    *,
    max_tokens: int | None = None,
    api_key: str | None = None,
    session_id: str | None = None,
) -> tuple[str, Usage]:
    """Run the summary request through ``stream_fn``; return the summary text and the call's usage.

    Raises ``CompactionError`` when the call fails, is aborted or produces no text.
    """
    options = StreamOptions(
        thinking_level=ThinkingLevel.OFF,
        max_tokens=max_tokens,
        api_key=api_key,
        session_id=session_id,
        signal=signal,
    )
    final: AssistantMessage | None = None
    async for event in stream_fn(model, context, options):
        if event.type == "done":
            final = event.message
        elif event.type == "error":
            failed = event.error
            raise CompactionError(
                f"summary request failed: {failed.error_message or event.reason}",
                aborted=event.reason == "aborted",
                context_overflow=is_context_overflow(failed),
            )
    if signal is not None and signal.aborted:
        raise CompactionError("summary request was aborted", aborted=True)
    if final is None:
        raise CompactionError("summary request ended without a result")
    summary = final.text.strip()
    if not summary:
        raise CompactionError(f"summary request returned no text (stop reason {final.stop_reason})")
    return summary, final.usage


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
    if messages and _is_compaction_summary(messages[0]):
        assert isinstance(messages[0], UserMessage)
        text = messages[0].text
        summary = text[len(COMPACTION_SUMMARY_PREFIX) :].removesuffix(SUMMARY_SUFFIX)
        path.append(CompactionEntry(id=new_id(), summary=summary, timestamp=messages[0].timestamp))
        rest = messages[1:]
    path.extend(MessageEntry(id=new_id(), message=message) for message in rest)
    return path
