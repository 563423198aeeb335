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

from ..messages import WireModel


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
    """Running totals, updated as entries are read or appended (never recomputed from scratch).

    Plain ints in a dict rather than a ``SessionStats``: pydantic attribute assignment is measurably
    slow when a 100,000-entry file is opened.
    """

    def __init__(self) -> None:
        self.totals: dict[str, int] = dict.fromkeys(_COUNTERS, 0)
        self.cost_total = 0.0

    def add(self, raw_entry: dict[str, Any]) -> None:
        kind = raw_entry.get("type")
        if kind == "message":
            message = raw_entry.get("message")
            if isinstance(message, dict):
                self._add_message(message)
        elif kind in ("compaction", "branch_summary"):
            self._add_usage(raw_entry.get("usage"))

    def _add_message(self, message: dict[str, Any]) -> None:
        totals = self.totals
        totals["message_count"] += 1
        role = message.get("role")
        if role == "user":
            totals["user_messages"] += 1
        elif role == "assistant":
            totals["assistant_messages"] += 1
            content = message.get("content")
            if isinstance(content, list):
                totals["tool_calls"] += sum(
                    1 for block in content if isinstance(block, dict) and block.get("type") == "toolCall"
                )
            self._add_usage(message.get("usage"))
        elif role == "toolResult":
            totals["tool_results"] += 1
            self._add_usage(message.get("usage"))

    def _add_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        totals = self.totals
        for key in ("input", "output", "cache_read", "cache_write"):
            totals[key + "_tokens"] += int(_number(usage.get(key)))
        cost = usage.get("cost")
        if isinstance(cost, dict):
            self.cost_total += float(_number(cost.get("total")))

    def snapshot(self) -> SessionStats:
        totals = self.totals
        cached = totals["cache_read_tokens"] + totals["cache_write_tokens"]
        uncached = totals["input_tokens"] + totals["output_tokens"]
        return SessionStats(
            **totals,
            cached_tokens=cached,
            uncached_tokens=uncached,
            total_tokens=cached + uncached,
            cost_total=self.cost_total,
        )


_COUNTERS = (
    "message_count",
    "user_messages",
    "assistant_messages",
    "tool_results",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)
