"""The CLI's approval commands: every conversation waiting for a person, and the decisions.

agentcore approvals                          calls waiting for approval, in every conversation
agentcore approve SESSION CALL [--args JSON] let one run (with edited arguments)
agentcore deny SESSION CALL [--reason TEXT]  refuse it; the model reads the reason
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import orjson

from ..errors import AgentNotFoundError, ValidationError
from ..logs import cli_logger
from ..search_attributes import AWAITING_APPROVAL
from .common import agents_for, attached
from .render import format_arguments, format_table


def _when(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


async def cmd_approvals(args: argparse.Namespace) -> int:
    """Conversations the index shows as ``AgentStatus = "awaiting_approval"``, each with its calls."""
    agents = await agents_for(args)
    rows: list[list[str]] = []
    listed: list[dict[str, Any]] = []
    for summary in await agents.list(f'AgentStatus = "{AWAITING_APPROVAL}"', limit=args.limit):
        try:
            pending = await (await agents.attach(summary.session_id)).pending_approvals()
        except AgentNotFoundError:
            continue  # ended since the index was read
        for approval in pending:
            session = approval.session_id or summary.session_id
            listed.append({"session_id": session, **approval.model_dump(mode="json", exclude={"session_id"})})
            rows.append(
                [
                    session,
                    approval.tool_call_id,
                    approval.tool_name,
                    format_arguments(approval.arguments)[:60],
                    _when(approval.requested_at),
                    _when(approval.expires_at),
                ]
            )
    if args.json:
        print(orjson.dumps(listed).decode())
    elif not rows:
        cli_logger().info("no tool calls are waiting for approval")
    else:
        print(format_table(["SESSION", "CALL", "TOOL", "ARGUMENTS", "SINCE", "EXPIRES"], rows))
    return 0


async def cmd_approve(args: argparse.Namespace) -> int:
    edited: Any = None
    if args.args is not None:
        try:
            edited = orjson.loads(args.args)
        except orjson.JSONDecodeError as err:
            raise ValidationError(f"--args: not JSON ({err})") from None
    agent = await attached(args)
    accepted = await agent.approve(args.call, edited)
    said = "approved" if edited is None else "approved with edited arguments"
    if accepted.status == "duplicate":
        said = "already approved"
    cli_logger().info(f"{args.call} {said}")
    return 0


async def cmd_deny(args: argparse.Namespace) -> int:
    agent = await attached(args)
    accepted = await agent.deny(args.call, args.reason or "")
    cli_logger().info(f"{args.call} {'already denied' if accepted.status == 'duplicate' else 'denied'}")
    return 0
