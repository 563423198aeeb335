"""CPU per model call to turn a conversation's context into a request's messages, converted afresh
(the in-process ``Agent``) and carried on from the previous call (the worker's ``ConversionMemo``).

    python -m bench --only convert

Tool-turn shaped transcripts (prompt, tool call, result, answer). Each carried call is given the
previous call's messages plus one turn, the newest three rebuilt as equal copies, as the worker's
session store hands them over; the figure is the median over the calls.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from agentcore.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore.model import Model
from agentcore.providers import anthropic_messages, get_model, openai_completions
from agentcore.providers.base import ConversionMemo
from agentcore.runtime import LlmContext

from .durable import Row

SECTION = "10. provider conversion per model call (context -> request messages)"
SIZES = (240, 2_000)
CONVERTERS: dict[str, tuple[Callable[..., list[dict[str, Any]]], Model]] = {
    "openai": (openai_completions.convert_messages, get_model("openai", "gpt-4o-mini")),
    "anthropic": (anthropic_messages.convert_messages, get_model("anthropic", "claude-sonnet-4-5")),
}


def _turn(number: int) -> list[Message]:
    call = ToolCall(id=f"call_{number}", name="noop", arguments={"n": number})
    return [
        UserMessage(content=[TextContent(text=f"/tools 1 ({number})")], timestamp=1),
        AssistantMessage(content=[call], stop_reason="toolUse", timestamp=2),
        ToolResultMessage(
            tool_call_id=call.id, tool_name="noop", content=[TextContent(text="ok")], timestamp=3
        ),
        AssistantMessage(content=[TextContent(text="Done: the tool said ok.")], timestamp=4),
    ]


def _per_call(convert: Callable[..., list[dict[str, Any]]], model: Model, size: int, carried: bool) -> float:
    transcript = [message for number in range(size // 4) for message in _turn(number)]
    memo = ConversionMemo() if carried else None
    base = transcript[: size - 4 * 30]
    if memo is not None:
        convert(model, LlmContext(messages=base), memo)
    samples = []
    for number in range(30):
        base = base + _turn(10_000 + number)
        # The newest messages come rebuilt, equal but not the same objects.
        messages = base[:-3] + [message.model_copy() for message in base[-3:]]
        context = LlmContext.model_construct(system_prompt="Be brief.", messages=messages, tools=[])
        started = time.process_time()
        convert(model, context, memo)
        samples.append(time.process_time() - started)
    return statistics.median(samples)


async def conversions(**_: object) -> list[Row]:
    rows = []
    for name, (convert, model) in CONVERTERS.items():
        cells = []
        for size in SIZES:
            fresh = _per_call(convert, model, size, carried=False)
            carried = _per_call(convert, model, size, carried=True)
            cells.append(f"{fresh * 1000:.2f} -> {carried * 1000:.3f} ms")
        rows.append(
            Row(
                SECTION,
                f"{name}, {' / '.join(str(size) for size in SIZES)} messages: afresh -> carried on",
                " / ".join(cells),
            )
        )
    return rows
