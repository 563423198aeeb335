"""``wait_for_idle`` after a quick run: the entries the run left for later are written from inside the
workflow task that takes the request (no activity round trip through the server), and they are in
the session file the moment it returns. Asked with ``since``, it answers with the run's messages."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentcore import AgentOptions
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text
from tests.support.durable import collect_run, running_worker


def _answer(context: Any) -> Any:
    users = [m for m in context.messages if m.role == "user"]
    return text(f"answer {len(users)}")


def _file_messages(path: Path) -> list[str]:
    with JsonlSessionStorage.open(path) as storage:
        return [m.text for m in storage.build_context().messages]  # type: ignore[union-attr]


async def _appends_scheduled(client: Client, session_id: str) -> int:
    history = await client.get_workflow_handle(session_id).fetch_history()
    return sum(
        1
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name == "session.append"
    )


async def test_wait_for_idle_writes_a_quick_runs_answer_in_the_task_that_takes_it(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer)) as h:
        agent = await h.agents.start(f"quick-{uuid.uuid4().hex[:8]}", AgentOptions(model=scripted_model()))
        await agent.prompt("one")  # a conversation's first model call runs remotely
        await agent.wait_for_idle(timeout=20)
        appends = await _appends_scheduled(temporal_client, agent.session_id)
        offset = await agent.event_offset()
        await agent.prompt("two")  # quick like the one before: a local call, its answer not yet written
        await collect_run(agent, offset)  # the run ended
        await agent.wait_for_idle(timeout=20)
        # At that moment the answer is in the file (a reader of the file sees what the client saw).
        assert _file_messages(h.session_path(agent.session_id)) == ["one", "answer 1", "two", "answer 2"]
        assert (await agent.get_state()).messages[-1].text == "answer 2"  # type: ignore[union-attr]
        # Written inside a workflow task: no session.append activity went through the server.
        assert await _appends_scheduled(temporal_client, agent.session_id) == appends


async def test_wait_for_idle_since_an_index_returns_the_runs_messages(
    temporal_client: Client, tmp_path: Path
) -> None:
    """``prompt`` says where its run's messages begin; ``wait_for_idle(since=...)`` answers with them,
    the run's answer last, so a client reads the turn without ``get_state``."""
    async with running_worker(temporal_client, tmp_path, ScriptedModel(_answer)) as h:
        agent = await h.agents.start(f"since-{uuid.uuid4().hex[:8]}", AgentOptions(model=scripted_model()))
        await agent.prompt("one")
        assert (await agent.wait_for_idle(timeout=20)).messages == []  # not asked for
        accepted = await agent.prompt("two")
        idle = await agent.wait_for_idle(timeout=20, since=accepted.message_count)
        assert (idle.start, idle.message_count) == (2, 4)
        assert [m.text for m in idle.messages] == ["two", "answer 2"]  # type: ignore[union-attr]
        assert idle.messages == (await agent.get_messages(start=2)).messages
        # From index 0: the whole conversation.
        assert [m.text for m in (await agent.wait_for_idle(since=0)).messages] == [  # type: ignore[union-attr]
            "one",
            "answer 1",
            "two",
            "answer 2",
        ]
