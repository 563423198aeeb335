"""``AgentcorePlugin``: durable conversations in any Temporal client and worker.

    plugin = AgentcorePlugin(tools=[...], sessions_dir="/srv/sessions")
    client = await Client.connect("temporal:7233", plugins=[plugin])
    worker = Worker(client, task_queue="my-queue", workflows=[MyWorkflow], activities=[my_activity])

Given to ``Client.connect`` alone, the plugin sets the client's data converter (pydantic payloads,
the encryption codec, the large-payload store) and, since the SDK hands a client's plugins on to
every ``Worker`` made from it, registers on each of those workers the conversation workflow, its
activities, the sandbox pass-through the workflow needs, the agent's tracing and metrics, and the
heartbeat throttle that lets an abort reach a running call within a second. The worker's other
workflows and activities are untouched. ``agentcore.worker.create_worker`` is this plugin plus
agentcore's tuning of the worker.

Every process that uses the plugin must see the same ``sessions_dir`` (the session files and, below
it, the payload store): workers read and write them, and a client may store a large prompt there.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.plugin import SimplePlugin
from temporalio.worker import Interceptor, ReplayerConfig, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from .activities import LlmActivities, SessionActivities, SessionStore, ToolActivities
from .activities.compaction import BranchActivities, CompactionActivities
from .activities.schedules import create_schedule, delete_schedules
from .runtime import StreamFn
from .state import GetApiKey
from .temporal import tracing
from .temporal.codec import EncryptionCodec, codec_from_env, parse_key
from .temporal.connect import DATA_CONVERTER
from .temporal.metrics import AgentMetrics, MetricsServer
from .temporal.observe import AgentObserver
from .temporal.payloads import PAYLOADS_SUBDIR, with_payload_store
from .temporal.runner import ContextFreeSandboxedRunner, is_context_free
from .tools import AgentTool, ToolRegistry
from .workflows import ConversationWorkflow, ScheduledMessageWorkflow
from .workflows.policies import HEARTBEAT_THROTTLE
from .workflows.task_guard import TaskGuardInterceptor

if TYPE_CHECKING:
    from .mcp import MCPServerSpec, MCPToolset

__all__ = ["AgentcorePlugin", "PASSTHROUGH_MODULES", "conversation_activities", "workflow_runner"]

PLUGIN_NAME = "agentcore.AgentcorePlugin"

# agentcore is deterministic library code (no I/O at import, clock and ids injected): passed through
# the sandbox so its pydantic models are built once per process, not once per workflow run. The
# workflow package too: its modules hold no state, and executing them again for every run (the
# decorators inspect each handler) cost 23-26 ms of CPU per new run or replay, against 0.3 ms.
# Determinism is kept by the replay tests over recorded histories. OpenTelemetry's context is shared
# with the tracing interceptor outside the sandbox.
PASSTHROUGH_MODULES = ("agentcore", "orjson", "opentelemetry")

# The SDK's defaults for the heartbeat throttle (``Worker``): a worker left at them gets agentcore's.
_SDK_MAX_HEARTBEAT_THROTTLE = timedelta(seconds=60)
_SDK_DEFAULT_HEARTBEAT_THROTTLE = timedelta(seconds=30)


def conversation_activities(
    store: SessionStore,
    registry: ToolRegistry,
    *,
    stream_fn: StreamFn | None = None,
    get_api_key: GetApiKey | None = None,
) -> list[Callable[..., Any]]:
    """Every activity a conversation calls, bound to one session store and tool registry.

    The one list of them: the plugin registers it on each worker (and ``create_worker`` through it),
    so an activity added here is served by every agentcore worker."""
    llm = LlmActivities(store, registry, stream_fn=stream_fn, get_api_key=get_api_key)
    tool_activities = ToolActivities(registry)
    session = SessionActivities(store)
    compaction = CompactionActivities(store, stream_fn=stream_fn, get_api_key=get_api_key)
    return [
        llm.stream,
        tool_activities.execute,
        tool_activities.describe,
        session.append,
        session.import_session,
        compaction.compact,
        BranchActivities(compaction).branch,
        create_schedule,
        delete_schedules,
    ]


def workflow_runner(
    data_converter: DataConverter | None = None, runner: WorkflowRunner | None = None
) -> WorkflowRunner:
    """``runner`` (default: Temporal's sandbox) with the pass-through agentcore's workflow needs.

    Temporal's own sandbox runner becomes agentcore's ``ContextFreeSandboxedRunner`` when
    ``data_converter`` ignores serialization contexts (``agentcore.temporal.runner``); any other
    sandboxed runner keeps its class; an unsandboxed runner is returned as it is."""
    if runner is None:
        runner = SandboxedWorkflowRunner()
    if not isinstance(runner, SandboxedWorkflowRunner):
        return runner
    restrictions = runner.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES)
    if (
        type(runner) is SandboxedWorkflowRunner
        and data_converter is not None
        and is_context_free(data_converter)
    ):
        return ContextFreeSandboxedRunner(restrictions=restrictions, runner_class=runner.runner_class)
    return dataclasses.replace(runner, restrictions=restrictions)


def observability_interceptors(
    client: Client, metrics: MetricsServer | AgentMetrics | None
) -> list[Interceptor]:
    """Temporal's tracing interceptor (unless the client brings it) and the agent's span and metric
    recorder, as far as tracing and ``metrics`` are on."""
    if isinstance(metrics, MetricsServer):
        if client.service_client.config.runtime is not metrics.runtime:
            raise ValueError(
                "metrics=MetricsServer: connect the client with runtime=metrics.runtime, "
                "or the SDK's metrics go to another runtime"
            )
        metrics = metrics.agent
    interceptors: list[Interceptor] = []
    tracer = tracing.tracer()
    # The active config: the interceptors the client's plugins added are there (OpenTelemetryPlugin's).
    if tracer is not None and not tracing.has_tracing_interceptor(
        client.config(active_config=True)["interceptors"]
    ):
        interceptor = tracing.tracing_interceptor()
        if interceptor is not None:
            interceptors.append(interceptor)
    if tracer is not None or metrics is not None:
        interceptors.append(
            AgentObserver(metrics=metrics, tracer=tracer, capture_content=tracing.capture_content())
        )
    return interceptors


def _codec(encryption: PayloadCodec | str | bytes | None) -> PayloadCodec | None:
    if encryption is None or isinstance(encryption, PayloadCodec):
        return encryption
    if isinstance(encryption, bytes):
        return EncryptionCodec(encryption)
    return EncryptionCodec(parse_key(encryption))


class AgentcorePlugin(SimplePlugin):
    """Conversations (``ConversationWorkflow`` and its activities) for a Temporal client and its workers.

    ``tools`` are the tools conversations may name (``AgentOptions.tools``); ``mcp_servers``
    (``agentcore.mcp``) add theirs, connected while a worker runs. ``sessions_dir`` holds the session
    files, ``payloads_dir`` (default ``<sessions_dir>/.payloads``) the payloads of 256 KB and more
    (``agentcore.temporal.payloads``). ``encryption`` encrypts every payload (AES-256-GCM,
    ``agentcore.temporal.codec``): a ``PayloadCodec``, a base64 key, or 32 raw key bytes; None keeps
    the client's own codec, or else takes the key from ``AGENTCORE_ENCRYPTION_KEY`` when it is set.
    ``stream_fn`` replaces the provider dispatch (tests, custom providers); ``get_api_key`` supplies
    provider keys at call time; ``metrics`` counts runs, turns, calls, tokens and cost
    (``agentcore.temporal.metrics``).
    """

    def __init__(
        self,
        *,
        tools: Sequence[AgentTool] = (),
        mcp_servers: Sequence[MCPServerSpec] = (),
        sessions_dir: str | Path = ".agentcore/sessions",
        encryption: PayloadCodec | str | bytes | None = None,
        payloads_dir: str | Path | None = None,
        stream_fn: StreamFn | None = None,
        get_api_key: GetApiKey | None = None,
        metrics: MetricsServer | AgentMetrics | None = None,
    ) -> None:
        self.sessions_dir = Path(sessions_dir)
        self.payloads_dir = (
            Path(payloads_dir) if payloads_dir is not None else self.sessions_dir / PAYLOADS_SUBDIR
        )
        self.codec = _codec(encryption)
        self.metrics = metrics
        self.registry = ToolRegistry(list(tools))
        self.mcp: MCPToolset | None = None
        if mcp_servers:
            from .mcp import MCPToolset  # the optional extra: agentcore[mcp]

            self.mcp = MCPToolset(mcp_servers, self.registry)
        self.conversation_activities = conversation_activities(
            SessionStore(self.sessions_dir), self.registry, stream_fn=stream_fn, get_api_key=get_api_key
        )
        self._mcp_users = 0
        self._mcp_lock = asyncio.Lock()
        super().__init__(
            PLUGIN_NAME,
            data_converter=self.data_converter,
            workflows=self._with_workflow,
            activities=self._with_activities,
            run_context=self._serving_mcp,
        )

    def data_converter(self, existing: DataConverter | None = None) -> DataConverter:
        """``existing`` (a client's converter) made agentcore's: the pydantic payload converter,
        its codec (``encryption``, else the one it has, else ``AGENTCORE_ENCRYPTION_KEY``'s) and
        the payload store."""
        codec = self.codec
        if codec is None and existing is not None:
            codec = existing.payload_codec
        if codec is None:
            codec = codec_from_env()
        converter = dataclasses.replace(
            DATA_CONVERTER,
            payload_codec=codec,
            external_storage=existing.external_storage if existing is not None else None,
        )
        return with_payload_store(converter, self.payloads_dir)

    def _with_workflow(self, existing: Sequence[type] | None) -> list[type]:
        workflows = list(existing or ())
        ours = (ConversationWorkflow, ScheduledMessageWorkflow)
        return [*workflows, *(workflow for workflow in ours if workflow not in workflows)]

    def _with_activities(self, existing: Sequence[Callable[..., Any]] | None) -> list[Callable[..., Any]]:
        activities = list(existing or ())
        return [*activities, *(fn for fn in self.conversation_activities if fn not in activities)]

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        client = config["client"]  # always set by Worker
        config["workflow_runner"] = workflow_runner(client.data_converter, config.get("workflow_runner"))
        config["interceptors"] = [
            *config.get("interceptors", ()),
            *observability_interceptors(client, self.metrics),
            TaskGuardInterceptor(),  # a conversation's refused updates, for its task guard
        ]
        # An abort reaches a running model or tool call through its next heartbeat's answer: the
        # SDK's throttle (up to 30-60 s) would hold it that long. Left alone when the worker sets its own.
        if config.get("max_heartbeat_throttle_interval") == _SDK_MAX_HEARTBEAT_THROTTLE:
            config["max_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        if config.get("default_heartbeat_throttle_interval") == _SDK_DEFAULT_HEARTBEAT_THROTTLE:
            config["default_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        return config

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        config = super().configure_replayer(config)
        config["workflow_runner"] = workflow_runner(
            config.get("data_converter"), config.get("workflow_runner")
        )
        return config

    @asynccontextmanager
    async def _serving_mcp(self) -> AsyncIterator[None]:
        # MCP servers live while a worker with this plugin runs: connected (stdio ones started)
        # before it polls, so its first tool calls find their tools, and let go when the last stops.
        if self.mcp is None:
            yield
            return
        async with self._mcp_lock:
            if self._mcp_users == 0:
                await self.mcp.start()
            self._mcp_users += 1
        try:
            yield
        finally:
            async with self._mcp_lock:
                self._mcp_users -= 1
                if self._mcp_users == 0:
                    await self.mcp.stop()


def plugin_of(client: Client) -> AgentcorePlugin | None:
    """The ``AgentcorePlugin`` ``client`` was connected with, if any."""
    for plugin in client.config()["plugins"]:
        if isinstance(plugin, AgentcorePlugin):
            return plugin
    return None
