"""Network faults between a worker process and the server (a forwarder in between: ``netproxy``).

Each test ends with ``rig.settle``: the session file equals the workflow's state, no workflow task
failed, and the histories replay. The whole fault run is ``python -m tests.reliability.netfault``;
``test_fault_run_short`` is its reduced form.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from agentcore.client import AgentClient, DurableAgent

from . import netfault, netns
from .conftest import Rig, WorkerProc, assistant_messages, spawn_worker, wait_until
from .netproxy import Forwarder


class Follower:
    """A subscriber that follows the documented rule (``netfault.ShownText``)."""

    def __init__(self, agent: DurableAgent) -> None:
        self.agent = agent
        self.text = netfault.ShownText()
        self.finals: list[tuple[str, str]] = []  # (shown, final text) per assistant message
        self.runs_ended = 0
        self.task = asyncio.ensure_future(self._follow())

    @property
    def shown(self) -> str:
        return self.text.shown

    async def _follow(self) -> None:
        async for _offset, event in self.agent.events(0):
            ended = self.text.see(event)
            if ended is not None:
                self.finals.append(ended)
            elif event.type == "agent_end":
                self.runs_ended += 1

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def _worker_behind(rig: Rig, link: Forwarder, **flags: Any) -> WorkerProc:
    proc = spawn_worker(link.address, rig.task_queue, rig.sessions_dir, rig.log, rig.workdir, **flags)
    rig.workers.append(proc)
    return await proc.ready()


def _target(rig: Rig) -> tuple[str, int]:
    host, port = rig.address.rsplit(":", 1)
    return host, int(port)


async def test_a_cut_mid_stream_shows_the_answer_once(rig: Rig) -> None:
    """The link is cut while the answer streams, for longer than the heartbeat timeout: the model
    finishes and its answer is written, but the attempt's result does not reach the server, which
    runs the call again. The retry answers from what this worker already has (the model is not
    called again) and a subscriber ends with exactly the answer, not a partial followed by all of it."""
    async with Forwarder(("127.0.0.1", 0), _target(rig)) as link:
        await _worker_behind(rig, link, delay=0.1, chunks=20)
        agent = await rig.start("cut-stream")
        follower = Follower(agent)
        await agent.prompt("tell me a long story")
        await wait_until(lambda: len(follower.shown) > 0, 30, what="the first deltas")
        link.blackhole()
        await asyncio.sleep(4)  # the model ends (2 s); the server times the attempt out (1 s beats)
        link.restore()
        await wait_until(lambda: follower.runs_ended >= 1, 60, what="the turn to end")
        state = await rig.settle(agent)
        await follower.close()
    (reply,) = assistant_messages(state.messages)
    assert reply.stop_reason == "stop"
    assert follower.finals == [(reply.text, reply.text)]
    assert len(rig.log_lines("stream-start")) == 1, "the model was called again for an answer it gave"


async def test_a_lost_workflow_task_is_retried_within_seconds_of_the_link_returning(rig: Rig) -> None:
    """A workflow task the server handed to the worker during a cut never arrives (the connection it
    was sent on is gone when the link returns): the conversation's turn ends within seconds of the
    link's return, not after a 30 s task timeout."""
    async with Forwarder(("127.0.0.1", 0), _target(rig)) as link:
        await _worker_behind(rig, link)
        agent = await rig.start("lost-task")
        await agent.prompt("first")
        await agent.wait_for_idle(timeout=30)
        link.blackhole()
        prompting = asyncio.ensure_future(agent.prompt("second"))  # its workflow task goes out, held
        await asyncio.sleep(2)
        link.reset()  # the connections die with what they held
        link.restore()
        returned = time.monotonic()
        await asyncio.wait_for(prompting, 60)
        await agent.wait_for_idle(timeout=60)
        recovered = time.monotonic() - returned
        state = await rig.settle(agent)
    assert [m.text for m in assistant_messages(state.messages)][-1].startswith("reply to 'second'")
    assert recovered < 15, f"the turn ended {recovered:.1f} s after the link returned"


BLACKHOLE_SECONDS = 30.0


@pytest.mark.skipif(not netns.available(), reason="network namespaces need root and ip")
async def test_a_turn_cut_off_by_a_long_blackhole_ends_within_seconds_of_the_return(rig: Rig) -> None:
    """The worker (on the shipped defaults, in its own network namespace) is streaming an answer
    when its path to the server is blackholed for 30 s: every packet dropped both ways, nothing
    reset, as in a real outage. The turn ends within 10 s of the path's return. On a connection
    left to TCP (the SDK's 30 s keepalive) the worker's next retransmission came ~23 s after the
    return and the turn took more than a minute; the keepalive gives the dead connection up during
    the cut and a new one is made within a few seconds of the return, and the server (the dev
    server's keepalive) drops the worker's old task polls instead of handing them tasks."""
    rig.agents = AgentClient(rig.client, task_queue=rig.task_queue, sessions_dir=rig.sessions_dir)
    host, port = _target(rig)
    with netns.Topology() as topology:
        async with Forwarder((topology.host_ip, 0), (host, port)) as link:
            await _worker_behind(rig, link, wrap=topology.command, shipped_defaults=1, delay=0.1, chunks=20)
            agent = await rig.start("blackhole")
            follower = Follower(agent)
            await agent.prompt("first")
            await wait_until(lambda: follower.runs_ended >= 1, 30, what="the first turn")
            await agent.prompt("tell me a long story")
            await wait_until(lambda: len(follower.shown) > 0, 30, what="the first deltas")
            topology.blackhole()
            await asyncio.sleep(BLACKHOLE_SECONDS)
            topology.restore()
            returned = time.monotonic()
            await wait_until(lambda: follower.runs_ended >= 2, 90, what="the turn to end")
            recovered = time.monotonic() - returned
            state = await rig.settle(agent)
            await follower.close()
            rig.cleanup()  # the worker stops before its namespace goes
    reply = assistant_messages(state.messages)[-1]
    assert reply.text.startswith("reply to 'tell me a long story'") and reply.stop_reason == "stop"
    assert follower.finals[-1] == (reply.text, reply.text)
    assert recovered < 10, f"the turn ended {recovered:.1f} s after the path returned"


@pytest.mark.skipif(not netns.available(), reason="network namespaces need root and ip")
async def test_fault_run_short(tmp_path: Path) -> None:
    """The fault run, reduced: 4 conversations x 8 turns with subscribers, the worker in its own
    network namespace; the worker-server path blackholed for 3 s and 13 s, a model stream reset,
    a kill -9. Nothing lost or duplicated, every shown text equal to the final one, no model request
    for an answer already sent (nor for one only the killed worker had got), every turn in flight done well within the old 30 s task timeout
    of a link's return."""
    async with netfault.DevServer(tmp_path / "temporal", ui=False) as server:
        report = await netfault.run(
            server.client,
            server.address,
            tmp_path,
            conversations=4,
            turns=8,
            schedule=netfault.SCHEDULES["short"],
            use_netns=True,
        )
    figures = report.figures()
    assert figures["lost"] == 0 and figures["duplicated"] == 0, figures
    assert figures["shown_text_differs"] == 0, report.shown_wrong
    assert figures["resent_after_answer"] == 0 and figures["failed_workflow_tasks"] == 0, figures
    assert figures["resent_after_answer_of_killed_worker"] == 0, figures
    assert not report.problems, report.problems
    # The target is 10 s at the 99th percentile (docs/network-faults.md has the measured figures);
    # here, with a few turns on a shared machine, only the old 30 s waits are ruled out.
    for kind in ("blackhole", "model_reset"):
        assert figures["recovery_seconds"][kind]["max"] < 20, figures["recovery_seconds"]
