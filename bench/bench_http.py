"""CPU per model call in the provider's whole path (request, httpx, SSE, events), against the
loopback model in its own process (its CPU is not counted).

    python -m bench --only http

Each figure is the median of the rounds. The calls are tool-turn shaped (the model asks for one tool).
"""

from __future__ import annotations

import asyncio
import statistics
import time

from agentcore.messages import TextContent, UserMessage
from agentcore.providers import aclose_shared_client, stream
from agentcore.runtime import LlmContext, StreamOptions
from agentcore.testing.loopback import LoopbackServer

from ._procs import spawn
from .durable import Row

SECTION = "9. provider CPU per model call (loopback, whole stream path)"


async def _calls(model: object, context: LlmContext, count: int, concurrency: int) -> float:
    """CPU seconds per call for ``count`` calls, ``concurrency`` at a time."""
    slots = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with slots:
            async for event in stream(model, context, StreamOptions(api_key="bench")):  # type: ignore[arg-type]
                if event.type == "error":
                    raise RuntimeError(event.error.error_message)

    started = time.process_time()
    await asyncio.gather(*(one() for _ in range(count)))
    return (time.process_time() - started) / count


async def provider_calls(rounds: int = 3, count: int = 300, **_options: object) -> list[Row]:
    loopback = await spawn("bench.loopback_proc", "--port", "0")
    model = LoopbackServer(port=int(loopback.info)).model("openai-completions")
    context = LlmContext(messages=[UserMessage(content=[TextContent(text="/tools 1")], timestamp=1)])
    seconds: dict[int, list[float]] = {}
    try:
        for _ in range(rounds):
            await aclose_shared_client()  # each round opens its connections afresh
            for concurrency in (1, 20):
                await _calls(model, context, 20, concurrency)  # warm: connections open
                seconds.setdefault(concurrency, []).append(await _calls(model, context, count, concurrency))
    finally:
        await aclose_shared_client()
        await loopback.stop()
    return [
        Row(SECTION, f"{concurrency} at a time", f"{statistics.median(seconds[concurrency]) * 1000:.2f} ms")
        for concurrency in (1, 20)
    ]
