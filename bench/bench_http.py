"""CPU per model call in the provider's whole path (request, httpx, SSE, events), against the
loopback model in its own process (its CPU is not counted), through the providers' client (aiohttp's
transport) and through httpx's own pool, taking turns.

    python -m bench --only http

Each figure is the median of the rounds. The calls are tool-turn shaped (the model asks for one tool).
"""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx

from agentcore.messages import TextContent, UserMessage
from agentcore.providers import aclose_shared_client, stream, transport
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


CONCURRENCY = (1, 20, 100)


def _own_pool() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=transport.HTTP_TIMEOUT, limits=transport.HTTP_LIMITS, trust_env=True)


async def provider_calls(rounds: int = 3, count: int = 300, **_options: object) -> list[Row]:
    loopback = await spawn("bench.loopback_proc", "--port", "0")
    model = LoopbackServer(port=int(loopback.info)).model("openai-completions")
    context = LlmContext(messages=[UserMessage(content=[TextContent(text="/tools 1")], timestamp=1)])
    clients = {"providers' client": transport._new_client, "httpx's own pool": _own_pool}
    seconds: dict[tuple[str, int], list[float]] = {}
    try:
        for _ in range(rounds):
            for name, make in clients.items():
                await aclose_shared_client()  # each round opens its connections afresh
                transport._new_client = make
                for concurrency in CONCURRENCY:
                    await _calls(model, context, 20, concurrency)  # warm: connections open
                    seconds.setdefault((name, concurrency), []).append(
                        await _calls(model, context, count, concurrency)
                    )
    finally:
        transport._new_client = clients["providers' client"]
        await aclose_shared_client()
        await loopback.stop()
    return [
        Row(SECTION, f"{name}, {concurrency} at a time", _each(seconds[name, concurrency]))
        for name in clients
        for concurrency in CONCURRENCY
    ]


def _each(values: list[float]) -> str:
    return (
        f"{statistics.median(values) * 1000:.2f} ms (" + " / ".join(f"{v * 1000:.2f}" for v in values) + ")"
    )
