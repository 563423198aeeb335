"""The terminal chat asks y / n / e when a tool call waits for approval (in tmux, as a person sees it)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.agent.test_approvals import call, deploy_tool
from tests.cli.test_terminal_chat import PROMPT_READY, TMUX, Terminal, chat_env
from tests.support.cli import AGENTCORE
from tests.support.durable import running_worker


@pytest.fixture
async def terminal() -> AsyncIterator[Terminal]:
    term = Terminal(f"agentcore-approvals-{uuid.uuid4().hex[:8]}")
    try:
        yield term
    finally:
        await term.close()


pytestmark = [
    pytest.mark.skipif(TMUX is None, reason="needs tmux (apt-get install tmux)"),
    pytest.mark.timeout(180),
]


async def test_the_chat_asks_yes_no_or_edit(
    temporal_client: Client, tmp_path: Path, terminal: Terminal
) -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel(
        [
            tool_calls([call("c1", service="web")]),
            text("Web is deployed."),
            tool_calls([call("c2", service="db")]),
            text("Leaving the database alone."),
            tool_calls([call("c3", service="api")]),
            text("The API runs on two replicas."),
        ]
    )
    async with running_worker(temporal_client, tmp_path, model, tools=[deploy_tool(runs)]) as h:
        agent = await h.agents.start("terminal-approvals", model=scripted_model(), tools=["deploy"])
        argv = [
            AGENTCORE, "--address", temporal_client.service_client.config.target_host,
            "--task-queue", h.task_queue, "--data-dir", str(tmp_path / "data"),
            "chat", agent.session_id, "--attach-only",
        ]  # fmt: skip
        await terminal.start(argv, chat_env())
        await terminal.wait_for(PROMPT_READY)

        await terminal.type("Deploy web.")
        await terminal.keys("Enter")
        await terminal.wait_for('approve deploy(service="web")? [y]es / [n]o [reason] / [e]dit:')
        assert runs == []
        await terminal.type("y")
        await terminal.keys("Enter")
        await terminal.wait_for("Web is deployed.")
        assert runs == [{"service": "web"}]

        await terminal.wait_for(PROMPT_READY)
        await terminal.type("Deploy db.")
        await terminal.keys("Enter")
        await terminal.wait_for('approve deploy(service="db")?')
        await terminal.type("n not during the freeze")
        await terminal.keys("Enter")
        await terminal.wait_for("denied: not during the freeze")
        await terminal.wait_for("Leaving the database alone.")
        assert runs == [{"service": "web"}]

        await terminal.wait_for(PROMPT_READY)
        await terminal.type("Deploy the API.")
        await terminal.keys("Enter")
        await terminal.wait_for('approve deploy(service="api")?')
        await terminal.type("e")
        await terminal.keys("Enter")
        await terminal.wait_for("arguments for deploy (JSON):")
        await terminal.type('{"service": "api", "replicas": "two"}')
        await terminal.keys("Enter")
        await terminal.wait_for("replicas")  # refused by the schema: asked again
        await terminal.wait_for_match(r"approve deploy\(service=\"api\"\)\?[^\n]*\n(.|\n)*approve deploy")
        await terminal.type("e")
        await terminal.keys("Enter")
        await terminal.type('{"service": "api", "replicas": 2}')
        await terminal.keys("Enter")
        await terminal.wait_for("The API runs on two replicas.")
        assert runs == [{"service": "web"}, {"service": "api", "replicas": 2}]
        await agent.wait_for_idle(timeout=30)  # everything is in the session file
        decisions = [e.data["decision"] for e in _custom(h.session_path(agent.session_id))]
        assert decisions == ["approved", "denied", "edited"]


def _custom(path: Path) -> list[Any]:
    from agentcore.session import JsonlSessionStorage

    with JsonlSessionStorage.open(path) as storage:
        return [
            e
            for e in storage.find_entries("custom")
            if getattr(e, "custom_type", "") == "tool_approval_decision"
        ]
