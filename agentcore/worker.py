"""The agentcore worker: the conversation workflow, its activities, and your tools.

    agentcore worker     # the cluster the TEMPORAL_* variables / profile file / flags name
    python worker.py     # TEMPORAL_ADDRESS (or TEMPORAL_PROFILE) set: that cluster; unset: embedded dev server

Environment: the ``TEMPORAL_*`` connection variables (``agentcore.temporal.connect``), ``AGENTCORE_TASK_QUEUE`` (default
``agentcore``), ``AGENTCORE_SESSIONS_DIR`` (default ``.agentcore/sessions``), ``AGENTCORE_DATA_DIR``
(embedded server's SQLite file and the demo database; default ``.agentcore``), ``AGENTCORE_DEMO_DB``,
provider keys ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` (read at call time, never stored).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.worker import FixedSizeSlotSupplier, Worker, WorkerTuner

from agentcore.logs import setup_logging
from agentcore.plugin import (
    AgentcorePlugin,
    observability_interceptors,
    plugin_of,
    workflow_runner,
)
from agentcore.runtime import StreamFn
from agentcore.state import GetApiKey
from agentcore.temporal.devserver import DevServer
from agentcore.temporal.metrics import AgentMetrics, MetricsServer
from agentcore.temporal.slots import WORKFLOW_TASK_SLOTS, ReplayBoundedSlots
from agentcore.tools import AgentTool

if TYPE_CHECKING:
    from agentcore.mcp import MCPServerSpec, MCPToolset

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "AgentWorker",
    "AgentcorePlugin",
    "create_worker",
    "main",
    "observability_interceptors",
    "tune_gc_for_worker",
    "workflow_runner",
]

logger = logging.getLogger("agentcore.worker")

DEFAULT_TASK_QUEUE = "agentcore"
# ``gc.set_threshold`` for a worker process (``tune_gc_for_worker``); Python's default is (700, 10, 10).
GC_THRESHOLDS = (20_000, 20, 50)


def create_worker(
    client: Client,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    tools: Sequence[AgentTool] = (),
    sessions_dir: str | Path = ".agentcore/sessions",
    stream_fn: StreamFn | None = None,
    get_api_key: GetApiKey | None = None,
    payloads_dir: str | Path | None = None,
    metrics: MetricsServer | AgentMetrics | None = None,
    mcp_servers: Sequence[MCPServerSpec] = (),
    replay_slots: int | None = None,
    **worker_options: Any,
) -> AgentWorker:
    """A ``temporalio.worker.Worker`` (an ``AgentWorker``) serving conversations on ``task_queue``.

    ``AgentcorePlugin`` (``agentcore.plugin``) does the registering: the client's own
    plugin when it was connected with one (then the plugin holds the tools and the sessions
    directory, and the arguments here that it takes must be left out), or else one made from the
    arguments here, which mean what they mean there. This adds agentcore's tuning of the worker and
    a second worker for the remote activities (``AgentWorker``). ``worker_options`` go to ``Worker``
    as they are.

    ``tools`` is the registry the conversations' ``AgentOptions.tools`` name; ``stream_fn`` replaces
    the provider dispatch (tests, custom providers). Payloads of 256 KB and more (large tool results,
    say) are kept in ``payloads_dir`` (default ``<sessions_dir>/.payloads``), which every worker must
    share, and the history refers to them: see ``agentcore.temporal.payloads``. ``mcp_servers``
    (``agentcore.mcp``) add their tools, named ``mcp:SERVER`` or ``mcp:SERVER/TOOL``; the worker
    connects to them when it starts and lets them go when it stops.

    ``metrics`` counts the agent's runs, turns, calls, tokens and cost (``agentcore.temporal.metrics``);
    a ``MetricsServer`` also serves the SDK's metrics, for which ``client`` must have been connected
    with ``runtime=metrics.runtime``. With OpenTelemetry configured (``OTEL_*``), the worker traces
    workflows, activities, model calls and tool calls (``agentcore.temporal.tracing``).
    """
    plugin = plugin_of(client)
    if plugin is None:
        plugin = AgentcorePlugin(
            tools=tools,
            mcp_servers=mcp_servers,
            sessions_dir=sessions_dir,
            payloads_dir=payloads_dir,
            stream_fn=stream_fn,
            get_api_key=get_api_key,
            metrics=metrics,
        )
        config = client.config()
        config["plugins"] = [*config["plugins"], plugin]
        client = Client(**config)
    elif tools or mcp_servers or stream_fn or get_api_key or payloads_dir or metrics:
        raise ValueError(
            "the client carries an AgentcorePlugin: give tools, MCP servers, stream_fn, get_api_key, "
            "payloads_dir and metrics to the plugin, not to create_worker"
        )
    _tune(worker_options, replay_slots)
    worker = AgentWorker(client, task_queue=task_queue, **worker_options)
    worker.mcp = plugin.mcp
    return worker


def _tune(worker_options: dict[str, Any], replay_slots: int | None) -> None:
    """agentcore's defaults for the ``Worker`` options not given: slots, sticky queue, thread pool."""
    # Workflow tasks are CPU-bound Python: more of them at once than a few per core adds no
    # throughput, only makes each slower; after a worker crash the survivor replays many histories
    # at once, and with 100 in flight each overran the 10 s workflow task timeout, again and again.
    # ``replay_slots``: of those 16, at most that many for full-history replays (a network cut
    # evicts all of a worker's conversations at once, and 16 replays together overran the timeout
    # on a loaded machine).
    activity_slots = worker_options.pop("max_concurrent_activities", None) or 100  # the SDK's default
    if "tuner" not in worker_options and "max_concurrent_workflow_tasks" not in worker_options:
        worker_options["tuner"] = WorkerTuner.create_composite(
            workflow_supplier=(
                FixedSizeSlotSupplier(WORKFLOW_TASK_SLOTS)
                if replay_slots is None
                else ReplayBoundedSlots(WORKFLOW_TASK_SLOTS, replay_slots)
            ),
            activity_supplier=FixedSizeSlotSupplier(activity_slots),
            local_activity_supplier=_fixed_slots(worker_options.pop("max_concurrent_local_activities", None)),
            nexus_supplier=_fixed_slots(worker_options.pop("max_concurrent_nexus_tasks", None)),
        )
    elif replay_slots is not None:
        raise ValueError("replay_slots makes the worker's tuner: give it or a tuner, not both")
    elif "tuner" not in worker_options:
        worker_options["max_concurrent_activities"] = activity_slots
    # A dead worker's sticky queue holds its conversations' next tasks this long before any other
    # worker may take them (the SDK default is 10 s).
    worker_options.setdefault("sticky_queue_schedule_to_start_timeout", timedelta(seconds=3))
    # Sync tools run in threads (``asyncio.to_thread``); activities themselves are all async. (Threads
    # start as they are needed.)
    worker_options.setdefault(
        "activity_executor", concurrent.futures.ThreadPoolExecutor(max_workers=activity_slots)
    )


def _fixed_slots(count: int | None) -> FixedSizeSlotSupplier:
    return FixedSizeSlotSupplier(count or 100)  # the SDK's default


class AgentWorker(Worker):
    """A ``Worker`` that runs conversations and their activities, and knows its MCP toolset.

    One worker polls both: a model or tool call its workflow task schedules may come back with the
    task's completion (eager activity execution, where the server allows it) and run here at once,
    with no poll in between."""

    def __init__(self, client: Client, *, task_queue: str, **options: Any) -> None:
        self.mcp: MCPToolset | None = None
        super().__init__(client, task_queue=task_queue, **options)


def _demo_tools(data_dir: Path) -> list[AgentTool]:
    try:
        from agentcore.demo import demo_tools
    except ImportError:  # pragma: no cover - the demo ships with the package
        return []
    return list(demo_tools(os.environ.get("AGENTCORE_DEMO_DB", str(data_dir / "cellar.sqlite"))))


def tune_gc_for_worker() -> None:
    """Collect garbage less often in a process whose main job is running a worker (its entry points
    call this; ``create_worker`` leaves an embedding process's settings alone).

    A worker holds many long-lived objects (its conversations, their sandboxes), and Python's default
    thresholds make full collections scan them again and again: in a 100-conversation burst the
    collector took 0.66-0.74 s of the worker's 14.5-15.7 s of CPU, 0.20-0.21 s with this
    (bench/log/028-worker-gc.md). What is alive now (modules, the SDK) is frozen out of collections.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def main() -> None:
    setup_logging()
    data_dir = Path(os.environ.get("AGENTCORE_DATA_DIR", ".agentcore"))
    sessions_dir = os.environ.get("AGENTCORE_SESSIONS_DIR", str(data_dir / "sessions"))
    task_queue = os.environ.get("AGENTCORE_TASK_QUEUE", DEFAULT_TASK_QUEUE)
    server: DevServer | None = None
    if os.environ.get("TEMPORAL_ADDRESS") or os.environ.get("TEMPORAL_PROFILE"):
        from agentcore.temporal import connect

        client = await connect()
    else:
        server = await DevServer(data_dir, port=7233, ui_port=8233).start()
        client = server.client
        logger.info("embedded Temporal dev server on %s, Web UI http://localhost:8233", server.address)
    try:
        worker = create_worker(
            client, task_queue=task_queue, tools=_demo_tools(data_dir), sessions_dir=sessions_dir
        )
        tune_gc_for_worker()
        logger.info("worker serving task queue %r, sessions in %s", task_queue, sessions_dir)
        await worker.run()
    finally:
        if server is not None:
            await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
