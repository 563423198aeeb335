"""``replay_slots``: a worker that bounds its full-history replays (``agentcore.temporal.slots``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import FixedSizeSlotSupplier, SlotReleaseContext, WorkerTuner

from agentcore import AgentOptions
from agentcore.temporal.slots import ReplayBoundedSlots
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import create_worker
from tests.support.durable import add_tool, collect_run, running_worker


@dataclass
class _Reserve:
    """What Core tells a slot supplier about a reservation (the fields the supplier reads)."""

    is_sticky: bool
    slot_type: str = "workflow"
    task_queue: str = "q"
    worker_identity: str = "w"
    worker_build_id: str = ""
    worker_deployment_version: None = None


async def test_shared_queue_tasks_wait_for_a_replay_slot_while_sticky_ones_do_not() -> None:
    slots = ReplayBoundedSlots(slots=4, shared_slots=2)
    first = await slots.reserve_slot(_Reserve(is_sticky=False))  # type: ignore[arg-type]
    await slots.reserve_slot(_Reserve(is_sticky=False))  # type: ignore[arg-type]
    third = asyncio.ensure_future(slots.reserve_slot(_Reserve(is_sticky=False)))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    assert not third.done()  # a third replay waits on the server, not here with a timeout running
    assert slots.try_reserve_slot(_Reserve(is_sticky=False)) is None  # type: ignore[arg-type]
    assert slots.try_reserve_slot(_Reserve(is_sticky=True)) is not None  # type: ignore[arg-type]
    slots.release_slot(SlotReleaseContext(slot_info=None, permit=first))
    await asyncio.wait_for(third, 2)
    assert slots.try_reserve_slot(_Reserve(is_sticky=True)) is not None
    assert slots.try_reserve_slot(_Reserve(is_sticky=True)) is None  # all four in use


async def test_a_worker_with_replay_slots_serves_conversations(
    temporal_client: Client, tmp_path: Path
) -> None:
    model = ScriptedModel([tool_calls([("add", {"a": 2, "b": 3})]), text("The sum is 5.")])
    async with running_worker(temporal_client, tmp_path, model, [add_tool()], replay_slots=2) as h:
        agent = await h.agents.start("replay-slots", AgentOptions(model=scripted_model(), tools=["add"]))
        await agent.prompt("add 2 and 3")
        events = await collect_run(agent)
        assert events[-1].type == "agent_end"
        assert (await agent.get_state()).messages[-1].content[0].text == "The sum is 5."  # type: ignore[union-attr]


def test_replay_slots_and_a_tuner_of_ones_own_are_refused_together(temporal_client: Client) -> None:
    tuner = WorkerTuner.create_composite(
        workflow_supplier=FixedSizeSlotSupplier(4),
        activity_supplier=FixedSizeSlotSupplier(4),
        local_activity_supplier=FixedSizeSlotSupplier(4),
        nexus_supplier=FixedSizeSlotSupplier(4),
    )
    with pytest.raises(ValueError, match="replay_slots"):
        create_worker(temporal_client, replay_slots=2, tuner=tuner)
