"""A bench worker in its own process (so its CPU time is measured apart from the server's).

    python -m bench.worker_proc ADDRESS TASK_QUEUE SESSIONS_DIR [--model loopback|scripted]
                                [--options JSON]                    # prints "READY <pid>"

``loopback``: the real OpenAI provider over HTTP (the model's ``base_url`` names the loopback
server); ``scripted``: ``ScriptedModel`` injected as ``stream_fn``, the same turn shapes without
HTTP or SSE, to separate provider cost. ``--options`` are ``Worker`` keyword arguments (seconds for
``*_interval`` / ``*_timeout``), plus ``"unsandboxed": true`` to measure the sandbox's cost,
``"workflow_threads": N`` for the threads that run workflow activations (default: one per slot), and
``"tool_timeout_seconds": SECONDS`` for the no-op tool (default 5),
``"gc_default": true`` to keep Python's garbage collection settings (``tune_gc_for_worker`` not called),
``"gc_thresholds": [a, b, c]`` to set them after that (``BENCH_GC_LOG=PATH`` logs full collections),
``"observe": true`` for traces (to the harness's ``bench.otlp_sink``, ``"otlp_endpoint"``) and
metrics (a ``MetricsServer`` on a loopback port), as ``agentcore worker --metrics-port`` runs with
``OTEL_EXPORTER_OTLP_ENDPOINT`` set; ``"traces"`` or ``"metrics"`` for one of them,
``"agent-metrics"`` for the agent's metrics without the SDK runtime's,
``"mcp_noop": true`` to serve the no-op tool from an MCP server over stdio (``bench.mcp_noop_server``,
same timeout) instead of an ``AgentTool``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from agentcore import AgentTool, AgentToolResult
from agentcore.runtime import LlmContext
from agentcore.temporal import connect
from agentcore.testing.scripted import Reply, ScriptedModel, text, tool_calls
from agentcore.worker import create_worker, tune_gc_for_worker


class NoopArgs(BaseModel):
    i: int = 0


async def _noop(tool_call_id: str, args: NoopArgs, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult.text("ok")


def noop_tool(timeout_seconds: float = 5.0) -> AgentTool:
    """The bench's tool (a ``tools.execute`` activity, as every tool call is), declared short (5 s);
    worker option ``tool_timeout_seconds`` changes that."""
    return AgentTool(
        name="noop",
        description="Do nothing.",
        parameters=NoopArgs,
        execute=_noop,
        timeout_seconds=timeout_seconds,
    )


NOOP = noop_tool()


def scripted_turn(context: LlmContext) -> Reply:
    """The loopback responder's turn shapes, for ``ScriptedModel`` (a function of the context)."""
    last = context.messages[-1]
    if last.role == "toolResult":
        return text("All done.")
    words = last.text.split() if last.role == "user" else []
    calls = int(words[1]) if len(words) > 1 and words[0] == "/tools" else 1
    if calls == 0:
        return text("Noted.")
    return tool_calls([("noop", {"i": i}) for i in range(calls)])


class _ForgetfulModel(ScriptedModel):
    """``ScriptedModel`` without its call recorder: a long bench must not grow the worker's memory."""

    def __call__(self, model: Any, context: LlmContext, options: Any) -> Any:
        self.calls.clear()
        self.options.clear()
        return super().__call__(model, context, options)


def _durations(options: dict[str, Any]) -> dict[str, Any]:
    from datetime import timedelta

    return {
        key: timedelta(seconds=value) if key.endswith(("_interval", "_timeout")) else value
        for key, value in options.items()
    }


def _log_collections(path: str) -> None:
    """Measurement: each full (generation 2) collection's time and what it freed, to ``path``."""
    import gc
    import time

    out = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life
    started = [0.0]

    def callback(phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            elapsed = (time.perf_counter() - started[0]) * 1000
            out.write(f"{time.time():.1f} gen2 {elapsed:.1f} ms collected {info['collected']}\n")

    gc.callbacks.append(callback)


async def main(args: argparse.Namespace) -> None:
    options = _durations(orjson.loads(args.options))
    metrics = None
    observe = options.pop("observe", None)
    otlp_endpoint = options.pop("otlp_endpoint", None)
    if otlp_endpoint:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_endpoint
        os.environ.setdefault("OTEL_SERVICE_NAME", "bench-worker")
    if observe in (True, "metrics"):
        from agentcore.temporal.metrics import MetricsServer

        metrics = options["metrics"] = MetricsServer(0, host="127.0.0.1").start()
    elif observe == "agent-metrics":
        # Measurement: the agent's metrics without the SDK runtime's Prometheus exporter.
        from agentcore.temporal.metrics import AgentMetrics

        options["metrics"] = AgentMetrics()
    client = await connect(args.address, **({"runtime": metrics.runtime} if metrics else {}))
    stream_fn = _ForgetfulModel(scripted_turn, chunks=1) if args.model == "scripted" else None
    if options.pop("unsandboxed", False):
        # Measurement only: what the workflow sandbox costs per turn (agentcore keeps it on).
        from temporalio.worker import UnsandboxedWorkflowRunner

        options["workflow_runner"] = UnsandboxedWorkflowRunner()
    threads = options.pop("workflow_threads", None)
    if threads is not None:
        # Measurement: how many threads run workflow activations (the SDK: one per task slot).
        import concurrent.futures

        options["workflow_task_executor"] = concurrent.futures.ThreadPoolExecutor(max_workers=int(threads))
    gc_default = options.pop("gc_default", False)
    gc_thresholds = options.pop("gc_thresholds", None)
    tool = noop_tool(float(options.pop("tool_timeout_seconds", os.environ.get("BENCH_TOOL_TIMEOUT", 5))))
    if options.pop("mcp_noop", False):
        from agentcore.mcp import MCPServerStdio

        root = str(Path(__file__).resolve().parent.parent)
        noop_server = MCPServerStdio(
            "bench",
            sys.executable,
            ["-m", "bench.mcp_noop_server"],
            cwd=root,
            timeout_seconds=tool.timeout_seconds,
        )
        options["mcp_servers"] = [noop_server]
    worker = create_worker(
        client,
        task_queue=args.task_queue,
        tools=[] if "mcp_servers" in options else [tool],
        sessions_dir=args.sessions_dir,
        stream_fn=stream_fn,
        **options,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if not gc_default:
        tune_gc_for_worker()  # as the worker's entry points do
    if gc_thresholds is not None:
        import gc

        gc.set_threshold(*gc_thresholds)
    gc_log = os.environ.get("BENCH_GC_LOG")
    if gc_log:
        _log_collections(gc_log)
    async with worker:
        print(f"READY {os.getpid()}", flush=True)
        await stop.wait()
    if otlp_endpoint:
        from agentcore.temporal.tracing import flush_tracing

        flush_tracing()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("task_queue")
    parser.add_argument("sessions_dir")
    parser.add_argument("--model", choices=["loopback", "scripted"], default="loopback")
    parser.add_argument("--options", default="{}")
    asyncio.run(main(parser.parse_args()))
