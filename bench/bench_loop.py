"""In-process loop overhead per turn, with a zero-latency scripted model.

    python bench/bench_loop.py [--runs N]

Two shapes: a text turn (prompt -> answer) and a tool turn (prompt -> tool call -> tool -> answer,
i.e. two model calls and one tool call). Each run is one ``agent_loop`` to completion, events fully
consumed; what is measured is the loop, the event objects, the tool pipeline and the scripted
stream, since the model answers instantly. Reports p50/p95/p99 and runs per second.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentcore import (  # noqa: E402
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    LlmContext,
    UserMessage,
    agent_loop,
)
from agentcore.testing import Reply, ScriptedModel, scripted_model, text, tool_calls  # noqa: E402


async def lookup(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
    return AgentToolResult.text(f"{args['city']}: 21 C, clear")


WEATHER = AgentTool(
    name="weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    execute=lookup,
)


def text_turn(context: LlmContext) -> Reply:
    return text("Paris is the capital of France.")


def tool_turn(context: LlmContext) -> Reply:
    # A function of the context, as a durable run needs: answer once the tool result is in.
    if context.messages[-1].role == "toolResult":
        return text("It is 21 C and clear in Paris.")
    return tool_calls([("weather", {"city": "Paris"})])


async def one_run(stream_fn: ScriptedModel, tools: list[Any]) -> int:
    prompt = UserMessage(content="What about Paris?", timestamp=1_700_000_000_000)
    config = AgentLoopConfig(model=scripted_model())
    events = 0
    async for _ in agent_loop(
        [prompt], AgentContext(system_prompt="Be brief.", tools=tools), config, None, stream_fn
    ):
        events += 1
    return events


async def measure(name: str, respond: Callable[[LlmContext], Reply], tools: list[Any], runs: int) -> None:
    stream_fn = ScriptedModel(respond, chunks=4)
    for _ in range(200):  # warm up imports, caches, pydantic validators
        await one_run(stream_fn, tools)
    stream_fn.calls.clear()
    stream_fn.options.clear()
    samples: list[float] = []
    gc.collect()
    started = time.perf_counter()
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        events = await one_run(stream_fn, tools)
        samples.append((time.perf_counter_ns() - t0) / 1000)
        if len(stream_fn.calls) > 1000:  # the recorder would otherwise grow for the whole benchmark
            stream_fn.calls.clear()
            stream_fn.options.clear()
    elapsed = time.perf_counter() - started
    q = statistics.quantiles(samples, n=100)
    print(
        f"{name:<10} {events:>3} events/run  p50 {q[49]:8.1f} us  p95 {q[94]:8.1f} us  p99 {q[98]:8.1f} us  "
        f"mean {statistics.fmean(samples):8.1f} us  {runs / elapsed:8.0f} runs/s"
    )


async def main(runs: int) -> None:
    print(f"agent_loop, in-process, zero-latency scripted model (4 deltas per text block), {runs} runs each")
    await measure("text turn", text_turn, [], runs)
    await measure("tool turn", tool_turn, [WEATHER], runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000)
    asyncio.run(main(parser.parse_args().runs))
