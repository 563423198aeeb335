"""The durable bench stack: embedded dev server, loopback model process, worker process, clients.

The server is started exactly as ``agentcore.temporal.DevServer`` starts it (SQLite file, UI on); the
worker and the loopback model run in processes of their own, so CPU time splits into worker and
server (read from /proc). The driver (this process) is the clients: updates, signals, subscribers.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import orjson
from temporalio.client import Client

from agentcore import AgentOptions
from agentcore.client import AgentClient, DurableAgent
from agentcore.protocol import Accepted, ConversationLimits
from agentcore.temporal import DevServer
from agentcore.testing.scripted import scripted_model

from ._procs import Child, children, cpu_seconds, rss_bytes, spawn

T = TypeVar("T")

# The bench drives conversations far faster than SPEC-9.1's per-conversation rate limits allow a
# user to; they are raised so the figures measure the runtime, not the limiter.
BENCH_LIMITS = ConversationLimits(max_messages=1_000_000, max_messages_per_minute=1_000_000)


def pct(samples: list[float], p: float) -> float:
    if not samples:
        return float("nan")
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[int(p) - 1]


@dataclass
class CpuMark:
    worker: float
    server: float
    wall: float
    # This process: the clients (updates, signals, subscribers) and, for in-process runs, the agent.
    clients: float = 0.0
    # The loopback model server's process (0 with the scripted model): not agentcore's cost, but it
    # shares the machine's two cores with everything else.
    model: float = 0.0


@dataclass
class Stack:
    server: DevServer
    server_pid: int
    worker: Child
    loopback: Child | None
    agents: AgentClient
    model_kind: str
    workdir: Path
    task_queue: str
    stamps_file: Path

    @property
    def sessions_dir(self) -> Path:
        return self.workdir / "sessions"

    def model(self) -> Any:
        if self.loopback is None:
            return scripted_model()
        from agentcore.model import Model

        port = int(self.loopback.info)
        return Model(
            id="loopback-gpt",
            provider="openai",
            api="openai-completions",
            base_url=f"http://127.0.0.1:{port}/v1",
        )

    async def start_agent(
        self, name: str | None = None, prompt: str | None = None, limits: ConversationLimits | None = None
    ) -> DurableAgent:
        """A new conversation; with ``prompt``, started with that prompt's run (one call)."""
        agent = await self.agents.start(
            name or f"b-{uuid.uuid4().hex[:10]}",
            AgentOptions(model=self.model(), tools=["noop"], system_prompt="Be brief."),
            prompt=prompt,
            limits=limits,
        )
        return agent

    def cpu(self) -> CpuMark:
        return CpuMark(
            cpu_seconds(self.worker.pid),
            cpu_seconds(self.server_pid),
            time.perf_counter(),
            time.process_time(),
            cpu_seconds(self.loopback.pid) if self.loopback is not None else 0.0,
        )

    def worker_rss(self) -> int:
        return rss_bytes(self.worker.pid)

    def server_rss(self) -> int:
        return rss_bytes(self.server_pid)


def _traced(client: Client, otlp_endpoint: str) -> Client:
    from agentcore.temporal.tracing import configure_tracing, tracing_interceptor

    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_endpoint
    os.environ.setdefault("OTEL_SERVICE_NAME", "bench-client")
    configure_tracing()
    config = client.config()
    config["interceptors"] = [*config["interceptors"], tracing_interceptor()]
    return Client(**config)


@asynccontextmanager
async def stack(
    *, model: str = "loopback", worker_options: dict[str, Any] | None = None, keep: bool = False
) -> AsyncIterator[Stack]:
    workdir = Path(tempfile.mkdtemp(prefix="agentcore-bench-"))
    extra = os.environ.get("BENCH_SERVER_ARGS", "").split()
    server = await DevServer(
        workdir / "temporal", ui=True, extra_args=extra, log_file=workdir / "server.log"
    ).start()
    loopback: Child | None = None
    worker: Child | None = None
    sink: Child | None = None
    client = server.client
    try:
        observe = (worker_options or {}).get("observe")
        if observe in (True, "traces"):
            # Traced (and measured, unless "traces"): the worker exports its spans to a sink in a
            # process of its own, and the bench's client is traced too, so the workflow's spans are
            # made as under a traced application.
            sink = await spawn("bench.otlp_sink")
            endpoint = f"http://127.0.0.1:{sink.info}"
            worker_options = {**(worker_options or {}), "otlp_endpoint": endpoint}
            client = _traced(client, endpoint)
        pids = children(os.getpid(), "temporal")
        assert len(pids) == 1, f"expected one temporal server child, found {pids}"
        stamps_file = workdir / "stamps.jsonl"
        if model == "loopback":
            loopback = await spawn("bench.loopback_proc", "--stamps", str(stamps_file))
        task_queue = f"bench-{uuid.uuid4().hex[:8]}"
        worker = await spawn(
            "bench.worker_proc",
            server.address,
            task_queue,
            str(workdir / "sessions"),
            "--model",
            model,
            "--options",
            orjson.dumps(worker_options or {}).decode(),
        )
        agents = AgentClient(
            client, task_queue=task_queue, sessions_dir=workdir / "sessions", limits=BENCH_LIMITS
        )
        yield Stack(server, pids[0], worker, loopback, agents, model, workdir, task_queue, stamps_file)
    finally:
        if worker is not None:
            await worker.stop()
        if loopback is not None:
            await loopback.stop()
        if sink is not None:
            from agentcore.temporal.tracing import flush_tracing

            flush_tracing()  # the client's spans, before their receiver goes
            await sink.stop()
        await server.stop()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


class TurnClock:
    """One subscriber per conversation; ``turn()`` = prompt sent -> ``agent_end`` received."""

    def __init__(
        self, agent: DurableAgent, *, subscribe: bool = True, since: bool = False, run: bool = False
    ) -> None:
        self.agent = agent
        # Without a subscriber a turn is read as a client without one reads it: ``wait_for_idle``,
        # then the answer from ``get_state`` (no streaming traffic); with ``since``, the answer from
        # ``wait_for_idle(since=...)`` itself (no query); with ``run``, from ``run`` (one update).
        self.subscribe = subscribe and not since and not run
        self.since = since
        self.run = run
        self.queue: asyncio.Queue[tuple[str, float, Any]] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        # Without a subscriber: when each ``wait_for_idle`` returned (wall clock, as the server's
        # history times are), to set against the run's end in the history.
        self.idle_at: list[float] = []

    async def start(self) -> TurnClock:
        if not self.subscribe:
            return self
        offset = await self.agent.event_offset()

        async def pump() -> None:
            cooldown = os.environ.get("BENCH_POLL_COOLDOWN_MS")
            options = {} if cooldown is None else {"poll_cooldown": timedelta(milliseconds=float(cooldown))}
            async for _, event in self.agent.events(offset, **options):
                self.queue.put_nowait((event.type, time.perf_counter(), event))

        self.task = asyncio.create_task(pump())
        return self

    async def turn(self, text: str, *, timeout: float = 60) -> float:
        """Seconds from sending the prompt until its ``agent_end`` reaches the subscriber (without
        one, until the call that waits for the run's end returns)."""
        started = time.perf_counter()
        if self.run:
            idle = await self._unless_busy(lambda: self.agent.run(text, timeout=timeout))
            self.idle_at.append(time.time())
            last = idle.messages[-1]
        else:
            accepted = await self.prompt(text)
            if self.subscribe:
                while True:
                    kind, at, event = await asyncio.wait_for(self.queue.get(), timeout)
                    if kind == "agent_end":
                        return at - started
            idle = await self.agent.wait_for_idle(
                timeout, since=accepted.message_count if self.since else None
            )
            self.idle_at.append(time.time())
            last = idle.messages[-1] if self.since else (await self.agent.get_state()).messages[-1]
        if last.role != "assistant":
            raise RuntimeError("the run ended without the answer")
        return time.perf_counter() - started

    async def prompt(self, text: str) -> Accepted:
        """Send ``text`` without waiting for its run (the caller reads the subscriber's ``queue``)."""
        return await self._unless_busy(lambda: self.agent.prompt(text))

    async def _unless_busy(self, send: Callable[[], Awaitable[T]]) -> T:
        """``send()``, again while the conversation is still busy with the run before: its
        ``agent_end`` is published a moment before the run's bookkeeping ends."""
        from agentcore.errors import AgentBusyError

        for _ in range(200):
            try:
                return await send()
            except AgentBusyError:
                await asyncio.sleep(0.002)
        raise RuntimeError("agent stayed busy")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass
