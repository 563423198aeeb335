"""Helpers for the provider tests: run a stream to its end against the loopback server."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentcore.events import StreamError, StreamEvent
from agentcore.messages import AssistantMessage
from agentcore.model import Model
from agentcore.providers import stream
from agentcore.runtime import LlmContext, StreamOptions
from agentcore.testing.loopback import LoopbackServer

SECRET_KEY = "sk-test-0123456789-SECRET"
PNG_1PX = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    async with LoopbackServer() as srv:
        yield srv


async def run(
    model: Model, context: LlmContext | None = None, options: StreamOptions | None = None
) -> tuple[list[StreamEvent], AssistantMessage]:
    """All events of one stream and its final message (from ``done`` or ``error``)."""
    events = [
        e async for e in stream(model, context or LlmContext(), options or StreamOptions(api_key=SECRET_KEY))
    ]
    final = events[-1]
    assert final.type in ("done", "error"), [e.type for e in events]
    assert sum(e.type in ("done", "error") for e in events) == 1
    message = final.message if final.type == "done" else final.error
    return events, message


def final_error(events: list[StreamEvent]) -> StreamError:
    last = events[-1]
    assert isinstance(last, StreamError), last.type
    return last


def dump_all(events: list[StreamEvent]) -> str:
    """Everything a subscriber or a log could see, as text."""
    return "\n".join(e.model_dump_json() for e in events) + repr(events)


def types(events: list[StreamEvent]) -> list[str]:
    return [e.type for e in events]


def body_of(server: LoopbackServer, index: int = -1) -> Any:
    return server.requests[index].body
