"""Network faults: conversations with subscribers while the worker's links are cut, degraded and reset.

    python -m tests.reliability.netfault                       # 20 conversations x 40 turns (needs root)
    python -m tests.reliability.netfault --no-faults           # the same workload, no fault: the baseline
    python -m tests.reliability.netfault --conversations 4 --turns 8 --schedule short

The worker runs as its own process, on the shipped defaults, in a network namespace behind a router
namespace (``netns``): the worker-server path can be blackholed (the router drops its packets) or
the worker's interface taken down; both of the worker's links pass through forwarders
(``netproxy``) that add delay and emulated loss, and the model link's forwarder can reset the
streams in flight. The model is the loopback server speaking OpenAI Chat Completions, streaming
its answers over about a second; every fourth turn asks for a tool call. Without root the
namespace faults are left out and the worker-server blackholes are made by the forwarder.

Every conversation has a subscriber that follows the documented rule: it shows ``text_delta`` deltas
and drops what it has on ``llm_retry``. At the end each assistant message's shown text must equal
the final text, every prompt must have exactly one answer, the session files must equal the
workflows, no workflow task may have failed, and no model request may repeat one whose answer was
already sent whole. Figures (JSON with ``--out``): turns, lost, duplicated, re-sent model requests,
recovery after each fault kind (the time from a link's return to the end of each turn in flight
then: p50 / p99 / max), and turn latency in the calm periods.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import signal
import statistics
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentcore import AgentOptions
from agentcore.client import AgentClient, DurableAgent
from agentcore.messages import AssistantMessage, ToolResultMessage, UserMessage
from agentcore.protocol import ConversationLimits
from agentcore.temporal import DevServer
from agentcore.testing.loopback import LoopbackServer, Script, ScriptToolCall

from . import netns
from .conftest import WorkerProc, assert_file_matches_state, run_histories, spawn_worker
from .netproxy import Forwarder

# Faults: (seconds after the workload starts, kind, seconds the fault lasts).
SCHEDULES: dict[str, list[tuple[float, str, float]]] = {
    "full": [
        (25, "blackhole", 2),
        (40, "blackhole", 12),
        (65, "link_down", 5),
        (85, "degraded", 20),
        (120, "model_reset", 0),
        (135, "blackhole", 20),
        (170, "link_down", 15),
        (200, "kill9", 0),
        (220, "blackhole", 5),
        (235, "model_reset", 0),
        (245, "link_down", 2),
        (260, "blackhole", 8),
    ],
    "blackholes": [
        (12, "blackhole", 20),
        (50, "blackhole", 12),
        (80, "blackhole", 8),
        (105, "blackhole", 5),
    ],
    "short": [
        (8, "blackhole", 3),
        (18, "model_reset", 0),
        (24, "blackhole", 13),
        (45, "kill9", 0),
    ],
}
CALM_AFTER = 15.0  # seconds after a fault ends that still count as disturbed (not calm)
TURN_TIMEOUT = 300.0
REPLY_WORDS = 30
FRAME_DELAY = 0.04  # seconds between the model's SSE frames: an answer streams over ~1 s


# ------------------------------------------------------------------------------------------ model


def _request_key(body: Any) -> str:
    return hashlib.sha256(orjson.dumps(body.get("messages", []))).hexdigest()[:16]


def _last_user_text(body: Any) -> tuple[str, str]:
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content")
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(last.get("role", "")), str(content or "")


def respond(body: Any, protocol: str) -> Script:
    """Deterministic in the request (a retried call gets the same answer)."""
    role, text = _last_user_text(body)
    if role == "user" and text.endswith("use add"):
        call_id = "call_" + hashlib.sha256(text.encode()).hexdigest()[:12]
        return Script(tool_calls=[ScriptToolCall(name="add", arguments={"a": len(text), "b": 2}, id=call_id)])
    if role == "tool":
        return Script(text=f"the sum is {text}", delay=FRAME_DELAY)
    words = " ".join(f"w{i}" for i in range(REPLY_WORDS))
    return Script(text=f"answer to {text}: {words}", delay=FRAME_DELAY)


class ModelServer(LoopbackServer):
    """Counts requests by their context, and which were answered whole (the stream's last byte out)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(respond, **kwargs)  # type: ignore[arg-type]
        self.requests_by_key: Counter[str] = Counter()
        self.completed: set[str] = set()
        self.resent_after_answer = 0
        self.resent: list[str] = []  # the last message of each request sent again after its answer
        self.streaming = 0

    async def _stream(self, writer: asyncio.StreamWriter, script: Script, protocol: Any, body: Any) -> bool:
        key = _request_key(body)
        if key in self.completed:
            self.resent_after_answer += 1
            self.resent.append(" / ".join(_last_user_text(body)))
        self.requests_by_key[key] += 1
        self.streaming += 1
        try:
            result = await super()._stream(writer, script, protocol, body)
        finally:
            self.streaming -= 1
        self.completed.add(key)
        return result


# ------------------------------------------------------------------------------------------ worker


def spawn(
    address: str,
    task_queue: str,
    workdir: Path,
    topology: netns.Topology | None,
    replay_slots: int | None = None,
) -> WorkerProc:
    """The worker, on the shipped defaults, talking to the provider model (in the namespace if any);
    ``replay_slots`` bounds its full-history replays (``create_worker(replay_slots=...)``, off by
    default, as shipped)."""
    return spawn_worker(
        address,
        task_queue,
        workdir / "sessions",
        workdir / "executions.log",
        workdir,
        wrap=topology.command if topology else None,
        model="provider",
        shipped_defaults=1,
        replay_slots=replay_slots or 0,
    )


# ------------------------------------------------------------------------------------------ the run


@dataclass
class Turn:
    conversation: int
    index: int
    sent: float
    ended: float | None = None
    error: str | None = None


@dataclass
class Fault:
    kind: str
    started: float
    returned: float = 0.0


@dataclass
class Report:
    conversations: int
    turns_asked: int
    turns: list[Turn] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    shown_wrong: list[str] = field(default_factory=list)  # messages whose shown text != final text
    messages_checked: int = 0
    duplicated: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    prompt_retries: list[str] = field(default_factory=list)  # prompts sent again (same id)
    resubscribed: list[str] = field(default_factory=list)  # event streams that gave up, followed again
    resent: list[str] = field(default_factory=list)
    model_requests: int = 0
    model_calls: int = 0
    resent_after_answer: int = 0
    resent_after_sent: int = 0
    resent_after_kill: int = 0
    failed_workflow_tasks: int = 0
    load: list[float] = field(default_factory=list)
    duration: float = 0.0
    # Each conversation's history events (monotonic time, event type), for ``timelines``.
    events: dict[int, list[tuple[float, str]]] = field(default_factory=dict)
    tcp: list[str] = field(default_factory=list)  # ``ss -tni`` samples around the faults (``--tcp-trace``)

    def figures(self) -> dict[str, Any]:
        done = [t for t in self.turns if t.ended is not None and t.error is None]
        recovery: dict[str, dict[str, Any]] = {}
        for kind in sorted({f.kind for f in self.faults}):
            values = []
            for fault in (f for f in self.faults if f.kind == kind):
                for turn in self.turns:
                    if turn.sent < fault.returned and (turn.ended is None or turn.ended > fault.returned):
                        end = turn.ended if turn.ended is not None else float("inf")
                        values.append(end - fault.returned)
            recovery[kind] = {"faults": sum(f.kind == kind for f in self.faults), **_stats(values)}
        calm = [t.ended - t.sent for t in done if self._calm(t)]  # type: ignore[operator]
        return {
            "conversations": self.conversations,
            "turns_asked": self.turns_asked,
            "turns_answered": len(done),
            "lost": self.turns_asked - len(done),
            "duplicated": len(self.duplicated),
            "assistant_messages_checked": self.messages_checked,
            "shown_text_differs": len(self.shown_wrong),
            "model_requests": self.model_requests,
            "model_calls": self.model_calls,
            "resent_after_answer": self.resent_after_answer,
            "resent_after_answer_of_killed_worker": self.resent_after_kill,
            "resent_after_model_sent_it": self.resent_after_sent,
            "failed_workflow_tasks": self.failed_workflow_tasks,
            "recovery_seconds": recovery,
            "calm_turn_seconds": _stats(calm),
            "duration_seconds": round(self.duration, 1),
            "prompts_sent_again": len(self.prompt_retries),
            "subscribers_resubscribed": len(self.resubscribed),
            "load_average": [round(value, 2) for value in self.load],
            "problems": self.problems[:20],
            "shown_text_differs_samples": self.shown_wrong[:10],
            "resent_samples": self.resent[:10],
        }

    def timelines(self, slower_than: float = 5.0) -> list[dict[str, Any]]:
        """Each turn in flight at a fault's return that ended more than ``slower_than`` seconds after
        it, with its conversation's history events from the turn's start (times from the return)."""
        slow = []
        for fault in self.faults:
            for turn in self.turns:
                if not (turn.sent < fault.returned and (turn.ended is None or turn.ended > fault.returned)):
                    continue
                end = turn.ended if turn.ended is not None else float("inf")
                if end - fault.returned <= slower_than:
                    continue
                events = [
                    f"{at - fault.returned:+7.2f} {name}"
                    for at, name in self.events.get(turn.conversation, [])
                    if turn.sent - 0.5 <= at <= end + 0.5
                ]
                slow.append(
                    {
                        "fault": fault.kind,
                        "returned_at": time.strftime(
                            "%H:%M:%S", time.gmtime(fault.returned + time.time() - time.monotonic())
                        ),
                        "lasted": round(fault.returned - fault.started, 1),
                        "conversation": turn.conversation,
                        "turn": turn.index,
                        "sent": round(turn.sent - fault.returned, 2),
                        "ended": round(end - fault.returned, 2),
                        "events": events,
                    }
                )
        return slow

    def _calm(self, turn: Turn) -> bool:
        assert turn.ended is not None
        return not any(
            turn.sent < fault.returned + CALM_AFTER and turn.ended > fault.started for fault in self.faults
        )


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "n": len(ordered),
        "p50": at(0.5),
        "p99": at(0.99),
        "max": round(ordered[-1], 2),
        "mean": round(statistics.fmean(ordered), 2),
    }


class ShownText:
    """What a UI that follows the rule shows of each assistant message: its ``text_delta`` deltas,
    dropped on ``llm_retry``. ``see`` returns ``(shown, final text)`` at each assistant message's end."""

    def __init__(self) -> None:
        self.shown = ""

    def see(self, event: Any) -> tuple[str, str] | None:
        if event.type == "message_start" and event.message.role == "assistant":
            self.shown = ""
        elif event.type == "message_update":
            delta = event.assistant_message_event
            if delta.get("type") == "text_delta":
                self.shown += str(delta.get("delta", ""))
        elif event.type == "llm_retry":
            self.shown = ""
        elif event.type == "message_end" and isinstance(event.message, AssistantMessage):
            return self.shown, event.message.text
        return None


class Subscriber:
    """A conversation's subscriber: checks each message's shown text, notes each run's end."""

    def __init__(self, agent: DurableAgent, index: int, report: Report) -> None:
        self.agent, self.index, self.report = agent, index, report
        self.runs_ended: asyncio.Queue[float] = asyncio.Queue()
        self.text = ShownText()
        self.last_offset = -1

    async def follow(self) -> None:
        # As a UI does: when the stream gives up (the conversation unreachable for minutes), follow
        # it again from the next offset.
        while True:
            try:
                await self._follow()
            except Exception as err:
                self.report.resubscribed.append(f"conversation {self.index}: {type(err).__name__}: {err}")
                await asyncio.sleep(1.0)

    async def _follow(self) -> None:
        async for offset, event in self.agent.events(self.last_offset + 1):
            if offset <= self.last_offset:
                self.report.problems.append(f"conversation {self.index}: offset {offset} seen twice")
            self.last_offset = offset
            ended = self.text.see(event)
            if ended is not None:
                self.report.messages_checked += 1
                shown, final = ended
                if shown != final:
                    self.report.shown_wrong.append(
                        f"conversation {self.index}: shown {shown[-60:]!r} / final {final[-60:]!r}"
                    )
            elif event.type == "agent_end":
                self.runs_ended.put_nowait(time.monotonic())


async def run(
    client: Client,
    address: str,
    workdir: Path,
    *,
    conversations: int,
    turns: int,
    schedule: list[tuple[float, str, float]],
    use_netns: bool,
    think: tuple[float, float] = (1.0, 4.0),
    seed: int = 1,
    limits: ConversationLimits | None = None,
    replay_slots: int | None = None,
    tcp_trace: bool = False,
) -> Report:
    rng = random.Random(seed)
    (workdir / "sessions").mkdir(parents=True, exist_ok=True)
    (workdir / "executions.log").touch()
    report = Report(conversations, conversations * turns)
    task_queue = f"netfault-{uuid.uuid4().hex[:8]}"
    host, port = address.rsplit(":", 1)
    topology = netns.Topology().open() if use_netns else None
    killed: list[int] = []
    try:
        listen = topology.host_ip if topology else "127.0.0.1"
        model_listen = topology.model_ip if topology else "127.0.0.1"
        model = await ModelServer().start()
        server_link = await Forwarder((listen, 0), (host, int(port)), seed=seed).start()
        model_link = await Forwarder((model_listen, 0), ("127.0.0.1", model.port), seed=seed + 1).start()
        workers = [await spawn(server_link.address, task_queue, workdir, topology, replay_slots).ready(60)]
        agents = AgentClient(client, task_queue=task_queue, sessions_dir=workdir / "sessions", limits=limits)
        options = AgentOptions(
            model=model.model(base_url=f"http://{model_link.address}/v1"),
            tools=["add"],
            system_prompt="netfault",
        )
        started = time.monotonic()
        subscribers: list[Subscriber] = []

        async def converse(index: int) -> None:
            agent = await agents.start(f"netfault-{index}-{uuid.uuid4().hex[:6]}", options)
            subscriber = Subscriber(agent, index, report)
            subscribers.append(subscriber)
            following = asyncio.create_task(subscriber.follow())
            try:
                await asyncio.sleep(rng.uniform(0, think[1]))
                for number in range(turns):
                    text = f"c{index} t{number}" + (" use add" if number % 4 == 3 else "")
                    turn = Turn(index, number, time.monotonic())
                    report.turns.append(turn)
                    try:
                        await prompt(agent, text, f"{agent.session_id}-{number}")
                        turn.ended = await asyncio.wait_for(subscriber.runs_ended.get(), TURN_TIMEOUT)
                    except Exception as err:
                        turn.error = f"{type(err).__name__}: {err}"
                        report.problems.append(f"conversation {index} turn {number}: {turn.error}")
                        return
                    await asyncio.sleep(rng.uniform(*think))
            finally:
                await asyncio.sleep(1.0)  # the last events reach the subscriber
                following.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await following
                with contextlib.suppress(Exception):
                    await check(agent, index)

        async def prompt(agent: DurableAgent, text: str, request_id: str) -> None:
            # As a careful client does: a prompt refused while the conversation cannot take it (its
            # workflow task failing over) is sent again with the same id, which applies it once.
            deadline = time.monotonic() + TURN_TIMEOUT
            while True:
                try:
                    await agent.prompt(text, id=request_id)
                    return
                except Exception as err:
                    if time.monotonic() > deadline:
                        raise
                    report.prompt_retries.append(f"{request_id}: {type(err).__name__}: {err}")
                    await asyncio.sleep(1.0)

        async def check(agent: DurableAgent, index: int) -> None:
            await agent.wait_for_idle(timeout=120)
            state = await agent.get_state()
            try:
                assert_file_matches_state(workdir / "sessions" / f"{agent.session_id}.jsonl", state)
            except AssertionError as err:
                report.problems.append(f"conversation {index}: file != state: {err}")
            answers: Counter[str] = Counter()
            last_user = ""
            for message in state.messages:
                if isinstance(message, UserMessage):
                    last_user = message.text
                elif isinstance(message, AssistantMessage) and not message.tool_calls:
                    answers[last_user] += 1
                    if message.stop_reason != "stop":
                        report.problems.append(f"conversation {index}: answer {message.stop_reason}")
            users = [m.text for m in state.messages if isinstance(m, UserMessage)]
            if len(users) != len(set(users)):
                report.duplicated.append(f"conversation {index}: a prompt recorded twice")
            for text, count in answers.items():
                if count > 1:
                    report.duplicated.append(f"conversation {index}: {text!r} answered {count} times")
            results = [m.tool_call_id for m in state.messages if isinstance(m, ToolResultMessage)]
            if len(results) != len(set(results)):
                report.duplicated.append(f"conversation {index}: a tool result recorded twice")
            offset = time.time() - time.monotonic()
            for history in await run_histories(client, agent.session_id):
                report.failed_workflow_tasks += sum(
                    e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in history.events
                )
                report.events.setdefault(index, []).extend(
                    (
                        e.event_time.seconds + e.event_time.nanos / 1e9 - offset,
                        EventType.Name(e.event_type)[len("EVENT_TYPE_") :],
                    )
                    for e in history.events
                )

        async def inject(kind: str, duration: float) -> None:
            fault = Fault(kind, time.monotonic())
            report.faults.append(fault)
            if kind == "blackhole":
                (topology.blackhole if topology else server_link.blackhole)()
                await asyncio.sleep(duration)
                (topology.restore if topology else server_link.restore)()
            elif kind == "link_down":
                assert topology is not None
                topology.link_down()
                await asyncio.sleep(duration)
                topology.link_up()
            elif kind == "degraded":
                # +300 ms round trip and 5 % loss (a lost chunk comes a retransmission timeout late), on
                # both of the worker's links.
                for link in (server_link, model_link):
                    link.degrade(delay=0.15, loss=0.05)
                await asyncio.sleep(duration)
                for link in (server_link, model_link):
                    link.degrade()
            elif kind == "model_reset":
                for _ in range(100):  # mid-stream: wait (bounded) for a stream in flight
                    if model.streaming:
                        break
                    await asyncio.sleep(0.05)
                model_link.reset()
            elif kind == "kill9":
                killed.append(workers[-1].pid)
                workers[-1].kill()
                workers.append(
                    await spawn(server_link.address, task_queue, workdir, topology, replay_slots).ready(60)
                )
            fault.returned = time.monotonic()

        async def faults() -> None:
            for at, kind, duration in schedule:
                if kind == "link_down" and topology is None:
                    continue
                await asyncio.sleep(max(0.0, started + at - time.monotonic()))
                await inject(kind, duration)

        async def sample_load() -> None:
            while True:
                report.load.append(os.getloadavg()[0])
                await asyncio.sleep(10)

        async def sample_tcp() -> None:
            # The worker-server connections as both ends see them (retransmission timer, backoff,
            # unacknowledged segments), every 0.5 s from a fault's start to 20 s after its return.
            assert topology is not None
            while True:
                await asyncio.sleep(0.5)
                fault = report.faults[-1] if report.faults else None
                now = time.monotonic()
                if fault is None or (fault.returned and now > fault.returned + 20):
                    continue
                for side, command in (
                    ("worker", topology.command(["ss", "-tniH", "dst", topology.host_ip])),
                    ("server", ["ss", "-tniH", "dst", topology.worker_ip]),
                ):
                    out = await asyncio.create_subprocess_exec(
                        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
                    )
                    text = (await out.communicate())[0].decode()
                    for line in " ".join(text.split("\n")).split("ESTAB")[1:]:
                        since = now - (fault.returned or fault.started)
                        where = "after" if fault.returned else "in"
                        report.tcp.append(
                            f"{fault.kind} {where} {since:6.2f} {side}: ESTAB{' '.join(line.split())}"
                        )

        injecting = asyncio.create_task(faults())
        sampling = asyncio.create_task(sample_load())
        tracing = asyncio.create_task(sample_tcp()) if tcp_trace and topology else None
        try:
            await asyncio.gather(*(converse(i) for i in range(conversations)))
        finally:
            report.duration = time.monotonic() - started
            for task in (injecting, sampling, tracing):
                if task is not None:
                    task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await injecting
            if topology is not None:
                topology.restore()
                topology.link_up()
            for worker in workers:
                worker.terminate()
            await server_link.stop()
            await model_link.stop()
            await model.stop()
            if topology is not None:
                topology.close()
        report.model_requests = sum(model.requests_by_key.values())
        report.model_calls = len(model.requests_by_key)
        report.resent_after_sent = model.resent_after_answer
        report.resent = model.resent
        report.resent_after_answer, report.resent_after_kill = _resent_after_answer(
            workdir / "executions.log", {str(pid) for pid in killed}
        )
        return report
    finally:
        if topology is not None:  # (also when the setup fails)
            topology.close()


def _resent_after_answer(log: Path, killed: set[str]) -> tuple[int, int]:
    """Model requests made for a call whose whole answer a worker had already received: by workers
    that were not killed, and those whose answer only a killed worker held (not yet written)."""
    answered: dict[tuple[str, str], str] = {}
    resent = resent_killed = 0
    for line in log.read_text().splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[0] not in ("stream-start", "stream-done"):
            continue
        call = (fields[5], fields[1])  # session, message count
        if fields[0] == "stream-done":
            answered.setdefault(call, fields[2])
        elif call in answered:
            if answered[call] in killed and fields[2] != answered[call]:
                resent_killed += 1
            else:
                resent += 1
    return resent, resent_killed


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--schedule", choices=sorted(SCHEDULES), default="full")
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument("--no-netns", action="store_true", help="forwarder faults only (no root needed)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--task-timeout", type=float, help="workflow_task_timeout_seconds (default: shipped)")
    parser.add_argument(
        "--replay-slots",
        type=int,
        help="the worker's replay_slots (agentcore worker --replay-slots; default: none, as shipped)",
    )
    parser.add_argument("--out", help="write the figures here (JSON)")
    parser.add_argument(
        "--timelines",
        help="write here each turn that ended more than 5 s after a fault's return, with its history",
    )
    parser.add_argument("--tcp-trace", help="write here the worker-server TCP connections around each fault")
    parser.add_argument("--workdir", help="keep sessions, logs and the server's database here")
    args = parser.parse_args()
    use_netns = netns.available() and not args.no_netns
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        async with DevServer(workdir / "temporal", ui=False) as server:
            report = await run(
                server.client,
                server.address,
                workdir,
                conversations=args.conversations,
                turns=args.turns,
                schedule=[] if args.no_faults else SCHEDULES[args.schedule],
                use_netns=use_netns,
                seed=args.seed,
                limits=(
                    ConversationLimits(workflow_task_timeout_seconds=args.task_timeout)
                    if args.task_timeout
                    else None
                ),
                replay_slots=args.replay_slots,
                tcp_trace=bool(args.tcp_trace),
            )
    figures = report.figures()
    if args.timelines:
        Path(args.timelines).write_text(json.dumps(report.timelines(), indent=1) + "\n")
    if args.tcp_trace:
        Path(args.tcp_trace).write_text("\n".join(report.tcp) + "\n")
    figures["netns"] = use_netns
    figures["replay_slots"] = args.replay_slots
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    bad = figures["lost"] or figures["duplicated"] or figures["shown_text_differs"] or report.problems
    resent = figures["resent_after_answer"] + figures["resent_after_answer_of_killed_worker"]
    raise SystemExit(1 if bad or resent or figures["failed_workflow_tasks"] else 0)


async def _main_until_terminated() -> None:
    # SIGTERM cancels the run, so that its network namespaces and processes are cleaned up.
    task = asyncio.ensure_future(main())
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    await task


if __name__ == "__main__":
    asyncio.run(_main_until_terminated())
