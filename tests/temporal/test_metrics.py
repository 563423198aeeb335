"""Worker metrics, scraped from ``/metrics`` after real turns: the agent's counters moved by what the
turns did, the Temporal SDK's runtime metrics beside them, and no label that names a session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from agentcore import AgentTool, AgentToolResult
from agentcore.model import ModelCost
from agentcore.state import AgentOptions
from agentcore.temporal import connect
from agentcore.temporal.metrics import MetricsServer
from agentcore.testing.loopback import LoopbackServer, Script
from tests.support.durable import add_tool, collect_run, running_worker, sleep_tool

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class NoArgs(BaseModel):
    pass


def failing_tool() -> AgentTool:
    def execute(tool_call_id: str, args: NoArgs, signal: Any, on_update: Any) -> AgentToolResult:
        raise RuntimeError("the disk is full")

    return AgentTool(
        name="fail", description="Always fails.", parameters=NoArgs, execute=execute, timeout_seconds=5
    )


async def scrape(port: int) -> tuple[str, Samples]:
    async with httpx.AsyncClient() as http:
        response = await http.get(f"http://127.0.0.1:{port}/metrics")
    response.raise_for_status()
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return response.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str) -> float:
    """A sample summed over all its label sets (the SDK labels by namespace, task queue, type...)."""
    return sum(sample_value for (sample_name, _), sample_value in samples.items() if sample_name == name)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


@pytest.fixture
async def metrics() -> Any:
    server = MetricsServer(0, host="127.0.0.1").start()
    try:
        yield server
    finally:
        server.stop()


async def test_counters_move_by_what_the_turns_did(
    temporal_env: WorkflowEnvironment, tmp_path: Path, metrics: MetricsServer
) -> None:
    address = temporal_env.client.service_client.config.target_host
    client = await connect(address, runtime=metrics.runtime)
    async with LoopbackServer() as model_server:
        # $2 / $8 per million tokens; the loopback reports 100 tokens in and 20 out per call.
        model = model_server.model(model_id="gpt-metrics", cost=ModelCost(input=2.0, output=8.0))
        label = "openai/gpt-metrics"
        async with running_worker(
            client,
            tmp_path,
            None,
            tools=[add_tool(), failing_tool(), sleep_tool(timeout_seconds=60)],
            metrics=metrics,
            get_api_key=lambda provider: "sk-loopback",
        ) as harness:
            _, before = await scrape(metrics.port)
            agent = await harness.agents.start(
                "metrics-1", AgentOptions(model=model, tools=["add", "fail", "sleep"])
            )
            # Run 1: a tool turn (add), then the answer. Run 2: the failing tool, then the answer.
            # Run 3: a plain answer. Run 4: a slow tool, aborted.
            for prompt in ('/tool add {"a": 1, "b": 2}', "/tool fail {}", "hello"):
                start = await agent.event_offset()
                await agent.prompt(prompt)
                await collect_run(agent, start)
            # Run 5 (before 4): the provider is overloaded once; the call is retried and answers.
            model_server.enqueue(Script(status=529))
            start = await agent.event_offset()
            await agent.prompt("again")
            await collect_run(agent, start)
            start = await agent.event_offset()
            await agent.prompt('/tool sleep {"seconds": 30}')
            events = agent.events(start)
            async for _, event in events:
                if event.type == "tool_execution_start":
                    break
            await agent.abort()
            await collect_run(agent, start)
            text, after = await scrape(metrics.port)

    assert moved(before, after, "agentcore_runs_total", model=label) == 5
    # Model calls: 2 per tool run (the call, then the answer after the result), 1 for the plain
    # answer, 1 for the retried one (and its failed attempt), 1 for the aborted run (its run ends
    # after the aborted tool).
    assert moved(before, after, "agentcore_model_calls_total", model=label, outcome="toolUse") == 3
    assert moved(before, after, "agentcore_model_calls_total", model=label, outcome="stop") == 4
    assert moved(before, after, "agentcore_turns_total", model=label) == 7
    assert moved(before, after, "agentcore_tokens_total", model=label, type="input") == 700
    assert moved(before, after, "agentcore_tokens_total", model=label, type="output") == 140
    assert moved(before, after, "agentcore_cost_usd_total", model=label) == pytest.approx(
        7 * (100 * 2 + 20 * 8) / 1e6
    )
    assert moved(before, after, "agentcore_model_call_duration_seconds_count", model=label) == 7
    assert moved(before, after, "agentcore_tool_calls_total", tool="add", outcome="ok") == 1
    assert moved(before, after, "agentcore_tool_calls_total", tool="fail", outcome="error") == 1
    assert moved(before, after, "agentcore_tool_calls_total", tool="sleep", outcome="aborted") == 1
    assert moved(before, after, "agentcore_tool_call_duration_seconds_count", tool="add") == 1
    assert moved(before, after, "agentcore_errors_total", code="EXECUTION_ERROR") == 1
    assert moved(before, after, "agentcore_aborts_total", kind="tool") == 1
    # The failed attempt: counted as a retry, its error by code; Temporal ran the call again.
    assert moved(before, after, "agentcore_model_calls_total", model=label, outcome="retry") == 1
    assert moved(before, after, "agentcore_errors_total", code="PROVIDER_RETRYABLE") == 1

    # The SDK runtime's own metrics are on the same endpoint, and moved with the turns' activities.
    assert (
        total(after, "temporal_activity_execution_latency_seconds_count")
        - total(before, "temporal_activity_execution_latency_seconds_count")
        >= 4
    )
    assert total(after, "temporal_workflow_task_execution_latency_seconds_count") > total(
        before, "temporal_workflow_task_execution_latency_seconds_count"
    )
    # Durations in seconds, the unit in every histogram's name; no ``_created`` series.
    histograms = {
        line.split()[2]
        for line in text.splitlines()
        if line.startswith("# TYPE") and line.endswith(" histogram")
    }
    assert histograms and all(name.endswith("_seconds") for name in histograms), histograms
    assert "_created" not in text
    # Never a session id: neither as a label name nor as a value.
    assert "metrics-1" not in text
    assert not any(
        key in {"session", "session_id", "workflow_id"} for _, labels in after for key, _ in labels
    )


async def test_metrics_need_the_runtime_the_client_was_made_with(
    temporal_env: WorkflowEnvironment, metrics: MetricsServer
) -> None:
    from agentcore.worker import create_worker

    with pytest.raises(ValueError, match="runtime=metrics.runtime"):
        create_worker(temporal_env.client, task_queue="unused", metrics=metrics)
