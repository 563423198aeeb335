"""Load under worker crashes: N conversations making tool calls for a while, on the embedded dev
server, while one of two worker processes is SIGKILLed and restarted every K seconds.

    python -m tests.reliability.load                      # 100 conversations, 5 minutes, kill every 30 s
    python -m tests.reliability.load --conversations 30 --duration 60 --kill-every 20

At the end every conversation must hold exactly the messages of the prompts it sent (user, tool
call, tool result, answer, each once, in order) and its session file must equal the workflow's
state. Prints throughput (turns per second) and the prompt-to-idle latency percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from temporalio.client import Client
from temporalio.service import RPCError

from agentcore import AgentOptions, WorkflowTaskFailingError
from agentcore.client import AgentClient, DurableAgent
from agentcore.messages import AssistantMessage, ToolResultMessage, UserMessage
from agentcore.protocol import ConversationLimits
from agentcore.temporal import DevServer
from agentcore.testing.scripted import scripted_model

from .conftest import WorkerProc, assert_file_matches_state, spawn_worker

# Two workers on one loaded machine, one killed every ~25 s: the killed one's conversations come back
# to the others as full-history replays, and sixteen at once overran the 10 s workflow task timeout
# again and again (bench/log/065-replay-bound-by-default.md). The workers bound them, as
# docs/network-faults.md advises for a loaded machine; ``--replay-slots 0`` runs the shipped default.
REPLAY_SLOTS = 2

LOAD_LIMITS = ConversationLimits(
    llm_heartbeat_seconds=2, tool_heartbeat_seconds=2, max_messages=100_000, max_messages_per_minute=1000
)


@dataclass
class LoadReport:
    conversations: int
    duration: float
    turns: int = 0
    kills: int = 0
    latencies: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # lost, duplicated or reordered messages
    client_errors: list[str] = field(default_factory=list)  # calls that raised (timeouts, refusals)
    # Prompts refused for a workflow task that kept failing (a worker overloaded past the task
    # timeout while it replays a killed worker's conversations), sent again with the same id.
    resent: int = 0
    # From the workers' logs: workflow tasks that ran over 5 s (Core's TMPRL1104 warning), and ones
    # that outlasted the 10 s task timeout (their completion refused: "Task not found").
    long_tasks: int = 0
    timed_out_tasks: int = 0

    @property
    def throughput(self) -> float:
        return self.turns / self.duration

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    def summary(self) -> str:
        return (
            f"{self.conversations} conversations, {self.duration:.0f} s, {self.kills} worker kills: "
            f"{self.turns} tool turns, {self.throughput:.2f} turns/s, latency p50 "
            f"{self.percentile(0.5):.2f} s, p99 {self.percentile(0.99):.2f} s, max "
            f"{max(self.latencies, default=0):.2f} s, mean {statistics.fmean(self.latencies or [0]):.2f} s; "
            f"{len(self.problems)} lost/duplicated/out-of-order, {len(self.client_errors)} client errors, "
            f"{self.resent} prompts refused for a failing workflow task and sent again; workers' logs: "
            f"{self.long_tasks} workflow tasks over 5 s, {self.timed_out_tasks} past the task timeout"
        )

    def read_worker_logs(self, workdir: Path) -> None:
        for output in workdir.glob("worker-*.out"):
            text = output.read_text(errors="replace")
            self.long_tasks += text.count("Workflow task duration exceeded")
            self.timed_out_tasks += text.count("Task not found when completing")


async def run_load(
    client: Client,
    address: str,
    workdir: Path,
    *,
    conversations: int,
    duration: float,
    kill_every: float,
    replay_slots: int = REPLAY_SLOTS,
) -> LoadReport:
    task_queue = f"load-{uuid.uuid4().hex[:8]}"
    sessions = workdir / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    log = workdir / "executions.log"
    log.touch()
    agents = AgentClient(client, task_queue=task_queue, sessions_dir=sessions, limits=LOAD_LIMITS)
    workers: list[WorkerProc] = [
        await spawn_worker(address, task_queue, sessions, log, workdir, replay_slots=replay_slots).ready()
        for _ in range(2)
    ]
    report = LoadReport(conversations, duration)
    deadline = time.monotonic() + duration

    async def converse(index: int) -> None:
        agent = await agents.start(
            f"load-{index}-{uuid.uuid4().hex[:6]}", AgentOptions(model=scripted_model(), tools=["add"])
        )
        turn = 0
        try:
            while time.monotonic() < deadline:
                turn += 1
                prompt = orjson.dumps({"calls": [["add", {"a": index, "b": turn}]], "turn": turn}).decode()
                started = time.monotonic()
                while True:
                    try:
                        await agent.prompt(prompt, id=f"{agent.session_id}-{turn}")
                        break
                    except WorkflowTaskFailingError:  # as the error says: the same id, sent again
                        if time.monotonic() > deadline + 120:
                            raise
                        report.resent += 1
                await agent.wait_for_idle(timeout=120)
                report.latencies.append(time.monotonic() - started)
                report.turns += 1
        except Exception as err:  # a client-side failure: reported, and the data is still checked
            report.client_errors.append(f"conversation {index}: {type(err).__name__}: {err}")
        try:
            await check(agent, turn, index)
        except Exception as err:
            report.problems.append(f"conversation {index}: could not be checked: {type(err).__name__}: {err}")

    async def check(agent: DurableAgent, turns: int, index: int) -> None:
        await agent.wait_for_idle(timeout=300)
        # A query waits for the conversation's workflow task; while a replay storm times tasks out,
        # it can time out too (RPCError "Timeout expired"): asked again, as a caller would.
        for attempt in range(4):
            try:
                state = await agent.get_state()
                break
            except RPCError:
                if attempt == 3:
                    raise
        try:
            assert_file_matches_state(sessions / f"{agent.session_id}.jsonl", state)
        except AssertionError as err:
            report.problems.append(f"{agent.session_id}: file != state: {err}")
        messages = state.messages
        if len(messages) == 4 * (turns - 1):
            turns -= 1  # the last prompt failed on the client before it was accepted
        if state.first_message_index or len(messages) != 4 * turns:
            report.problems.append(f"{agent.session_id}: {len(messages)} messages for {turns} prompts")
            return
        for turn in range(1, turns + 1):
            user, call, result, answer = messages[4 * (turn - 1) : 4 * turn]
            ok = (
                isinstance(user, UserMessage)
                and orjson.loads(user.text)["turn"] == turn
                and isinstance(call, AssistantMessage)
                and call.stop_reason == "toolUse"
                and isinstance(result, ToolResultMessage)
                and result.text == str(float(index + turn))
                and isinstance(answer, AssistantMessage)
                and answer.stop_reason == "stop"
            )
            if not ok:
                report.problems.append(f"{agent.session_id}: turn {turn} is not user/call/result/answer")
                return

    async def chaos() -> None:
        # Kills at planned times (every ``kill_every``, give or take a fifth), not counted from the
        # replacement worker's start: on a loaded machine that start is slow, and the run still
        # gets about ``duration / kill_every`` kills, all before the deadline.
        victim, due = 0, time.monotonic()
        while True:
            due += kill_every * random.uniform(0.8, 1.2)
            if due >= deadline:
                return
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            workers[victim].kill()
            report.kills += 1
            workers[victim] = await spawn_worker(
                address, task_queue, sessions, log, workdir, replay_slots=replay_slots
            ).ready()
            victim = 1 - victim

    chaos_task = asyncio.create_task(chaos())
    started = time.monotonic()
    try:
        await asyncio.gather(*(converse(i) for i in range(conversations)))
    finally:
        chaos_task.cancel()
        for worker in workers:
            worker.terminate()
    report.duration = time.monotonic() - started
    report.read_worker_logs(workdir)
    return report


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--duration", type=float, default=300)
    parser.add_argument("--kill-every", type=float, default=30)
    parser.add_argument(
        "--replay-slots",
        type=int,
        default=REPLAY_SLOTS,
        help="the workers' replay_slots (0: the default, none)",
    )
    parser.add_argument("--workdir", help="keep sessions, logs and the server's database here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        async with DevServer(workdir / "temporal", ui=False) as server:
            report = await run_load(
                server.client,
                server.address,
                workdir,
                conversations=args.conversations,
                duration=args.duration,
                kill_every=args.kill_every,
                replay_slots=args.replay_slots,
            )
    print(report.summary())
    for problem in (report.problems + report.client_errors)[:20]:
        print("  ", problem)
    raise SystemExit(1 if report.problems else 0)


if __name__ == "__main__":
    asyncio.run(main())
