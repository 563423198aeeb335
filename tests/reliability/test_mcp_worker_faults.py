"""A worker process killed (SIGKILL, by pid) in the middle of MCP tool calls: a read-only tool runs
again on the next worker; one without annotations (not known to be safe to repeat) never runs again
and its result says the outcome is unknown."""

from __future__ import annotations

import json
import sys

from agentcore.errors import OUTCOME_UNKNOWN
from agentcore.messages import ToolResultMessage
from tests.support.mcp import ROOT, log_lines

from .conftest import Rig, wait_until
from .test_worker_faults import directive


async def test_kill_mid_mcp_calls_reruns_the_read_only_one_and_reports_the_other_unknown(rig: Rig) -> None:
    mcp_log = rig.workdir / "mcp.log"
    config = rig.workdir / "mcp.json"
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_servers", "stdio", "--name", "alpha", "--log", str(mcp_log)],
        "env": {"PYTHONPATH": str(ROOT)},
        "cwd": str(ROOT),
    }
    config.write_text(json.dumps({"mcpServers": {"alpha": server}}))
    first = await rig.spawn(mcp_config=config)
    agent = await rig.start("mcp-kill", tools=["mcp:alpha"])
    await agent.prompt(directive(("record", {"tag": "r1", "seconds": 60}), ("hold", {"tag": "h1"})))
    await wait_until(
        lambda: log_lines(mcp_log, "record") and log_lines(mcp_log, "hold-start"), what="both calls"
    )
    first.kill()  # both calls are in flight on the first worker's server
    await rig.spawn(mcp_config=config)
    await wait_until(
        lambda: len(log_lines(mcp_log, "hold-start")) == 2, what="the read-only call to run again"
    )
    mcp_log.with_name(mcp_log.name + ".release").touch()
    state = await rig.settle(agent)

    results = {m.tool_name: m for m in state.messages if isinstance(m, ToolResultMessage)}
    assert len(log_lines(mcp_log, "record")) == 1  # never run again
    unknown = results["record"]
    assert unknown.is_error and "outcome is unknown" in unknown.text
    assert unknown.details == {"error_code": OUTCOME_UNKNOWN}
    held = results["hold"]
    assert not held.is_error and held.text == f"released h1 in {log_lines(mcp_log, 'hold-start')[1][2]}"
    final = state.messages[-1]
    assert final.role == "assistant" and final.stop_reason == "stop"  # the turn went on
