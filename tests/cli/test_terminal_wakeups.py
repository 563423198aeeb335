"""The terminal chat shows a wake-up that fires while it waits at the prompt: the note as a line of
its own (as a typed line is), the run's answer, then the prompt again. In a real terminal (tmux)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from temporalio.client import Client

from tests.cli.test_terminal_chat import PROMPT_READY, Terminal, chat_argv, chat_env, pytestmark, terminal
from tests.support.durable import eventually
from tests.support.web import web_deployment

__all__ = ["pytestmark", "terminal"]  # the fixture and the tmux marks, shared


async def test_a_wakeup_fired_at_the_prompt_shows_like_a_typed_line(
    temporal_client: Client, tmp_path: Path, terminal: Terminal
) -> None:
    async with web_deployment(temporal_client, tmp_path) as web:
        agent = await web.start("terminal-wakeup")
        await terminal.start(chat_argv(web, tmp_path / "data", agent.session_id), chat_env())
        await terminal.wait_for(PROMPT_READY)
        await agent.schedule_wakeup("What is 3 * 20?", after=timedelta(seconds=1))
        screen = await terminal.wait_for("wake-up> What is 3 * 20?")
        assert "on time" in screen or "s late" in screen
        await terminal.wait_for("3 * 20 = 60.")
        state = await eventually(agent.get_state, lambda s: s.status == "idle" and len(s.messages) >= 2)
        assert state.messages[0].text.startswith("[wake-up] What is 3 * 20?")
        # The prompt is back and takes a line as before.
        await terminal.wait_for(PROMPT_READY)
        await terminal.type("/quit")
        await terminal.keys("Enter")
        await terminal.wait_for("[exited 0]")
