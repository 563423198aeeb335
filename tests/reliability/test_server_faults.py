"""Faults 4, 5 and 10: a torn session-file append, the Temporal server killed and restarted on its
SQLite file, and the Temporal database lost entirely (recovery from the session file alone)."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from agentcore.messages import AssistantMessage, UserMessage
from agentcore.session import JsonlSessionStorage, MessageEntry, ModelChangeEntry
from agentcore.session.lines import TORN_MARKER
from agentcore.temporal import connect
from agentcore.testing.scripted import scripted_model

from .conftest import FAULT_LIMITS, Rig, ServerProc, file_messages, wait_until
from .test_signals_abort import user_texts
from .test_worker_faults import directive


@pytest.mark.parametrize(
    ("tear", "delay"),
    [('"hello"', 0.05), ('"assistant"', 0.05), ('"hello"', 0.0)],
    ids=["entries-batch", "assistant-result", "run-flush"],
)
async def test_kill_mid_append_torn_line_is_repaired(rig: Rig, tear: str, delay: float) -> None:
    """Fault 4: the worker dies halfway through one ``write`` of the session file: the prompt's
    entries or the model's answer, each written by the model activity (a call slow enough to be
    handed from its local attempt to a remote one), or a quick run's entries, written together once
    the run ends. The next writer closes the torn line off with a marker; readers skip exactly that
    line; no entry is lost or doubled."""
    torn = await rig.spawn(tear_append=tear, delay=delay, chunks=3)
    agent = await rig.start("torn")
    await agent.prompt("hello")
    await wait_until(lambda: torn.process.poll() is not None, 30, what="the worker to die mid-append")
    path = rig.session_path(agent)
    assert not path.read_bytes().endswith(b"\n"), "a torn tail is on disk"
    await rig.spawn()
    state = await rig.settle(agent)
    assert [m.role for m in state.messages] == ["user", "assistant"]
    raw = path.read_bytes()
    assert raw.count(TORN_MARKER) == 1 and raw.endswith(b"\n")
    with JsonlSessionStorage.open(path) as storage:
        assert any("torn" in warning for warning in storage.warnings)
        ids = [entry.id for entry in storage.get_entries()]
    assert len(ids) == len(set(ids))
    await agent.prompt("and again")  # the repaired file keeps taking appends
    state = await rig.settle(agent)
    assert user_texts(state.messages) == ["hello", "and again"]


async def test_server_killed_and_restarted_mid_conversation(server_proc: ServerProc, tmp_path: Path) -> None:
    """Fault 5: SIGKILL the dev server (SQLite persistence) while three conversations stream, with
    steering and follow-ups just sent; restart it on the same file: every conversation resumes and
    each signal is applied exactly once."""
    await server_proc.start()
    client = await connect(server_proc.address)
    rig = Rig(client, server_proc.address, tmp_path / "rig")
    try:
        await rig.spawn(delay=0.1, chunks=30)
        agents = [await rig.start(f"srv{i}") for i in range(3)]
        for agent in agents:
            await agent.prompt("before the crash", id="p")
        await rig.wait_log("stream-start", count=3)
        for agent in agents:
            await agent.steer("steered", id="s")
            await agent.follow_up("followed up", id="f")
        server_proc.kill()
        time.sleep(1)
        await server_proc.start()
        for agent in agents:
            state = await rig.settle(agent, timeout=90)
            assert user_texts(state.messages) == ["before the crash", "steered", "followed up"]
            assert state.messages[-1].role == "assistant" and state.messages[-1].stop_reason == "stop"
        await agents[0].prompt("after the restart")
        state = await rig.settle(agents[0])
        assert user_texts(state.messages)[-1] == "after the restart"
    finally:
        rig.cleanup()


async def test_a_subscriber_rides_out_a_server_restart(server_proc: ServerProc, tmp_path: Path) -> None:
    """``events()`` across a dev server SIGKILL and restart: the subscription reconnects by itself and
    goes on from the last offset it gave out, with nothing skipped or repeated."""
    import asyncio

    await server_proc.start()
    client = await connect(server_proc.address)
    rig = Rig(client, server_proc.address, tmp_path / "rig")
    try:
        await rig.spawn()
        agent = await rig.start("sub")
        received: list[tuple[int, str]] = []
        ends = asyncio.Event()

        async def watch() -> None:
            async for offset, event in agent.events(reconnect_timeout=timedelta(seconds=60)):
                received.append((offset, event.type))
                if event.type == "agent_end" and sum(t == "agent_end" for _, t in received) == 2:
                    ends.set()
                    return

        watcher = asyncio.create_task(watch())
        await agent.prompt("before the crash", id="p1")
        await rig.settle(agent)
        server_proc.kill()
        await asyncio.sleep(15)  # longer than the client retries one call: the poll fails meanwhile
        assert not watcher.done(), watcher
        await server_proc.start()
        await agent.prompt("after the restart", id="p2")
        await asyncio.wait_for(ends.wait(), 90)
        await watcher
        offsets = [offset for offset, _ in received]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), offsets
        assert [t for _, t in received].count("agent_start") == 2
    finally:
        rig.cleanup()


async def test_database_lost_recover_from_session_file(server_proc: ServerProc, tmp_path: Path) -> None:
    """Fault 10: the Temporal database is gone (server killed, file deleted). ``recover`` rebuilds
    the conversation from its JSONL file into a new workflow on a fresh server and it continues with
    the whole conversation as context."""
    await server_proc.start()
    rig = Rig(await connect(server_proc.address), server_proc.address, tmp_path / "rig")
    try:
        await rig.spawn()
        agent = await rig.start("lost-db", tools=["add"])
        await agent.prompt(directive(("add", {"a": 2, "b": 3})))
        await agent.wait_for_idle(timeout=30)
        await agent.prompt("second")
        before = (await rig.settle(agent)).messages
        path = rig.session_path(agent)
    finally:
        rig.cleanup()
    server_proc.kill()
    for leftover in server_proc.db.parent.glob(server_proc.db.name + "*"):
        leftover.unlink()
    await server_proc.start()
    fresh = Rig(await connect(server_proc.address), server_proc.address, tmp_path / "rig")
    try:
        await fresh.spawn()
        recovered = await fresh.agents.recover(path)
        assert recovered.session_id == agent.session_id
        await recovered.wait_for_idle(timeout=30)  # tools are described by the worker on start
        state = await recovered.get_state()
        assert state.messages == before and [t.name for t in state.tools] == ["add"]
        await recovered.prompt("after recovery")
        state = await fresh.settle(recovered)
        assert state.messages[: len(before)] == before
        assert [m.role for m in state.messages[len(before) :]] == ["user", "assistant"]
        # The model saw the whole conversation, not just the new prompt.
        assert int(fresh.log_lines("stream-start")[-1][1]) == len(before) + 1
    finally:
        fresh.cleanup()


async def test_recover_1000_messages_within_target(rig: Rig) -> None:
    """SPEC-11.1: recovering a 1,000-message conversation (start to answering queries) takes < 2 s."""
    rig.agents.limits = FAULT_LIMITS.model_copy(update={"max_messages": 5000})
    session_id = f"big-{uuid.uuid4().hex[:6]}"
    path = rig.sessions_dir / f"{session_id}.jsonl"
    now = int(time.time() * 1000)
    with JsonlSessionStorage.create(path, "/", {"system_prompt": "be brief"}) as storage:
        entries = [ModelChangeEntry(model=scripted_model())]
        for i in range(1000):
            message = (
                UserMessage(content=f"question {i} " + "x" * 200, timestamp=now)
                if i % 2 == 0
                else AssistantMessage(
                    content=[{"type": "text", "text": f"answer {i} " + "y" * 400}], timestamp=now
                )
            )
            entries.append(MessageEntry(message=message))
        storage.append_entries(entries)
    await rig.spawn()
    started = time.perf_counter()
    agent = await rig.agents.recover(path)
    await agent.wait_for_idle(timeout=30)
    state = await agent.get_state()
    elapsed = time.perf_counter() - started
    print(f"\nrecover(1,000 messages): {elapsed:.3f} s")
    assert state.message_count == 1000
    assert elapsed < 2.0, f"recovery took {elapsed:.2f} s (SPEC-11.1 target: 2 s)"
    await agent.prompt("one more")
    state = await rig.settle(agent)
    assert state.message_count == 1002
    assert len(file_messages(path)) == 1002
