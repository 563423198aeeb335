"""Compaction's settings and token estimates: when a context is long enough to compact."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import orjson
from pydantic import Field

from ..messages import (
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
from ..model import Model
from ..session.context import (
    COMPACTION_SUMMARY_PREFIX,
)

CHARS_PER_TOKEN: Final = 4
# Providers bill an image by its size; without decoding it, a fixed figure near a typical
# 1024x1024 image's cost keeps the estimate on the safe side.
IMAGE_TOKENS: Final = 1_200


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


def is_compaction_summary(message: Message) -> bool:
    return isinstance(message, UserMessage) and message.text.startswith(COMPACTION_SUMMARY_PREFIX)


def _last_usage_index(messages: Sequence[Message]) -> int | None:
    """Index of the newest assistant message whose reported usage describes the *current* context.

    A compacted context starts with the summary, followed by kept messages that were answered before
    the compaction: their usage counts the history the summary replaced, and trusting it would trigger
    another compaction at once. Kept messages are older than the summary (its timestamp is the
    compaction's), so only assistant messages at or after that time are trusted. Failed and aborted
    calls report no usable usage.
    """
    trusted_from = messages[0].timestamp if messages and is_compaction_summary(messages[0]) else 0
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
