"""Traces of a real durable turn with a tool, exported over OTLP/HTTP by a traced client (``agentcore
chat``) and a traced worker (``agentcore worker``), received and decoded by a real receiver here."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor, ReplaySafeTracerProvider
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentcore.messages import ToolResultMessage
from agentcore.protocol import ConversationLimits
from agentcore.session import JsonlSessionStorage
from agentcore.state import AgentOptions
from agentcore.temporal.observe import AgentObserver
from agentcore.temporal.tracing import AgentTracingInterceptor
from agentcore.testing.loopback import (
    LoopbackServer,
    Protocol,
    Script,
    ScriptToolCall,
    ScriptUsage,
    last_turn,
)
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import add_tool, collect_run, running_worker
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.process import AgentcoreProcess, wait_until
from tests.support.replay import watch_task_queue

API_KEY = "sk-trace-secret-4242"
PROMPT = "What is six times seven? Please calculate."
ANSWER_PREFIX = "The calculator says"


def calculating_responder(request: Any, protocol: Protocol) -> Script:
    kind, text = last_turn(request, protocol)
    if kind == "tool":
        return Script(text=f"{ANSWER_PREFIX} {text}.", usage=ScriptUsage(input=100, cache_read=30))
    return Script(text="Let me compute.", tool_calls=[ScriptToolCall("calculator", {"expression": "6*7"})])


def ancestors(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> list[str]:
    names = []
    while span.parent_span_id and span.parent_span_id in by_id:
        span = by_id[span.parent_span_id]
        names.append(span.name)
    return names


async def test_one_trace_from_the_client_down_to_each_model_and_tool_call(
    temporal_client: Client, tmp_path: Path
) -> None:
    address = temporal_client.service_client.config.target_host
    session_id = f"traced-{uuid.uuid4().hex[:8]}"
    sessions_dir = tmp_path / "data" / "sessions"
    task_queue = f"trace-{uuid.uuid4().hex[:10]}"
    watch_task_queue(temporal_client, task_queue, temporal_client.data_converter)  # the CLI's start
    common = [
        "--address", address, "--task-queue", task_queue,
        "--data-dir", str(tmp_path / "data"), "--sessions-dir", str(sessions_dir),
    ]  # fmt: skip
    with OtlpReceiver() as receiver:
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
        async with LoopbackServer(calculating_responder) as model_server:
            model_url = urlsplit(model_server.openai_base_url)
            model_host, model_port = model_url.hostname, model_url.port
            worker = await AgentcoreProcess(
                [*common, "worker"],
                env={**otel, "OTEL_SERVICE_NAME": "test-worker", "OPENAI_API_KEY": API_KEY},
            ).start()
            try:
                await worker.wait_for_line(lambda line: "worker on" in line)
                chat = await AgentcoreProcess(
                    [
                        *common,
                        "chat",
                        session_id,
                        "--once",
                        PROMPT,
                        "--model",
                        "openai/gpt-trace",
                        "--base-url",
                        model_server.openai_base_url,
                    ],  # fmt: skip
                    env={**otel, "OTEL_SERVICE_NAME": "test-chat"},
                ).start()
                assert await chat.wait(90) == 0, chat.lines
                worker.signal()
                assert await worker.wait(60) == 0, worker.lines
            finally:
                await worker.stop()
        await wait_until(
            lambda: (
                len(receiver.named("chat ")) >= 2
                and receiver.named("execute_tool ")
                and receiver.named("StartWorkflow:")
            ),
            timeout=30,
            what="the spans of both processes",
        )
        spans = list(receiver.spans)

    by_id = {span.span_id: span for span in spans}
    [start] = [span for span in spans if span.name.startswith("StartWorkflow:")]
    assert start.service_name == "test-chat"
    calls = [span for span in spans if span.name == "chat gpt-trace"]
    chats = calls
    assert len(chats) == 2, [span.attributes for span in calls]
    [tool] = [span for span in spans if span.name == "execute_tool calculator"]

    # One trace: the client's StartWorkflow down to every model and tool call, across two processes.
    # Each call is one span, the activity's own (no zero-length StartActivity / RunActivity around it).
    assert {span.trace_id for span in [*calls, tool]} == {start.trace_id}
    for span in [*calls, tool]:
        assert span.service_name == "test-worker"
        assert ancestors(span, by_id) == [start.name]
        assert span.attributes["temporalWorkflowID"] == session_id
        assert span.attributes["temporalActivityID"]
    assert {span.kind for span in chats} == {3} and tool.kind == 1  # CLIENT, INTERNAL
    assert not [s.name for s in spans if s.name.startswith(("StartActivity:", "ValidateUpdate:"))]
    assert not [s.name for s in spans if s.name in ("RunActivity:llm.stream", "RunActivity:tools.execute")]
    # The workflow's own spans (Temporal's interceptor makes them when not replaying) are in it too.
    workflow_spans = [span for span in spans if span.name.startswith(("RunWorkflow:", "HandleUpdate:"))]
    assert {span.trace_id for span in workflow_spans if span.name.startswith("RunWorkflow:")} == {
        start.trace_id
    }

    # GenAI semantic conventions, and the session on every span.
    cached = {span.attributes["gen_ai.response.finish_reasons"][0]: span for span in chats}
    assert cached["stop"].attributes["gen_ai.usage.cache_read.input_tokens"] == 30
    assert cached["tool_calls"].attributes["gen_ai.usage.cache_read.input_tokens"] == 0
    assert sorted(tuple(span.attributes["gen_ai.response.finish_reasons"]) for span in chats) == [
        ("stop",),
        ("tool_calls",),
    ]
    for span in chats:
        attributes = span.attributes
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == "gpt-trace"
        assert attributes["gen_ai.usage.input_tokens"] == 100
        assert attributes["gen_ai.usage.output_tokens"] == 20
        assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 0
        assert attributes["gen_ai.response.id"] == "chatcmpl-loopback"
        assert (attributes["server.address"], attributes["server.port"]) == (model_host, model_port)
        assert attributes["agentcore.session.id"] == session_id
        assert attributes["gen_ai.conversation.id"] == session_id
    with JsonlSessionStorage.open(sessions_dir / f"{session_id}.jsonl") as storage:
        [result] = [m for m in storage.build_context().messages if isinstance(m, ToolResultMessage)]
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert tool.attributes["gen_ai.tool.call.id"] == result.tool_call_id
    assert tool.attributes["agentcore.session.id"] == session_id
    assert tool.status_code != 2  # not ERROR

    # The event stream's polls are Temporal's plumbing, not the conversation's: not traced.
    assert not [span.name for span in spans if "__temporal_" in span.name]
    assert [span.name for span in spans if span.name.startswith("HandleUpdate:prompt")]

    # No prompt, answer or tool text without AGENTCORE_OTEL_CAPTURE_CONTENT; never the API key.
    everything = repr([(span.name, span.attributes) for span in spans])
    for secret in (API_KEY, PROMPT, ANSWER_PREFIX, "6*7"):
        assert secret not in everything, secret


async def test_content_is_captured_only_when_switched_on(temporal_client: Client, tmp_path: Path) -> None:
    tracer, exporter = _recording_tracing()
    observer = AgentObserver(tracer=tracer, capture_content=True)
    model = ScriptedModel([tool_calls([("add", {"a": 20, "b": 22})]), text("It is 42.")])
    async with running_worker(
        temporal_client, tmp_path, model, tools=[add_tool()], interceptors=[observer]
    ) as harness:
        agent = await harness.agents.start("captured", AgentOptions(model=scripted_model(), tools=["add"]))
        await agent.prompt("add twenty and twenty-two")
        await collect_run(agent)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    answers = [
        span.attributes or {} for span in exporter.get_finished_spans() if span.name == "chat scripted"
    ]
    # The conventions' role/parts format; the second call's input is the whole conversation so far.
    inputs = [json.loads(attributes["gen_ai.input.messages"]) for attributes in answers]
    assert sorted(len(messages) for messages in inputs) == [1, 3]
    whole = max(inputs, key=len)
    assert [message["role"] for message in whole] == ["user", "assistant", "tool"]
    assert whole[0]["parts"] == [{"type": "text", "content": "add twenty and twenty-two"}]
    [call] = whole[1]["parts"]
    assert (call["type"], call["name"], call["arguments"]) == ("tool_call", "add", {"a": 20, "b": 22})
    assert whole[2]["parts"] == [{"type": "tool_call_response", "id": call["id"], "response": ["42.0"]}]
    outputs = [json.loads(attributes["gen_ai.output.messages"]) for attributes in answers]
    assert [
        {"role": "assistant", "parts": [{"type": "text", "content": "It is 42."}], "finish_reason": "stop"}
    ] in outputs
    tool = spans["execute_tool add"].attributes or {}
    assert tool["gen_ai.tool.call.arguments"] == '{"a":20,"b":22}'
    assert tool["gen_ai.tool.call.result"] == "42.0"


def _recording_tracing() -> tuple[Any, Any]:
    """A tracer of the test's own (the process-wide provider is left alone) and what it records."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


_RECORDED: Any = None


def _process_tracing() -> tuple[Any, Any]:
    """The process's replay-safe provider (Temporal's ``create_tracer_provider``, as the SDK's
    interceptor requires), recording in memory: installed once, as a process can only have one. A
    test reads the spans of its own trace (``_trace``)."""
    global _RECORDED
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider, create_tracer_provider

    if _RECORDED is None:
        assert not isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider)
        exporter = InMemorySpanExporter()
        provider = create_tracer_provider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _RECORDED = exporter
    assert isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider)
    return trace.get_tracer("test"), _RECORDED


def _trace(exporter: Any, app: Any) -> list[Any]:
    trace_id = app.get_span_context().trace_id
    return [span for span in exporter.get_finished_spans() if span.context.trace_id == trace_id]


def _traced_client(client: Client) -> Client:
    config = client.config()
    config["interceptors"] = [AgentTracingInterceptor()]
    return Client(**config)


async def test_a_conversation_stays_one_trace_across_continue_as_new(
    temporal_client: Client, tmp_path: Path
) -> None:
    tracer, exporter = _process_tracing()
    client = _traced_client(temporal_client)
    limits = ConversationLimits(continue_as_new_after_events=40, llm_heartbeat_seconds=2)
    model = ScriptedModel(lambda context: text("ok"))
    observer = AgentObserver(tracer=tracer)
    async with running_worker(client, tmp_path, model, limits=limits, interceptors=[observer]) as h:
        with tracer.start_as_current_span("app") as app:
            agent = await h.agents.start("traced-rolling", AgentOptions(model=scripted_model()))
        first_run = (await agent.handle.describe()).run_id
        for i in range(8):
            await agent.prompt(f"p{i}")
            await agent.wait_for_idle(timeout=20)
        assert (await agent.handle.describe()).run_id != first_run, "the workflow should have rolled over"
    spans = _trace(exporter, app)
    chats = [span for span in spans if span.name == "chat scripted"]
    assert len(chats) == 8
    # Every model call of every run is in the application's trace, right under its StartWorkflow.
    [start] = [span for span in spans if span.name.startswith("StartWorkflow:")]
    assert {span.context.trace_id for span in chats} == {app.get_span_context().trace_id}
    assert {span.parent.span_id for span in chats if span.parent} == {start.context.span_id}
    assert len({(span.attributes or {})["temporalRunID"] for span in chats}) >= 2
    assert all((span.attributes or {})["gen_ai.request.model"] == "scripted" for span in chats)


@workflow.defn(name="tests.PlainTraced")
class PlainTracedWorkflow:
    @workflow.run
    async def run(self) -> str:
        result: str = await workflow.execute_activity(
            "tests.echo", "hi", start_to_close_timeout=timedelta(seconds=10)
        )
        return result


@activity.defn(name="tests.echo")
async def echo(text: str) -> str:
    return text


async def test_other_workflows_keep_temporals_spans(temporal_client: Client, tmp_path: Path) -> None:
    tracer, exporter = _process_tracing()
    client = _traced_client(temporal_client)
    task_queue = f"plain-{uuid.uuid4().hex[:8]}"
    # Unsandboxed: the sandbox would import this whole test module again.
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[PlainTracedWorkflow],
        activities=[echo],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        with tracer.start_as_current_span("app") as app:
            result = await client.execute_workflow(
                PlainTracedWorkflow.run, id=f"plain-{uuid.uuid4().hex[:8]}", task_queue=task_queue
            )
    assert result == "hi"
    spans = {span.name: span for span in _trace(exporter, app)}
    assert "StartActivity:tests.echo" in spans and "RunActivity:tests.echo" in spans
    # The SDK's OpenTelemetryInterceptor: the workflow's span lasts as long as the run did (the older
    # TracingInterceptor ended it at once) and holds the activity's spans.
    run = spans["RunWorkflow:tests.PlainTraced"]
    activity_span = spans["RunActivity:tests.echo"]
    assert run.start_time < activity_span.start_time <= activity_span.end_time < run.end_time
    by_id = {span.context.span_id: span for span in spans.values()}
    parent = activity_span
    while parent.parent is not None and parent.parent.span_id in by_id and parent is not run:
        parent = by_id[parent.parent.span_id]
    assert parent is run


async def test_a_streamed_answer_is_a_few_spans_with_none_per_delta_batch(
    temporal_client: Client, tmp_path: Path
) -> None:
    tracer, exporter = _process_tracing()
    client = _traced_client(temporal_client)
    # 40 deltas over 2 s: the model call sends them to the workflow in several signal batches.
    model = ScriptedModel(lambda context: text("word " * 40), chunks=40, delay=0.05)
    async with running_worker(client, tmp_path, model, interceptors=[AgentObserver(tracer=tracer)]) as h:
        with tracer.start_as_current_span("app") as app:
            agent = await h.agents.start("streamed", AgentOptions(model=scripted_model()))
            await agent.prompt("talk for two seconds")
            events = await collect_run(agent)
            await agent.wait_for_idle(timeout=20)
    assert sum(1 for event in events if event.type == "message_update") >= 20  # it did stream
    spans = [span for span in _trace(exporter, app) if span.name != "app"]
    names = sorted(span.name for span in spans)
    # The run, its updates, and the one model call; nothing for each batch of deltas it sent.
    assert not [name for name in names if "activity_events" in name], names
    assert names.count("chat scripted") == 1
    assert len(spans) <= 8, names
    assert {span.context.trace_id for span in spans} == {app.get_span_context().trace_id}
    # Temporal's own interceptor made the client's and the workflow's spans, under the replay-safe
    # provider it requires.
    [interceptor] = client.config()["interceptors"]
    assert isinstance(interceptor.temporal, OpenTelemetryInterceptor)
    assert isinstance(trace.get_tracer_provider(), ReplaySafeTracerProvider)
    assert "StartWorkflow:agentcore.Conversation" in names and "HandleUpdate:prompt" in names


async def test_replaying_a_conversation_adds_no_spans(temporal_client: Client, tmp_path: Path) -> None:
    tracer, exporter = _process_tracing()
    client = _traced_client(temporal_client)
    model = ScriptedModel(lambda context: text("ok"))
    # No workflow cache: every workflow task replays the whole history so far, spans and all.
    async with running_worker(
        client, tmp_path, model, interceptors=[AgentObserver(tracer=tracer)], max_cached_workflows=0
    ) as h:
        with tracer.start_as_current_span("app") as app:
            agent = await h.agents.start("replayed", AgentOptions(model=scripted_model()))
            for i in range(3):
                await agent.prompt(f"p{i}")
                await agent.wait_for_idle(timeout=20)
            state = await agent.get_state()  # a query, answered through the tracing interceptors
    assert state.status == "idle" and len(state.messages) == 6
    names = [span.name for span in _trace(exporter, app)]
    assert names.count("HandleQuery:get_state") == 1, names
    assert names.count("RunWorkflow:agentcore.Conversation") == 1, names
    assert names.count("HandleUpdate:prompt") == 3, names
    assert names.count("chat scripted") == 3, names


def _configured_in_a_fresh_process(setup: str) -> dict[str, Any]:
    """``configure_tracing`` in a new interpreter (a process has one global tracer provider), with
    an OTLP endpoint set and ``setup`` run first; what it decided and installed."""
    script = f"""
import json, logging, os
os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
logging.basicConfig(level=logging.WARNING)
from opentelemetry import trace
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor, ReplaySafeTracerProvider
{setup}
from agentcore.temporal.tracing import configure_tracing, tracing_interceptor
before = trace.get_tracer_provider()
on = configure_tracing()
interceptor = tracing_interceptor()
provider = trace.get_tracer_provider()
print(json.dumps({{
    "on": on,
    "replay_safe": isinstance(provider, ReplaySafeTracerProvider),
    "kept": provider is before,
    "sdk_interceptor": isinstance(getattr(interceptor, "temporal", None), OpenTelemetryInterceptor),
}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def test_tracing_installs_temporals_replay_safe_provider_and_interceptor() -> None:
    made = _configured_in_a_fresh_process("")
    assert (made["on"], made["replay_safe"], made["kept"], made["sdk_interceptor"]) == (
        True,
        True,
        False,
        True,
    )
    # An application's own provider made with create_tracer_provider is kept as it is.
    own = _configured_in_a_fresh_process(
        "from temporalio.contrib.opentelemetry import create_tracer_provider\n"
        "trace.set_tracer_provider(create_tracer_provider())"
    )
    assert (own["on"], own["replay_safe"], own["kept"], own["sdk_interceptor"]) == (True, True, True, True)
    # A plain one would make the SDK's interceptor refuse every worker: tracing stays off, and says why.
    plain = _configured_in_a_fresh_process(
        "from opentelemetry.sdk.trace import TracerProvider\ntrace.set_tracer_provider(TracerProvider())"
    )
    assert (plain["on"], plain["sdk_interceptor"]) == (False, False)
    assert "create_tracer_provider" in plain["stderr"]


def test_a_client_with_the_sdks_opentelemetry_plugin_is_traced_once(
    temporal_env: WorkflowEnvironment,
) -> None:
    # A user who connects with Temporal's own OpenTelemetryPlugin (here with Temporal's spans on) gets
    # its spans once: agentcore adds no tracing interceptor of its own, on the client or its workers.
    address = temporal_env.client.service_client.config.target_host
    script = f"""
import asyncio, json, os, uuid
os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.opentelemetry import OpenTelemetryPlugin, create_tracer_provider
from agentcore.temporal import connect
from agentcore.plugin import observability_interceptors

exporter = InMemorySpanExporter()
provider = create_tracer_provider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

async def main():
    client = await connect({address!r}, plugins=[OpenTelemetryPlugin(add_temporal_spans=True)])
    handle = await client.start_workflow("tests.Nobody", id=f"otel-{{uuid.uuid4().hex[:8]}}", task_queue="nobody")
    await handle.terminate()
    plain = await Client.connect({address!r}, plugins=[OpenTelemetryPlugin()])
    print(json.dumps({{
        "starts": [s.name for s in exporter.get_finished_spans() if s.name.startswith("StartWorkflow:")],
        "client": [type(i).__name__ for i in client.config(active_config=True)["interceptors"]],
        "worker": [type(i).__name__ for i in observability_interceptors(plain, None)],
    }}), flush=True)

asyncio.run(main())
os._exit(0)  # Core's threads are not waited for at interpreter exit
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["starts"] == ["StartWorkflow:tests.Nobody"]
    assert result["client"] == ["OpenTelemetryInterceptor"]
    assert result["worker"] == ["AgentObserver"]
