"""Session statistics (SPEC-4.3), over every entry of the file.

Stats count *all* entries, on every branch and including history hidden by compaction: they answer
"what did this session cost", not "what is in the context".

Token fields follow pi's convention that ``Usage.input`` is the uncached part of the prompt:

- ``cached_tokens = cache_read + cache_write`` (both are prompt-cache traffic, billed at cache rates);
- ``uncached_tokens = input + output``;
- ``total_tokens`` = the sum of the four.

``cost_total`` sums ``usage.cost.total`` of assistant messages, of tool results that carry usage, and
of compaction and branch-summary entries (their summaries were made by a model too).

The accumulator reads the raw JSON dicts, not validated entries: a session is opened without
validating every message body (see ``storage``), and stats must still cover all of them.
"""

from __future__ import annotations

from typing import Any

from ..messages import Message, WireModel


class SessionStats(WireModel):
    message_count: int = 0
    cached_tokens: int = 0
    uncached_tokens: int = 0
    total_tokens: int = 0
    cost_total: float = 0.0
    # The breakdown behind the spec's five fields (pi reports these too).
    user_messages: int = 0
    assistant_messages: int = 0
    tool_results: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


def _number(value: Any) -> float:
    # bool is an int subclass; neither it nor a malformed value may leak into a token count.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return 0


class StatsAccumulator:
    """Running totals, updated as entries are read or appended (never recomputed from scratch)."""

    def __init__(self) -> None:
        self.stats = SessionStats()

    def add(self, raw_entry: dict[str, Any]) -> None:
        kind = raw_entry.get("type")
        if kind == "message":
            message = raw_entry.get("message")
            if isinstance(message, dict):
                self._add_message(message)
        elif kind in ("compaction", "branch_summary"):
            self._add_usage(raw_entry.get("usage"))

    def _add_message(self, message: dict[str, Any]) -> None:
        stats = self.stats
        stats.message_count += 1
        role = message.get("role")
        if role == "user":
            stats.user_messages += 1
        elif role == "assistant":
            stats.assistant_messages += 1
            content = message.get("content")
            if isinstance(content, list):
                stats.tool_calls += sum(
                    1 for block in content if isinstance(block, dict) and block.get("type") == "toolCall"
                )
            self._add_usage(message.get("usage"))
        elif role == "toolResult":
            stats.tool_results += 1
            self._add_usage(message.get("usage"))

    def _add_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        stats = self.stats
        input_tokens = int(_number(usage.get("input")))
        output_tokens = int(_number(usage.get("output")))
        cache_read = int(_number(usage.get("cache_read")))
        cache_write = int(_number(usage.get("cache_write")))
        stats.input_tokens += input_tokens
        stats.output_tokens += output_tokens
        stats.cache_read_tokens += cache_read
        stats.cache_write_tokens += cache_write
        stats.cached_tokens += cache_read + cache_write
        stats.uncached_tokens += input_tokens + output_tokens
        stats.total_tokens += input_tokens + output_tokens + cache_read + cache_write
        cost = usage.get("cost")
        if isinstance(cost, dict):
            stats.cost_total += float(_number(cost.get("total")))

    def snapshot(self) -> SessionStats:
        return self.stats.model_copy()


def add_message_to_stats(stats: SessionStats, message: Message) -> SessionStats:
    """``stats`` plus one typed message (the workflow keeps running totals without a file)."""
    view: dict[str, Any] = {"role": message.role}
    usage = getattr(message, "usage", None)
    if usage is not None:
        view["usage"] = usage.model_dump(mode="json")
    if message.role == "assistant":
        view["content"] = [{"type": block.type} for block in message.content]
    accumulator = StatsAccumulator()
    accumulator.stats = stats.model_copy()
    accumulator._add_message(view)
    return accumulator.stats
