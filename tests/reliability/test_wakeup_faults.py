"""A wake-up whose worker was killed (SIGKILL, by pid) before it came due: it fires once, when a
worker is back, and the session file equals the workflow's state."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from .conftest import Rig, assert_no_answered_twice, assistant_messages


async def test_a_wakeup_due_while_its_worker_was_killed_fires_once(rig: Rig) -> None:
    first = await rig.spawn()
    agent = await rig.start("wakeup-killed")
    await agent.schedule_wakeup("Check the deploy.", after=timedelta(seconds=2))
    await agent.wait_for_idle(timeout=30)
    first.kill()
    await asyncio.sleep(4)  # due, with no worker alive (a query would find none to answer it)
    await rig.spawn()
    deadline = asyncio.get_running_loop().time() + 60
    while len((await agent.get_state()).messages) < 2:
        assert asyncio.get_running_loop().time() < deadline, "the wake-up did not fire"
        await asyncio.sleep(0.2)
    state = await rig.settle(agent)
    users = [m.text for m in state.messages if m.role == "user"]
    assert len(users) == 1 and users[0].startswith("[wake-up] Check the deploy.")
    assert len(assistant_messages(state.messages)) == 1
    assert_no_answered_twice(state.messages)
    fired = [event async for _, event in _events_to_idle(agent) if event.type == "wakeup_fired"]
    assert len(fired) == 1 and fired[0].late_seconds >= 1


async def _events_to_idle(agent):  # type: ignore[no-untyped-def]
    async for offset, event in agent.events(0):
        yield offset, event
        if event.type == "agent_end":
            return
