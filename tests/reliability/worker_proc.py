"""A real worker process for the reliability suite: the tests start it, kill it by pid, start another.

    python -m tests.reliability.worker_proc --address 127.0.0.1:7233 --task-queue q \\
        --sessions DIR --log FILE --ready FILE [--model scripted|provider] [--delay S] [--chunks N]
        [--mcp-config FILE] [--approval-tool 1] [--subagent-tool 1]

Every tool and every model call appends a line to ``--log`` (``<event> <key> <pid> <attempt>``), so a
test counts real executions across processes. Besides its own lines, every execution of a tool logs
``tool-call <session>:<tool call id> <tool> <pid> <attempt>`` as it begins (a call is its session and
id); a model call is ``stream-start``'s session and message count. ``--ready`` is written once the
worker polls.

``--approval-tool 1`` adds ``approved_op`` (``safe_op`` that waits for a person's approval);
``--subagent-tool 1`` adds ``helper``, a sub-agent whose task is a user message like any other (a JSON
directive makes it call ``add``, ``safe_op`` or ``approved_op``).

The scripted model answers from the last message (a function of the context, so a retried call gets
the same shape of answer), streaming ``--chunks`` deltas ``--delay`` seconds apart so a test can kill
it mid-stream. A user message whose text is a JSON directive asks for tool calls::

    {"calls": [["safe_op", {"key": "k1", "work": 3}]]}

Any other user text gets a text reply, and a tool result gets ``done`` plus the results. Replies name
the worker's pid: like a real model, two attempts never answer byte-for-byte alike.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel
from temporalio import activity

from agentcore import AgentOptions, AgentTool, AgentToolResult, subagent_tool
from agentcore.events import StreamEvent
from agentcore.mcp import load_mcp_config
from agentcore.messages import ToolResultMessage, UserMessage
from agentcore.model import Model
from agentcore.runtime import LlmContext, StreamOptions
from agentcore.session.storage import jsonl as session_storage
from agentcore.temporal import connect
from agentcore.testing.scripted import Reply, ScriptedModel, scripted_model, text, tool_calls
from agentcore.tool_context import current_tool_context
from agentcore.worker import create_worker

PID = os.getpid()


def log_line(log: Path, *fields: object) -> None:
    # One small O_APPEND write per line: lines from several processes never interleave.
    with open(log, "a") as handle:
        handle.write(" ".join(str(field) for field in fields) + "\n")


class OpArgs(BaseModel):
    key: str
    work: float = 0.0  # seconds before the effect
    linger: float = 0.0  # seconds between the effect and returning the result


def log_tool_call(log: Path, name: str, tool_call_id: str) -> None:
    """``tool-call <session>:<tool call id> <tool> <pid> <attempt>``: one line per execution."""
    context = current_tool_context()
    session = context.session_id if context and context.session_id else "-"
    log_line(log, "tool-call", f"{session}:{tool_call_id}", name, PID, context.attempt if context else 0)


def op_tool(name: str, log: Path, *, retry_safe: bool, requires_approval: bool = False) -> AgentTool:
    """``start`` -> sleep ``work`` -> ``effect`` (the real side effect) -> sleep ``linger`` -> return."""

    async def execute(tool_call_id: str, args: OpArgs, signal: Any, on_update: Any) -> AgentToolResult:
        context = current_tool_context()
        attempt = context.attempt if context else 0
        log_tool_call(log, name, tool_call_id)
        log_line(log, f"{name}-start", args.key, PID, attempt)
        await asyncio.sleep(args.work)
        log_line(log, f"{name}-effect", args.key, PID, attempt)
        await asyncio.sleep(args.linger)
        return AgentToolResult.text(f"{name} {args.key} done")

    return AgentTool(
        name=name,
        description=f"A {'retry-safe' if retry_safe else 'not retry-safe'} operation with a logged effect.",
        parameters=OpArgs,
        execute=execute,
        retry_safe=retry_safe,
        requires_approval=requires_approval,
    )


class AddArgs(BaseModel):
    a: float
    b: float


def add_tool(log: Path | None = None) -> AgentTool:
    def execute(tool_call_id: str, args: AddArgs, signal: Any, on_update: Any) -> AgentToolResult:
        if log is not None:
            log_tool_call(log, "add", tool_call_id)
        return AgentToolResult.text(str(args.a + args.b))

    return AgentTool(name="add", description="Add two numbers.", parameters=AddArgs, execute=execute)


def respond(reply_words: int) -> Any:
    def reply(context: LlmContext) -> Reply:
        last = context.messages[-1] if context.messages else None
        if isinstance(last, UserMessage):
            directive = _directive(last.text)
            if directive is not None and directive.get("calls"):
                return tool_calls([(name, args) for name, args in directive["calls"]])
            words = " ".join(f"w{i}" for i in range(reply_words))
            return text(f"reply to {last.text[:40]!r} from worker {PID}: {words}")
        if isinstance(last, ToolResultMessage):
            results = [m.text for m in context.messages if isinstance(m, ToolResultMessage)][-8:]
            return text(f"done by worker {PID}: {'; '.join(results)}")
        return text(f"continued by worker {PID}")

    return reply


def _directive(value: str) -> dict[str, Any] | None:
    if not value.startswith("{"):
        return None
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def logged_stream(model: Any, log: Path) -> Any:
    """Logs ``stream-start`` and, once the answer is in, ``stream-done``: ``<message count> <pid>
    <attempt> <local|remote> <session>`` (a call is its session and message count)."""

    def stream(model_: Model, context: LlmContext, options: StreamOptions) -> AsyncIterator[StreamEvent]:
        info = activity.info()
        fields = (len(context.messages), PID, info.attempt, "local" if info.is_local else "remote")
        log_line(log, "stream-start", *fields, options.session_id or "-")
        return _logging_done(model(model_, context, options), log, (*fields, options.session_id or "-"))

    return stream


async def _logging_done(
    events: AsyncIterator[StreamEvent], log: Path, fields: tuple[Any, ...]
) -> AsyncIterator[StreamEvent]:
    async for event in events:
        if event.type == "done":
            log_line(log, "stream-done", *fields)
        yield event


def tear_append_containing(marker: str) -> None:
    """Die (SIGKILL, from inside) halfway through this process's first session-file write whose bytes
    contain ``marker`` (which write that is depends on how the turn ran, so it is chosen by content).

    The only way to stop a process *inside* one ``write`` call at a chosen byte: write half the
    payload, then kill ourselves, exactly as a crash mid-append would leave the file.
    """
    original = session_storage.write_all
    wanted = marker.encode()

    def write_all(fd: int, data: bytes) -> None:
        if wanted in data and len(data) > 2:
            os.write(fd, data[: len(data) // 2])
            os.kill(PID, signal.SIGKILL)
        original(fd, data)

    session_storage.write_all = write_all  # type: ignore[assignment]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--sessions", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--ready", required=True)
    parser.add_argument("--model", choices=["scripted", "provider"], default="scripted")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each scripted delta")
    parser.add_argument("--chunks", type=int, default=1, help="deltas per scripted block")
    parser.add_argument("--reply-words", type=int, default=3)
    parser.add_argument("--tear-append", default="", help="die mid-way through the append containing this")
    parser.add_argument("--mcp-config", default="", help="MCP servers for the worker (mcpServers JSON)")
    parser.add_argument(
        "--shipped-defaults", type=int, default=0, help="1: create_worker's own worker options"
    )
    parser.add_argument("--replay-slots", type=int, default=0, help="create_worker's replay_slots (0: none)")
    parser.add_argument(
        "--approval-tool", type=int, default=0, help="1: add approved_op, safe_op awaiting approval"
    )
    parser.add_argument(
        "--subagent-tool", type=int, default=0, help="1: add helper, a sub-agent with the tools above"
    )
    args = parser.parse_args()

    # Core's warnings (a poll retried, a task completion refused) with the time they happened.
    logging.basicConfig(format="%(asctime)s %(name)s %(levelname)s %(message)s", level=logging.WARNING)
    log = Path(args.log)
    if args.tear_append:
        tear_append_containing(args.tear_append)
    client = await connect(args.address)
    tools = [
        op_tool("safe_op", log, retry_safe=True),
        op_tool("unsafe_op", log, retry_safe=False),
        add_tool(log),
    ]
    if args.approval_tool:
        tools.append(op_tool("approved_op", log, retry_safe=True, requires_approval=True))
    if args.subagent_tool:
        helper = AgentOptions(model=scripted_model(), tools=["add", "safe_op", "approved_op"])
        tools.append(subagent_tool("helper", "Hands a task to a sub-agent.", helper))
    if args.model == "scripted":
        scripted = ScriptedModel(respond(args.reply_words), chunks=args.chunks, delay=args.delay)
        stream_fn = logged_stream(scripted, log)
    else:
        from agentcore.inprocess import default_stream_fn

        stream_fn = logged_stream(default_stream_fn(), log)
    # A killed worker's sticky queue would hold the conversation's next workflow task for the
    # default 10 s; the suite kills workers on purpose and wants the task moved on quickly.
    options: dict[str, Any] = (
        {}
        if args.shipped_defaults
        else {
            "sticky_queue_schedule_to_start_timeout": timedelta(seconds=2),
            "graceful_shutdown_timeout": timedelta(seconds=1),
        }
    )
    worker = create_worker(
        client,
        task_queue=args.task_queue,
        tools=tools,
        sessions_dir=args.sessions,
        stream_fn=stream_fn,
        mcp_servers=load_mcp_config(args.mcp_config) if args.mcp_config else (),
        get_api_key=(lambda provider: "sk-loopback") if args.model == "provider" else None,
        replay_slots=args.replay_slots or None,
        **options,
    )
    async with worker:
        Path(args.ready).write_text(str(PID))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
