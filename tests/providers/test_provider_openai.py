"""OpenAI Chat Completions over real HTTP against the loopback server."""

from __future__ import annotations

import asyncio
import http.server
import threading
import time
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agentcore.model import ModelCost, ThinkingLevel
from agentcore.providers import (
    RAW_ARGUMENTS_KEY,
    aclose_shared_client,
    get_model,
    is_context_overflow,
    stream,
    transport,
)
from agentcore.runtime import AbortSignal, LlmContext, StreamOptions
from agentcore.testing.loopback import LoopbackServer, Script, ScriptToolCall, ScriptUsage
from agentcore.tools import ToolSpec
from tests.support.providers import PNG_1PX, SECRET_KEY, body_of, dump_all, final_error, run, server, types

# ``server`` is a pytest fixture, used by parameter name; exporting it keeps linters from dropping it.
__all__ = ["server"]

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def gpt4o(srv: LoopbackServer, **fields):
    model = get_model("openai", "gpt-4o")
    model.base_url = srv.openai_base_url
    return model.model_copy(update=fields)


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1)


async def test_text_stream_usage_cost_and_request(server: LoopbackServer):
    server.enqueue(
        Script(text="Hello there, world", usage=ScriptUsage(input=1000, output=200, cache_read=500))
    )
    context = LlmContext(system_prompt="Be brief.", messages=[user("hi")], tools=[WEATHER])
    events, message = await run(gpt4o(server), context)

    assert types(events)[:2] == ["start", "text_start"]
    assert types(events)[-2:] == ["text_end", "done"]
    assert "".join(e.delta for e in events if e.type == "text_delta") == "Hello there, world"
    assert message.content == [TextContent(text="Hello there, world")]
    assert message.stop_reason == "stop" and message.error_message is None
    assert message.response_id == "chatcmpl-loopback"
    assert (message.api, message.provider, message.model) == ("openai-completions", "openai", "gpt-4o")
    # prompt_tokens includes the cached ones; they are split out and priced at the cache rate.
    assert message.usage.model_dump(exclude={"cost"}) == {
        "input": 1000,
        "output": 200,
        "cache_read": 500,
        "cache_write": 0,
        "total_tokens": 1700,
    }
    assert message.usage.cost.total == pytest.approx((1000 * 2.5 + 200 * 10 + 500 * 1.25) / 1e6)

    request = server.requests[-1]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET_KEY}"
    body = request.body
    assert body["model"] == "gpt-4o" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert body["tools"] == [
        {"type": "function", "function": WEATHER.model_dump(include={"name", "description", "parameters"})}
    ]
    assert "reasoning_effort" not in body


async def test_parallel_tool_calls_from_fragments(server: LoopbackServer):
    calls = [
        ScriptToolCall("get_weather", {"city": "Edinburgh", "days": [1, 2]}, id="call_A"),
        ScriptToolCall("get_weather", {"city": 'Paris "FR" ✓'}, id="call_B"),
    ]
    server.enqueue(Script(text="Checking.", tool_calls=calls, fragment_chars=3))
    events, message = await run(gpt4o(server), LlmContext(messages=[user("weather?")], tools=[WEATHER]))

    assert message.stop_reason == "toolUse"
    assert message.tool_calls == [
        ToolCall(id="call_A", name="get_weather", arguments={"city": "Edinburgh", "days": [1, 2]}),
        ToolCall(id="call_B", name="get_weather", arguments={"city": 'Paris "FR" ✓'}),
    ]
    ends = [e for e in events if e.type == "toolcall_end"]
    assert [e.tool_call.id for e in ends] == ["call_A", "call_B"]
    # The first call is complete before the second starts streaming.
    order = types(events)
    assert order.index("toolcall_end") < len(order) - 1 - order[::-1].index("toolcall_start")
    assert sum(e.type == "toolcall_delta" for e in events) > 10


async def test_partial_arguments_fill_in_while_streaming(server: LoopbackServer):
    server.enqueue(
        Script(tool_calls=[ScriptToolCall("get_weather", {"city": "Edinburgh"})], fragment_chars=4)
    )
    seen: list[dict] = []
    async for event in stream(gpt4o(server), LlmContext(messages=[user("x")]), StreamOptions(api_key="k")):
        if event.type == "toolcall_delta":
            seen.append(dict(event.partial.content[event.content_index].arguments))
    assert {} in seen and {"city": "Edi"} in seen and seen[-1] == {"city": "Edinburgh"}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_then_tool_call(server: LoopbackServer, field: str):
    server.enqueue(
        Script(
            thinking="The user wants weather.",
            reasoning_field=field,
            tool_calls=[ScriptToolCall("get_weather", {"city": "Oslo"})],
        )
    )
    model = server.model("openai-completions", "qwen3", reasoning=True, provider="ollama")
    events, message = await run(
        model, LlmContext(messages=[user("x")]), StreamOptions(thinking_level=ThinkingLevel.MEDIUM)
    )

    assert types(events)[1:3] == ["thinking_start", "thinking_delta"]
    thinking, call = message.content
    assert thinking == ThinkingContent(thinking="The user wants weather.", thinking_signature=field)
    assert call == ToolCall(id="call_loopback_0", name="get_weather", arguments={"city": "Oslo"})
    body = body_of(server)
    assert body["reasoning_effort"] == "medium"
    assert "authorization" not in server.requests[-1].headers  # a local server takes no key


@pytest.mark.parametrize(
    ("model_id", "provider", "level", "effort"),
    [
        ("gpt-5", "openai", ThinkingLevel.LOW, "low"),
        ("gpt-5", "openai", ThinkingLevel.XHIGH, "high"),  # not an xhigh model: clamped
        ("gpt-5.2", "openai", ThinkingLevel.XHIGH, "xhigh"),
        ("gpt-5", "openai", ThinkingLevel.OFF, None),
        ("qwen3", "ollama", ThinkingLevel.OFF, "none"),  # Ollama thinks unless told not to
    ],
)
async def test_reasoning_effort_mapping(server: LoopbackServer, model_id, provider, level, effort):
    server.enqueue(Script(text="ok"))
    model = server.model("openai-completions", model_id, reasoning=True, provider=provider)
    await run(
        model,
        LlmContext(messages=[user("x")]),
        StreamOptions(api_key="k", thinking_level=level, max_tokens=99),
    )
    body = body_of(server)
    assert body.get("reasoning_effort") == effort
    assert body["max_completion_tokens" if provider == "openai" else "max_tokens"] == 99


async def test_usage_absent_means_zero_usage(server: LoopbackServer):
    server.enqueue(Script(text="hi", usage=None))
    _, message = await run(gpt4o(server))
    assert message.stop_reason == "stop"
    assert message.usage == Usage()


async def test_content_filter_is_an_error(server: LoopbackServer):
    server.enqueue(Script(text="Some", wire_stop_reason="content_filter"))
    events, message = await run(gpt4o(server))
    assert final_error(events).retryable is False
    assert message.stop_reason == "error" and message.text == "Some"
    assert "content filter" in message.error_message


async def test_stop_with_tool_calls_means_tool_use(server: LoopbackServer):
    # Ollama reports finish_reason "stop" on a turn that called tools.
    server.enqueue(
        Script(tool_calls=[ScriptToolCall("get_weather", {"city": "Rome"})], wire_stop_reason="stop")
    )
    events, message = await run(gpt4o(server))
    assert events[-1].reason == "toolUse" and message.stop_reason == "toolUse"


async def test_comment_lines_and_keepalives(server: LoopbackServer):
    server.enqueue(Script(text="still here", keepalives=True))
    _, message = await run(gpt4o(server))
    assert message.text == "still here" and message.stop_reason == "stop"


async def test_429_is_retryable_with_the_servers_delay(server: LoopbackServer):
    server.enqueue(
        Script(status=429, error_message="Rate limit reached for gpt-4o", headers={"retry-after": "2"})
    )
    server.enqueue(
        Script(status=429, error_message="Slow down", headers={"retry-after-ms": "1500", "retry-after": "9"})
    )
    events, message = await run(gpt4o(server))
    error = final_error(events)
    assert (error.reason, error.retryable, error.retry_after_seconds, error.status_code) == (
        "error",
        True,
        2.0,
        429,
    )
    assert message.stop_reason == "error"
    assert message.error_message == (
        "HTTP 429 from openai: Rate limit reached for gpt-4o [rate_limit_exceeded] (retryable; retry after 2.0s)"
    )
    events, _ = await run(gpt4o(server))
    assert final_error(events).retry_after_seconds == 1.5


async def test_a_retry_after_past_the_cap_or_not_a_number_is_not_waited_for(server: LoopbackServer):
    server.enqueue(Script(status=429, error_message="Daily quota spent", headers={"retry-after": "86400"}))
    server.enqueue(Script(status=429, error_message="Slow down", headers={"retry-after": "1e999"}))
    server.enqueue(Script(status=429, error_message="Slow down", headers={"retry-after-ms": "nan"}))
    events, message = await run(gpt4o(server))
    error = final_error(events)
    assert (error.retryable, error.retry_after_seconds) == (False, None)
    assert "Daily quota spent" in (message.error_message or "")
    assert "retry after 86,400s, more than the 60s a call waits" in (message.error_message or "")
    for _ in range(2):
        events, message = await run(gpt4o(server))
        error = final_error(events)
        assert (error.retryable, error.retry_after_seconds) == (True, None)
        assert message.error_message and message.error_message.endswith(
            "Slow down [rate_limit_exceeded] (retryable)"
        )


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(500, True), (529, True), (503, True), (400, False), (401, False), (404, False), (422, False)],
)
async def test_http_status_classification(server: LoopbackServer, status: int, retryable: bool):
    server.enqueue(Script(status=status, error_message=f"failure {status}"))
    events, message = await run(gpt4o(server))
    error = final_error(events)
    assert (error.status_code, error.retryable, error.retry_after_seconds) == (status, retryable, None)
    assert message.error_message.startswith(f"HTTP {status} from openai: failure {status}")
    assert message.error_message.endswith("(retryable)" if retryable else "(not retryable)")
    assert message.content == []


async def test_context_overflow_is_not_retryable(server: LoopbackServer):
    server.enqueue(
        Script(
            status=400,
            error_message="This model's maximum context length is 128000 tokens. However, you requested 130000 tokens.",
        )
    )
    events, message = await run(gpt4o(server))
    assert final_error(events).retryable is False
    assert is_context_overflow(message)
    assert message.error_message.startswith(
        "Context overflow: HTTP 400 from openai: This model's maximum context length"
    )


async def test_error_event_after_200_keeps_partial_text(server: LoopbackServer):
    server.enqueue(Script(text="Partial answer here", error_after=3))
    events, message = await run(gpt4o(server))
    error = final_error(events)
    assert error.retryable is True and error.status_code is None
    assert message.stop_reason == "error"
    assert message.text == "Partial "
    assert message.error_message == (
        "Stream error from openai: server_error: The server had an error while processing your request. "
        "Sorry about that! (retryable)"
    )


async def test_truncated_mid_tool_call_without_terminator(server: LoopbackServer):
    server.enqueue(
        Script(
            tool_calls=[ScriptToolCall("get_weather", {"city": "Edinburgh"})], fragment_chars=4, end_after=4
        )
    )
    events, message = await run(gpt4o(server))
    error = final_error(events)
    assert error.retryable is True
    assert message.error_message == "Stream ended before the response was complete (openai) (retryable)"
    (call,) = message.tool_calls
    assert call.arguments == {RAW_ARGUMENTS_KEY: '{"city":'}


async def test_length_cut_mid_tool_call(server: LoopbackServer):
    server.enqueue(
        Script(tool_calls=[ScriptToolCall("get_weather", '{"city": "Edinb')], stop_reason="length")
    )
    events, message = await run(gpt4o(server))
    assert events[-1].type == "done" and events[-1].reason == "length"
    assert message.tool_calls[0].arguments == {RAW_ARGUMENTS_KEY: '{"city": "Edinb'}


async def test_connection_dropped_mid_stream(server: LoopbackServer):
    server.enqueue(Script(text="abcdefghijkl", drop_after=3))
    events, message = await run(gpt4o(server))
    error = final_error(events)
    assert error.retryable is True
    assert message.error_message.startswith("Connection error talking to openai: ")
    assert message.text == "abcdefgh"


async def test_connection_refused_is_retryable():
    model = get_model("openai", "gpt-4o")
    model.base_url = "http://127.0.0.1:9/v1"
    events, message = await run(model)
    assert final_error(events).retryable is True
    assert message.error_message.startswith("Connection error talking to openai")
    # The transport's own words, not the httpx name its adapter maps a refusal to (ConnectTimeout).
    assert "timed out" not in message.error_message
    assert "Cannot connect to host 127.0.0.1:9" in message.error_message


@pytest.mark.parametrize(
    "answer",
    [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", b""],
    ids=["bad-status-line", "bad-chunk", "closed-at-once"],
)
async def test_a_malformed_answer_ends_the_stream_retryably(answer: bytes):
    """Whatever the transport raises for a broken answer, the stream ends with one retryable error
    (an exception escaping the body's reader would leave the caller waiting for good)."""

    async def broken(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(broken, "127.0.0.1", 0)
    model = get_model("openai", "gpt-4o").model_copy(
        update={"base_url": f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/v1"}
    )
    async with listener:
        events, message = await asyncio.wait_for(run(model), timeout=10)
    assert final_error(events).retryable is True
    assert message.error_message.startswith("Connection error talking to openai: ")
    assert SECRET_KEY not in dump_all(events)  # aiohttp's error carries the request's headers


async def test_abort_closes_the_stream_promptly(server: LoopbackServer):
    server.enqueue(Script(text="x" * 400, chunk_chars=1, delay=0.01))
    signal = AbortSignal()
    aborted_at = 0.0
    events = []
    async for event in stream(gpt4o(server), LlmContext(), StreamOptions(api_key="k", signal=signal)):
        events.append(event)
        if event.type == "text_delta" and len(event.partial.text) == 10:
            aborted_at = time.perf_counter()
            asyncio.get_running_loop().call_soon(signal.abort)
    latency = time.perf_counter() - aborted_at
    print(f"\nopenai abort -> final event: {latency * 1000:.2f} ms")
    error = final_error(events)
    assert error.reason == "aborted" and error.error.stop_reason == "aborted"
    assert error.error.text.startswith("x" * 10)
    assert latency < 1.0
    sent = len(server.frame_times)
    await asyncio.sleep(0.1)
    # The server notices the closed socket within two writes (the first one draws the peer's reset);
    # had the stream stayed open, ten more frames would have gone out in those 100 ms.
    assert len(server.frame_times) <= sent + 2, "the server kept streaming after the abort"


async def test_already_aborted_signal_sends_nothing(server: LoopbackServer):
    signal = AbortSignal()
    signal.abort()
    events, message = await run(gpt4o(server), options=StreamOptions(api_key="k", signal=signal))
    assert message.stop_reason == "aborted" and server.requests_received == 0


async def test_key_never_leaks_even_when_echoed(server: LoopbackServer):
    server.enqueue(Script(status=401, error_message="Incorrect API key provided", echo_request_headers=True))
    events, message = await run(gpt4o(server))
    assert SECRET_KEY in server.requests[-1].headers["authorization"]
    assert SECRET_KEY not in dump_all(events)
    assert SECRET_KEY not in message.model_dump_json()
    assert "[redacted]" in message.error_message
    assert SECRET_KEY not in repr(StreamOptions(api_key=SECRET_KEY))
    assert SECRET_KEY not in StreamOptions(api_key=SECRET_KEY).model_dump_json()


async def test_key_from_environment(server: LoopbackServer, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.enqueue(Script(text="ok"))
    await run(gpt4o(server), options=StreamOptions())
    assert server.requests[-1].headers["authorization"] == "Bearer sk-from-env"


async def test_missing_key_for_the_vendor_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    events, message = await run(get_model("openai", "gpt-4o"), options=StreamOptions())
    assert final_error(events).retryable is False
    assert "OPENAI_API_KEY" in message.error_message


async def test_unknown_api_is_an_error_event():
    model = get_model("openai", "gpt-4o").model_copy(update={"api": "nope"})
    events, message = await run(model)
    assert types(events) == ["start", "error"]
    assert "No provider for api 'nope'" in message.error_message


async def test_request_carries_images_tool_results_and_error_results(server: LoopbackServer):
    server.enqueue(Script(text="done"))
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})
    messages = [
        UserMessage(
            content=[TextContent(text="What is this?"), ImageContent(data=PNG_1PX, mime_type="image/png")],
            timestamp=1,
        ),
        AssistantMessage(
            content=[ThinkingContent(thinking="hmm"), TextContent(text="Let me check."), call],
            stop_reason="toolUse",
            timestamp=2,
        ),
        ToolResultMessage(
            tool_call_id="call_1",
            tool_name="get_weather",
            content=[TextContent(text="rain"), ImageContent(data=PNG_1PX, mime_type="image/png")],
            timestamp=3,
        ),
        AssistantMessage(
            content=[ToolCall(id="call_2", name="get_weather", arguments={})],
            stop_reason="toolUse",
            timestamp=4,
        ),
        ToolResultMessage(
            tool_call_id="call_2",
            tool_name="get_weather",
            content=[TextContent(text="city is required")],
            is_error=True,
            timestamp=5,
        ),
        AssistantMessage(
            content=[TextContent(text="half")], stop_reason="error", error_message="boom", timestamp=6
        ),
    ]
    await run(gpt4o(server), LlmContext(system_prompt="sys", messages=messages, tools=[WEATHER]))
    image_url = {"url": f"data:image/png;base64,{PNG_1PX}"}
    assert body_of(server)["messages"] == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": image_url},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images returned by get_weather:"},
                {"type": "image_url", "image_url": image_url},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: city is required"},
    ]


async def test_unanswered_tool_call_gets_an_error_result(server: LoopbackServer):
    server.enqueue(Script(text="ok"))
    messages = [
        AssistantMessage(
            content=[ToolCall(id="c1", name="get_weather", arguments={})], stop_reason="toolUse", timestamp=1
        ),
        user("never mind"),
    ]
    await run(gpt4o(server), LlmContext(messages=messages))
    wire = body_of(server)["messages"]
    assert wire[1] == {"role": "tool", "tool_call_id": "c1", "content": "Error: No result provided"}
    assert wire[2] == {"role": "user", "content": "never mind"}


async def test_text_only_model_gets_no_images(server: LoopbackServer):
    server.enqueue(Script(text="ok"))
    model = server.model("openai-completions", "llama", input=["text"], cost=ModelCost())
    msg = UserMessage(
        content=[TextContent(text="see"), ImageContent(data=PNG_1PX, mime_type="image/png")], timestamp=1
    )
    await run(model, LlmContext(messages=[msg]))
    assert body_of(server)["messages"] == [
        {"role": "user", "content": "see(image omitted: this model does not accept images)"}
    ]


async def test_finished_streams_return_their_connection_to_the_pool(server: LoopbackServer):
    # A zero-latency server: the provider sees the terminator before the chunked body has ended.
    # Each call must leave its connection reusable, or a worker runs out of pool after 100 calls.
    await aclose_shared_client()  # a fresh pool: other tests' connections are not ours to count
    model = gpt4o(server)
    accepted_before = server.connections_accepted
    for _ in range(5):
        server.enqueue(Script(text="hello"))
        _, message = await run(model)
        assert message.stop_reason == "stop"
    assert server.connections_accepted - accepted_before == 1


async def test_the_loopback_server_keeps_its_latest_requests_and_counts_them_all():
    # Each body holds the whole context: a record of every request grew without end in a long
    # conversation (``agentcore dev``, the bench's model server).
    async with LoopbackServer(keep_requests=3) as small:
        model = small.model("openai-completions", "gpt-4o")
        for i in range(5):
            small.enqueue(Script(text="ok"))
            await run(model, LlmContext(messages=[UserMessage(content=f"q{i}", timestamp=1)]))
        assert small.requests_received == 5
        assert [r.body["messages"][-1]["content"] for r in small.requests] == ["q2", "q3", "q4"]


@pytest.fixture
async def one_connection(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """The providers' client with a pool of one connection, short pool and read timeouts."""
    monkeypatch.setattr(
        transport, "HTTP_LIMITS", httpx.Limits(max_connections=1, max_keepalive_connections=1)
    )
    monkeypatch.setattr(transport, "HTTP_TIMEOUT", httpx.Timeout(5.0, read=0.3, pool=1.0))
    await aclose_shared_client()
    yield
    await aclose_shared_client()


async def test_an_abort_mid_stream_gives_the_connection_back(server: LoopbackServer, one_connection: None):
    """With a single pooled connection, the call after an aborted one still gets a connection."""
    server.enqueue(Script(text="x" * 400, chunk_chars=1, delay=0.01), Script(text="after"))
    signal = AbortSignal()
    async for event in stream(gpt4o(server), LlmContext(), StreamOptions(api_key="k", signal=signal)):
        if event.type == "text_delta" and len(event.partial.text) == 5:
            signal.abort()
    _, message = await run(gpt4o(server))
    assert (message.stop_reason, message.text) == ("stop", "after")


async def test_a_stalled_stream_times_out_retryably(server: LoopbackServer, one_connection: None):
    server.enqueue(Script(text="abc", delay=2.0), Script(text="after"))
    events, message = await run(gpt4o(server))
    assert final_error(events).retryable is True
    assert message.error_message == "Connection error talking to openai: timed out (ReadTimeout) (retryable)"
    _, message = await run(gpt4o(server))  # the timed-out connection is not left holding the slot
    assert message.text == "after"


async def test_a_proxy_from_the_environment_carries_the_calls(monkeypatch: pytest.MonkeyPatch):
    """``HTTP_PROXY`` is honoured: the request goes to the proxy in absolute form."""
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n"))
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"error":{"message":"answered by the proxy"}}'
        head = f"HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(proxy, "127.0.0.1", 0)
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}")
    await aclose_shared_client()  # the client reads the environment when it is made
    model = get_model("openai", "gpt-4o").model_copy(update={"base_url": "http://model.invalid/v1"})
    try:
        async with listener:
            _, message = await run(model)
    finally:
        await aclose_shared_client()
    assert seen == [b"POST http://model.invalid/v1/chat/completions HTTP/1.1\r\n"]
    assert message.error_message and "answered by the proxy" in message.error_message


class _StdlibSse(http.server.BaseHTTPRequestHandler):
    """What a hand-written test server often is: ``http.server``, HTTP/1.0, the body ending with
    the connection (no Content-Length, no chunking), SSE frames flushed one by one."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in ("Hel", "lo"):
            chunk = {"id": "c1", "choices": [{"index": 0, "delta": {"content": piece}}]}
            self.wfile.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
            self.wfile.flush()
        done = {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(b"data: " + orjson.dumps(done) + b"\n\ndata: [DONE]\n\n")

    def log_message(self, *args: object) -> None:
        pass


async def test_a_provider_streams_from_a_stdlib_http_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StdlibSse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    model = get_model("openai", "gpt-4o").model_copy(
        update={"base_url": f"http://127.0.0.1:{server.server_address[1]}/v1"}
    )
    try:
        for _ in range(2):  # the second call cannot reuse the closed connection: a new one
            events, message = await run(model)
            assert [e.type for e in events if e.type in ("text_delta", "done")] == [
                "text_delta",
                "text_delta",
                "done",
            ]
            assert message.text == "Hello"
    finally:
        await aclose_shared_client()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("body", "retryable"),
    [
        (b'{"error":{"message":"model is loading"}}', False),
        (b'{"error":{"message":"server overloaded, try again"}}', True),
    ],
)
async def test_a_json_answer_to_a_streaming_request_keeps_the_servers_words(body: bytes, retryable: bool):
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the request's head; its body is not needed
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with listener:
        port = listener.sockets[0].getsockname()[1]
        model = get_model("openai", "gpt-4o").model_copy(update={"base_url": f"http://127.0.0.1:{port}/v1"})
        events, message = await run(model)
    error = final_error(events)
    assert (error.retryable, error.status_code) == (retryable, 200)
    text = body.decode().split('"message":"')[1].split('"')[0]
    assert message.error_message == (
        f"Stream error from openai: expected an event stream, got JSON: {text}"
        f" ({'retryable' if retryable else 'not retryable'})"
    )
