"""Durable conversation benches (SPEC-11) on the embedded dev server, one scenario at a time.

    python -m bench.durable single|concurrent|burst|tools|recovery|history|deltas|mcp [--model loopback|scripted]

Every scenario starts its own stack (``bench.harness``: dev server with its SQLite file, a worker
process, the loopback model process) and returns table rows; ``python -m bench`` runs them all.
A "tool turn" is prompt -> model asks for a no-op tool -> tool -> model answers, timed from sending
the prompt to its ``agent_end`` reaching a subscriber (streaming on: every conversation has one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from temporalio.api.enums.v1 import EventType, TimeoutType

from agentcore import Agent
from agentcore.messages import AssistantMessage, TextContent, UserMessage
from agentcore.model import Model
from agentcore.session import FsyncPolicy, JsonlSessionStorage, MessageEntry, StorageRateLimits
from agentcore.session.entries import ActiveToolsChangeEntry, ModelChangeEntry

from . import _procs
from ._procs import children, cpu_seconds
from .harness import BENCH_LIMITS, Stack, TurnClock, pct, stack
from .worker_proc import NOOP, scripted_turn


@dataclass
class Row:
    """One line of the results table."""

    section: str
    metric: str
    value: str
    target: str = ""
    ok: bool | None = None


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _lat_row(section: str, metric: str, samples: list[float], p99_target: float | None = None) -> Row:
    q50, q95, q99 = (pct(samples, p) for p in (50, 95, 99))
    value = f"{_ms(q50)} / {_ms(q95)} / {_ms(q99)} ms"
    if p99_target is None:
        return Row(section, metric, value)
    return Row(section, metric, value, f"p99 <= {p99_target * 1000:.0f} ms", q99 <= p99_target)


async def _history(stack_: Stack, session_id: str) -> Any:
    # No run id: the conversation's current run (continue-as-new starts new ones).
    return await stack_.agents.client.get_workflow_handle(session_id).fetch_history()


# ------------------------------------------------------------------------------- 1. single conversation


def _idle_delays(history: Any, returned: list[float]) -> tuple[list[float], list[float]]:
    """Per ``wait_for_idle``: seconds from its run's end to the update's completion in the history,
    and to the client holding the result (``returned``: wall-clock times, in order; matched from the
    last, as the history is the current run's; its first wait may be one it cannot time, answered
    for a run that ended before the conversation continued as new). A run ends in the workflow task
    of its last model call: the task that made a local call's marker, or the one after a remote
    call's result."""
    scheduled: dict[int, str] = {}
    waits: set[str] = set()
    task_done = run_end = 0.0
    remote_call_ended = False
    pairs: list[tuple[float, float]] = []
    for event in history.events:
        at = event.event_time.ToMicroseconds() / 1e6
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            task_done = at
            if remote_call_ended:
                run_end, remote_call_ended = at, False
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            data = event.marker_recorded_event_attributes.details.get("data")
            if data is not None and any(b'"llm.stream"' in p.data for p in data.payloads):
                run_end = task_done
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attributes = event.activity_task_completed_event_attributes
            remote_call_ended = scheduled.get(attributes.scheduled_event_id) == "llm.stream"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            attributes = event.workflow_execution_update_accepted_event_attributes
            if attributes.accepted_request.input.name in ("wait_for_idle", "prompt_and_wait"):
                waits.add(attributes.protocol_instance_id)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            attributes = event.workflow_execution_update_completed_event_attributes
            # Not one refused as ROLLING_OVER (sent again to the next run), nor one the next run
            # answered for a run that ended in the last (its end is in that run's history).
            if attributes.meta.update_id in waits and not attributes.outcome.HasField("failure") and run_end:
                pairs.append((run_end, at))
    pairs = pairs[-len(returned) :]
    in_history = [completed - end for end, completed in pairs]
    at_client = [back - end for (end, _), back in zip(pairs, returned[-len(pairs) :], strict=True)]
    return in_history, at_client


async def in_process_turns(model: Model, turns: int, stream_fn: Any = None) -> list[float]:
    """The same tool turn through the in-process ``Agent`` (same provider, same loopback server)."""
    # The durable conversations' limits: SPEC-9.1's 100 messages a minute would refuse the bench.
    agent = Agent(
        model=model, tools=[NOOP], system_prompt="Be brief.", stream_fn=stream_fn, limits=BENCH_LIMITS
    )
    samples = []
    for index in range(turns + 10):
        started = time.perf_counter()
        await agent.prompt("/tools 1")
        await agent.wait_for_idle()
        if index >= 10:
            samples.append(time.perf_counter() - started)
        if len(agent.messages) > 400:
            agent.reset()
    return samples


async def _warm_clock(
    s: Stack, warmup: int, subscribe: bool = True, since: bool = False, run: bool = False
) -> TurnClock:
    """A new conversation with its subscriber (unless not ``subscribe``, or ``since``: see
    ``TurnClock``), past its first ``warmup`` tool turns."""
    clock = await TurnClock(await s.start_agent(), subscribe=subscribe, since=since, run=run).start()
    for _ in range(warmup):
        await clock.turn("/tools 1")
    return clock


def _rounds(values: list[float], label: str = "") -> str:
    """Each round's value in order, in brackets; nothing for a single round."""
    return "" if len(values) == 1 else f" ({label}{' / '.join(f'{value:.1f}' for value in values)})"


def _each(values: list[float], unit: str = " ms") -> str:
    """A figure over rounds: their median, then each round's value when there are several."""
    return f"{statistics.median(values):.1f}{unit}{_rounds(values)}"


async def single(
    model_kind: str = "loopback",
    turns: int = 100,
    rounds: int = 1,
    subscribe: bool = True,
    since: bool = False,
    run: bool = False,
    **options: Any,
) -> list[Row]:
    """One conversation's tool turns. With ``rounds`` > 1, each round on a stack of its own (the
    machine's state changes from minute to minute): latencies pooled, CPU figures as the median.
    Without ``subscribe`` each turn is read by ``wait_for_idle`` and ``get_state`` (no subscriber);
    with ``since``, by ``wait_for_idle(since=...)`` alone; with ``run``, by ``run`` (one update)."""
    section = f"1. one conversation ({model_kind})"
    subscribe = subscribe and not since and not run
    if run:
        section += ", read by run"
    elif since:
        section += ", read by wait_for_idle(since=...)"
    elif not subscribe:
        section += ", read by wait_for_idle + get_state"
    if rounds > 1:
        section += f", {rounds} rounds"
    samples: list[float] = []
    worker: list[float] = []
    server: list[float] = []
    clients: list[float] = []
    local: list[float] = []
    idle_history: list[float] = []
    idle_client: list[float] = []
    for index in range(rounds):
        async with stack(model=model_kind, **options) as s:
            clock = await _warm_clock(s, 10, subscribe, since, run)
            before = s.cpu()
            samples += [await clock.turn("/tools 1") for _ in range(turns)]
            after = s.cpu()
            await clock.stop()
            if not subscribe:
                history, client = _idle_delays(
                    await _history(s, clock.agent.session_id), clock.idle_at[-turns:]
                )
                idle_history += history
                idle_client += client
            worker.append((after.worker - before.worker) / turns * 1000)
            server.append((after.server - before.server) / turns * 1000)
            clients.append((after.clients - before.clients) / turns * 1000)
            if index == 0:
                stream_fn = None
                if model_kind == "scripted":
                    from .worker_proc import _ForgetfulModel

                    stream_fn = _ForgetfulModel(scripted_turn)
                local = await in_process_turns(s.model(), turns, stream_fn)
    overhead = [sample - pct(local, 50) for sample in samples]
    waited = "run" if run else "wait_for_idle"
    idle = [
        _lat_row(section, f"{waited} done after the run's end, in the history", idle_history),
        _lat_row(section, f"{waited} returned after the run's end", idle_client),
    ]
    return [
        Row(
            section,
            "tool turn p50/p95/p99",
            _lat_row(section, "", samples).value,
            "p50 <= 50 ms, p99 <= 100 ms",
            pct(samples, 50) <= 0.050 and pct(samples, 99) <= 0.100,
        ),
        _lat_row(section, "in-process Agent, same turn", local),
        _lat_row(section, "durable overhead (minus in-process p50)", overhead, 1.0),
        Row(section, "worker CPU per turn", _each(worker), "<= 25 ms", statistics.median(worker) <= 25),
        Row(section, "server CPU per turn", _each(server)),
        Row(section, "client CPU per turn", _each(clients)),
        *(idle if not subscribe else []),
    ]


# ---------------------------------------------------------------------- 2. many conversations, paced


async def _start_many(s: Stack, count: int, subscribe: bool = True, run: bool = False) -> list[TurnClock]:
    agents = await asyncio.gather(*(s.start_agent() for _ in range(count)))
    clocks = (TurnClock(agent, subscribe=subscribe, run=run).start() for agent in agents)
    return list(await asyncio.gather(*clocks))


async def paced(
    rate_per_hour: float,
    seconds: float,
    sessions: int = 100,
    model_kind: str = "loopback",
    tool_calls_per_minute: float | None = None,
    **options: Any,
) -> list[Row]:
    """``sessions`` conversations, each sending a message every 3600/rate s (random phase).

    Every message is a tool turn, unless ``tool_calls_per_minute`` is given (SPEC-11.2's mix: 100
    tool calls a minute across all the conversations): then that share of the messages are tool
    turns and the rest plain ones (prompt -> answer, one model call)."""
    label = f"2. {sessions} conversations at {rate_per_hour:.0f} msg/session/h"
    tool_share = 1.0
    if tool_calls_per_minute is not None:
        tool_share = min(1.0, tool_calls_per_minute / (sessions * rate_per_hour / 60))
        label += f", {tool_calls_per_minute:.0f} tool calls/min (SPEC-11.2 mix)"
    chooser = random.Random(11)
    async with stack(model=model_kind, **options) as s:
        clocks = await _start_many(s, sessions)
        await asyncio.gather(*(clock.turn("/tools 1") for clock in clocks))  # warm every workflow
        interval = 3600 / rate_per_hour
        samples: list[float] = []
        failures = Counter[str]()
        before = s.cpu()
        deadline = time.perf_counter() + seconds

        async def session(clock: TurnClock) -> None:
            await asyncio.sleep(random.uniform(0, interval))
            next_at = time.perf_counter()
            while next_at < deadline:
                message = "/tools 1" if chooser.random() < tool_share else "/tools 0"
                try:
                    samples.append(await clock.turn(message, timeout=60))
                except Exception as exc:
                    failures[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
                next_at += interval
                if next_at >= deadline:  # no sleep past it: the wall clock would count the sleep
                    break
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

        await asyncio.gather(*(session(clock) for clock in clocks))
        after = s.cpu()
        for clock in clocks:
            await clock.stop()
    turns = len(samples)
    wall = after.wall - before.wall
    offered = sessions * rate_per_hour / 3600
    return [
        _lat_row(label, "message processing p50/p95/p99", samples, 1.0),
        Row(label, "turns/s (offered)", f"{turns / wall:.1f} ({offered:.1f})"),
        Row(
            label,
            "CPU per turn: worker / server / clients",
            f"{(after.worker - before.worker) / turns * 1000:.1f} / "
            f"{(after.server - before.server) / turns * 1000:.1f} / "
            f"{(after.clients - before.clients) / turns * 1000:.1f} ms",
        ),
        Row(
            label,
            "failed turns",
            f"{failures.total()} {dict(failures)}" if failures else "0",
            "0",
            not failures,
        ),
    ]


@dataclass
class _BurstRound:
    rate: float
    samples: list[float]
    cpu: tuple[float, float, float, float]  # ms per turn: worker, server, clients, model server
    failures: int
    history_counts: Counter[str]
    rss: tuple[int, int, int]  # idle, peak active, idle after


async def burst(
    sessions: int = 100,
    turns: int = 5,
    model_kind: str = "loopback",
    subscribe: bool = True,
    rounds: int = 1,
    run: bool = False,
    **options: Any,
) -> list[Row]:
    """All conversations start at once and run ``turns`` tool turns back to back. With ``rounds`` >
    1, each round on a stack of its own: rates and CPU as the median, latencies pooled, failures
    summed, memory from the round with the median rate."""
    label = f"2. burst: {sessions} conversations x {turns} tool turns ({model_kind})"
    if run:
        label += ", read by run"
    elif not subscribe:
        label += ", no subscribers"
    if rounds > 1:
        label += f", {rounds} rounds"
    results = [
        await _burst_round(sessions, turns, model_kind, subscribe, run, options) for _ in range(rounds)
    ]
    rates = [r.rate for r in results]
    cpu = [statistics.median(r.cpu[index] for r in results) for index in range(4)]
    failures = sum(r.failures for r in results)
    history_counts = sum((r.history_counts for r in results), Counter[str]())
    turns_done = max(sum(len(r.samples) for r in results), 1)
    median_round = sorted(results, key=lambda r: r.rate)[len(results) // 2]
    idle_rss, peak_rss, after_rss = median_round.rss
    return [
        Row(label, "tool turns/s", _each(rates, ""), ">= 40 (at least 26)", statistics.median(rates) >= 26),
        _lat_row(label, "turn latency p50/p95/p99", [x for r in results for x in r.samples]),
        Row(
            label,
            "CPU per turn: worker / server / clients (/ model server)",
            " / ".join(f"{value:.1f}" for value in cpu)
            + " ms"
            + _rounds([r.cpu[0] for r in results], "worker "),
            "worker <= 25 ms",
            cpu[0] <= 25,
        ),
        Row(label, "failed conversations", str(failures), "0", failures == 0),
        Row(
            label,
            "remote activities per turn: model calls / tools / session writes (the rest local)",
            " / ".join(
                f"{history_counts[f'remote {name}'] / turns_done:.2f}"
                for name in ("llm.stream", "tools.execute", "session.append")
            ),
        ),
        Row(
            label,
            "workflow task start-to-close timeouts + failures (sticky queue waits)",
            f"{history_counts['timeout'] + history_counts['failure']} ({history_counts['sticky']})",
            "0",
            history_counts["timeout"] + history_counts["failure"] == 0,
        ),
        Row(
            "7. worker memory",
            f"RSS: {sessions} idle / {sessions} active / idle after",
            f"{idle_rss / 1e6:.0f} / {peak_rss / 1e6:.0f} / {after_rss / 1e6:.0f} MB",
        ),
    ]


async def _burst_round(
    sessions: int, turns: int, model_kind: str, subscribe: bool, run: bool, options: dict[str, Any]
) -> _BurstRound:
    async with stack(model=model_kind, **options) as s:
        clocks = await _start_many(s, sessions, subscribe, run)
        await asyncio.sleep(1.0)  # the starts' first workflow tasks settle: idle memory
        idle_rss = s.worker_rss()
        failures = 0
        samples: list[float] = []
        peak_rss = idle_rss

        async def session(clock: TurnClock) -> None:
            nonlocal failures
            try:
                for _ in range(turns):
                    samples.append(await clock.turn("/tools 1", timeout=120))
            except Exception:
                failures += 1

        async def watch_memory() -> None:
            nonlocal peak_rss
            while True:
                peak_rss = max(peak_rss, s.worker_rss())
                await asyncio.sleep(0.2)

        watcher = asyncio.create_task(watch_memory())
        before = s.cpu()
        await asyncio.gather(*(session(clock) for clock in clocks))
        after = s.cpu()
        watcher.cancel()
        await asyncio.sleep(1.0)
        after_rss = s.worker_rss()
        for clock in clocks:
            await clock.stop()
        history_counts = Counter[str]()
        for one in await asyncio.gather(*(_history_counts(s, c.agent.session_id) for c in clocks)):
            history_counts.update(one)
    done = max(len(samples), 1)
    per_turn = (
        (after.worker - before.worker) / done * 1000,
        (after.server - before.server) / done * 1000,
        (after.clients - before.clients) / done * 1000,
        (after.model - before.model) / done * 1000,
    )
    return _BurstRound(
        rate=len(samples) / (after.wall - before.wall),
        samples=samples,
        cpu=per_turn,
        failures=failures,
        history_counts=history_counts,
        rss=(idle_rss, peak_rss, after_rss),
    )


async def _history_counts(s: Stack, session_id: str) -> Counter[str]:
    """Failed workflow tasks, timed-out ones (a worker held one too long), and sticky queue waits: a
    task that waited more than ``sticky_queue_schedule_to_start_timeout`` for its worker to take it
    and went to the shared queue (no work lost; the worker that takes it replays the history).
    Also the remote activities by type (``remote <name>``): a model call or tool call there was
    handed off by its local attempt (or declined by it, a conversation's first model call)."""
    counts = Counter[str]()
    for event in (await _history(s, session_id)).events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            counts[f"remote {event.activity_task_scheduled_event_attributes.activity_type.name}"] += 1
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            counts["failure"] += 1
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            kind = event.workflow_task_timed_out_event_attributes.timeout_type
            counts["sticky" if kind == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START else "timeout"] += 1
    return counts


# ----------------------------------------------------------------------------------- 3. tool batches


def _tool_spans(events: list[Any]) -> list[float]:
    """Per turn: first tools.execute scheduled -> the workflow task that sees the last result starts."""
    spans = []
    scheduled_at: float | None = None
    tool_ids: set[int] = set()
    completed = 0
    waiting = False
    for event in events:
        at = event.event_time.ToMicroseconds() / 1e6
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            if name == "tools.execute":
                if scheduled_at is None:
                    scheduled_at, completed = at, 0
                tool_ids.add(event.event_id)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            if event.activity_task_completed_event_attributes.scheduled_event_id in tool_ids:
                completed += 1
                waiting = completed == len(tool_ids)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED and waiting and scheduled_at is not None:
            spans.append(at - scheduled_at)
            scheduled_at, waiting = None, False
            tool_ids.clear()
    return spans


async def tools(turns: int = 20, model_kind: str = "loopback", **options: Any) -> list[Row]:
    """Tool activities (``local_tool_calls`` off: every call a remote ``tools.execute``, as a slow
    tool's is): first scheduled -> the workflow task that sees the last result; and the whole tool
    turn as shipped (a quick tool's calls local)."""
    section = "3. tool execution overhead (no-op tool)"
    rows = []
    # One run's history holds every turn timed (no continue-as-new).
    remote = BENCH_LIMITS.model_copy(
        update={"local_tool_calls": False, "continue_as_new_after_events": 100_000}
    )
    async with stack(model=model_kind, **options) as s:
        for batch in (1, 5, 10):
            agent = await s.start_agent(limits=remote)
            clock = await TurnClock(agent).start()
            for _ in range(3 + turns):
                await clock.turn(f"/tools {batch}")
            await clock.stop()
            history = await _history(s, agent.session_id)
            spans = _tool_spans(list(history.events))[3:]
            rows.append(
                _lat_row(
                    section, f"batch of {batch}: remote tools.execute scheduled -> results seen", spans, 5.0
                )
            )
        for batch in (1, 5, 10):
            agent = await s.start_agent()
            clock = await TurnClock(agent).start()
            for _ in range(3):
                await clock.turn(f"/tools {batch}")
            samples = [await clock.turn(f"/tools {batch}") for _ in range(turns)]
            await clock.stop()
            rows.append(_lat_row(section, f"batch of {batch}: whole tool turn", samples, 5.0))
    return rows


# ------------------------------------------------------------------------------------ 4. recovery


def _session_file(path: Path, model: Model, messages: int) -> None:
    limits = StorageRateLimits.unlimited()
    with JsonlSessionStorage.create(
        path, cwd="/", metadata={"system_prompt": "Be brief."}, fsync=FsyncPolicy("never"), rate_limits=limits
    ) as storage:
        storage.append_entries([ModelChangeEntry(model=model), ActiveToolsChangeEntry(active_tools=["noop"])])
        for start in range(0, messages, 1000):
            batch = []
            for n in range(start, min(start + 1000, messages)):
                if n % 2 == 0:
                    message: Any = UserMessage(content=f"question {n}: " + "lorem ipsum " * 8, timestamp=1)
                else:
                    message = AssistantMessage(content=[TextContent(text="answer " * 30)], timestamp=1)
                batch.append(MessageEntry(message=message))
            storage.append_entries(batch)


async def recovery(model_kind: str = "loopback", repeats: int = 3, **options: Any) -> list[Row]:
    rows = []
    async with stack(model=model_kind, **options) as s:
        source = s.workdir / "recover-src"
        source.mkdir()
        for count in (100, 1_000, 10_000):
            path = source / f"r{count}.jsonl"
            _session_file(path, s.model(), count)
            ready, first_turn = [], []
            for attempt in range(repeats):
                started = time.perf_counter()
                agent = await s.agents.recover(path, session_id=f"rec-{count}-{attempt}")
                await agent.wait_for_idle(timeout=60)
                ready.append(time.perf_counter() - started)
                clock = await TurnClock(agent).start()
                await clock.turn("/tools 1")
                first_turn.append(time.perf_counter() - started)
                await clock.stop()
            rows.append(
                Row(
                    "4. session recovery",
                    f"{count:,} messages: ready / first tool turn done (median)",
                    f"{_ms(statistics.median(ready))} / {_ms(statistics.median(first_turn))} ms",
                    "p50 <= 2000 ms",
                    statistics.median(first_turn) <= 2.0,
                )
            )
    return rows


# ----------------------------------------------------------------------------- 5. history per turn


async def history(
    model_kind: str = "loopback",
    checkpoints: tuple[int, ...] = (10, 100, 500),
    window: int = 5,
    **options: Any,
) -> list[Row]:
    label = "5. history per turn"
    rows: list[Row] = []
    per_turn_bytes: list[float] = []
    async with stack(model=model_kind, **options) as s:
        agent = await s.start_agent()
        client = s.agents.client
        clock = await TurnClock(agent).start()
        turn = 0
        latencies: list[tuple[int, float, str]] = []

        async def run_id() -> str:
            return (await client.get_workflow_handle(agent.session_id).describe()).run_id

        async def one_turn() -> None:
            nonlocal turn
            before = await run_id()
            latency = await clock.turn("/tools 1")
            turn += 1
            latencies.append((turn, latency, before))

        for checkpoint in checkpoints:
            while turn < checkpoint - window:
                await one_turn()
            cpu0 = s.cpu()
            while True:
                start_run = await run_id()
                h0 = await _history(s, agent.session_id)
                for _ in range(window):
                    await one_turn()
                h1 = await _history(s, agent.session_id)
                if await run_id() == start_run:
                    break  # else a continue-as-new fell in the window: measure the next one
            cpu1 = s.cpu()
            added = list(h1.events)[len(h0.events) :]
            size = sum(event.ByteSize() for event in added) / window
            per_turn_bytes.append(size)
            rows.append(
                Row(
                    label,
                    f"turn {turn}: bytes / events / worker CPU per turn",
                    f"{size:,.0f} B / {len(added) / window:.1f} / "
                    f"{(cpu1.worker - cpu0.worker) / window * 1000:.1f} ms",
                )
            )
        # Continue-as-new: the turns during which the run changed, and the carried input's size.
        runs: dict[str, int] = {}
        for number, _, rid in latencies:
            runs.setdefault(rid, number)
        rollovers = sorted(runs.values())[1:]
        median = statistics.median(latency for _, latency, _ in latencies)
        cost = [latency - median for number, latency, _ in latencies if number in rollovers]
        current = await _history(s, agent.session_id)
        first = list(current.events)[0]
        carried = first.workflow_execution_started_event_attributes.input.ByteSize()
        await clock.stop()
    flat = max(per_turn_bytes) <= 1.2 * min(per_turn_bytes)
    rows.append(
        Row(
            label,
            "bytes per turn flat (max/min)",
            f"{max(per_turn_bytes) / min(per_turn_bytes):.2f}",
            "<= 1.2",
            flat,
        )
    )
    rows.append(
        Row(
            label,
            f"continue-as-new: {len(rollovers)} in {turn} turns; extra latency; carried input",
            f"{_ms(statistics.mean(cost)) if cost else 'n/a'} ms; {carried:,} B",
        )
    )
    return rows


# ------------------------------------------------------------------------- 8. server work per turn


def _server_counters(s: Stack) -> dict[str, float]:
    """The dev server's request counters (Prometheus), by operation, frontend and history summed."""
    import re
    import urllib.request

    banner = (s.workdir / "server.log").read_text()
    url = re.search(r"Temporal Metrics:\s+(\S+)", banner)
    if url is None:
        return {}
    text = urllib.request.urlopen(url.group(1), timeout=5).read().decode()
    counters: dict[str, float] = {}
    for name, labels, value in re.findall(
        r"^(service_requests|persistence_requests)\{(.*)\} (\S+)$", text, re.M
    ):
        operation = re.search(r'operation="([^"]+)"', labels)
        key = f"{name.split('_')[0]} {operation.group(1) if operation else '?'}"
        counters[key] = counters.get(key, 0.0) + float(value)
    return counters


async def server_ops(
    turns: int = 40,
    model_kind: str = "scripted",
    pause: float = 0.0,
    subscribe: bool = True,
    since: bool = False,
    run: bool = False,
    **options: Any,
) -> list[Row]:
    """Requests the server handles per watched tool turn (frontend and history services counted
    together): a count, so unlike CPU figures it hardly moves with the machine's speed. ``pause``:
    seconds between turns (a person reading: the run's entries are written after it, not by the next
    run); without ``subscribe``, each turn read by ``wait_for_idle`` and ``get_state``."""
    section = f"8. server requests per tool turn ({model_kind}"
    section += f", {pause:g} s apart" if pause else ""
    if run:
        section += ", read by run)"
    elif since:
        section += ", read by wait_for_idle(since=...))"
    else:
        section += ")" if subscribe else ", read by wait_for_idle + get_state)"
    async with stack(model=model_kind, **options) as s:
        clock = await _warm_clock(s, 5, subscribe, since, run)
        await asyncio.sleep(2)  # the server reports its counters every second
        before = _server_counters(s)
        for _ in range(turns):
            await clock.turn("/tools 1")
            await asyncio.sleep(pause)
        await asyncio.sleep(2)
        after = _server_counters(s)
        await clock.stop()
    per_turn = {key: (after[key] - before.get(key, 0.0)) / turns for key in after}
    keep = [
        "service RespondWorkflowTaskCompleted",
        "service UpdateWorkflowExecution",
        "service RecordActivityTaskHeartbeat",
        "service RespondActivityTaskCompleted",
        "service QueryWorkflow",
        "persistence UpdateWorkflowExecution",
        "persistence ReadHistoryBranch",
    ]
    return [Row(section, key, f"{per_turn.get(key, 0.0):.2f}") for key in keep]


# ------------------------------------------------------------------- 9. many live conversations


def _mb(count: int) -> str:
    return f"{count / 1e6:.0f} MB"


async def scale(
    convs: int = 500, batch: int = 50, wake: int = 50, model_kind: str = "loopback", **options: Any
) -> list[Row]:
    """``convs`` live conversations on one worker: each started with one tool turn (``start(...,
    prompt=...)``, read by ``wait_for_idle`` and ``get_state``, no subscriber), ``batch`` at a
    time, then left idle. Then
    the ``wake`` oldest (the first out of the worker's cache once it is full) are prompted again,
    one at a time: a prompt to its answer. Memory and the SQLite file as they stand at the end."""
    section = f"9. {convs:,} live conversations on one worker ({model_kind})"
    async with stack(model=model_kind, **options) as s:
        # The clients keep handles on the ``wake`` oldest only (a client need not hold a handle on
        # every conversation: ``attach`` makes one from the id).
        clocks: list[TurnClock] = []
        started = 0

        async def one() -> None:
            nonlocal started
            # Started with its prompt (update-with-start), the turn read as ``TurnClock`` reads one.
            agent = await s.start_agent(prompt="/tools 1")
            await agent.wait_for_idle(120)
            if (await agent.get_state()).messages[-1].role != "assistant":
                raise RuntimeError("idle without the answer")
            started += 1
            if len(clocks) < wake:
                clocks.append(TurnClock(agent, subscribe=False))

        before = s.cpu()
        for start in range(0, convs, batch):
            await asyncio.gather(*(one() for _ in range(min(batch, convs - start))))
        after = s.cpu()
        await asyncio.sleep(2)  # the last deferred flushes and index writes
        samples = [await clock.turn("/tools 1", timeout=120) for clock in clocks[:wake]]
        worker, server = s.worker_rss(), s.server_rss()
        clients = _procs.rss_bytes(os.getpid())
        database = sum(
            path.stat().st_size for path in (s.workdir / "temporal").glob("temporal.db*") if path.is_file()
        )
    wall = after.wall - before.wall
    return [
        Row(section, "started and answered once: conversations/s", f"{started / wall:.1f} ({wall:.0f} s)"),
        Row(
            section,
            "CPU per conversation started: worker / server / clients",
            f"{(after.worker - before.worker) / started * 1000:.1f} / "
            f"{(after.server - before.server) / started * 1000:.1f} / "
            f"{(after.clients - before.clients) / started * 1000:.1f} ms",
        ),
        Row(
            section,
            "RSS: worker + clients (worker / clients); server",
            f"{_mb(worker + clients)} ({_mb(worker)} / {_mb(clients)}); {_mb(server)}",
        ),
        Row(
            section, "SQLite file (per conversation)", f"{_mb(database)} ({database / started / 1e3:.0f} KB)"
        ),
        _lat_row(section, f"a prompt to the {wake} oldest answered p50/p95/p99", samples),
    ]


# ----------------------------------------------------------------------------------- 6. deltas


async def deltas(streams: int = 5, count: int = 100, gap_ms: float = 10, **options: Any) -> list[Row]:
    """Provider server writes a delta -> a subscriber receives it (loopback stamps every write)."""
    latencies: list[float] = []
    async with stack(model="loopback", **options) as s:
        agent = await s.start_agent()
        clock = await TurnClock(agent).start()
        await clock.turn("/tools 1")
        for _ in range(streams):
            received: dict[int, float] = {}
            started = time.perf_counter()
            await clock.prompt(f"/stream {count} {gap_ms}")
            while True:
                kind, at, event = await asyncio.wait_for(clock.queue.get(), 60)
                if kind == "message_update":
                    delta = event.assistant_message_event.get("delta") or ""
                    for piece in delta.replace("]", "] ").split():
                        if piece.startswith("[") and piece.endswith("]"):
                            received.setdefault(int(piece[1:-1]), at)
                if kind == "agent_end":
                    break
            await asyncio.sleep(0.05)
            written = orjson.loads(s.stamps_file.read_bytes().splitlines()[-1])
            for key, sent in written.items():
                if int(key) in received and sent >= started:
                    latencies.append(received[int(key)] - sent)
        await clock.stop()
    return [_lat_row("6. delta latency (server write -> subscriber)", "p50/p95/p99", latencies)]


# ------------------------------------------------------------- MCP tool against a local AgentTool


async def mcp(model_kind: str = "scripted", turns: int = 100, rounds: int = 3, **options: Any) -> list[Row]:
    """One conversation's tool turns with the no-op tool served by an MCP stdio server, against the
    same turns with a local ``AgentTool``: worker CPU per turn, rounds interleaved (local, MCP, ...)
    on a stack each. The MCP server's own CPU (a child of the worker) is shown apart."""
    worker_options = dict(options.get("worker_options", {}))
    timeout = float(worker_options.get("tool_timeout_seconds", 120))
    section = f"MCP stdio tool vs local AgentTool ({model_kind}, tool timeout {timeout:g} s)"
    cpu: dict[str, list[float]] = {"local": [], "mcp": []}
    latency: dict[str, list[float]] = {"local": [], "mcp": []}
    server_cpu: list[float] = []
    for _ in range(rounds):
        for kind in ("local", "mcp"):
            flags = {**worker_options, "tool_timeout_seconds": timeout, "mcp_noop": kind == "mcp"}
            async with stack(model=model_kind, worker_options=flags) as s:
                clock = await _warm_clock(s, 10)
                mcp_pids = children(s.worker.pid, "python")
                before, mcp_before = s.cpu(), sum(cpu_seconds(pid) for pid in mcp_pids)
                latency[kind] += [await clock.turn("/tools 1") for _ in range(turns)]
                after, mcp_after = s.cpu(), sum(cpu_seconds(pid) for pid in mcp_pids)
                await clock.stop()
                cpu[kind].append((after.worker - before.worker) / turns * 1000)
                if kind == "mcp":
                    server_cpu.append((mcp_after - mcp_before) / turns * 1000)
    ratio = statistics.median(cpu["mcp"]) / statistics.median(cpu["local"])
    return [
        _lat_row(section, "local AgentTool turn p50/p95/p99", latency["local"]),
        _lat_row(section, "MCP tool turn p50/p95/p99", latency["mcp"]),
        Row(section, "worker CPU per turn, local AgentTool", _each(cpu["local"])),
        Row(section, "worker CPU per turn, MCP tool", _each(cpu["mcp"])),
        Row(section, "MCP / local worker CPU (medians)", f"{ratio:.2f}x", "<= 2x", ratio <= 2.0),
        Row(section, "MCP server process CPU per turn", _each(server_cpu)),
    ]


SCENARIOS = {
    "single": single,
    "concurrent": lambda **kw: _concurrent(**kw),
    "burst": burst,
    "tools": tools,
    "recovery": recovery,
    "history": history,
    "deltas": deltas,
    "mcp": mcp,
    "scale": scale,
}


async def _concurrent(**options: Any) -> list[Row]:
    rows = await paced(1000, 15, tool_calls_per_minute=100, **options)
    rows += await paced(1000, 15, **options)
    rows += await paced(10_000, 10, **options)
    return rows


def print_table(rows: list[Row]) -> None:
    # Rows without a target (the machine's speed, lists) don't widen the columns of those with one.
    sized = [row for row in rows if row.target] or rows
    widths = [max(len(getattr(r, f)) for r in sized) for f in ("metric", "value", "target")]
    section = None
    for row in rows:
        if row.section != section:
            section = row.section
            print(f"\n{section}")
        mark = "" if row.ok is None else ("  ok" if row.ok else "  MISS")
        print(
            f"  {row.metric:<{widths[0]}}  {row.value:>{widths[1]}}  {row.target:<{widths[2]}}{mark}".rstrip()
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=list(SCENARIOS))
    parser.add_argument("--model", choices=["loopback", "scripted"], default="loopback")
    parser.add_argument("--worker-options", default="{}", help="Worker keyword arguments, as JSON")
    args = parser.parse_args()
    options: dict[str, Any] = {"worker_options": orjson.loads(args.worker_options)}
    if args.scenario != "deltas":
        options["model_kind"] = args.model
    rows = asyncio.run(SCENARIOS[args.scenario](**options))
    print_table(rows)


if __name__ == "__main__":
    main()
