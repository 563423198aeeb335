"""``AgentcorePlugin``: conversations in a worker and client built with the plain SDK.

Only public SDK API here: ``Client.connect(plugins=...)``, ``Worker(client, ...)``, ``Replayer``.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from agentcore import AgentOptions
from agentcore.client import AgentClient
from agentcore.temporal import AgentcorePlugin
from agentcore.temporal.codec import ENCODING, key_from_bytes
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import FAST_LIMITS, add_tool, collect_run
from tests.support.replay import recording_client


@activity.defn(name="plugin_test.greet")
async def greet(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn(name="PluginTestGreeting")
class GreetingWorkflow:
    """A team's own workflow, served by the same worker as the conversations."""

    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(greet, name, start_to_close_timeout=timedelta(seconds=10))


async def _connect(env: WorkflowEnvironment, plugin: AgentcorePlugin) -> Client:
    return recording_client(
        await Client.connect(env.client.service_client.config.target_host, plugins=[plugin])
    )


async def test_a_plain_worker_with_the_plugin_serves_its_own_workflow_and_a_conversation(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    model = ScriptedModel([tool_calls([("add", {"a": 2, "b": 3})]), text("The sum is 5.")])
    sessions_dir = tmp_path / "sessions"
    key = key_from_bytes(bytes(range(32)))
    plugin = AgentcorePlugin(tools=[add_tool()], sessions_dir=sessions_dir, encryption=key, stream_fn=model)
    client = await _connect(temporal_env, plugin)
    task_queue = f"tq-{uuid.uuid4().hex[:12]}"

    async with Worker(client, task_queue=task_queue, workflows=[GreetingWorkflow], activities=[greet]):
        greeting = await client.execute_workflow(
            GreetingWorkflow.run, "Ada", id=f"greet-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        assert greeting == "Hello, Ada!"

        agents = AgentClient(client, task_queue=task_queue, sessions_dir=sessions_dir, limits=FAST_LIMITS)
        agent = await agents.start("plugin-1", AgentOptions(model=scripted_model(), tools=["add"]))
        await agent.prompt("What is 2 + 3?")
        events = await collect_run(agent)
        await agent.wait_for_idle()
        state = await agent.get_state()

    assert [m.role for m in state.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert state.messages[2].text == "5.0" and state.messages[-1].text == "The sum is 5."
    assert [e.type for e in events][-1] == "agent_end"
    assert (sessions_dir / "plugin-1.jsonl").is_file()

    # The plugin's codec encrypted what the server stores: no prompt in clear in the history.
    history = await agent.handle.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    assert all(p.metadata["encoding"] == ENCODING for p in started.input.payloads)
    assert b"What is 2 + 3?" not in history.to_json().encode()

    # The same plugin configures a Replayer: the conversation replays with no other setup.
    await Replayer(workflows=[], plugins=[plugin]).replay_workflow(history)


async def test_a_client_with_the_plugin_decodes_what_its_workers_write(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    plugin = AgentcorePlugin(sessions_dir=tmp_path / "sessions", stream_fn=ScriptedModel([text("hi")]))
    client = await _connect(temporal_env, plugin)
    assert client.data_converter.payload_codec is None
    assert client.data_converter.external_storage is not None  # the large-payload store

    # A worker made from the client gets the conversation workflow and every activity once, even
    # when it names the workflow itself; the SDK's heartbeat throttle becomes agentcore's.
    from agentcore.workflows import ConversationWorkflow

    worker = Worker(client, task_queue="tq-config", workflows=[ConversationWorkflow])
    config = worker.config(active_config=True)
    assert list(config["workflows"]).count(ConversationWorkflow) == 1
    names = {getattr(fn, "__temporal_activity_definition").name for fn in config["activities"]}
    assert {"llm.stream", "tools.execute", "session.append"} <= names
    assert len(names) == len(config["activities"]) == len(plugin.conversation_activities)
    assert config["max_heartbeat_throttle_interval"] < timedelta(seconds=1)
