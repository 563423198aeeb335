"""CPU per model call in the provider's whole path (request, HTTP, SSE, events), over the providers'
HTTP/1.1 transport and over httpx's own (``AGENTCORE_HTTP_TRANSPORT=httpx``), against the loopback
model in its own process (its CPU is not counted).

    python -m bench --only http

The two transports alternate round by round, so a change in the machine's speed hits both alike;
each figure is the median of the rounds. The calls are tool-turn shaped (the model asks for one tool).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

from agentcore.messages import TextContent, UserMessage
from agentcore.providers import aclose_shared_client, stream
from agentcore.runtime import LlmContext, StreamOptions
from agentcore.testing.loopback import LoopbackServer

from ._procs import spawn
from .durable import Row

SECTION = "9. provider CPU per model call (loopback, whole stream path)"
TRANSPORTS = {"ours": None, "httpx's own": "httpx"}


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
    seconds: dict[tuple[str, int], list[float]] = {}
    saved = os.environ.get("AGENTCORE_HTTP_TRANSPORT")
    try:
        for _ in range(rounds):
            for name, setting in TRANSPORTS.items():
                if setting is None:
                    os.environ.pop("AGENTCORE_HTTP_TRANSPORT", None)
                else:
                    os.environ["AGENTCORE_HTTP_TRANSPORT"] = setting
                await aclose_shared_client()  # the next call builds the client with this transport
                for concurrency in (1, 20):
                    await _calls(model, context, 20, concurrency)  # warm: connections open
                    seconds.setdefault((name, concurrency), []).append(
                        await _calls(model, context, count, concurrency)
                    )
    finally:
        await aclose_shared_client()
        if saved is None:
            os.environ.pop("AGENTCORE_HTTP_TRANSPORT", None)
        else:
            os.environ["AGENTCORE_HTTP_TRANSPORT"] = saved
        await loopback.stop()
    rows = []
    for concurrency in (1, 20):
        ours, theirs = (statistics.median(seconds[(name, concurrency)]) * 1000 for name in TRANSPORTS)
        rows.append(
            Row(
                SECTION,
                f"{concurrency} at a time: ours / httpx's own transport",
                f"{ours:.2f} / {theirs:.2f} ms",
            )
        )
    return rows
