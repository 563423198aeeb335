"""The CLI's commands on a conversation's tree: messages with entry ids, compact, branch, fork, labels."""

from __future__ import annotations

import argparse

import orjson

from ..logs import cli_logger
from ..protocol import MessagesPage
from .common import agents_for, attached


async def cmd_messages(args: argparse.Namespace) -> int:
    """One line per message in the current context, with the entry id branch/fork/label take."""
    agent = await attached(args)
    start = args.start
    while True:  # a page holds what fits in one answer (large tool output makes pages short)
        page = await agent.get_messages(start)
        if args.output == "json":  # one JSON object per message: its index, entry id and the message
            for index, (entry_id, message) in enumerate(
                zip(page.entry_ids, page.messages, strict=True), page.start
            ):
                print(
                    orjson.dumps(
                        {"index": index, "entry_id": entry_id, "message": message.model_dump(mode="json")}
                    ).decode()
                )
        else:
            _print_messages(page)
        start = max(start, page.start) + len(page.messages)
        if not page.messages or start >= page.total:
            return 0


def _print_messages(page: MessagesPage) -> None:
    for index, (entry_id, message) in enumerate(zip(page.entry_ids, page.messages, strict=True), page.start):
        text = getattr(message, "text", "") or ""
        if message.role == "assistant":
            calls = ", ".join(call.name for call in message.tool_calls)
            text = text or (f"[calls {calls}]" if calls else f"[{message.stop_reason}]")
        elif message.role == "toolResult":
            text = f"{message.tool_name}: {text}"
        line = " ".join(text.split())
        print(f"{index:>4}  {entry_id or '-':<32}  {message.role:<10}  {line[:90]}")


async def cmd_compact(args: argparse.Namespace) -> int:
    agent = await attached(args)
    cli_logger().info(f"compacting {agent.session_id}...")
    end = await agent.compact(args.instructions)
    if end.error_message:
        cli_logger().info(f"compaction failed: {end.error_message}")
        return 1
    if end.summary is None:
        cli_logger().info("nothing to compact")
        return 0
    print(f"compacted: {end.tokens_before} -> {end.tokens_after} tokens (entry {end.entry_id})")
    return 0


async def cmd_branch(args: argparse.Namespace) -> int:
    agent = await attached(args)
    target = None if args.entry_id in ("start", "root") else args.entry_id
    result = await agent.branch(target, summary=args.summary, summarize=args.summarize)
    print(f"leaf now {result.leaf_id or 'the start'}; {len(result.messages)} message(s) in context")
    if result.summary:
        print(result.summary)
    return 0


async def cmd_fork(args: argparse.Namespace) -> int:
    agents = await agents_for(args)
    fork = await agents.fork(args.session, args.entry_id, args.new_session)
    state = await fork.get_state()
    print(f"forked {args.session} at {args.entry_id} into {fork.session_id} ({state.message_count} messages)")
    return 0


async def cmd_label(args: argparse.Namespace) -> int:
    agent = await attached(args)
    await agent.set_label(args.entry_id, args.label)
    cli_logger().info(f"label of {args.entry_id}: {args.label or '(cleared)'}")
    return 0


async def cmd_name(args: argparse.Namespace) -> int:
    agent = await attached(args)
    await agent.set_session_name(args.name)
    return 0
