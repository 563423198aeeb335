"""The CLI's commands on running conversations and session files (all but ``dev`` and ``worker``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import orjson

from ..client import DurableAgent, SessionSummary
from ..errors import AgentError
from ..logs import cli_logger
from ..session import JsonlSessionStorage
from .common import agents_for, attached, default_sessions_dir
from .export import session_to_markdown
from .parser import CliError
from .render import EventPrinter, format_state, format_table


async def _follow_run(agent: DurableAgent, start: int) -> None:
    printer = EventPrinter()
    async for _, event in agent.events(start):
        if printer.handle(event):
            return


async def cmd_send(args: argparse.Namespace) -> int:
    agent = await attached(args)
    start = await agent.event_offset()
    accepted = await agent.prompt(args.text)
    said = "accepted" if accepted.status == "accepted" else "already accepted (a repeated id)"
    cli_logger().info(f"{said}; events from offset {start}")
    if args.wait:
        await _follow_run(agent, start)
    return 0


async def cmd_steer(args: argparse.Namespace) -> int:
    agent = await attached(args)
    print(await agent.steer(args.text))
    return 0


async def cmd_follow_up(args: argparse.Namespace) -> int:
    agent = await attached(args)
    print(await agent.follow_up(args.text))
    return 0


async def cmd_clear(args: argparse.Namespace) -> int:
    """Prints each removed message as ``steering: TEXT`` / ``follow_up: TEXT``."""
    agent = await attached(args)
    removed = await agent.clear_queues(args.queue)
    for queue, items in (("steering", removed.steering), ("follow_up", removed.follow_up)):
        for item in items:
            print(f"{queue}: {item.message.text}")
    cli_logger().info(
        f"removed {len(removed.steering)} steering and {len(removed.follow_up)} follow-up "
        f"message(s) from {agent.session_id}"
    )
    return 0


async def cmd_abort(args: argparse.Namespace) -> int:
    agent = await attached(args)
    await agent.abort(args.reason)
    cli_logger().info(f"abort sent to {agent.session_id}")
    return 0


async def cmd_state(args: argparse.Namespace) -> int:
    agent = await attached(args)
    state = await agent.get_state()
    if args.output == "json":
        print(state.model_dump_json(indent=2))
    else:
        print(format_state(state, await agent.get_session_stats()))
    return 0


async def cmd_schedule(args: argparse.Namespace) -> int:
    agent = await attached(args)
    if args.delete:
        await agent.delete_schedule(args.delete)
        cli_logger().info(f"deleted schedule {args.delete}")
        return 0
    if args.list:
        rows = []
        for item in await agent.list_schedules():
            description = await agent.client.get_schedule_handle(item.id).describe()
            upcoming = description.info.next_action_times[:1]
            paused = description.schedule.state.paused
            rows.append(
                [
                    item.id,
                    item.describe(),
                    "paused"
                    if paused
                    else (upcoming[0].astimezone().strftime("%Y-%m-%d %H:%M:%S") if upcoming else "-"),
                    item.text if len(item.text) <= 60 else item.text[:59] + "…",
                ]
            )
        if rows:
            print(format_table(["SCHEDULE", "WHEN", "NEXT", "TEXT"], rows))
        else:
            cli_logger().info(f"{agent.session_id} has no schedules")
        return 0
    if not args.text:
        raise CliError("schedule: the message TEXT is missing", exit_code=2)
    item = await agent.schedule(args.text, every=args.every, cron=args.cron)
    print(item.id)
    cli_logger().info(f"{item.describe()}: {args.text!r} to {agent.session_id}")
    return 0


async def cmd_terminate(args: argparse.Namespace) -> int:
    agent = await attached(args)
    await agent.terminate(args.reason)
    cli_logger().info(f"terminated {agent.session_id}; recover it with: agentcore recover PATH")
    return 0


async def cmd_events(args: argparse.Namespace) -> int:
    """JSON lines ``{"offset": N, "event": {...}}``; rerun with ``--from N+1`` to resume."""
    agent = await attached(args)
    end = None if args.follow else await agent.event_offset()
    if end is not None and args.from_offset >= end:
        return 0
    async for offset, event in agent.events(args.from_offset):
        line = orjson.dumps({"offset": offset, "event": event.model_dump(mode="json")})
        sys.stdout.write(line.decode() + "\n")
        sys.stdout.flush()
        if end is not None and offset >= end - 1:
            break
    return 0


def _file_stats(sessions_dir: Path, summary: SessionSummary) -> tuple[int | None, float | None]:
    # Until the workflow indexes message count and cost, the session file has them (read-only open).
    path = sessions_dir / f"{summary.session_id}.jsonl"
    if not path.is_file():
        return None, None
    try:
        with JsonlSessionStorage.open(path) as storage:
            stats = storage.get_session_stats()
    except AgentError:
        return None, None
    return stats.message_count, stats.cost_total


async def cmd_sessions(args: argparse.Namespace) -> int:
    agents = await agents_for(args)
    summaries = await agents.list(args.query, limit=args.limit)
    if args.output == "json":  # the list as it is (an empty one too), for programs
        print(orjson.dumps([summary.model_dump(mode="json") for summary in summaries]).decode())
        return 0
    if not summaries:
        cli_logger().info("no conversations")
        return 0
    rows = []
    for summary in summaries:
        messages, cost = summary.message_count, summary.cost_usd
        if messages is None or cost is None:
            file_messages, file_cost = _file_stats(default_sessions_dir(args), summary)
            messages = messages if messages is not None else file_messages
            cost = cost if cost is not None else file_cost
        started = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(summary.start_time)) if summary.start_time else "-"
        )
        rows.append(
            [
                summary.session_id,
                summary.status.lower() + (f"/{summary.agent_status}" if summary.agent_status else ""),
                summary.model or "-",
                "-" if messages is None else str(messages),
                "-" if cost is None else f"${cost:.4f}",
                started,
            ]
        )
    print(format_table(["SESSION", "STATUS", "MODEL", "MESSAGES", "COST", "STARTED"], rows))
    return 0


async def cmd_recover(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.is_file():
        raise CliError(f"no session file at {path}", exit_code=3)
    agents = await agents_for(args)
    cli_logger().info(f"rebuilding the conversation from {path} ...")
    agent = await agents.recover(path, session_id=args.session_id)
    state = await agent.get_state()
    print(agent.session_id)
    cli_logger().info(
        f"recovered {state.message_count} messages into session {agent.session_id}; "
        f"continue with: agentcore chat {agent.session_id}"
    )
    return 0


def session_path(args: argparse.Namespace, target: str) -> Path:
    path = Path(target)
    if path.is_file():
        return path
    candidate = default_sessions_dir(args) / f"{target}.jsonl"
    if candidate.is_file():
        return candidate
    raise CliError(f"AGENT_NOT_FOUND: no session file {target!r} (looked in {candidate.parent})", exit_code=3)


async def cmd_export(args: argparse.Namespace) -> int:
    markdown = session_to_markdown(session_path(args, args.target))
    if args.output:
        Path(args.output).write_text(markdown, encoding="utf-8")
        cli_logger().info(f"wrote {args.output}")
    else:
        sys.stdout.write(markdown)
    return 0


async def cmd_chat(args: argparse.Namespace) -> int:
    from .chat import ChatSession, ScriptedLines, line_source, pretty_output
    from .common import attach_or_start, choose_model

    agents = await agents_for(args)
    session_id = args.session or time.strftime("chat-%Y%m%d-%H%M%S")
    try:
        model = choose_model(args.model, args.base_url, args.demo_port)
    except ValueError as err:
        raise CliError(str(err), exit_code=2) from None
    agent = (
        await agents.attach(session_id)
        if args.attach_only
        else await attach_or_start(agents, session_id, model)
    )
    cli_logger().info(f"session {session_id}; /help for commands, Ctrl-C aborts a turn")
    pretty = pretty_output(args)
    lines = ScriptedLines(args.once, sys.stdout) if args.once else line_source(Path(args.data_dir), pretty)
    await ChatSession(agent, lines, pretty=pretty).run()
    if args.once:
        await agent.wait_for_idle(timeout=60)
    return 0


async def cmd_codec_server(args: argparse.Namespace) -> int:
    from ..temporal.codec import ENCRYPTION_KEY_ENV, EncryptionKeyError, codec_from_env
    from ..temporal.codec_server import DEFAULT_ORIGINS, CodecServer

    try:
        codec = codec_from_env()
    except (EncryptionKeyError, ImportError) as err:
        raise CliError(str(err), exit_code=2) from None
    if codec is None:
        raise CliError(f"{ENCRYPTION_KEY_ENV} is not set: nothing to decode", exit_code=2)
    token = args.token or None
    if token is not None:
        from ..web.security import weak_token_problem

        problem = weak_token_problem(token)
        if problem:
            raise CliError(problem, exit_code=2)
    server = CodecServer(
        codec, host=args.host, port=args.port, origins=args.origin or DEFAULT_ORIGINS, token=token
    )
    server.start()
    cli_logger().info(f"codec server on {server.url} (POST /decode, /encode; token required)")
    if token is None:
        cli_logger().info(f"generated token; the UI's codec endpoint: {server.endpoint}")
    try:
        await asyncio.Event().wait()
    finally:
        server.stop()
    return 0
