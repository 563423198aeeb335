"""Tools a real ``agentcore worker`` process serves in tests (``--tools tests.support.worker_tools:TOOLS``).

Each execution appends ``start <call id> <pid>`` and ``end <call id> <pid>`` to the file named by
``AGENTCORE_TEST_TOOL_LOG``, so a test counts real executions across processes.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel

from agentcore import AgentTool, AgentToolResult


class SlowArgs(BaseModel):
    seconds: float
    label: str = ""


def _log(*fields: object) -> None:
    with open(os.environ["AGENTCORE_TEST_TOOL_LOG"], "a") as handle:
        handle.write(" ".join(str(field) for field in fields) + "\n")


async def _slow_op(tool_call_id: str, args: SlowArgs, signal: Any, on_update: Any) -> AgentToolResult:
    _log("start", tool_call_id, os.getpid())
    await asyncio.sleep(args.seconds)
    _log("end", tool_call_id, os.getpid())
    return AgentToolResult.text(f"slow_op {args.label} finished after {args.seconds}s")


# Not retry-safe: a second execution would return OUTCOME_UNKNOWN instead of the tool's text.
TOOLS = [
    AgentTool(
        name="slow_op",
        description="A slow operation with an effect that must happen once.",
        parameters=SlowArgs,
        execute=_slow_op,
        retry_safe=False,
        timeout_seconds=60,
    )
]
