"""``agentcore approvals`` / ``approve`` / ``deny`` against a real server and worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore.cli import run
from agentcore.events import AgentEvent
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.agent.test_approvals import call, deploy_tool
from tests.support.durable import Harness, eventually, running_worker
from tests.workflows.test_approvals_durable import of, read_until, tool_results


def argv(client: Client, h: Harness, *command: str) -> list[str]:
    return [
        "--address", client.service_client.config.target_host, "--task-queue", h.task_queue,
        "--data-dir", str(h.sessions_dir.parent), "--sessions-dir", str(h.sessions_dir), *command,
    ]  # fmt: skip


async def test_list_approve_with_edited_arguments_and_deny(
    temporal_client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel(
        [
            tool_calls([call("c1", service="web")]),
            text("Deployed."),
            tool_calls([call("c2", service="db")]),
            text("Not deployed."),
        ]
    )
    async with running_worker(temporal_client, tmp_path, model, tools=[deploy_tool(runs)]) as h:
        agent = await h.agents.start("cli-approve", model=scripted_model(), tools=["deploy"])
        await agent.prompt("Deploy web.")
        events: list[AgentEvent] = []
        await read_until(agent, events, "tool_approval_requested")
        capsys.readouterr()

        async def listing() -> list[dict[str, Any]]:
            assert await run(argv(temporal_client, h, "approvals", "--json")) == 0
            listed: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
            return listed

        # The list goes through the index (eventually consistent): wait for it to show the call.
        listed = await eventually(listing, lambda rows: [r["tool_call_id"] for r in rows] == ["c1"])
        assert [(r["session_id"], r["tool_call_id"], r["tool_name"], r["arguments"]) for r in listed] == [
            ("cli-approve", "c1", "deploy", {"service": "web"})
        ]
        assert await run(argv(temporal_client, h, "approvals")) == 0
        table = capsys.readouterr().out.splitlines()
        assert table[0].split()[:3] == ["SESSION", "CALL", "TOOL"]
        assert table[1].split()[:3] == ["cli-approve", "c1", "deploy"]
        assert await run(argv(temporal_client, h, "state", "cli-approve")) == 0
        state = capsys.readouterr().out
        assert "awaiting_approval" in state
        assert 'approval  deploy(service="web") waits (call c1' in state

        # Bad edited arguments are refused with the code, and the call still waits.
        code = await run(
            argv(temporal_client, h, "approve", "cli-approve", "c1", "--args", '{"replicas": 2}')
        )
        assert code == 1 and "INVALID_PARAMETERS" in capsys.readouterr().err
        code = await run(
            argv(
                temporal_client,
                h,
                "approve",
                "cli-approve",
                "c1",
                "--args",
                '{"service": "web", "replicas": 2}',
            )
        )
        assert code == 0
        await read_until(agent, events, "agent_end")
        assert runs == [{"service": "web", "replicas": 2}]
        assert await run(argv(temporal_client, h, "deny", "cli-approve", "c1")) == 1
        assert "APPROVAL_ALREADY_RESOLVED" in capsys.readouterr().err

        await agent.wait_for_idle(timeout=30)
        await agent.prompt("Deploy db.")
        await read_until(agent, events, "tool_approval_requested", 2)
        assert (
            await run(argv(temporal_client, h, "deny", "cli-approve", "c2", "--reason", "db is frozen")) == 0
        )
        await read_until(agent, events, "agent_end", 2)
        assert [e.decision for e in of(events, "tool_approval_resolved")] == ["edited", "denied"]
        assert "db is frozen" in tool_results(events)[-1].content[0].text
        assert runs == [{"service": "web", "replicas": 2}]
        assert await run(argv(temporal_client, h, "approve", "cli-approve", "nope")) == 1
        assert "APPROVAL_NOT_FOUND" in capsys.readouterr().err
        listed = await eventually(listing, lambda rows: not rows)
        assert listed == []
