"""``create_worker``: workflow tasks and local activities on one worker, remote activities on another.

The SDK core hands a worker's local activities to Python ahead of its remote activity tasks; under
load those waited past their heartbeat timeouts (bench/TUNING.md, entry 20). ``AgentWorker`` polls
them apart, in one process, behind ``Worker``'s own interface.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from agentcore import AgentOptions
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import AgentWorker, create_worker

from .durable_support import collect_run, running_worker, sleep_tool


def _worker(client: Client, tmp_path: Path, **options: object) -> AgentWorker:
    return create_worker(
        client, task_queue=f"tq-{uuid.uuid4().hex[:12]}", sessions_dir=tmp_path / "sessions", **options
    )


async def test_remote_activities_are_polled_by_a_worker_of_their_own(
    temporal_client: Client, tmp_path: Path
) -> None:
    worker = _worker(temporal_client, tmp_path, max_concurrent_workflow_tasks=3, max_concurrent_activities=7)
    assert isinstance(worker, Worker)
    remote = worker.remote_activities
    assert remote is not None
    main, other = worker.config(active_config=True), remote.config(active_config=True)
    assert main["no_remote_activities"] is True and main["max_concurrent_workflow_tasks"] == 3
    assert main["workflows"] and not other.get("workflows")
    assert {getattr(fn, "__temporal_activity_definition").name for fn in other["activities"]} >= {
        "llm.stream",
        "tools.execute",
        "session.append",
    }
    assert other["task_queue"] == main["task_queue"] and other["max_concurrent_activities"] == 7
    assert "max_concurrent_workflow_tasks" not in other or other["max_concurrent_workflow_tasks"] is None


async def test_a_worker_that_polls_no_remote_activities_gets_no_second_worker(
    temporal_client: Client, tmp_path: Path
) -> None:
    assert _worker(temporal_client, tmp_path, no_remote_activities=True).remote_activities is None


async def test_remote_model_call_and_remote_tool_run_and_the_conversation_goes_on(
    temporal_client: Client, tmp_path: Path
) -> None:
    # The main worker polls no remote activity: each of these ran on the second one, or the turn
    # would never end. The slow model call starts local and is handed to a remote llm.stream
    # (same process: it adopts the call); the 120 s tool is a remote tools.execute.
    model = ScriptedModel(
        [tool_calls([("sleep", {"seconds": 0.2})]), text("Slept well, " * 10)], chunks=10, delay=0.03
    )
    async with running_worker(temporal_client, tmp_path, model, tools=[sleep_tool(timeout_seconds=120)]) as h:
        agent = await h.agents.start("split", AgentOptions(model=scripted_model(), tools=["sleep"]))
        await agent.prompt("sleep a little")
        events = await collect_run(agent)
        ends = [e for e in events if e.type == "tool_execution_end"]
        assert [(e.is_error, e.result.content[0].text) for e in ends] == [(False, "slept 0.2")]
        assert any(e.type == "message_update" for e in events)  # deltas streamed by the remote call
        assert len(model.calls) == 2  # the handed-off call was adopted, not made twice
        await agent.prompt("again")
        assert (await collect_run(agent, await agent.event_offset()))[-1].type == "agent_end"


async def test_run_and_shutdown_cover_both_workers(temporal_client: Client, tmp_path: Path) -> None:
    worker = _worker(temporal_client, tmp_path)
    remote = worker.remote_activities
    assert remote is not None
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.3)
    assert worker.is_running and remote.is_running
    await asyncio.wait_for(worker.shutdown(), 30)
    await asyncio.wait_for(running, 30)
    assert worker.is_shutdown and remote.is_shutdown

    worker = _worker(temporal_client, tmp_path)
    async with worker:
        await asyncio.sleep(0.3)
        assert worker.is_running and worker.remote_activities is not None
    assert worker.is_shutdown and worker.remote_activities.is_shutdown


async def test_a_failed_remote_activity_worker_stops_the_other_and_run_raises(
    temporal_client: Client, tmp_path: Path
) -> None:
    worker = _worker(temporal_client, tmp_path)
    remote = worker.remote_activities
    assert remote is not None

    async def fail() -> None:
        await asyncio.sleep(0.3)
        raise RuntimeError("remote activity worker failed")

    remote.run = fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="remote activity worker failed"):
        await asyncio.wait_for(worker.run(), 30)
    assert worker.is_shutdown


def test_a_worker_process_collects_garbage_less_often() -> None:
    """``tune_gc_for_worker`` (what the worker's entry points call) freezes what is alive and raises
    the thresholds; a process that only creates a worker keeps its own settings. Run in a child
    process: the test process's collector is left alone."""
    import subprocess
    import sys

    script = (
        "import gc\nfrom agentcore import worker\n"
        "before = gc.get_threshold()\n"
        "worker.tune_gc_for_worker()\n"
        "print(before == (700, 10, 10), gc.get_threshold() == worker.GC_THRESHOLDS, gc.get_freeze_count() > 1000)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[1],
    )
    assert out.stdout.split() == ["True", "True", "True"]
