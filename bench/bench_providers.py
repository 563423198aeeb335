"""Provider benchmark: parse throughput, and the latency a provider adds to each delta.

    python bench/bench_providers.py [--deltas 20000] [--paced 300]

1. Throughput: a recorded-format stream (from the loopback encoders) is cut into 4 KiB socket-sized
   chunks and run through the SSE parser alone, then through the full provider path (SSE + protocol
   handler + partial-message builder, producing ``StreamEvent``s). A tool-call case measures the cost
   of re-parsing partial JSON arguments on every fragment.
2. Added latency: the loopback server (in its own thread) sends paced deltas and stamps each frame
   just before writing it. We read the same response once from a raw asyncio socket and once through
   the provider over httpx, and compare the receive stamps: the difference is what httpx, the SSE
   parser, JSON decoding and event building add per delta.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from agentcore.providers import aclose_shared_client, stream
from agentcore.providers.anthropic_messages import _MessagesHandler
from agentcore.providers.base import PartialMessageBuilder, SseHandler
from agentcore.providers.openai_completions import _CompletionsHandler
from agentcore.providers.sse import SseParser
from agentcore.runtime import LlmContext, StreamOptions
from agentcore.testing.loopback import LoopbackServer, Script, ScriptToolCall, encode_anthropic, encode_openai

CHUNK = 4096
REQUEST = {"model": "bench", "stream_options": {"include_usage": True}}


def _chunks(frames: list[bytes]) -> list[bytes]:
    raw = b"".join(frames)
    return [raw[i : i + CHUNK] for i in range(0, len(raw), CHUNK)]


def _best_of(runs: int, fn: Callable[[], int]) -> tuple[float, int]:
    """Fastest of ``runs`` timings (seconds) and the item count ``fn`` returned."""
    best, count = float("inf"), 0
    for _ in range(runs):
        start = time.perf_counter()
        count = fn()
        best = min(best, time.perf_counter() - start)
    return best, count


def bench_throughput(deltas: int) -> list[tuple[str, str, float, float]]:
    server = LoopbackServer()
    text_script = Script(text="abcd" * deltas, chunk_chars=4)
    args = {"query": "x" * (deltas // 4), "limit": 10}
    tool_script = Script(tool_calls=[ScriptToolCall("search", args)], fragment_chars=5)
    cases: list[
        tuple[str, Callable[[Script, Any], list[bytes]], Callable[[PartialMessageBuilder], SseHandler], str]
    ] = [
        ("openai", encode_openai, _CompletionsHandler, "openai-completions"),
        ("anthropic", encode_anthropic, _MessagesHandler, "anthropic-messages"),
    ]
    rows = []
    for name, encode, make_handler, api in cases:
        model = server.model(api)
        for label, script in (("text", text_script), ("tool args", tool_script)):
            chunks = _chunks(encode(script, REQUEST))

            def sse_only(chunks: list[bytes] = chunks) -> int:
                parser = SseParser()
                count = sum(len(parser.feed(chunk)) for chunk in chunks)
                return count + len(parser.finish())

            def full_path(
                chunks: list[bytes] = chunks, make_handler: Any = make_handler, model: Any = model
            ) -> int:
                builder = PartialMessageBuilder(model)
                handler = make_handler(builder)
                parser = SseParser()
                count = 0
                for chunk in chunks:
                    for sse in parser.feed(chunk):
                        count += len(handler.on_event(sse))
                return count

            seconds, count = _best_of(3, sse_only)
            rows.append((name, f"{label}: SSE frames", count / seconds, seconds * 1e6 / count))
            seconds, count = _best_of(3, full_path)
            rows.append((name, f"{label}: StreamEvents", count / seconds, seconds * 1e6 / count))
    return rows


async def _raw_socket_times(
    server: LoopbackServer, path: str, body: dict[str, Any], frames: int
) -> list[float]:
    """Receive stamp of each SSE frame, reading the HTTP response straight off the socket."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    payload = orjson.dumps(body)
    writer.write(
        f"POST {path} HTTP/1.1\r\nhost: {server.host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
        + payload
    )
    await writer.drain()
    stamps: list[float] = []
    while len(stamps) < frames:
        data = await reader.read(65536)
        if not data:
            break
        now = time.perf_counter()
        stamps.extend([now] * data.count(b"\n\n"))
    writer.close()
    return stamps


async def bench_latency(paced: int) -> list[tuple[str, float, float, float, float]]:
    server = LoopbackServer().start_in_thread()
    rows = []
    try:
        for api, path, first_text_frame in (
            ("openai-completions", "/v1/chat/completions", 1),  # after the role chunk
            ("anthropic-messages", "/v1/messages", 2),  # after message_start, content_block_start
        ):
            script = Script(text="tok " * paced, chunk_chars=4, delay=0.002)
            model = server.model(api)
            body = {
                "model": model.id,
                "max_tokens": 10,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            }
            server.enqueue(script)
            raw = await _raw_socket_times(server, path, body, first_text_frame + paced)
            sent = list(server.frame_times)
            raw_latency = [raw[i] - sent[i] for i in range(first_text_frame, first_text_frame + paced)]

            # Warm the shared client's connection so both sides start with an open socket.
            server.enqueue(Script(text="warm"))
            async for _ in stream(model, LlmContext(), StreamOptions(api_key="bench")):
                pass
            server.enqueue(script)
            received: list[float] = []
            async for event in stream(model, LlmContext(), StreamOptions(api_key="bench")):
                if event.type == "text_delta":
                    received.append(time.perf_counter())
            sent = list(server.frame_times)
            provider_latency = [received[k] - sent[first_text_frame + k] for k in range(paced)]
            rows.append(
                (
                    api,
                    statistics.median(raw_latency) * 1e6,
                    statistics.median(provider_latency) * 1e6,
                    _p99(raw_latency) * 1e6,
                    _p99(provider_latency) * 1e6,
                )
            )
    finally:
        await aclose_shared_client()
        server.stop_thread()
    return rows


def _p99(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--deltas", type=int, default=20000, help="deltas in the throughput streams")
    parser.add_argument("--paced", type=int, default=300, help="paced deltas in the latency runs")
    args = parser.parse_args()

    print(f"Parse throughput ({args.deltas} deltas, {CHUNK}-byte chunks, best of 3)")
    print(f"{'protocol':<10} {'stage':<26} {'events/s':>12} {'us/event':>9}")
    for name, stage, rate, micros in bench_throughput(args.deltas):
        print(f"{name:<10} {stage:<26} {rate:>12,.0f} {micros:>9.2f}")

    print(f"\nLatency per delta, server write -> consumer ({args.paced} deltas, 2 ms apart), microseconds")
    print(
        f"{'api':<20} {'raw p50':>9} {'provider p50':>13} {'added p50':>10} {'raw p99':>9} {'provider p99':>13}"
    )
    for api, raw50, prov50, raw99, prov99 in asyncio.run(bench_latency(args.paced)):
        print(
            f"{api:<20} {raw50:>9.0f} {prov50:>13.0f} {prov50 - raw50:>10.0f} {raw99:>9.0f} {prov99:>13.0f}"
        )


if __name__ == "__main__":
    main()
