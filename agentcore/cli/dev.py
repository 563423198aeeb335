"""``agentcore dev`` and ``agentcore worker``: a Temporal server (embedded or not), a worker, the demo.

``dev`` is the whole system in one process: the Temporal dev server (SQLite under ``--data-dir``,
Web UI), a worker with the demo tools, the demo model (the loopback provider server playing the
sommelier) unless an API key is set, and a chat. Everything it runs is the production path: real
gRPC to a real server, real HTTP to the provider, the same workflow and activities as a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.client import Client

from ..client import AgentClient
from ..demo import demo_tools
from ..demo.script import DEMO_QUESTIONS, sommelier_responder
from ..model import Model
from ..testing.loopback import LoopbackServer
from ..tools import AgentTool
from .common import (
    DEMO_TOOL_NAMES,
    attach_or_start,
    choose_model,
    demo_model,
    needs_demo_server,
    progress,
)
from .parser import CliError

if TYPE_CHECKING:
    from ..mcp import MCPServerSpec
    from ..web import RunningWebServer


@contextlib.asynccontextmanager
async def demo_model_server(port: int, pacing: float) -> AsyncIterator[LoopbackServer]:
    try:
        server = await LoopbackServer(sommelier_responder(pacing=pacing), port=port).start()
    except OSError as err:
        raise OSError(
            f"cannot serve the demo model on 127.0.0.1:{port} ({err.strerror}); pass --demo-port"
        ) from None
    try:
        yield server
    finally:
        await server.stop()


@contextlib.contextmanager
def _codec_server(port: int) -> Iterator[str | None]:
    from ..temporal.codec import codec_from_env

    codec = codec_from_env()
    if codec is None:
        yield None
        return
    from ..temporal.codec_server import CodecServer

    server = CodecServer(codec, port=port).start()
    progress(f"payload encryption on; UI codec server at {server.url} (the UI is given its token)")
    try:
        yield server.endpoint
    finally:
        server.stop()


def _explicit_cluster(args: argparse.Namespace) -> str | None:
    """What names a cluster for ``dev`` to attach to, if anything does."""
    for value, source in (
        (args.address, "--address"),
        (os.environ.get("TEMPORAL_ADDRESS"), "TEMPORAL_ADDRESS"),
        (args.profile, "--profile"),
        (os.environ.get("TEMPORAL_PROFILE"), "TEMPORAL_PROFILE"),
        (args.config_file, "--config-file"),
        (args.api_key, "--api-key"),
    ):
        if value:
            return source
    return None


@contextlib.asynccontextmanager
async def _temporal_for_dev(
    args: argparse.Namespace, codec_url: str | None
) -> AsyncIterator[tuple[Client, str | None]]:
    """The client ``dev`` works through, and the Web UI's base URL: the cluster named explicitly
    (``--address`` or ``TEMPORAL_ADDRESS``, a profile, an API key), else an embedded dev server
    started (and stopped) here. Which of the two it did is said either way."""
    from ..temporal import DevServer
    from .common import connect_or_fail

    named_by = _explicit_cluster(args)
    if named_by is not None:
        client = await connect_or_fail(args)
        progress(
            f"attached to the Temporal server at {client.service_client.config.target_host} "
            f"({client.namespace}), named by {named_by}; no embedded server started"
        )
        yield client, None
        return
    data_dir = Path(args.data_dir)
    started = time.monotonic()
    progress(
        f"starting an embedded Temporal dev server (SQLite in {data_dir / 'temporal.db'}; "
        "--address or TEMPORAL_ADDRESS attaches to a running one instead) ..."
    )
    server = DevServer(
        data_dir,
        port=args.port or None,
        ui=not args.no_ui,
        ui_port=args.ui_port or None,
        codec_endpoint=codec_url,
        log_file=data_dir / "temporal.log",
    )
    try:
        await server.start()
    except RuntimeError as err:  # the SDK's "did not start within 5s" and the like
        raise CliError(
            f"the Temporal dev server did not start ({str(err).split(';')[0]}); "
            f"its log: {data_dir / 'temporal.log'}",
            exit_code=2,
        ) from None
    if server.replaced_pid is not None:
        progress(f"stopped a Temporal dev server an earlier run left running (pid {server.replaced_pid})")
    try:
        # The server puts its UI 1000 ports above its own unless told where.
        ui_port = args.ui_port or int(server.address.rsplit(":", 1)[1]) + 1000
        ui = "" if args.no_ui else f", Web UI http://localhost:{ui_port}"
        progress(f"Temporal at {server.address}{ui} ({time.monotonic() - started:.1f}s)")
        yield server.client, None if args.no_ui else f"http://localhost:{ui_port}"
    finally:
        progress("stopping the Temporal dev server ...")
        await server.stop()


def mcp_servers(args: argparse.Namespace) -> list[MCPServerSpec]:
    """The servers ``--mcp`` and ``--mcp-config`` name (a bad one is a usage error, exit 2)."""
    if not args.mcp and not args.mcp_config:
        return []
    try:
        from ..mcp import MCPConfigError, load_mcp_config, names_given_twice, parse_mcp_option
    except ImportError:
        raise CliError("--mcp needs the MCP SDK: pip install 'agentcore[mcp]'", exit_code=2) from None
    try:
        servers = [server for path in args.mcp_config for server in load_mcp_config(path)]
        servers += [parse_mcp_option(value) for value in args.mcp]
    except MCPConfigError as err:
        raise CliError(str(err), exit_code=2) from None
    twice = names_given_twice(servers)
    if twice:
        raise CliError(f"MCP server name(s) given twice: {', '.join(twice)}", exit_code=2)
    for server in servers:
        progress(f"MCP server {server.name!r}: {server.where()} (tools: mcp:{server.name})")
    return servers


async def run_dev(args: argparse.Namespace) -> int:
    from agentcore.worker import create_worker

    from .chat import ChatSession, ScriptedLines, line_source, pretty_output

    data_dir = Path(args.data_dir)
    sessions_dir = Path(args.sessions_dir) if args.sessions_dir else data_dir / "sessions"
    model = choose_model(args.model, args.base_url, args.demo_port)
    servers = mcp_servers(args)  # a bad --mcp fails before anything starts
    with _codec_server(args.codec_port) as codec_url:
        async with (
            _temporal_for_dev(args, codec_url) as (client, ui_url),
            contextlib.AsyncExitStack() as stack,
        ):
            if needs_demo_server(model):
                pacing = 0.0 if args.fast else 0.012
                loopback = await stack.enter_async_context(demo_model_server(args.demo_port, pacing))
                model = demo_model(loopback.port)
                progress(f"demo model: the scripted sommelier at {loopback.openai_base_url} (no API key)")
            else:
                progress(f"model: {model.provider}/{model.id}")
            worker = create_worker(
                client,
                task_queue=args.task_queue,
                tools=demo_tools(data_dir / "cellar.sqlite"),
                sessions_dir=sessions_dir,
                mcp_servers=servers,
            )
            await stack.enter_async_context(worker)
            progress(f"worker serving task queue {args.task_queue!r}; sessions in {sessions_dir}")
            agents = AgentClient(client, task_queue=args.task_queue, sessions_dir=sessions_dir)
            scripted = bool(args.demo_script or args.once)
            web_server = None
            if not (args.no_web or scripted):
                web_server = await stack.enter_async_context(_web_chat(args, agents, model, ui_url))
            if args.no_chat:
                progress("serving until Ctrl-C")
                await asyncio.Event().wait()
                return 0
            session_id = args.session or time.strftime("cellar-%Y%m%d-%H%M%S")
            extra_tools = [f"mcp:{server.name}" for server in servers]
            agent = await attach_or_start(agents, session_id, model, extra_tools)
            ui_link = f"  ({ui_url}/namespaces/{client.namespace}/workflows/{session_id})" if ui_url else ""
            progress(f"session {session_id}{ui_link}; /help for commands, Ctrl-C aborts a turn")
            if web_server is not None:
                progress(f"this conversation in the browser: {web_server.link(f'/c/{session_id}')}")
            pretty = pretty_output(args)
            if scripted:
                lines = ScriptedLines(args.once or DEMO_QUESTIONS, sys.stdout)
                await ChatSession(agent, lines, pretty=pretty).run()
                await agent.wait_for_idle(timeout=60)
            else:
                await ChatSession(agent, line_source(data_dir, pretty), pretty=pretty).run()
            progress(f"session file: {sessions_dir / (session_id + '.jsonl')}")
    return 0


@contextlib.asynccontextmanager
async def _web_chat(
    args: argparse.Namespace, agents: AgentClient, model: Model, temporal_ui_url: str | None
) -> AsyncIterator[RunningWebServer | None]:
    """The web chat beside the terminal one; a port in use costs only the web chat (with a warning)."""
    from .web import serving_web

    def resolve_model(spec: str) -> Model:
        # The demo model is the one this process serves, wherever its port ended up.
        return (
            model if spec == "demo" and needs_demo_server(model) else choose_model(spec, None, args.demo_port)
        )

    async with contextlib.AsyncExitStack() as stack:
        server: RunningWebServer | None = None
        try:
            server = await stack.enter_async_context(
                serving_web(args, agents, resolve_model, model, list(DEMO_TOOL_NAMES), temporal_ui_url)
            )
            progress(f"web chat at {server.link()}")
        except CliError as err:
            progress(f"no web chat: {err}")
        yield server


def load_tools(specs: Sequence[str]) -> list[AgentTool]:
    """``--tools MODULE:NAME``: each names a list of ``AgentTool`` (or one tool, or a function
    returning either), importable from the current directory (as ``uvicorn`` finds its app)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    tools: list[AgentTool] = []
    for spec in specs:
        module_name, _, attribute = spec.partition(":")
        if not module_name or not attribute:
            raise CliError(f"--tools takes MODULE:NAME, not {spec!r}", exit_code=2)
        try:
            value = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as err:
            raise CliError(f"--tools {spec}: {err}", exit_code=2) from None
        if callable(value) and not isinstance(value, AgentTool):
            value = value()
        found = [value] if isinstance(value, AgentTool) else list(value)
        if not all(isinstance(tool, AgentTool) for tool in found):
            raise CliError(f"--tools {spec}: not an AgentTool or a list of them", exit_code=2)
        tools.extend(found)
    return tools


async def run_worker(args: argparse.Namespace) -> int:
    """Serve until SIGTERM (or Ctrl-C): then stop polling, give in-flight activities
    ``--graceful-shutdown`` seconds to finish (what does not is cancelled and retried elsewhere),
    and exit 0."""
    from agentcore.worker import create_worker, tune_gc_for_worker

    from ..temporal.metrics import MetricsServer
    from .common import connect_or_fail

    servers = mcp_servers(args)  # a bad --mcp fails before anything connects
    metrics = (
        MetricsServer(args.metrics_port, host=args.metrics_host) if args.metrics_port is not None else None
    )
    client = await connect_or_fail(args, **({"runtime": metrics.runtime} if metrics else {}))
    data_dir = Path(args.data_dir)
    sessions_dir = Path(args.sessions_dir) if args.sessions_dir else data_dir / "sessions"
    tools = (
        load_tools(args.tools)
        if args.tools
        else demo_tools(os.environ.get("AGENTCORE_DEMO_DB", str(data_dir / "cellar.sqlite")))
    )
    worker = create_worker(
        client,
        task_queue=args.task_queue,
        tools=tools,
        sessions_dir=sessions_dir,
        metrics=metrics,
        mcp_servers=servers,
        graceful_shutdown_timeout=timedelta(seconds=args.graceful_shutdown),
        replay_slots=args.replay_slots,
    )
    tune_gc_for_worker()
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        # Replaces the CLI's cancel-on-SIGTERM: cancelling would drop the activities in flight.
        loop.add_signal_handler(signum, stopping.set)
    async with contextlib.AsyncExitStack() as stack:
        if args.demo_model:
            loopback = await stack.enter_async_context(demo_model_server(args.demo_port, 0.012))
            progress(f"demo model at {loopback.openai_base_url}")
        if metrics is not None:
            metrics.start()
            stack.callback(metrics.stop)
            progress(f"metrics on http://{args.metrics_host}:{metrics.port}/metrics")
        target = client.service_client.config.target_host
        progress(
            f"worker on {target} ({client.namespace}) serving {args.task_queue!r}; sessions in {sessions_dir}"
        )
        running = asyncio.create_task(worker.run())
        stop = asyncio.create_task(stopping.wait())
        try:
            await asyncio.wait({running, stop}, return_when=asyncio.FIRST_COMPLETED)
            if stop.done():
                progress(
                    f"stopping: no new tasks; in-flight activities have {args.graceful_shutdown:g}s to finish"
                )
                await worker.shutdown()
            await running
        finally:
            # Cancelled from outside (a caller running this command in its own event loop): the
            # worker stops with it instead of polling on, orphaned, and the signal handlers go.
            stop.cancel()
            if not running.done():
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
        progress("worker stopped")
    return 0


__all__ = ["DEMO_QUESTIONS", "load_tools", "run_dev", "run_worker"]
