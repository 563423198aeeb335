"""A call that needs the conversation's worker when none runs: a typed ``NoWorkerError`` within
seconds, not a wait without end (an update) or an untyped server error after half a minute (a
query); and nothing sent is lost: a worker that starts later takes it up."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

import agentcore.client.calls as client_calls
from agentcore import AgentOptions, AgentTool, AgentToolResult, NoWorkerError, cli
from agentcore.client import AgentClient
from agentcore.errors import AgentError
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import create_worker
from tests.support.durable import FAST_LIMITS, running_worker

CHECK = 1.0  # WORKER_CHECK_SECONDS here, to keep the test short (5 s by default; 20 s to confirm)


def _answer(context):  # type: ignore[no-untyped-def]
    last = context.messages[-1]
    if last.role == "user" and last.text == "use the slow tool":
        return tool_calls([("slow", {})])
    return text(f"got {len(context.messages)} messages")


async def _slow(tool_call_id, args, signal, on_update):  # type: ignore[no-untyped-def]
    await asyncio.sleep(3 * CHECK)  # outlasts the check: a busy worker is waited for
    return AgentToolResult.text("slow done")


SLOW = AgentTool(
    name="slow",
    description="Takes a while.",
    parameters={"type": "object"},
    execute=_slow,
    timeout_seconds=30,
)


async def test_a_call_no_worker_takes_says_so_and_a_worker_that_starts_takes_it_up(
    temporal_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_calls, "WORKER_CHECK_SECONDS", CHECK)
    monkeypatch.setattr(client_calls, "WORKER_CONFIRM_SECONDS", 2 * CHECK)
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    sessions = tmp_path / "sessions"
    agents = AgentClient(temporal_client, task_queue=task_queue, sessions_dir=sessions, limits=FAST_LIMITS)
    options = AgentOptions(model=scripted_model(), tools=[SLOW])
    agent = await agents.start("nobody-home", options)  # a start needs no worker

    began = time.monotonic()
    with pytest.raises(NoWorkerError) as raised:
        await agent.prompt("hello", id="first-prompt")
    assert time.monotonic() - began < 10 * CHECK
    error = raised.value
    assert isinstance(error, AgentError) and error.code == "NO_WORKER"
    assert task_queue in error.message and "first-prompt" in error.message, error.message
    with pytest.raises(NoWorkerError, match="get_state has no answer"):
        await agent.get_state()
    # A subscriber's polls are Updates too: said within seconds, not after the reconnect timeout.
    began = time.monotonic()
    with pytest.raises(NoWorkerError, match="the event stream from offset 0 has no answer"):
        async for _ in agent.events(0):
            pass
    assert time.monotonic() - began < 10 * CHECK
    # Started with its prompt (update-with-start): the conversation starts, the prompt waits.
    with pytest.raises(NoWorkerError, match="the conversation started"):
        await agents.start("nobody-home-2", AgentOptions(model=scripted_model()), prompt="hi there")

    worker = create_worker(
        temporal_client,
        task_queue=task_queue,
        sessions_dir=sessions,
        tools=[SLOW],
        stream_fn=ScriptedModel(_answer),
    )
    async with worker:
        # Nothing sent was lost: the worker takes up both prompts.
        idle = await agent.wait_for_idle(timeout=30, since=0)
        assert [m.text for m in idle.messages] == ["hello", "got 1 messages"]
        second = await agents.attach("nobody-home-2")
        idle = await second.wait_for_idle(timeout=30, since=0)
        assert [m.text for m in idle.messages] == ["hi there", "got 1 messages"]
        # A worker that is there but busy past the check is waited for: a run that takes 3 checks.
        idle = await agent.run("use the slow tool", timeout=30)
        assert idle.messages[-1].text == "got 5 messages"

    # A worker that has gone: none of its polls within WORKER_GONE_SECONDS.
    monkeypatch.setattr(client_calls, "WORKER_GONE_SECONDS", 2 * CHECK)
    await asyncio.sleep(3 * CHECK)
    with pytest.raises(NoWorkerError):
        await agent.steer("anyone?")
    await agent.terminate("test over")


async def test_the_cli_says_no_worker_runs_the_conversation(
    temporal_client: Client,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a line, as a refusal, not the server's untyped error. (At the default timings, 5 s confirmed
    20 s later, before a query's own 30 s timeout: the terminal chat's test runs those.)"""
    monkeypatch.setattr(client_calls, "WORKER_CHECK_SECONDS", CHECK)
    monkeypatch.setattr(client_calls, "WORKER_CONFIRM_SECONDS", 2 * CHECK)
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"
    agents = AgentClient(temporal_client, task_queue=task_queue, sessions_dir=tmp_path / "sessions")
    agent = await agents.start("cli-nobody-home", AgentOptions(model=scripted_model()))
    address = temporal_client.service_client.config.target_host
    began = time.monotonic()
    assert await cli.run(["--address", address, "--task-queue", task_queue, "state", "cli-nobody-home"]) == 1
    assert time.monotonic() - began < 10 * CHECK
    err = capsys.readouterr().err
    assert f"NO_WORKER: no worker polls task queue '{task_queue}'" in err, err
    assert "agentcore worker" in err and "Traceback" not in err
    await agent.terminate("test over")


async def test_recover_through_a_worker_with_none_running_says_so(
    temporal_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``recover`` without the sessions directory waits for a worker to place the file: with none
    running it says so, rather than waiting for the conversation to end (which it never does)."""
    monkeypatch.setattr(client_calls, "WORKER_CHECK_SECONDS", CHECK)
    monkeypatch.setattr(client_calls, "WORKER_CONFIRM_SECONDS", 2 * CHECK)
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer)) as h:
        original = await h.agents.start("to-recover", AgentOptions(model=scripted_model()))
        await original.run("hello", timeout=20)
        saved = h.session_path("to-recover")
    nobody = AgentClient(temporal_client, task_queue=f"tq-{uuid.uuid4().hex[:12]}", limits=FAST_LIMITS)
    began = time.monotonic()
    with pytest.raises(NoWorkerError, match="wait_for_idle"):
        await asyncio.wait_for(nobody.recover(saved, session_id="recovered-nobody"), 30)
    assert time.monotonic() - began < 10 * CHECK
    await (await nobody.attach("recovered-nobody")).terminate("test over")
