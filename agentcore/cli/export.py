"""A JSONL session file as a Markdown transcript (``agentcore export``).

Reads the file only (no Temporal): the conversation along the current branch, as ``recover`` would
rebuild it, with tool calls and their results in fenced blocks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson

from ..messages import AssistantMessage, Message, ThinkingContent, ToolResultMessage
from ..session import JsonlSessionStorage


def _fence(text: str, info: str = "") -> str:
    # A fence longer than any backtick run inside, so tool output cannot close it early.
    longest = max((len(run) for run in text.split("\n") if set(run) == {"`"}), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text.rstrip()}\n{ticks}"


def _when(milliseconds: int) -> str:
    return datetime.fromtimestamp(milliseconds / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _message_markdown(message: Message) -> list[str]:
    if isinstance(message, AssistantMessage):
        parts = ["### Assistant"]
        thinking = "".join(b.thinking for b in message.content if isinstance(b, ThinkingContent))
        if thinking:
            parts.append("> " + thinking.strip().replace("\n", "\n> "))
        if message.text:
            parts.append(message.text.strip())
        for call in message.tool_calls:
            arguments = orjson.dumps(call.arguments, option=orjson.OPT_INDENT_2).decode()
            parts.append(f"**Tool call** `{call.name}`\n\n{_fence(arguments, 'json')}")
        if message.stop_reason in ("error", "aborted"):
            parts.append(f"*({message.stop_reason}: {message.error_message or 'no details'})*")
        return parts
    if isinstance(message, ToolResultMessage):
        label = "error" if message.is_error else "result"
        return [f"**Tool {label}** `{message.tool_name}`\n\n{_fence(message.text or '(no output)')}"]
    return ["### User", message.text.strip() or "*(non-text content)*"]


def session_to_markdown(path: str | Path) -> str:
    """The Markdown transcript of the session file at ``path``."""
    with JsonlSessionStorage.open(path) as storage:
        header = storage.get_metadata()
        context = storage.build_context()
        stats = storage.get_session_stats()
    title = header.name or header.id
    lines = [f"# Session {title}", ""]
    facts = [f"- Started: {_when(header.timestamp)}"]
    if context.model is not None:
        facts.append(f"- Model: `{context.model.provider}/{context.model.id}`")
    if context.active_tools:
        facts.append(f"- Tools: {', '.join(f'`{name}`' for name in context.active_tools)}")
    facts.append(
        f"- Messages: {stats.message_count} ({stats.tool_calls} tool calls), "
        f"{stats.total_tokens} tokens, ${stats.cost_total:.4f}"
    )
    lines += facts + [""]
    if context.system_prompt:
        lines += ["## System prompt", "", _fence(context.system_prompt), ""]
    lines += ["## Conversation", ""]
    for message in context.messages:
        for part in _message_markdown(message):
            lines += [part, ""]
    return "\n".join(lines).rstrip() + "\n"
