"""Watched conversations: a conversation survives its worker whatever its clients do.

    python -m tests.reliability.watched                          # 60 conversations, one run
    python -m tests.reliability.watched --conversations 60 --runs 10
    python -m tests.reliability.watched --workers 3 --no-kill    # duplicate executions, no fault
    python -m tests.reliability.watched --kinds subagent --conversations 12 --details 20

Worker processes (``worker_proc``, killed by pid) serve N conversations. Each conversation is
watched for the whole run by an event subscriber (``async for ... in agent.events()``) and by a loop
that queries it (``get_state`` mostly, ``get_messages``, ``get_queues``, and the Temporal Web UI's own
``__stack_trace`` and ``__temporal_workflow_metadata``) every ``--query-interval`` seconds while a turn
of it runs, every ``--idle-query-interval`` seconds between turns and across the restart.
Each conversation takes ``TURNS`` turns of quick tools, of one of ``KINDS``: two ``add`` calls side by
side, ``safe_op``, a tool awaiting approval (approved through the client), a sub-agent (a child
workflow), a sub-agent whose tool awaits approval (approved through the parent), a steering message
or a follow-up sent while the turn's tool runs; at most ``--concurrency`` turns run at once. Then
(``--kill``) the first worker is SIGKILLed, another one started, and every conversation gets one more
prompt that it must answer.

Checked for every conversation: every turn and the last prompt answered (the last message an
assistant's, ``stop``), the subscriber saw every run's ``agent_end`` with no offset skipped and is
still following, the query loop ran through the restart with no error other than transient ones,
the session file equals the workflow's state, and no history (every run, its sub-agents' child
workflows too) has a failed workflow task or fails to replay. Counted from the workers' execution
log: tool calls (session + tool call id) and model calls (session + message count) that ran more than
once (with ``--no-kill`` nothing may run twice). One line per run; exit status 1 if a run failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError

from agentcore.client import TRANSIENT_RPC_STATUSES, DurableAgent
from agentcore.errors import EVENTS_AHEAD_OF_TASK, NoWorkerError
from agentcore.events import AgentEvent
from agentcore.messages import AssistantMessage, Message, UserMessage
from agentcore.protocol import DurableState

from .conftest import Rig, WorkerProc, assert_file_matches_state, file_messages, history_problems

T = TypeVar("T")

CONVERSATIONS = 60
# Seconds between one conversation's queries (each waits for its answer) while a turn of it runs,
# and while it is idle (between turns, across the restart). An idle conversation answers a query in
# ~10 ms: sixty idle ones queried every 20 ms would starve the busy ones of the two cores.
QUERY_INTERVAL = 0.02
IDLE_QUERY_INTERVAL = 0.5
TURNS = 3
# Turns running at once (a conversation waits for a slot for each of its turns; all of them are
# watched all along). Sixty at once, each queried every 20 ms, saturate two cores: turns slow down,
# so each draws more queries, and a sub-agent turn can take minutes.
TURN_CONCURRENCY = 20
KINDS = ("adds", "safe_op", "approval", "subagent", "steer", "follow_up", "subagent_approval")
TOOLS = ["add", "safe_op", "approved_op", "helper"]
WORKER_FLAGS: dict[str, Any] = {"approval_tool": 1, "subagent_tool": 1}
# The tool a steering message or a follow-up is sent during works this long: they reach the
# conversation while it runs, even with a slow workflow task in between.
SLOW_WORK = 2.0
TURN_TIMEOUT = 120.0  # a turn's prompt, its approvals / steering, and its end
ANSWER_TIMEOUT = 180.0  # the prompt after the restart, until its answer
CHECK_TIMEOUT = 60.0  # the checks' queries of a conversation (state), and its histories
CHECK_CONCURRENCY = 6  # conversations checked at once
# One query of the watching loop: longer than the server's own wait for a query's answer, so that
# the RPC gives up first.
QUERY_TIMEOUT = 60.0
# The queries of the loop, in turn: the state most often, as a UI polling it does.
QUERIES = ("get_state", "get_messages", "get_state", "get_queues", "get_state", "stack", "metadata")


def directive(calls: list[list[Any]], **extra: Any) -> str:
    """A user message asking the scripted model (``worker_proc.respond``) for these tool calls."""
    return orjson.dumps({"calls": calls, **extra}).decode()


def turn_prompt(kind: str, index: int, turn: int) -> str:
    key = f"c{index}-t{turn}"
    adds = [["add", {"a": index, "b": turn}], ["add", {"a": turn, "b": 1}]]
    calls: list[list[Any]] = {
        "adds": adds,
        "safe_op": [["safe_op", {"key": key}], adds[0]],
        "approval": [["approved_op", {"key": key}], adds[0]],
        "subagent": [["helper", {"task": directive(adds)}]],
        "subagent_approval": [["helper", {"task": directive([["approved_op", {"key": key}]])}]],
        "steer": [["safe_op", {"key": key, "work": SLOW_WORK}], adds[0]],
        "follow_up": [["safe_op", {"key": key, "work": SLOW_WORK}], adds[0]],
    }[kind]
    return directive(calls, conversation=index, turn=turn)


@dataclass
class Watched:
    """One conversation, its watchers, and what they saw."""

    index: int
    kind: str
    agent: DurableAgent
    events: list[tuple[int, AgentEvent]] = field(default_factory=list)
    subscriber: asyncio.Task[None] | None = None
    querier: asyncio.Task[None] | None = None
    queries_ok: int = 0
    queries_ok_after_restart: int = 0
    transient_errors: Counter[str] = field(default_factory=Counter)
    query_errors: Counter[str] = field(default_factory=Counter)  # not transient: each is a failure
    query_error_samples: list[str] = field(default_factory=list)  # the first few of them
    runs: int = 0  # prompts accepted: the runs the subscriber must see end
    ended: list[str] = field(default_factory=list)  # watchers that stopped by themselves, and why
    stuck: str = ""  # the phase it stopped answering in, and why
    step: str = ""  # where its current turn is
    busy: bool = False  # a turn of it runs: queried every ``query_interval``
    retried: Counter[str] = field(default_factory=Counter)  # its turns' calls sent again, by step
    turn_seconds: list[float] = field(default_factory=list)  # each answered turn, prompt to idle
    late: list[str] = field(default_factory=list)  # steering / follow-ups that missed their turn

    @property
    def session_id(self) -> str:
        return self.agent.session_id

    def ends(self) -> int:
        return sum(1 for _, event in self.events if event.type == "agent_end")


@dataclass
class WatchedReport:
    conversations: int
    workers: int
    kill: bool
    query_interval: float
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    stuck: list[str] = field(default_factory=list)  # conversations that stopped answering
    unanswered: list[str] = field(default_factory=list)  # answered, but not as expected
    subscribers: list[str] = field(default_factory=list)
    query_errors: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # session file != state
    histories: list[str] = field(default_factory=list)  # failed workflow tasks, replay failures
    duplicate_tools: dict[str, int] = field(default_factory=dict)
    duplicate_models: dict[str, int] = field(default_factory=dict)
    queries: int = 0
    failed_queries: int = 0
    transient: Counter[str] = field(default_factory=Counter)
    late: int = 0
    tool_calls: int = 0
    model_calls: int = 0
    failures_file: Path | None = None
    turn_seconds: list[float] = field(default_factory=list)  # every answered turn, prompt to idle
    retried: Counter[str] = field(default_factory=Counter)  # turns' calls sent again (transient errors)

    def failures(self) -> list[str]:
        """Everything that breaks the claim; duplicates only count without a kill (a killed worker's
        calls run again, as they should)."""
        duplicates: list[str] = []
        if not self.kill:
            duplicates += [f"tool call {key} ran {n} times" for key, n in self.duplicate_tools.items()]
            duplicates += [f"model call {key} ran {n} times" for key, n in self.duplicate_models.items()]
        return [
            *(f"stuck: {line}" for line in self.stuck),
            *(f"unanswered: {line}" for line in self.unanswered),
            *(f"subscriber: {line}" for line in self.subscribers),
            *(f"query: {line}" for line in self.query_errors),
            *(f"file != state: {line}" for line in self.files),
            *(f"history: {line}" for line in self.histories),
            *duplicates,
        ]

    def summary(self) -> str:
        phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in self.phases.items())
        history_sessions = {line.split(" run ")[0] for line in self.histories}
        transient = ", ".join(f"{n} {kind}" for kind, n in self.transient.most_common()) or "none"
        turns = sorted(self.turn_seconds) or [0.0]
        return (
            f"{self.conversations} conversations, {self.workers} worker(s), "
            f"{'a kill' if self.kill else 'no fault'}, {self.seconds:.0f} s ({phases}; turns p50 "
            f"{turns[len(turns) // 2]:.1f} s, max {turns[-1]:.1f} s): "
            f"{len(self.stuck)} stuck, {len(self.unanswered)} answered wrong, "
            f"{len(self.histories)} history problems in {len(history_sessions)} workflows, "
            f"{len(self.files)} file != state, {len(self.subscribers)} subscriber problems, "
            f"{self.failed_queries} failed queries of {self.queries} in {len(self.query_errors)} "
            f"conversations (transient: {transient}), "
            f"{len(self.duplicate_tools)}/{self.tool_calls} tool calls and "
            f"{len(self.duplicate_models)}/{self.model_calls} model calls ran twice or more, "
            f"{self.late} steering/follow-ups after their turn; turns' calls sent again after a transient "
            f"error: {', '.join(f'{n} at {kind}' for kind, n in self.retried.most_common()) or 'none'}"
        )


def _difference(path: Path, state: DurableState) -> str:
    """Where the session file and the workflow's state part: the first message that differs, and
    in which fields."""
    messages = file_messages(path)
    held = messages[state.first_message_index :]
    for index, (on_disk, in_workflow) in enumerate(zip(held, state.messages, strict=False)):
        if on_disk != in_workflow:
            disk, flow = on_disk.model_dump(mode="json"), in_workflow.model_dump(mode="json")
            keys = sorted(key for key in disk.keys() | flow.keys() if disk.get(key) != flow.get(key))
            shown = "; ".join(
                f"{key}: file {disk.get(key)!r:.150} / state {flow.get(key)!r:.150}" for key in keys
            )
            return f"message {index + state.first_message_index} ({on_disk.role}) differs: {shown}"
    return f"{len(messages)} messages in the file, {state.message_count} in the state"


def _is_transient(err: BaseException, *, timeouts: bool = True) -> str | None:
    """The kind of a failure that passes (a worker restarting, a slow answer, the server's query
    buffer full), else None."""
    if isinstance(err, TimeoutError):
        return "timeout" if timeouts else None
    if isinstance(err, NoWorkerError):
        return "no worker"
    if isinstance(err, RPCError) and err.status in TRANSIENT_RPC_STATUSES:
        return err.status.name if err.status else "rpc"
    if isinstance(err, WorkflowQueryFailedError) and EVENTS_AHEAD_OF_TASK in str(err):
        # The Web UI's own queries (agentcore's client sends a refused one again by itself): the
        # query came with history events ahead of their workflow task (``workflows/task_guard.py``).
        return "events ahead of their task"
    return None


async def _query(agent: DurableAgent, kind: str) -> object:
    if kind == "get_state":
        return await agent.get_state()
    if kind == "get_messages":
        return await agent.get_messages()
    if kind == "get_queues":
        return await agent.get_queues()
    if kind == "stack":  # the Web UI's "Stack Trace" tab
        return await agent.handle.query("__stack_trace", result_type=str)
    # The Web UI's current details and the workflow's queries, signals and updates
    return await agent.handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)


class Scenario:
    def __init__(
        self,
        rig: Rig,
        *,
        conversations: int,
        query_interval: float,
        workers: int,
        kill: bool,
        kinds: tuple[str, ...] = KINDS,
        turn_timeout: float = TURN_TIMEOUT,
        idle_query_interval: float = IDLE_QUERY_INTERVAL,
        concurrency: int = TURN_CONCURRENCY,
    ):
        self.rig = rig
        self.slots = asyncio.Semaphore(concurrency)
        self.idle_query_interval = idle_query_interval
        self.turn_timeout = turn_timeout
        self.kinds = kinds
        self.conversations = conversations
        self.query_interval = query_interval
        self.workers = workers
        self.kill = kill
        self.restarted_at: float | None = None  # when the new worker polled
        self.stopping = False
        self.report = WatchedReport(conversations, workers, kill, query_interval)

    # ------------------------------------------------------------------------------ watchers

    async def _subscribe(self, w: Watched) -> None:
        async for offset, event in w.agent.events():
            w.events.append((offset, event))

    async def _watch(self, w: Watched) -> None:
        # (``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for`` can swallow the
        # cancellation that stops this loop, when the query ends at the same moment.)
        n = 0
        while not self.stopping:
            kind = QUERIES[n % len(QUERIES)]
            n += 1
            try:
                async with asyncio.timeout(QUERY_TIMEOUT):
                    await _query(w.agent, kind)
                w.queries_ok += 1
                if self.restarted_at is not None:
                    w.queries_ok_after_restart += 1
            except asyncio.CancelledError:
                raise
            except Exception as err:
                transient = _is_transient(err)
                if transient is not None:
                    w.transient_errors[transient] += 1
                else:
                    w.query_errors[f"{kind}: {type(err).__name__}"] += 1
                    if len(w.query_error_samples) < 3:
                        w.query_error_samples.append(f"{kind}: {type(err).__name__}: {str(err)[:300]}")
            await asyncio.sleep(self.query_interval if w.busy else self.idle_query_interval)

    # ------------------------------------------------------------------------------ turns

    async def _until(self, predicate: Callable[[], Awaitable[bool] | bool]) -> None:
        """Poll until ``predicate`` holds (the turn's timeout bounds it)."""
        while True:
            value = predicate()
            if not isinstance(value, bool):
                value = await value
            if value:
                return
            await asyncio.sleep(0.05)

    async def _retrying(self, w: Watched, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, sent again after a transient failure, as a client would: every call of a turn
        is idempotent (a request id, or a decision made again the same way). The watching loop's
        queries fill the server's query buffer, and ``approve`` asks a query first."""
        while True:
            try:
                return await call()
            except Exception as err:
                kind = _is_transient(err, timeouts=False)
                if kind is None:
                    raise
                w.retried[f"{w.step}: {kind}"] += 1
            await asyncio.sleep(0.2)

    async def _approve_pending(self, w: Watched) -> None:
        """Approve, through the conversation the person talks to, every call waiting (its own, or
        its sub-agent's: ``approve`` routes it to the child)."""
        pending: list[Any] = []

        async def waiting() -> bool:
            pending[:] = await self._retrying(w, w.agent.pending_approvals)
            return bool(pending)

        w.step = "an approval request"
        await self._until(waiting)
        w.step = "approve"
        for request in pending:
            await self._retrying(w, functools.partial(w.agent.approve, request.tool_call_id))

    async def _turn(self, w: Watched, turn: int, prompt: str, timeout: float) -> list[Message]:
        """One prompt's run, its approvals, steering or follow-up, to its end: all within
        ``timeout`` (a timeout says which step it was at)."""
        async with self.slots:
            started = time.monotonic()
            w.busy = True
            try:
                async with asyncio.timeout(timeout):
                    messages = await self._run_turn(w, turn, prompt, timeout)
            except TimeoutError:
                raise TimeoutError(f"still at {w.step} after {timeout:.0f} s") from None
            finally:
                w.busy = False
        w.turn_seconds.append(time.monotonic() - started)
        return messages

    async def _run_turn(self, w: Watched, turn: int, prompt: str, timeout: float) -> list[Message]:
        seen = len(w.events)
        w.step = "prompt"
        accepted = await self._retrying(w, lambda: w.agent.prompt(prompt, id=f"{w.session_id}-turn-{turn}"))
        w.runs += 1
        queued = ""
        if w.kind in ("approval", "subagent_approval") and turn <= TURNS:
            await self._approve_pending(w)
        elif w.kind in ("steer", "follow_up") and turn <= TURNS:
            # Sent while the turn's slow tool runs: the subscriber saw it start.
            w.step = "the subscriber's tool_execution_start"
            await self._until(lambda: any(e.type == "tool_execution_start" for _, e in w.events[seen:]))
            w.step = w.kind
            queued = f"{w.kind.replace('_', '-')} {turn} of conversation {w.index}"
            send = w.agent.steer if w.kind == "steer" else w.agent.follow_up
            await self._retrying(w, lambda: send(queued, id=f"{w.session_id}-{w.kind}-{turn}"))
        w.step = "wait_for_idle"
        idle = await self._retrying(
            w, lambda: w.agent.wait_for_idle(timeout=timeout, since=accepted.message_count)
        )
        if queued and not any(isinstance(m, UserMessage) and m.text == queued for m in idle.messages):
            w.late.append(queued)  # it reached the conversation after the run: the next run takes it
        return idle.messages

    def _check_answer(
        self, w: Watched, phase: str, messages: list[Message], worker: WorkerProc | None
    ) -> None:
        last = messages[-1] if messages else None
        problem = ""
        if not isinstance(last, AssistantMessage):
            problem = f"the last message is {getattr(last, 'role', None)!r}, not the assistant's answer"
        elif last.stop_reason != "stop":
            problem = f"the answer stopped with {last.stop_reason!r}: {last.error_message}"
        elif worker is not None and f"worker {worker.pid}" not in last.text:
            problem = f"the answer is not the new worker's ({worker.pid}): {last.text[:120]!r}"
        if problem:
            self.report.unanswered.append(f"{w.session_id} ({w.kind}) {phase}: {problem}")

    async def _converse(self, w: Watched) -> None:
        for turn in range(1, TURNS + 1):
            try:
                messages = await self._turn(w, turn, turn_prompt(w.kind, w.index, turn), self.turn_timeout)
            except Exception as err:
                w.stuck = f"turn {turn}: {type(err).__name__}: {str(err)[:300]}"
                return
            self._check_answer(w, f"turn {turn}", messages, None)

    async def _answer_after_restart(self, w: Watched, worker: WorkerProc | None) -> None:
        if w.stuck:
            return
        prompt = directive(
            [["add", {"a": w.index, "b": 100}], ["add", {"a": 100, "b": w.index}]], after="kill"
        )
        try:
            messages = await self._turn(w, TURNS + 1, prompt, ANSWER_TIMEOUT)
        except Exception as err:
            w.stuck = f"after the restart: {type(err).__name__}: {str(err)[:300]}"
            return
        self._check_answer(w, "after the restart", messages, worker)

    # ------------------------------------------------------------------------------ checks

    async def _check(self, w: Watched) -> None:
        report = self.report
        if w.stuck:
            report.stuck.append(f"{w.session_id} ({w.kind}) {w.stuck}")
        # The watchers were still running when stopped, the subscriber saw every offset once and in
        # order and every run's end.
        report.subscribers += [f"{w.session_id}: {line}" for line in w.ended]
        offsets = [offset for offset, _ in w.events]
        if offsets != list(range(len(offsets))):
            report.subscribers.append(f"{w.session_id}: offsets skipped or repeated: {offsets[:5]}...")
        if not w.stuck and w.ends() != w.runs:
            report.subscribers.append(f"{w.session_id}: {w.ends()} agent_end events for {w.runs} runs")
        # The query loop ran through the restart, with nothing but transient failures.
        if self.restarted_at is not None and not w.stuck and not w.queries_ok_after_restart:
            report.query_errors.append(f"{w.session_id}: no query answered after the restart")
        if w.query_errors:
            counts = ", ".join(f"{n} {kind}" for kind, n in w.query_errors.most_common())
            report.query_errors.append(f"{w.session_id}: {counts}; the first: {w.query_error_samples[0]}")
        report.failed_queries += sum(w.query_errors.values())
        report.queries += w.queries_ok + sum(w.transient_errors.values()) + sum(w.query_errors.values())
        report.transient.update(w.transient_errors)
        report.late += len(w.late)
        report.turn_seconds += w.turn_seconds
        report.retried.update(w.retried)
        # The session file equals the workflow's state (``Rig.settle``'s check), when it answers.
        if not w.stuck:
            try:
                async with asyncio.timeout(CHECK_TIMEOUT):
                    state = await w.agent.get_state()
                path = self.rig.session_path(w.agent)
                try:
                    assert_file_matches_state(path, state)
                except AssertionError as err:
                    report.files.append(f"{w.session_id} ({w.kind}): {err}; {_difference(path, state)}")
            except Exception as err:
                report.files.append(f"{w.session_id}: {type(err).__name__}: {str(err)[:300]}")
        # Every history of it and of its sub-agents: no failed workflow task, and it replays.
        try:
            async with asyncio.timeout(CHECK_TIMEOUT):
                report.histories += await history_problems(
                    self.rig.client, w.session_id, keep=self.rig.workdir / "histories"
                )
        except Exception as err:
            report.histories.append(f"{w.session_id} run ?: not checked: {type(err).__name__}: {err}")

    def _count_executions(self) -> None:
        tools = Counter(line[1] for line in self.rig.log_lines("tool-call"))
        # A model call is its session and the number of messages it was sent (``logged_stream``).
        models = Counter(f"{line[5]}@{line[1]}" for line in self.rig.log_lines("stream-start"))
        self.report.tool_calls, self.report.model_calls = len(tools), len(models)
        self.report.duplicate_tools = {key: n for key, n in tools.items() if n > 1}
        self.report.duplicate_models = {key: n for key, n in models.items() if n > 1}

    # ------------------------------------------------------------------------------ the run

    async def run(self) -> WatchedReport:
        started = time.monotonic()
        phase = started

        def lap(name: str) -> None:
            nonlocal phase
            now = time.monotonic()
            self.report.phases[name] = now - phase
            phase = now

        for _ in range(self.workers):
            await self.rig.spawn(**WORKER_FLAGS)
        agents = await asyncio.gather(
            *(self.rig.start(f"watched-{index}", tools=TOOLS) for index in range(self.conversations))
        )
        watched = [
            Watched(index, self.kinds[index % len(self.kinds)], agent) for index, agent in enumerate(agents)
        ]
        for w in watched:
            w.subscriber = asyncio.create_task(self._subscribe(w))
            w.querier = asyncio.create_task(self._watch(w))
        lap("start")
        try:
            await asyncio.gather(*(self._converse(w) for w in watched))
            lap("turns")
            if self.kill:
                self.rig.workers[0].kill()
                new = await self.rig.spawn(**WORKER_FLAGS)
                self.restarted_at = time.monotonic()
                lap("restart")
                await asyncio.gather(
                    *(self._answer_after_restart(w, new if self.workers == 1 else None) for w in watched)
                )
                lap("answers")
            # The subscribers see the last runs end (a moment after their idle), the query loops
            # answer after the restart.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(30):
                    await self._until(lambda: all(self._caught_up(w) for w in watched))
        finally:
            await self._stop_watchers(watched)
        checking = asyncio.Semaphore(CHECK_CONCURRENCY)

        async def check(w: Watched) -> None:
            async with checking:
                await self._check(w)

        await asyncio.gather(*(check(w) for w in watched))  # without the watchers' load
        self._count_executions()
        lap("checks")
        self.report.seconds = time.monotonic() - started
        return self.report

    def _caught_up(self, w: Watched) -> bool:
        """Its subscriber saw every run end, its query loop had an answer since the restart."""
        return bool(w.stuck) or (w.ends() >= w.runs and (not self.kill or w.queries_ok_after_restart > 0))

    async def _stop_watchers(self, watched: list[Watched]) -> None:
        """Cancel the watchers; one that had already stopped by itself is reported."""
        for w in watched:
            for name, task in (("subscription", w.subscriber), ("query loop", w.querier)):
                if task is None:
                    continue
                if task.done():
                    error = None if task.cancelled() else task.exception()
                    w.ended.append(f"the {name} stopped by itself: {error!r}")
                else:
                    task.cancel()
        self.stopping = True
        tasks = {task for w in watched for task in (w.subscriber, w.querier) if task is not None}
        for _ in range(6):  # a cancellation swallowed on the way is sent again
            _, running = await asyncio.wait(tasks, timeout=5)
            if not running:
                return
            for task in running:
                task.cancel()
        for w in watched:
            if w.subscriber in running or w.querier in running:
                w.ended.append("a watcher did not stop when cancelled")


async def run_watched(
    rig: Rig,
    *,
    conversations: int = CONVERSATIONS,
    query_interval: float = QUERY_INTERVAL,
    workers: int = 1,
    kill: bool = True,
    kinds: tuple[str, ...] = KINDS,
    turn_timeout: float = TURN_TIMEOUT,
    idle_query_interval: float = IDLE_QUERY_INTERVAL,
    concurrency: int = TURN_CONCURRENCY,
) -> WatchedReport:
    """Run the scenario on ``rig`` (its workers are stopped at the end); every failure, not only the
    first ones a test prints, is written to ``watched-failures.txt`` in the rig's directory, and each
    history with a problem to its ``histories/`` directory."""
    scenario = Scenario(
        rig,
        conversations=conversations,
        query_interval=query_interval,
        workers=workers,
        kill=kill,
        kinds=kinds,
        turn_timeout=turn_timeout,
        idle_query_interval=idle_query_interval,
        concurrency=concurrency,
    )
    try:
        report = await scenario.run()
    finally:
        rig.cleanup()
    report.failures_file = rig.workdir / "watched-failures.txt"
    report.failures_file.write_text("\n".join([report.summary(), *report.failures()]) + "\n")
    return report


async def main() -> None:
    from agentcore.temporal import DevServer

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, default=CONVERSATIONS)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--query-interval", type=float, default=QUERY_INTERVAL, help="seconds, while a turn runs"
    )
    parser.add_argument(
        "--idle-query-interval", type=float, default=IDLE_QUERY_INTERVAL, help="seconds, between turns"
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes on the task queue")
    parser.add_argument("--kill", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"the conversations' kinds, in turn (of {', '.join(KINDS)})"
    )
    parser.add_argument("--turn-timeout", type=float, default=TURN_TIMEOUT, help="seconds")
    parser.add_argument("--concurrency", type=int, default=TURN_CONCURRENCY, help="turns running at once")
    parser.add_argument("--details", type=int, default=0, help="print this many failures of each run")
    parser.add_argument("--workdir", help="keep sessions, logs and the server's database here")
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        async with DevServer(workdir / "temporal", ui=False) as server:
            client: Client = server.client
            for run in range(1, args.runs + 1):
                rig = Rig(client, server.address, workdir / f"run-{run}")
                report = await run_watched(
                    rig,
                    conversations=args.conversations,
                    query_interval=args.query_interval,
                    workers=args.workers,
                    kill=args.kill,
                    kinds=tuple(args.kinds.split(",")),
                    turn_timeout=args.turn_timeout,
                    idle_query_interval=args.idle_query_interval,
                    concurrency=args.concurrency,
                )
                failures = report.failures()
                failed += bool(failures)
                print(f"run {run}: {'FAIL' if failures else 'ok'}: {report.summary()}", flush=True)
                for line in failures[: args.details]:
                    print("   ", line, flush=True)
    print(f"{failed} of {args.runs} runs failed")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    asyncio.run(main())
