"""``ConversionMemo``: a provider converts each message object once per conversation.

The worker passes one memo per conversation (its session store hands every model call the same
message objects). Whatever the memo saves, the request must be exactly the one a fresh conversion
builds: checked here call after call for both providers, and end to end through a worker against
the loopback server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore import AgentOptions
from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore.model import Model
from agentcore.providers import anthropic_messages, get_model, openai_completions
from agentcore.providers.base import ConversionMemo
from agentcore.runtime import LlmContext
from agentcore.session import JsonlSessionStorage
from agentcore.testing.loopback import LoopbackServer
from tests.support.durable import add_tool, running_worker
from tests.support.providers import PNG_1PX

CONVERTERS = [openai_completions.convert_messages, anthropic_messages.convert_messages]


def _model(api: str, **fields: Any) -> Model:
    provider = "anthropic" if api == "anthropic-messages" else "openai"
    model = get_model(provider, "claude-sonnet-4-5" if provider == "anthropic" else "gpt-4o-mini")
    return model.model_copy(update=fields)


def _turn(number: int, api: str) -> list[Message]:
    """A user prompt, an assistant that thinks and calls a tool, its result (with an image every
    third turn) and the answer."""
    call = ToolCall(id=f"call_{number}", name="add", arguments={"a": number, "b": 1})
    result_content: list[TextContent | ImageContent] = [TextContent(text=str(number + 1))]
    if number % 3 == 0:
        result_content.append(ImageContent(data=PNG_1PX, mime_type="image/png"))
    origin = {"api": api, "provider": "anthropic", "model": "claude-sonnet-4-5"}
    return [
        UserMessage(content=[TextContent(text=f"add {number} and 1")], timestamp=1),
        AssistantMessage(
            content=[ThinkingContent(thinking="sum", thinking_signature=f"sig{number}"), call],
            stop_reason="toolUse",
            timestamp=2,
            **origin,
        ),
        ToolResultMessage(tool_call_id=call.id, tool_name="add", content=result_content, timestamp=3),
        AssistantMessage(content=[TextContent(text=f"It is {number + 1}.")], timestamp=4, **origin),
    ]


@pytest.mark.parametrize("convert", CONVERTERS, ids=["openai", "anthropic"])
def test_converting_through_the_memo_builds_the_same_request(convert: Any) -> None:
    api = "anthropic-messages" if convert is anthropic_messages.convert_messages else "openai-completions"
    memo, steady = ConversionMemo(), ConversionMemo()
    transcript: list[Message] = []
    models = [_model(api), _model(api, input=["text"]), _model(api, id="other-model")]
    previous: list[dict[str, Any]] = []
    for number in range(12):
        transcript += _turn(number, api)
        if number == 4:  # an interrupted turn: a failed answer and a call left without its result
            transcript.append(
                AssistantMessage(
                    content=[ToolCall(id="lost", name="add", arguments={})],
                    stop_reason="toolUse",
                    timestamp=5,
                )
            )
            transcript.append(AssistantMessage(content=[], stop_reason="error", timestamp=6, **{"api": api}))
        if number == 8:  # a branch: the conversation goes on from an earlier point
            transcript = transcript[:10]
        # Each call asks for what a turn's model calls see: up to its prompt, its tool result, its end.
        for end in (len(transcript) - 3, len(transcript) - 1, len(transcript)):
            model = models[number % len(models)]
            context = LlmContext(system_prompt="Be brief.", messages=transcript[:end])
            fresh = convert(model, context)
            assert convert(model, context, memo) == fresh
            assert convert(model, context) == fresh, "the memo's blocks were changed by a conversion"
        # One model throughout: the turn before's messages are not converted again.
        pieces = _pieces(convert(models[0], LlmContext(messages=transcript), steady), api)
        if previous and number != 8:  # (after the branch it starts afresh)
            reused = [piece for piece in previous if any(piece is new for new in pieces)]
            # All but the newest turn's (at most 8 pieces) and the synthetic results came back.
            assert len(reused) >= min(len(previous), len(pieces)) - 8
        previous = pieces


def _pieces(wire: list[dict[str, Any]], api: str) -> list[object]:
    """What a conversion is made of: OpenAI's entries, or Anthropic's content blocks."""
    if api == "openai-completions":
        return list(wire)
    return [block for entry in wire for block in entry["content"]]


def test_the_newest_messages_may_be_equal_copies() -> None:
    """The worker rebuilds a turn's newest messages for each call: equal copies at the end of the
    previous call's messages still let the next call carry on; a changed one does not."""
    model = _model("openai-completions")
    memo = ConversionMemo()
    first = _turn(1, model.api)
    one = openai_completions.convert_messages(model, LlmContext(messages=first), memo)
    copies = [message.model_copy(deep=True) for message in first[-2:]]
    more = first[:-2] + copies + _turn(2, model.api)
    two = openai_completions.convert_messages(model, LlmContext(messages=more), memo)
    assert two == openai_completions.convert_messages(model, LlmContext(messages=more))
    assert all(new is old for new, old in zip(two, one, strict=False)), "carried on, nothing converted again"

    changed = [*more[:-1], more[-1].model_copy(update={"content": [TextContent(text="edited")]})]
    three = openai_completions.convert_messages(
        model, LlmContext(messages=changed + _turn(3, model.api)), memo
    )
    assert three == openai_completions.convert_messages(
        model, LlmContext(messages=changed + _turn(3, model.api))
    )
    assert three[0] is not two[0], "converted afresh"

    # Another model that takes no images normalizes differently: converted afresh too.
    blind = model.model_copy(update={"input": ["text"]})
    four = openai_completions.convert_messages(blind, LlmContext(messages=changed), memo)
    assert four == openai_completions.convert_messages(blind, LlmContext(messages=changed))
    assert four[0] is not three[0]


async def test_a_worker_sends_every_request_as_a_fresh_conversion_would(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Tool turns through a worker (its memo in use): each request the provider sent carries
    exactly the conversion of the transcript that preceded the answer it got."""
    async with LoopbackServer() as server:
        model = server.model()
        async with running_worker(temporal_client, tmp_path, stream_fn=None, tools=[add_tool()]) as h:
            agent = await h.agents.start(
                "memo", AgentOptions(model=model, tools=["add"], system_prompt="Hi.")
            )
            for number in range(4):
                await agent.prompt(f'/tool add {{"a": {number}, "b": 2}}')
                await agent.wait_for_idle(timeout=30)
                await agent.prompt(f"plain {number}")
                await agent.wait_for_idle(timeout=30)
            with JsonlSessionStorage.open(h.session_path("memo")) as storage:
                transcript = storage.build_context().messages
        answers = [index for index, message in enumerate(transcript) if isinstance(message, AssistantMessage)]
        requests = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
        assert len(requests) == len(answers) == 12
        for body, answer in zip(requests, answers, strict=True):
            context = LlmContext(system_prompt="Hi.", messages=transcript[:answer])
            assert body["messages"] == openai_completions.convert_messages(model, context)
