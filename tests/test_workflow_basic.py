from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from agentcore import AgentOptions
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.durable_support import add_tool, collect_run, running_worker


async def test_tool_turn_reaches_state_events_and_session_file(
    temporal_client: Client, tmp_path: Path
) -> None:
    model = ScriptedModel([tool_calls([("add", {"a": 2, "b": 3})]), text("The sum is 5.")])
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        agent = await h.agents.start(
            "s1", AgentOptions(model=scripted_model(), tools=["add"], system_prompt="Be brief.")
        )
        accepted = await agent.prompt("What is 2 + 3?")
        assert accepted.status == "accepted"
        events = await collect_run(agent)
        await agent.wait_for_idle()
        state = await agent.get_state()
        assert [m.role for m in state.messages] == ["user", "assistant", "toolResult", "assistant"]
        assert state.messages[-1].text == "The sum is 5."
        assert state.messages[2].text == "5.0"
        assert not state.is_streaming
        types = [e.type for e in events]
        assert types[0] == "agent_start" and types[-1] == "agent_end"
        assert "tool_execution_start" in types and "tool_execution_end" in types
        history = await agent.handle.fetch_history()
        scheduled = [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
        ]
        assert "tools.execute" not in scheduled, "a short retry-safe tool runs as a local activity"
        assert any(e.HasField("marker_recorded_event_attributes") for e in history.events)
        with JsonlSessionStorage.open(h.session_path("s1")) as storage:
            context = storage.build_context()
            assert [m.model_dump() for m in context.messages] == [m.model_dump() for m in state.messages]
            assert context.system_prompt == "Be brief."
            assert context.active_tools == ["add"]


async def test_search_attributes_make_conversations_findable(temporal_client: Client, tmp_path: Path) -> None:
    import asyncio

    model = ScriptedModel(lambda context: text("ok"))
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start("findable-1", AgentOptions(model=scripted_model("finder")))
        await agent.prompt("hi")
        await agent.wait_for_idle(timeout=20)
        found = []
        for _ in range(50):  # visibility is eventually consistent
            found = await h.agents.list('AgentModel = "scripted/finder" AND AgentStatus = "idle"')
            if found and found[0].message_count == 2:
                break
            await asyncio.sleep(0.1)
        assert [s.session_id for s in found] == ["findable-1"]
        assert found[0].message_count == 2 and found[0].agent_status == "idle"


async def test_get_state_shows_the_message_being_streamed(temporal_client: Client, tmp_path: Path) -> None:
    import asyncio

    model = ScriptedModel(
        lambda context: text("one two three four five six seven eight"), chunks=40, delay=0.05
    )
    async with running_worker(temporal_client, tmp_path, model) as h:
        agent = await h.agents.start("partial", AgentOptions(model=scripted_model()))
        await agent.prompt("count")
        partial_texts = []
        for _ in range(60):
            state = await agent.get_state()
            if state.streaming_message is not None and state.streaming_message.text:
                partial_texts.append(state.streaming_message.text)
            if not state.is_streaming and partial_texts:
                break
            await asyncio.sleep(0.05)
        await agent.wait_for_idle(timeout=20)
        final = (await agent.get_state()).messages[-1].text
        assert partial_texts, "a query mid-stream sees the partial text"
        assert all(final.startswith(p) for p in partial_texts)
        assert any(len(p) < len(final) for p in partial_texts)


async def test_a_watched_local_tool_turn_answers_each_poll_once(
    temporal_client: Client, tmp_path: Path
) -> None:
    """Events wait for a local tool to return: a subscriber gets the model's tool call and the tool's
    result in one poll answer (not one before the tool and one after), and misses nothing."""
    import asyncio

    from temporalio.api.enums.v1 import EventType

    def respond(context):  # type: ignore[no-untyped-def]
        if context.messages[-1].role == "user":
            return tool_calls([("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})])
        return text("done")

    turns = 4
    async with running_worker(temporal_client, tmp_path, ScriptedModel(respond), tools=[add_tool()]) as h:
        agent = await h.agents.start("held", AgentOptions(model=scripted_model(), tools=["add"]))
        offset = await agent.event_offset()
        history_before = len((await agent.handle.fetch_history()).events)
        for index in range(turns):
            watcher = asyncio.create_task(collect_run(agent, offset))
            await asyncio.sleep(0.2)  # the subscriber's poll is waiting when the prompt lands
            await agent.prompt(f"add {index}")
            events = await watcher
            types = [event.type for event in events]
            assert types.count("tool_execution_end") == 2 and types[-1] == "agent_end"
            offset = await agent.event_offset()
        history = (await agent.handle.fetch_history()).events[history_before:]
    # Per turn the workflow publishes when the prompt is accepted, when the first model call returns
    # (its tool calls run locally in that same workflow task) and when the second returns: at most
    # three answers. Answering before the local tools ran made a fourth in every turn.
    answered = [
        e
        for e in history
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
        and e.workflow_execution_update_completed_event_attributes.outcome.HasField("success")
    ]
    prompts = [
        e
        for e in history
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        and e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name == "prompt"
    ]
    assert len(prompts) == turns
    assert len(answered) - len(prompts) <= 3 * turns, f"{len(answered) - len(prompts)} poll answers"
