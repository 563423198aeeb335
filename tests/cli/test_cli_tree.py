"""CLI commands on a conversation's tree: messages with entry ids, label, name, branch, fork, compact."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from agentcore.cli import run
from agentcore.session import JsonlSessionStorage
from tests.support.cli import Deployment, demo_deployment


@pytest.fixture
async def deployment(temporal_client: Client, tmp_path: Path):  # type: ignore[no-untyped-def]
    async with demo_deployment(temporal_client, tmp_path) as deployment:
        yield deployment


async def test_tree_commands(deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    agent = await deployment.start_demo("cli-tree")
    for question in ("What is 12 * 7.5?", "What time is it in Tokyo?"):
        await agent.prompt(question)
        await agent.wait_for_idle(timeout=30)
    capsys.readouterr()

    assert await run(deployment.argv("messages", "cli-tree")) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [row[2] for row in rows] == ["user", "assistant", "toolResult", "assistant"] * 2
    first_answer = rows[3][1]

    assert await run(deployment.argv("label", "cli-tree", first_answer, "maths done")) == 0
    assert await run(deployment.argv("name", "cli-tree", "Calculations")) == 0
    assert await run(deployment.argv("fork", "cli-tree", first_answer, "cli-tree-fork")) == 0
    assert "into cli-tree-fork (4 messages)" in capsys.readouterr().out

    assert await run(deployment.argv("branch", "cli-tree", first_answer, "--summary", "Tokyo is UTC+9.")) == 0
    assert "5 message(s) in context" in capsys.readouterr().out
    assert await run(deployment.argv("compact", "cli-tree")) == 0

    with JsonlSessionStorage.open(deployment.sessions_dir / "cli-tree.jsonl") as storage:
        assert storage.get_label(first_answer) == "maths done"
        assert storage.get_metadata().name == "Calculations"
        assert storage.build_context().messages[-1].text.endswith("Tokyo is UTC+9.\n</summary>")  # type: ignore[union-attr]
    assert await run(deployment.argv("branch", "cli-tree", "no-such-entry")) != 0


async def test_fork_with_the_default_relative_sessions_dir(
    temporal_client: Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The layout ``agentcore dev`` makes by default: ``.agentcore/sessions`` relative to where it runs.
    monkeypatch.chdir(tmp_path)
    async with demo_deployment(temporal_client, tmp_path, data_dir=Path(".agentcore")) as deployment:
        agent = await deployment.start_demo("cli-rel")
        await agent.prompt("What is 12 * 7.5?")
        await agent.wait_for_idle(timeout=30)
        capsys.readouterr()
        argv = ["--address", deployment.address, "--task-queue", deployment.task_queue]
        assert await run([*argv, "messages", "cli-rel"]) == 0
        first_answer = capsys.readouterr().out.splitlines()[-1].split()[1]
        assert await run([*argv, "fork", "cli-rel", first_answer, "cli-rel-fork"]) == 0
        assert "into cli-rel-fork (4 messages)" in capsys.readouterr().out
        assert (tmp_path / ".agentcore" / "sessions" / "cli-rel-fork.jsonl").is_file()
        assert not (tmp_path / ".agentcore" / "sessions" / ".agentcore").exists()
