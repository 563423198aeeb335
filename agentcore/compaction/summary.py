"""The summary request: the prompts, the transcript the model reads, and the call that makes the summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import orjson

from ..errors import CompactionError
from ..messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
)
from ..model import Model, ThinkingLevel
from ..providers.errors import is_context_overflow
from ..runtime import AbortSignal, LlmContext, StreamFn, StreamOptions
from .estimates import CHARS_PER_TOKEN

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
