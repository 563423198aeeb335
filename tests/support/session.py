"""Helpers shared by the session tests."""

from __future__ import annotations

from pathlib import Path

from agentcore.messages import AssistantMessage, TextContent, Usage, UsageCost, UserMessage
from agentcore.session import FsyncPolicy, JsonlSessionStorage, StorageRateLimits


def user(text: str, timestamp: int = 1_700_000_000_000) -> UserMessage:
    return UserMessage(content=text, timestamp=timestamp)


def assistant(
    text: str,
    *,
    input: int = 0,
    output: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
    cost: float = 0.0,
) -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text=text)],
        usage=Usage(
            input=input,
            output=output,
            cache_read=cache_read,
            cache_write=cache_write,
            cost=UsageCost(total=cost),
        ),
        timestamp=1_700_000_000_000,
    )


def texts(messages: list[object]) -> list[str]:
    out = []
    for message in messages:
        content = getattr(message, "content", [])
        out.append("".join(getattr(block, "text", "") for block in content))
    return out


def new_session(path: Path, **kwargs: object) -> JsonlSessionStorage:
    """A writer without rate limits or fsync, for fast tests."""
    kwargs.setdefault("rate_limits", StorageRateLimits.unlimited())
    kwargs.setdefault("fsync", FsyncPolicy("never"))
    return JsonlSessionStorage.create(path, cwd="/work", **kwargs)  # type: ignore[arg-type]


def reopen(path: Path, **kwargs: object) -> JsonlSessionStorage:
    kwargs.setdefault("rate_limits", StorageRateLimits.unlimited())
    return JsonlSessionStorage.open(path, **kwargs)  # type: ignore[arg-type]
