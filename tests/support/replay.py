"""Every durable test replays the workflow histories it made: a nondeterminism regression fails the day
it is written, in whichever test first exercises it.

How: the clients tests use (``conftest.temporal_client``, the reliability ``Rig``'s) carry
``RecordStarts``, a client interceptor that notes the workflow id and run id of every workflow started
through them (``start_workflow``, signal-with-start, update-with-start); the workers tests run note their
task queue (``watch_worker``), and whatever else reached that queue (a conversation the CLI started,
say) is found through visibility. At the end of the test (``conftest.replay_check``) each noted run's
history is fetched, with the runs it continued as new into and the child workflows it started, and all
the conversations among them replay in one ``Replayer`` (``replayer()``). A test that makes histories
no worker could replay on purpose opts out with ``@pytest.mark.no_replay_check("why")``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowInput,
    StartWorkflowUpdateWithStartInput,
    WorkflowHandle,
    WorkflowHistory,
    WorkflowUpdateHandle,
)
from temporalio.converter import DataConverter
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer, Worker

from agentcore.protocol import WORKFLOW_NAME
from agentcore.temporal import DATA_CONVERTER
from agentcore.worker import workflow_runner
from agentcore.workflows import ConversationWorkflow

# The workflow types ``replayer()`` knows; other histories (a test's own toy workflow) are not replayed.
REPLAYABLE = frozenset({WORKFLOW_NAME})
# At most this many history fetches at once.
FETCHES = 16
# A test's replays that take longer than this fail it, named, rather than run into the test's timeout.
REPLAY_TIMEOUT = 60


def replayer(data_converter: DataConverter = DATA_CONVERTER) -> Replayer:
    """A ``Replayer`` for conversations, as the worker runs them (``data_converter``: the worker's)."""
    return Replayer(
        workflows=[ConversationWorkflow],
        data_converter=data_converter,
        workflow_runner=workflow_runner(data_converter),
    )


_DEFAULT_REPLAYER = replayer()


# ----------------------------------------------------------------------------------- recording


@dataclass(frozen=True)
class _Root:
    client: Client  # to fetch its history with
    workflow_id: str
    run_id: str | None  # None: not known (a start whose call did not return); its first run
    task_queue: str | None


@dataclass
class Registry:
    """What one test started: workflows, and the task queues its workers served."""

    enabled: bool = True  # False: the test opted out (``no_replay_check``)
    roots: list[_Root] = field(default_factory=list)
    # task queue -> (a client of its server, the converter its workers use)
    queues: dict[str, tuple[Client, DataConverter]] = field(default_factory=dict)
    # What ``check`` did: histories replayed, seconds it took, histories it could not fetch (why).
    replayed: int = 0
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """For the test report (``conftest.pytest_terminal_summary`` adds them up)."""
        return {"replayed": self.replayed, "seconds": self.seconds, "skipped": list(self.skipped)}


_current: Registry | None = None


@contextlib.contextmanager
def recording(enabled: bool = True) -> Iterator[Registry]:
    """Starts and workers from here on are noted in the registry this yields."""
    global _current
    registry = _current = Registry(enabled)
    try:
        yield registry
    finally:
        _current = None


class RecordStarts(Interceptor):
    """Notes every workflow started through the client (see ``recording_client``)."""

    def __init__(self) -> None:
        self.client: Client | None = None

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _RecordingOutbound(self, next)

    def note(self, workflow_id: str, run_id: str | None, task_queue: str | None) -> None:
        if _current is not None and self.client is not None:
            _current.roots.append(_Root(self.client, workflow_id, run_id or None, task_queue))


class _RecordingOutbound(OutboundInterceptor):
    def __init__(self, recorder: RecordStarts, next: OutboundInterceptor) -> None:
        super().__init__(next)
        self.recorder = recorder

    async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle[Any, Any]:
        try:
            handle = await self.next.start_workflow(input)
        except WorkflowAlreadyStartedError:
            raise  # nothing started
        except BaseException:
            self.recorder.note(input.id, None, input.task_queue)  # it may have started all the same
            raise
        self.recorder.note(input.id, handle.result_run_id or handle.first_execution_run_id, input.task_queue)
        return handle

    async def start_update_with_start_workflow(
        self, input: StartWorkflowUpdateWithStartInput
    ) -> WorkflowUpdateHandle[Any]:
        start = input.start_workflow_input
        try:
            handle = await self.next.start_update_with_start_workflow(input)
        except WorkflowAlreadyStartedError:
            raise
        except BaseException:
            # E.g. the update's call given up on (``NoWorkerError``) after the workflow started.
            self.recorder.note(start.id, None, start.task_queue)
            raise
        self.recorder.note(start.id, handle.workflow_run_id, start.task_queue)
        return handle


def recording_client(client: Client) -> Client:
    """``client`` (its config, plugins and interceptors) with the starts it makes noted for the replay
    check."""
    config = client.config()
    recorder = RecordStarts()
    interceptors = [i for i in config["interceptors"] if not isinstance(i, RecordStarts)]
    recorded = Client(**{**config, "interceptors": [*interceptors, recorder]})
    recorder.client = recorded
    return recorded


def watch_task_queue(client: Client, task_queue: str, data_converter: DataConverter) -> None:
    """Replay, too, the conversations on ``task_queue`` that clients without ``RecordStarts`` started
    (the CLI's, a subprocess's), with ``data_converter`` (its workers')."""
    if _current is not None:
        _current.queues[task_queue] = (client, data_converter)


def watch_worker(worker: Worker) -> None:
    """``watch_task_queue`` for ``worker``'s queue, with its data converter (codec, payload store)."""
    watch_task_queue(worker.client, worker.task_queue, worker.client.data_converter)


# ------------------------------------------------------------------------------------ checking


@dataclass(frozen=True)
class _Run:
    client: Client
    workflow_id: str
    run_id: str
    converter: DataConverter


async def check(registry: Registry) -> None:
    """Replay every history of the workflows noted in ``registry`` so far (and forget them); an
    ``AssertionError`` names each that does not replay. A history that cannot be fetched (its server
    or namespace gone) is not replayed: ``registry.skipped`` says which and why."""
    if not registry.enabled or (not registry.roots and not registry.queues):
        return
    began = time.monotonic()
    histories = await _histories(registry)
    registry.roots, registry.queues = [], {}
    failures: list[str] = []
    by_converter: dict[int, tuple[DataConverter, list[tuple[_Run, WorkflowHistory]]]] = {}
    for run, history in histories:
        by_converter.setdefault(id(run.converter), (run.converter, []))[1].append((run, history))
    for converter, group in by_converter.values():
        check_with = _DEFAULT_REPLAYER if converter is DATA_CONVERTER else replayer(converter)
        names = {history.run_id: f"{run.workflow_id} (run {run.run_id})" for run, history in group}
        try:
            results = await asyncio.wait_for(
                check_with.replay_workflows(
                    _iterate([history for _, history in group]), raise_on_replay_failure=False
                ),
                REPLAY_TIMEOUT,
            )
        except TimeoutError:
            failures.append(f"the Replayer did not finish in {REPLAY_TIMEOUT} s: {', '.join(names.values())}")
            continue
        for run_id, err in results.replay_failures.items():
            failures.append(f"{names.get(run_id, run_id)}: {type(err).__name__}: {err}")
    registry.replayed += len(histories)
    registry.seconds += time.monotonic() - began
    if failures:
        raise AssertionError(
            f"{len(failures)} of {len(histories)} workflow histories this test made do not replay:\n"
            + "\n".join(failures)
        )


async def check_now() -> None:
    """``check`` what the current test has made so far, now: before the server it ran on goes away
    (the reliability stage's killable server). What it makes from here on is checked at its end."""
    if _current is not None:
        await check(_current)


async def _iterate(histories: list[WorkflowHistory]) -> AsyncIterator[WorkflowHistory]:
    for history in histories:
        yield history


async def _histories(registry: Registry) -> list[tuple[_Run, WorkflowHistory]]:
    """Each run's history once: the roots, the runs they continued as new into, their children."""
    limit = asyncio.Semaphore(FETCHES)
    seen: set[str] = set()
    found: list[tuple[_Run, WorkflowHistory]] = []
    pending: set[asyncio.Task[None]] = set()

    def converter_for(client: Client, task_queue: str | None) -> DataConverter:
        if task_queue is not None and task_queue in registry.queues:
            return registry.queues[task_queue][1]
        return client.data_converter

    def follow(run: _Run) -> None:
        if run.run_id in seen:
            return
        seen.add(run.run_id)
        task = asyncio.create_task(fetch(run))
        pending.add(task)
        task.add_done_callback(pending.discard)

    async def fetch(run: _Run) -> None:
        try:
            async with limit:
                handle = run.client.get_workflow_handle(run.workflow_id, run_id=run.run_id)
                history = await handle.fetch_history()
        except RPCError as err:
            registry.skipped.append(f"{run.workflow_id} (run {run.run_id}): history not fetched: {err}")
            return
        if not history.events:
            return
        started = history.events[0].workflow_execution_started_event_attributes
        # A run no worker has taken a workflow task of yet ran no workflow code: nothing to replay
        # (and the Replayer waits forever on a history of just WorkflowExecutionStarted).
        if started.workflow_type.name in REPLAYABLE and any(
            event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED for event in history.events
        ):
            found.append((run, history))
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
                child = event.child_workflow_execution_started_event_attributes.workflow_execution
                follow(_Run(run.client, child.workflow_id, child.run_id, run.converter))
        last = history.events[-1]
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            next_run = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            follow(_Run(run.client, run.workflow_id, next_run, run.converter))

    async def first_run(root: _Root) -> None:
        try:
            async with limit:
                described = await root.client.get_workflow_handle(root.workflow_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:  # not found: the start failed, nothing to replay
                registry.skipped.append(f"{root.workflow_id}: not described: {err}")
            return
        info = described.raw_description.workflow_execution_info
        converter = converter_for(root.client, root.task_queue)
        follow(_Run(root.client, root.workflow_id, info.first_run_id or described.run_id, converter))

    async def listed(task_queue: str, client: Client, converter: DataConverter) -> None:
        try:
            async with limit:
                runs = [e async for e in client.list_workflows(f'TaskQueue = "{task_queue}"')]
        except RPCError as err:
            registry.skipped.append(f"task queue {task_queue}: not listed: {err}")
            return
        for execution in runs:
            follow(_Run(client, execution.id, execution.run_id, converter))

    lookups = []
    for root in registry.roots:
        if root.run_id is None:
            lookups.append(first_run(root))
        else:
            follow(
                _Run(root.client, root.workflow_id, root.run_id, converter_for(root.client, root.task_queue))
            )
    lookups += [listed(queue, client, converter) for queue, (client, converter) in registry.queues.items()]
    await asyncio.gather(*lookups)
    while pending:
        await asyncio.gather(*list(pending))
    return found
