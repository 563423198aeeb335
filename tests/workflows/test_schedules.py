"""Recurring messages through Temporal Schedules: made by the conversation, visible to Temporal (overlap
SKIP, a short catch-up window), delivered as runs, listed and deleted by the CLI, deleted on reset,
and deleted by their next action once the conversation was terminated."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, ScheduleOverlapPolicy
from temporalio.service import RPCError, RPCStatusCode

import agentcore.client.agent as durable_agent
from agentcore import AgentOptions
from agentcore.cli import run
from agentcore.errors import ScheduleNotFoundError, ValidationError
from agentcore.messages import UserMessage
from agentcore.runtime import LlmContext
from agentcore.testing.scripted import Reply, ScriptedModel, scripted_model, text
from tests.support.durable import eventually, running_worker


def echo_model() -> ScriptedModel:
    def reply(context: LlmContext) -> Reply:
        last = next(m for m in reversed(context.messages) if isinstance(m, UserMessage))
        return text(f"seen: {last.text.splitlines()[0]}")

    return ScriptedModel(reply)


async def schedule_exists(client: Client, schedule_id: str) -> bool:
    try:
        await client.get_schedule_handle(schedule_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


def notes(state: Any) -> list[str]:
    return [m.text for m in state.messages if m.role == "user"]


async def test_a_schedule_delivers_its_text_and_is_deleted(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, echo_model()) as h:
        agent = await h.agents.start("sched-1", AgentOptions(model=scripted_model()))
        with pytest.raises(ValidationError):
            await agent.schedule("no when")
        item = await agent.schedule("check the queue", every=timedelta(seconds=2))
        assert item.id.startswith("sched-1.schedule.")
        # A Temporal Schedule an operator sees (and can pause) in the Web UI.
        description = await temporal_client.get_schedule_handle(item.id).describe()
        assert description.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
        assert description.schedule.policy.catchup_window == timedelta(minutes=1)
        state = await eventually(agent.get_state, lambda s: len(notes(s)) >= 2, timeout=30)
        assert all(note.startswith("[scheduled message] check the queue") for note in notes(state))
        assert [s.id for s in await agent.list_schedules()] == [item.id]
        await agent.delete_schedule(item.id)
        assert not await schedule_exists(temporal_client, item.id)
        assert await agent.list_schedules() == []
        with pytest.raises(ScheduleNotFoundError):
            await agent.delete_schedule(item.id)


async def test_reset_deletes_the_schedules(temporal_client: Client, tmp_path: Path) -> None:
    async with running_worker(temporal_client, tmp_path, echo_model()) as h:
        agent = await h.agents.start("sched-reset", AgentOptions(model=scripted_model()))
        hourly = await agent.schedule("hourly", every="1h")
        daily = await agent.schedule("daily", cron="0 9 * * *")
        await agent.reset()
        assert await agent.list_schedules() == []
        assert not await schedule_exists(temporal_client, hourly.id)
        assert not await schedule_exists(temporal_client, daily.id)


async def test_a_terminated_conversations_schedule_deletes_itself(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, echo_model()) as h:
        agent = await h.agents.start("sched-gone", AgentOptions(model=scripted_model()))
        item = await agent.schedule("anyone there?", every=timedelta(seconds=1))
        await agent.handle.terminate("operator")
        gone = await eventually(
            lambda: schedule_exists(temporal_client, item.id), lambda exists: not exists, timeout=30
        )
        assert not gone


async def test_terminate_deletes_the_schedules_at_once(
    temporal_client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_worker(temporal_client, tmp_path, echo_model()) as h:
        agent = await h.agents.start("sched-end", AgentOptions(model=scripted_model()))
        item = await agent.schedule("hourly", every="1h")
        address = temporal_client.service_client.config.target_host
        base = ["--address", address, "--task-queue", h.task_queue, "--sessions-dir", str(h.sessions_dir)]
        assert await run([*base, "terminate", "sched-end", "--reason", "done with it"]) == 0
        assert not await schedule_exists(temporal_client, item.id)  # not an hour later
        description = await agent.handle.describe()
        assert description.status is not None and description.status.name == "TERMINATED"
        assert await run([*base, "terminate", "sched-end"]) == 3  # AGENT_NOT_FOUND: nothing runs


async def test_terminate_ends_a_conversation_no_worker_runs(
    temporal_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator terminates a conversation whose workers are gone: it cannot name its schedules,
    and is terminated all the same (its schedules go when they next fire)."""
    monkeypatch.setattr(durable_agent, "TERMINATE_ASK_SECONDS", 1.0)
    async with running_worker(temporal_client, tmp_path, echo_model()) as h:
        agent = await h.agents.start("sched-orphan", AgentOptions(model=scripted_model()))
        await agent.schedule("hourly", every="1h")
    await agent.terminate("its workers are gone")
    description = await agent.handle.describe()
    assert description.status is not None and description.status.name == "TERMINATED"


async def test_the_cli_makes_lists_and_deletes_schedules(
    temporal_client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_worker(temporal_client, tmp_path, echo_model()) as h:
        await h.agents.start("sched-cli", AgentOptions(model=scripted_model()))
        address = temporal_client.service_client.config.target_host
        base = ["--address", address, "--task-queue", h.task_queue, "--sessions-dir", str(h.sessions_dir)]
        assert await run([*base, "schedule", "sched-cli", "--every", "1h", "Summarise the day."]) == 0
        schedule_id = capsys.readouterr().out.strip()
        assert schedule_id.startswith("sched-cli.schedule.")
        assert await run([*base, "schedule", "sched-cli", "--list"]) == 0
        listed = capsys.readouterr().out
        assert schedule_id in listed and "every 1:00:00" in listed and "Summarise the day." in listed
        assert await run([*base, "schedule", "sched-cli", "--cron", "bad cron", "x"]) == 1
        assert await run([*base, "schedule", "sched-cli", "--delete", schedule_id]) == 0
        assert not await schedule_exists(temporal_client, schedule_id)
        assert await run([*base, "schedule", "sched-cli", "--delete", schedule_id]) == 1
        assert "SCHEDULE_NOT_FOUND" in capsys.readouterr().err
