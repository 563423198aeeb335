"""Abort latency of a durable conversation: ``abort()`` mid-stream until ``agent_end`` reaches a subscriber.

    python bench/bench_abort.py [--runs 10]

The model streams slowly (5 ms per delta); each run aborts after the first delta arrives. Cancellation
reaches the model activity through its heartbeat (the worker sends them at most every
``HEARTBEAT_THROTTLE``), the activity hands back its partial message, and the loop ends the run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.support.durable

from agentcore import AgentOptions
from agentcore.temporal import DATA_CONVERTER, find_temporal_binary, search_attribute_keys
from agentcore.testing.scripted import ScriptedModel, scripted_model, text
from tests.support.durable import running_worker  # noqa: E402


async def measure(runs: int) -> list[float]:
    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=find_temporal_binary(),
        search_attributes=list(search_attribute_keys().values()),
        dev_server_log_level="error",
    )
    model = ScriptedModel(lambda context: text("word " * 2000), chunks=2000, delay=0.005)
    latencies = []
    try:
        async with running_worker(env.client, Path(tempfile.mkdtemp()), model) as h:
            for i in range(runs):
                agent = await h.agents.start(f"abort-{i}", AgentOptions(model=scripted_model()))
                await agent.prompt("go")
                offset = 0
                async for seen, event in agent.events(0):
                    if event.type == "message_update":
                        offset = seen
                        break
                started = time.perf_counter()
                await agent.abort()
                async for _, event in agent.events(offset + 1):
                    if event.type == "agent_end":
                        break
                latencies.append((time.perf_counter() - started) * 1000)
                state = await agent.get_state()
                assert state.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]
    finally:
        await env.shutdown()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    latencies = sorted(asyncio.run(measure(parser.parse_args().runs)))
    p50 = statistics.median(latencies)
    print(
        f"abort -> agent_end at a subscriber: p50 {p50:.0f} ms, max {latencies[-1]:.0f} ms ({len(latencies)} runs)"
    )


if __name__ == "__main__":
    main()
