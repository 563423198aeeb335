"""Fixtures of the reliability stage: real worker processes (killed by pid), a killable dev server,
and the checks every fault test ends with (session file == workflow state, no failed workflow task,
the history replays)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from agentcore import AgentOptions
from agentcore.client import AgentClient, DurableAgent
from agentcore.messages import AssistantMessage, Message
from agentcore.protocol import ConversationLimits, DurableState
from agentcore.search_attributes import SEARCH_ATTRIBUTES
from agentcore.session import JsonlSessionStorage
from agentcore.temporal import connect, dynamic_config_args, find_temporal_binary
from agentcore.temporal.payloads import PAYLOADS_SUBDIR, with_payload_store
from agentcore.testing.scripted import scripted_model
from tests.support import replay
from tests.support.durable import eventually
from tests.support.replay import recording_client

ROOT = Path(__file__).resolve().parents[2]
HISTORIES = ROOT / "tests" / "histories"
# Heartbeats of 1 s: a killed or stalled worker's activity is retried elsewhere within ~2 s.
FAULT_LIMITS = ConversationLimits(llm_heartbeat_seconds=1, tool_heartbeat_seconds=1, llm_max_attempts=8)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_until(predicate: Any, timeout: float = 30, interval: float = 0.05, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(interval)


# ------------------------------------------------------------------------------------ worker processes


@dataclass
class WorkerProc:
    """One ``worker_proc.py`` process; every signal goes to its own pid."""

    process: subprocess.Popen[bytes]
    ready_file: Path
    output: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    async def ready(self, timeout: float = 30) -> WorkerProc:
        def polling() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"worker {self.pid} exited: {self.output.read_text()[-2000:]}")
            return self.ready_file.exists()

        await wait_until(polling, timeout, what=f"worker {self.pid} to poll")
        return self

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def cont(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def terminate(self) -> None:
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def spawn_worker(
    address: str,
    task_queue: str,
    sessions_dir: Path,
    log: Path,
    workdir: Path,
    wrap: Callable[[list[str]], list[str]] | None = None,
    **flags: Any,
) -> WorkerProc:
    name = uuid.uuid4().hex[:8]
    ready = workdir / f"worker-{name}.ready"
    output = workdir / f"worker-{name}.out"
    argv = [
        sys.executable,
        "-m",
        "tests.reliability.worker_proc",
        f"--address={address}",
        f"--task-queue={task_queue}",
        f"--sessions={sessions_dir}",
        f"--log={log}",
        f"--ready={ready}",
    ]
    argv += [f"--{key.replace('_', '-')}={value}" for key, value in flags.items()]
    if wrap is not None:  # e.g. run inside a network namespace (``netns.Topology.command``)
        argv = wrap(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(output, "wb") as out:
        process = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    return WorkerProc(process, ready, output)


# --------------------------------------------------------------------------------------- the rig


@dataclass
class Rig:
    """One test's world: a task queue, a sessions dir, an execution log, its worker processes."""

    client: Client
    address: str
    workdir: Path
    limits: ConversationLimits = field(default_factory=lambda: FAULT_LIMITS)
    task_queue: str = field(default_factory=lambda: f"rel-{uuid.uuid4().hex[:10]}")
    workers: list[WorkerProc] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sessions_dir = self.workdir / "sessions"
        self.sessions_dir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / "executions.log"
        self.log.touch()
        # Every history this rig's conversations make replays at the end of the test (or, on a
        # killable server, before it stops): tests/support/replay.py.
        self.client = recording_client(self.client)
        replay.watch_task_queue(
            self.client,
            self.task_queue,
            with_payload_store(self.client.data_converter, self.sessions_dir / PAYLOADS_SUBDIR),
        )
        self.agents = AgentClient(
            self.client, task_queue=self.task_queue, sessions_dir=self.sessions_dir, limits=self.limits
        )

    async def spawn(self, *, wait: bool = True, **flags: Any) -> WorkerProc:
        proc = spawn_worker(self.address, self.task_queue, self.sessions_dir, self.log, self.workdir, **flags)
        self.workers.append(proc)
        return await proc.ready() if wait else proc

    async def start(self, session_id: str, tools: list[str] | None = None, **fields: Any) -> DurableAgent:
        options = AgentOptions(model=fields.pop("model", scripted_model()), tools=tools or [], **fields)
        return await self.agents.start(f"{session_id}-{uuid.uuid4().hex[:6]}", options)

    def log_lines(self, event: str, key: str | None = None) -> list[list[str]]:
        lines = [line.split() for line in self.log.read_text().splitlines() if line]
        return [line for line in lines if line[0] == event and (key is None or line[1] == key)]

    async def wait_log(self, event: str, key: str | None = None, count: int = 1, timeout: float = 30) -> None:
        await wait_until(lambda: len(self.log_lines(event, key)) >= count, timeout, what=f"{event} {key}")

    def session_path(self, agent: DurableAgent) -> Path:
        return self.sessions_dir / f"{agent.session_id}.jsonl"

    async def settle(self, agent: DurableAgent, timeout: float = 60) -> DurableState:
        """Wait for idle, then prove the session file equals the workflow's state, that no workflow
        task failed, and that every run's history replays against the current code."""
        await agent.wait_for_idle(timeout=timeout)
        state = await agent.get_state()
        assert_file_matches_state(self.session_path(agent), state)
        await assert_histories_sound(self.client, agent.session_id)
        return state

    def cleanup(self) -> None:
        for proc in self.workers:
            proc.terminate()


def file_messages(path: Path) -> list[Message]:
    with JsonlSessionStorage.open(path) as storage:
        assert not [w for w in storage.warnings if "torn" not in w], storage.warnings
        return storage.build_context().messages


def assert_file_matches_state(path: Path, state: DurableState) -> None:
    messages = file_messages(path)
    assert len(messages) == state.message_count
    held = messages[state.first_message_index :]
    assert len(held) == len(state.messages)
    for index, (on_disk, in_workflow) in enumerate(zip(held, state.messages, strict=True)):
        assert on_disk == in_workflow, f"message {index + state.first_message_index} differs"
    ids = [m.tool_call_id for m in messages if m.role == "toolResult"]
    assert len(ids) == len(set(ids)), f"a tool result is recorded twice: {ids}"


def assistant_messages(messages: list[Message]) -> list[AssistantMessage]:
    return [m for m in messages if isinstance(m, AssistantMessage)]


def assert_no_answered_twice(messages: list[Message]) -> None:
    """Each user message is followed by one run: never two assistant messages in a row."""
    for before, after in zip(messages, messages[1:], strict=False):
        assert not (before.role == "assistant" and after.role == "assistant" and not before.tool_calls), (
            f"two assistant messages in a row: {before} / {after}"
        )


async def run_histories(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    # Visibility is eventually consistent: wait until it lists the newest run (the handle knows it).
    newest = (await client.get_workflow_handle(workflow_id).describe()).run_id

    async def read() -> list[str]:
        return [e.run_id async for e in client.list_workflows(f'WorkflowId = "{workflow_id}"')]

    run_ids = await eventually(read, lambda run_ids: newest in run_ids)
    if newest not in run_ids:
        run_ids.append(newest)
    return [
        await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history() for run_id in run_ids
    ]


async def assert_histories_sound(client: Client, workflow_id: str) -> None:
    for history in await run_histories(client, workflow_id):
        failed = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
        assert not failed, f"workflow task failed: {failed[0].workflow_task_failed_event_attributes}"
        await replay.replayer().replay_workflow(history)
        if os.environ.get("AGENTCORE_RECORD_HISTORIES"):
            # Keep this fault scenario's history for tests/workflows/test_replay.py (fault 12):
            # AGENTCORE_RECORD_HISTORIES=1 pytest tests/reliability --run-reliability -k <scenario>
            test = os.environ.get("PYTEST_CURRENT_TEST", "scenario").split("::")[-1].split(" ")[0]
            name = test.removeprefix("test_").replace("_", "-")[:40]
            (HISTORIES / f"fault-{name}-{history.run_id[-8:]}.json").write_text(history.to_json())


async def history_problems(
    client: Client, workflow_id: str, *, children: bool = True, keep: Path | None = None
) -> list[str]:
    """What ``assert_histories_sound`` checks, collected instead of raised at the first: every failed
    workflow task (with its failure's message) and every run that does not replay, of every run of
    ``workflow_id`` and (``children``) of every child workflow those runs started (sub-agents).
    ``keep``: a directory to write each history with a problem to (``<workflow id>-<run>.json``)."""
    problems: list[str] = []
    check = replay.replayer()
    for history in await run_histories(client, workflow_id):
        run = f"{workflow_id} run {history.run_id[-8:]}"
        found = len(problems)
        child_ids: list[str] = []
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                failed = event.workflow_task_failed_event_attributes
                problems.append(
                    f"{run}: WorkflowTaskFailed (event {event.event_id}, cause {failed.cause}): "
                    f"{failed.failure.message[:300]}"
                )
            elif event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
                started = event.child_workflow_execution_started_event_attributes
                child_ids.append(started.workflow_execution.workflow_id)
        try:
            await check.replay_workflow(history)
        except Exception as err:
            problems.append(f"{run}: does not replay: {type(err).__name__}: {str(err)[:300]}")
        if keep is not None and len(problems) > found:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{workflow_id}-{history.run_id[-8:]}.json").write_text(history.to_json())
        if children:
            for child_id in child_ids:
                problems += await history_problems(client, child_id, keep=keep)
    return problems


@pytest.fixture
async def rig(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Rig]:
    client = temporal_env.client
    rig = Rig(client, client.service_client.config.target_host, tmp_path)
    try:
        yield rig
    finally:
        rig.cleanup()


# ------------------------------------------------------------------------------ a killable server


class ServerProc:
    """``temporal server start-dev`` on a SQLite file, as a child process we can SIGKILL and restart."""

    def __init__(self, workdir: Path) -> None:
        self.db = workdir / "temporal.db"
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.output = workdir / "server.out"
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> ServerProc:
        argv = [
            find_temporal_binary(),
            "server",
            "start-dev",
            "--db-filename",
            str(self.db),
            "--port",
            str(self.port),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--headless",
            "--log-level",
            "error",
            *dynamic_config_args(),
        ]
        for name, kind in SEARCH_ATTRIBUTES.items():
            argv += ["--search-attribute", f"{name}={kind}"]
        with open(self.output, "ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        await wait_until(self._accepting, 60, interval=0.2, what="the dev server")
        return self

    async def _accepting(self) -> bool:
        try:
            client = await connect(self.address)
            await client.count_workflows()
            return True
        except Exception:
            return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
async def server_proc(tmp_path: Path) -> AsyncIterator[ServerProc]:
    server = ServerProc(tmp_path)
    try:
        yield server
    finally:
        try:
            if server.process is not None and server.process.poll() is None:
                await replay.check_now()  # while the histories are still there
        finally:
            server.stop()
