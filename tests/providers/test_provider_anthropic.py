"""Anthropic Messages over real HTTP against the loopback server."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore.model import ThinkingLevel
from agentcore.providers import RAW_ARGUMENTS_KEY, get_model, is_context_overflow, stream
from agentcore.runtime import AbortSignal, LlmContext, StreamOptions
from agentcore.testing.loopback import LoopbackServer, Script, ScriptToolCall, ScriptUsage, encode_anthropic
from agentcore.tools import ToolSpec
from tests.support.providers import PNG_1PX, SECRET_KEY, body_of, dump_all, final_error, run, server, types

# ``server`` is a pytest fixture, used by parameter name; exporting it keeps linters from dropping it.
__all__ = ["server"]

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}},
)
CACHE = {"type": "ephemeral"}


def sonnet(srv: LoopbackServer, model_id: str = "claude-sonnet-4-5"):
    model = get_model("anthropic", model_id)
    model.base_url = srv.anthropic_base_url
    return model


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1)


def test_frames_match_the_recorded_wire_format():
    script = Script(
        text="I'll check.",
        tool_calls=[ScriptToolCall("get_weather", {"location": "Paris"}, id="toolu_01")],
        fragment_chars=8,
    )
    frames = encode_anthropic(script, {"model": "claude-sonnet-4-20250514"})
    assert frames[0].startswith(
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_loopback"'
    )
    assert (
        b'event: content_block_start\ndata: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}\n\n'
        in frames
    )
    assert (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}\n\n'
        in frames
    )
    assert (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"locati"}}\n\n'
        in frames
    )
    assert (
        frames[-2]
        == b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}\n\n'
    )
    assert frames[-1] == b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


async def test_text_with_pings_usage_cache_and_cost(server: LoopbackServer):
    usage = ScriptUsage(input=377, output=65, cache_read=1000, cache_write=200)
    server.enqueue(Script(text="I'll check the weather in Paris.", usage=usage, keepalives=True))
    context = LlmContext(system_prompt="You are terse.", messages=[user("Paris?")], tools=[WEATHER])
    events, message = await run(sonnet(server), context)

    assert types(events)[:3] == ["start", "text_start", "text_delta"]
    assert message.content == [TextContent(text="I'll check the weather in Paris.")]
    assert message.stop_reason == "stop" and message.response_id == "msg_loopback"
    assert message.usage.model_dump(exclude={"cost"}) == {
        "input": 377,
        "output": 65,
        "cache_read": 1000,
        "cache_write": 200,
        "total_tokens": 1642,
    }
    assert message.usage.cost.total == pytest.approx((377 * 3 + 65 * 15 + 1000 * 0.3 + 200 * 3.75) / 1e6)

    request = server.requests[-1]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == SECRET_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "fine-grained-tool-streaming-2025-05-14" in request.headers["anthropic-beta"]
    body = request.body
    assert body["model"] == "claude-sonnet-4-5" and body["stream"] is True
    assert body["max_tokens"] == 32000
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": CACHE}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Paris?", "cache_control": CACHE}]}
    ]
    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER.parameters}
    ]
    assert "thinking" not in body


async def test_usage_absent(server: LoopbackServer):
    server.enqueue(Script(text="hi", usage=None))
    _, message = await run(sonnet(server))
    assert message.usage.total_tokens == 0 and message.usage.cost.total == 0


async def test_parallel_tool_use_with_fragmented_input(server: LoopbackServer):
    calls = [
        ScriptToolCall("get_weather", {"location": "Paris"}, id="toolu_A"),
        ScriptToolCall("get_weather", {"location": "Tōkyō", "unit": "c"}, id="toolu_B"),
    ]
    server.enqueue(Script(text="Both.", tool_calls=calls, fragment_chars=2))
    events, message = await run(sonnet(server), LlmContext(messages=[user("x")], tools=[WEATHER]))
    assert message.stop_reason == "toolUse"
    assert message.tool_calls == [
        ToolCall(id="toolu_A", name="get_weather", arguments={"location": "Paris"}),
        ToolCall(id="toolu_B", name="get_weather", arguments={"location": "Tōkyō", "unit": "c"}),
    ]
    assert [e.tool_call.id for e in events if e.type == "toolcall_end"] == ["toolu_A", "toolu_B"]


async def test_thinking_with_signature_then_tool_call(server: LoopbackServer):
    server.enqueue(
        Script(
            thinking="Let me solve this step by step",
            thinking_signature="EqQBCgIYAhIM",
            tool_calls=[ScriptToolCall("get_weather", {"location": "Rome"})],
        )
    )
    options = StreamOptions(
        api_key="k", thinking_level=ThinkingLevel.MEDIUM, temperature=0.5, max_tokens=4000
    )
    events, message = await run(sonnet(server), LlmContext(messages=[user("x")], tools=[WEATHER]), options)
    assert types(events)[1:3] == ["thinking_start", "thinking_delta"]
    assert message.content[0] == ThinkingContent(
        thinking="Let me solve this step by step", thinking_signature="EqQBCgIYAhIM"
    )
    assert message.content[1] == ToolCall(
        id="toolu_loopback_0", name="get_weather", arguments={"location": "Rome"}
    )
    body = body_of(server)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 4000 + 8192
    assert "temperature" not in body  # refused together with thinking
    assert "interleaved-thinking-2025-05-14" in server.requests[-1].headers["anthropic-beta"]


@pytest.mark.parametrize(
    ("model_id", "level", "expected"),
    [
        ("claude-sonnet-4-6", ThinkingLevel.LOW, ({"type": "adaptive"}, {"effort": "low"})),
        ("claude-opus-4-6", ThinkingLevel.XHIGH, ({"type": "adaptive"}, {"effort": "max"})),
        ("claude-sonnet-4-6", ThinkingLevel.XHIGH, ({"type": "adaptive"}, {"effort": "high"})),
        ("claude-haiku-4-5", ThinkingLevel.MINIMAL, ({"type": "enabled", "budget_tokens": 1024}, None)),
        ("claude-haiku-4-5", ThinkingLevel.OFF, (None, None)),
    ],
)
async def test_thinking_level_mapping(server: LoopbackServer, model_id, level, expected):
    server.enqueue(Script(text="ok"))
    await run(
        sonnet(server, model_id),
        LlmContext(messages=[user("x")]),
        StreamOptions(api_key="k", thinking_level=level),
    )
    body = body_of(server)
    assert (body.get("thinking"), body.get("output_config")) == expected


async def test_redacted_thinking_is_kept_and_replayed(server: LoopbackServer):
    server.enqueue(
        Script(redacted_thinking="OPAQUE==", thinking="visible", thinking_signature="SIG", text="Answer.")
    )
    model = sonnet(server)
    _, first = await run(
        model, LlmContext(messages=[user("q")]), StreamOptions(api_key="k", thinking_level=ThinkingLevel.LOW)
    )
    assert first.content[0] == ThinkingContent(thinking="", thinking_signature="OPAQUE==", redacted=True)
    assert first.content[1] == ThinkingContent(thinking="visible", thinking_signature="SIG")

    server.enqueue(Script(text="again"))
    await run(model, LlmContext(messages=[user("q"), first, user("more")]))
    assert body_of(server)["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "redacted_thinking", "data": "OPAQUE=="},
            {"type": "thinking", "thinking": "visible", "signature": "SIG"},
            {"type": "text", "text": "Answer."},
        ],
    }


async def test_thinking_from_another_model_is_replayed_as_text(server: LoopbackServer):
    server.enqueue(Script(text="ok"))
    foreign = AssistantMessage(
        content=[
            ThinkingContent(thinking="pondering", thinking_signature="reasoning_content"),
            TextContent(text="Hi"),
        ],
        api="openai-completions",
        provider="ollama",
        model="qwen3",
        timestamp=2,
    )
    unsigned = AssistantMessage(
        content=[ThinkingContent(thinking="cut short"), TextContent(text="Yo")],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        timestamp=3,
    )
    await run(sonnet(server), LlmContext(messages=[user("a"), foreign, user("b"), unsigned, user("c")]))
    wire = body_of(server)["messages"]
    assert wire[1]["content"] == [{"type": "text", "text": "pondering"}, {"type": "text", "text": "Hi"}]
    assert wire[3]["content"] == [{"type": "text", "text": "cut short"}, {"type": "text", "text": "Yo"}]


async def test_request_images_and_tool_results(server: LoopbackServer):
    server.enqueue(Script(text="ok"))
    calls = [
        ToolCall(id="toolu_1", name="get_weather", arguments={"location": "Oslo"}),
        ToolCall(id="call|x.2", name="get_weather", arguments={}),
    ]
    messages = [
        UserMessage(
            content=[TextContent(text="Look"), ImageContent(data=PNG_1PX, mime_type="image/png")], timestamp=1
        ),
        AssistantMessage(
            content=[TextContent(text="Checking."), *calls],
            stop_reason="toolUse",
            api="anthropic-messages",
            provider="anthropic",
            model="claude-sonnet-4-5",
            timestamp=2,
        ),
        ToolResultMessage(
            tool_call_id="toolu_1",
            tool_name="get_weather",
            content=[TextContent(text="rain"), ImageContent(data=PNG_1PX, mime_type="image/png")],
            timestamp=3,
        ),
        ToolResultMessage(
            tool_call_id="call|x.2",
            tool_name="get_weather",
            content=[TextContent(text="location is required")],
            is_error=True,
            timestamp=4,
        ),
    ]
    await run(sonnet(server), LlmContext(system_prompt="sys", messages=messages, tools=[WEATHER]))
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX}}
    assert body_of(server)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Look"}, image]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Oslo"}},
                {"type": "tool_use", "id": "call_x_2", "name": "get_weather", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "rain"}, image],
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "call_x_2",
                    "content": [{"type": "text", "text": "location is required"}],
                    "is_error": True,
                    "cache_control": CACHE,
                },
            ],
        },
    ]


async def test_429_and_529(server: LoopbackServer):
    server.enqueue(
        Script(status=429, error_message="Number of requests exceeded", headers={"retry-after": "3"}),
        Script(status=529, error_message="Overloaded"),
    )
    events, message = await run(sonnet(server))
    error = final_error(events)
    assert (error.status_code, error.retryable, error.retry_after_seconds) == (429, True, 3.0)
    assert (
        message.error_message
        == "HTTP 429 from anthropic: Number of requests exceeded (retryable; retry after 3.0s)"
    )
    events, message = await run(sonnet(server))
    assert (final_error(events).status_code, final_error(events).retryable) == (529, True)
    assert message.error_message == "HTTP 529 from anthropic: Overloaded (retryable)"


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(400, False), (401, False), (403, False), (413, False), (500, True), (408, True), (409, True)],
)
async def test_status_classification(server: LoopbackServer, status, retryable):
    server.enqueue(Script(status=status, error_message="nope"))
    events, message = await run(sonnet(server))
    assert final_error(events).retryable is retryable
    assert message.error_message.startswith(f"HTTP {status} from anthropic: nope")


async def test_x_should_retry_header_wins(server: LoopbackServer):
    server.enqueue(Script(status=400, error_message="odd", headers={"x-should-retry": "true"}))
    events, _ = await run(sonnet(server))
    assert final_error(events).retryable is True


async def test_prompt_too_long_is_context_overflow(server: LoopbackServer):
    server.enqueue(Script(status=400, error_message="prompt is too long: 205351 tokens > 200000 maximum"))
    events, message = await run(sonnet(server))
    assert final_error(events).retryable is False
    assert is_context_overflow(message)
    assert message.error_message == (
        "Context overflow: HTTP 400 from anthropic: prompt is too long: 205351 tokens > 200000 maximum (not retryable)"
    )


async def test_overloaded_error_event_after_200(server: LoopbackServer):
    server.enqueue(Script(text="Some partial text", error_after=4))
    events, message = await run(sonnet(server))
    error = final_error(events)
    assert error.retryable is True and error.status_code is None
    assert message.stop_reason == "error" and message.text == "Some par"
    assert message.error_message == "Stream error from anthropic: overloaded_error: Overloaded (retryable)"


async def test_invalid_request_error_event_is_not_retryable(server: LoopbackServer):
    server.enqueue(Script(text="x", error_after=1, error_type="invalid_request_error", error_message="bad"))
    events, _ = await run(sonnet(server))
    assert final_error(events).retryable is False


async def test_max_tokens_cut_mid_tool_call(server: LoopbackServer):
    server.enqueue(
        Script(tool_calls=[ScriptToolCall("get_weather", '{"location": "San Fra')], stop_reason="length")
    )
    events, message = await run(sonnet(server))
    assert events[-1].type == "done" and events[-1].reason == "length"
    assert message.tool_calls[0].arguments == {RAW_ARGUMENTS_KEY: '{"location": "San Fra'}


async def test_stream_ending_without_message_stop(server: LoopbackServer):
    server.enqueue(
        Script(
            tool_calls=[ScriptToolCall("get_weather", {"location": "Lima"})], fragment_chars=4, end_after=5
        )
    )
    events, message = await run(sonnet(server))
    assert final_error(events).retryable is True
    assert message.error_message == "Stream ended before the response was complete (anthropic) (retryable)"
    assert message.usage.input == 100  # input usage came first, in message_start
    assert message.tool_calls[0].arguments == {RAW_ARGUMENTS_KEY: '{"locati'}


async def test_connection_dropped(server: LoopbackServer):
    server.enqueue(Script(text="abcdefgh", drop_after=4))
    events, message = await run(sonnet(server))
    assert final_error(events).retryable is True
    assert message.error_message.startswith("Connection error talking to anthropic")
    assert message.text == "abcdefgh"


async def test_refusal_is_an_error(server: LoopbackServer):
    server.enqueue(Script(text="I can't", wire_stop_reason="refusal"))
    events, message = await run(sonnet(server))
    assert final_error(events).retryable is False
    assert (
        message.error_message
        == "The model refused to answer (stop_reason refusal) (anthropic) (not retryable)"
    )
    assert message.text == "I can't"


async def test_abort_mid_thinking(server: LoopbackServer):
    server.enqueue(Script(thinking="t" * 300, chunk_chars=1, delay=0.01))
    signal = AbortSignal()
    aborted_at = 0.0
    events = []
    options = StreamOptions(api_key="k", signal=signal, thinking_level=ThinkingLevel.HIGH)
    async for event in stream(sonnet(server), LlmContext(), options):
        events.append(event)
        if event.type == "thinking_delta" and len(event.partial.content[0].thinking) == 5:
            aborted_at = time.perf_counter()
            asyncio.get_running_loop().call_soon(signal.abort)
    latency = time.perf_counter() - aborted_at
    print(f"\nanthropic abort -> final event: {latency * 1000:.2f} ms")
    error = final_error(events)
    assert error.reason == "aborted" and error.error.error_message == "Request was aborted"
    assert error.error.content[0].thinking.startswith("ttttt")
    assert error.error.usage.input == 100
    assert latency < 1.0


async def test_key_never_leaks(server: LoopbackServer):
    server.enqueue(Script(status=401, error_message="invalid x-api-key", echo_request_headers=True))
    events, message = await run(sonnet(server))
    assert server.requests[-1].headers["x-api-key"] == SECRET_KEY
    assert SECRET_KEY not in dump_all(events)
    assert "[redacted]" in message.error_message
    assert final_error(events).retryable is False


async def test_key_resolution_order(server: LoopbackServer, monkeypatch):
    from agentcore.providers import set_api_key_resolver

    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    server.enqueue(Script(text="1"), Script(text="2"), Script(text="3"))
    await run(sonnet(server), options=StreamOptions())
    assert server.requests[-1].headers["x-api-key"] == "from-env"

    async def resolver(provider: str) -> str | None:
        return f"from-callback-{provider}"

    set_api_key_resolver(resolver)
    try:
        await run(sonnet(server), options=StreamOptions())
        assert server.requests[-1].headers["x-api-key"] == "from-callback-anthropic"
        await run(sonnet(server), options=StreamOptions(api_key="explicit"))
        assert server.requests[-1].headers["x-api-key"] == "explicit"
    finally:
        set_api_key_resolver(None)


def test_server_in_a_thread_for_sync_code():
    import httpx

    server = LoopbackServer().start_in_thread()
    try:
        server.enqueue(Script(text="hey"))
        body = {
            "model": "m",
            "max_tokens": 10,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
        response = httpx.post(f"{server.anthropic_base_url}/v1/messages", json=body)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.text.startswith("event: message_start\ndata: ")
        assert response.text.endswith('event: message_stop\ndata: {"type":"message_stop"}\n\n')
        assert server.requests[0].body == body
    finally:
        server.stop_thread()


async def test_demo_responder_echoes_and_calls_tools(server: LoopbackServer):
    model = sonnet(server)
    _, reply = await run(model, LlmContext(messages=[user("hello")]))
    assert reply.text == "You said: hello"
    _, reply = await run(
        model, LlmContext(messages=[user('/tool get_weather {"location": "Oslo"}')], tools=[WEATHER])
    )
    assert reply.tool_calls[0].arguments == {"location": "Oslo"}
    result = ToolResultMessage(
        tool_call_id=reply.tool_calls[0].id,
        tool_name="get_weather",
        content=[TextContent(text="sunny")],
        timestamp=3,
    )
    _, final = await run(model, LlmContext(messages=[user("q"), reply, result]))
    assert final.text == "The tool returned: sunny"
