"""The terminal chat as a person uses it: ``agentcore chat`` in a real terminal (tmux), keys sent to
it and the screen read back. Skips with the reason when tmux is not installed."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from tests.support.cli import AGENTCORE
from tests.support.web import WebDeployment, web_deployment

TMUX = shutil.which("tmux")
# The empty prompt's placeholder: shown only while the prompt waits for a line.
PROMPT_READY = "Alt+Enter for a new line"
pytestmark = [
    pytest.mark.skipif(TMUX is None, reason="needs tmux (apt-get install tmux)"),
    pytest.mark.timeout(180),
]


class Terminal:
    """One tmux window on a private tmux server (its own socket), 120 x 40."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    async def tmux(self, *args: str) -> str:
        assert TMUX is not None
        result = await asyncio.to_thread(
            subprocess.run, [TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    async def start(self, argv: list[str], env: dict[str, str]) -> None:
        command = " ".join(f"'{part}'" for part in argv) + "; echo '[exited '$?']'; sleep 600"
        settings = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
        await self.tmux("new-session", "-d", "-x", "120", "-y", "40", *settings, command)

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", *keys)

    async def type(self, text: str) -> None:
        await self.tmux("send-keys", "-l", text)

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-J", "-S", "-300")

    async def wait_for(self, text: str, timeout: float = 40) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = await self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {text!r}; the terminal shows:\n{screen}")
            await asyncio.sleep(0.1)

    async def wait_for_match(self, pattern: str, timeout: float = 40) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            screen = await self.screen()
            match = re.search(pattern, screen)
            if match:
                return match
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for /{pattern}/; the terminal shows:\n{screen}")
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        await self.tmux("kill-server")


@pytest.fixture
async def terminal() -> AsyncIterator[Terminal]:
    term = Terminal(f"agentcore-test-{uuid.uuid4().hex[:8]}")
    try:
        yield term
    finally:
        await term.close()


def chat_argv(web: WebDeployment, data_dir: Path, session_id: str) -> list[str]:
    address = web.agents.client.service_client.config.target_host
    return [
        AGENTCORE, "--address", address, "--task-queue", web.agents.task_queue,
        "--data-dir", str(data_dir), "chat", session_id, "--attach-only",
    ]  # fmt: skip


def chat_env() -> dict[str, str]:
    return {"TERM": "xterm-256color", "LANG": "C.UTF-8", "PATH": os.environ.get("PATH", "")}


async def test_the_terminal_chat_renders_markdown_panels_and_a_spinner_and_aborts_on_ctrl_c(
    temporal_client: Client, tmp_path: Path, terminal: Terminal
) -> None:
    async with web_deployment(temporal_client, tmp_path) as web:
        agent = await web.start("terminal-chat")
        data_dir = tmp_path / "data"
        await terminal.start(chat_argv(web, data_dir, agent.session_id), chat_env())
        await terminal.wait_for(PROMPT_READY)

        await terminal.type("Hi! We're having roast lamb tonight. Anything from the Rhône under $80?")
        await terminal.keys("Enter")
        screen = await terminal.wait_for("You have 6 bottles left.")
        # Markdown rendered (the answer's **bold** shows without its asterisks), tools as panels.
        assert "I'd open the Domaine du Vieux Télégraphe" in screen
        assert "**" not in screen
        assert '╭─ ✓ search_wines(region="Rhône"' in screen
        assert "╭─ ✓ wine_details(wine_id=13)" in screen
        assert "│ Region: Rhône, France" in screen

        # A tool that runs until let go: the spinner counts its seconds; Ctrl-C aborts the turn.
        await terminal.type("Could you hold the door for me?")
        await terminal.keys("Enter")
        spinner = r"([⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]) running hold: holding the door… (\d+\.\d)s"
        first = await terminal.wait_for_match(spinner)
        # It spins and counts the seconds.
        counting = spinner.replace(r"(\d+\.\d)s", rf"(?!{re.escape(first[2])}s)(\d+\.\d)s")
        later = await terminal.wait_for_match(counting)
        assert float(later[2]) > float(first[2])
        await terminal.keys("C-c")
        await terminal.wait_for("^C aborting the turn...")
        screen = await terminal.wait_for("aborted")
        await terminal.wait_for(PROMPT_READY)
        state = await agent.get_state()
        assert state.status == "idle"
        assert web.hold.calls == 1
        assert "[exited" not in await terminal.screen()  # Ctrl-C stopped the turn, not the chat

        # Multi-line input: Alt+Enter starts a new line, Enter sends both.
        await terminal.type("What is 3 * 20?")
        await terminal.keys("Escape", "Enter")
        await terminal.type("Thanks!")
        await terminal.keys("Enter")
        await terminal.wait_for("3 * 20 = 60.")
        users = [m.text for m in (await agent.get_state()).messages if m.role == "user"]
        assert users[-1] == "What is 3 * 20?\nThanks!"

        # Up recalls the last line; the history outlives the chat.
        await terminal.wait_for(PROMPT_READY)
        await terminal.keys("Up")
        await terminal.wait_for("you> What is 3 * 20?")
        await terminal.keys("Down")  # back to the empty line being written
        await terminal.type("/quit")
        await terminal.keys("Enter")
        await terminal.wait_for("[exited 0]")
        assert (data_dir / "chat_history").is_file()

    async with web_deployment(temporal_client, tmp_path / "again") as web:
        agent = await web.start("terminal-chat-2")
        second = Terminal(f"{terminal.socket}-2")
        try:
            await second.start(chat_argv(web, data_dir, agent.session_id), chat_env())
            await second.wait_for(PROMPT_READY)
            await second.keys("Up")
            await second.wait_for("you> /quit")
            await second.keys("Up")
            await second.wait_for("Thanks!")
        finally:
            await second.close()


async def test_plain_output_when_stdout_is_not_a_terminal(temporal_client: Client, tmp_path: Path) -> None:
    """A pipe gets today's plain lines, with no colour, spinner or cursor movement."""
    async with web_deployment(temporal_client, tmp_path) as web:
        agent = await web.start("piped-chat")
        argv = chat_argv(web, tmp_path / "data", agent.session_id)
        result = await asyncio.to_thread(
            subprocess.run,
            argv,
            input="What is 3 * 20?\n",
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == (
            '  -> calculator(expression="3 * 20")\n  <- calculator: 3 * 20 = 60\nagent> 3 * 20 = 60.\n'
        )


async def test_clear_drops_the_queued_messages_before_the_next_prompt(
    temporal_client: Client, tmp_path: Path, terminal: Terminal
) -> None:
    async with web_deployment(temporal_client, tmp_path) as web:
        agent = await web.start("terminal-clear")
        # Queued while idle, from another client: unless cleared they would go with the next prompt.
        await agent.steer("Only half bottles.")
        await agent.follow_up("And a dessert wine?")
        await terminal.start(chat_argv(web, tmp_path / "data", agent.session_id), chat_env())
        await terminal.wait_for(PROMPT_READY)

        await terminal.type("/clear steering")
        await terminal.keys("Enter")
        screen = await terminal.wait_for("[cleared 1 queued message(s)]")
        assert "- steering: Only half bottles." in screen
        await terminal.wait_for(PROMPT_READY)
        await terminal.type("/clear")
        await terminal.keys("Enter")
        await terminal.wait_for("- follow-up: And a dessert wine?")
        assert (await agent.get_queues()).steering == (await agent.get_queues()).follow_up == []

        await terminal.wait_for(PROMPT_READY)
        await terminal.type("What is 3 * 20?")
        await terminal.keys("Enter")
        await terminal.wait_for("3 * 20 = 60.")
        await agent.wait_for_idle(timeout=30)
        users = [m.text for m in (await agent.get_state()).messages if m.role == "user"]
        assert users == ["What is 3 * 20?"]


async def test_the_composer_stays_live_while_a_turn_runs(
    temporal_client: Client, tmp_path: Path, terminal: Terminal
) -> None:
    async with web_deployment(temporal_client, tmp_path) as web:
        agent = await web.start("terminal-steer")
        await terminal.start(chat_argv(web, tmp_path / "data", agent.session_id), chat_env())
        await terminal.wait_for(PROMPT_READY)
        await terminal.type("Could you hold the door for me?")
        await terminal.keys("Enter")
        await terminal.wait_for("running hold")
        # Enter steers at once, while the tool still runs (not after the turn).
        await terminal.type("What time is it?")
        await terminal.keys("Enter")
        await terminal.wait_for("[steering message queued]")
        queues = await agent.get_queues()
        assert [item.message.text for item in queues.steering] == ["What time is it?"]
        assert (await agent.get_state()).status == "running" and web.hold.calls == 1
        # A follow-up command queues a follow-up; both are listed under the live output.
        await terminal.type("/followup And a dessert wine?")
        await terminal.keys("Enter")
        await terminal.wait_for("queued follow-up: And a dessert wine?")
        screen = await terminal.wait_for("queued steering: What time is it?")
        assert "steer> " in screen
        web.hold.release()
        await terminal.wait_for(PROMPT_READY)
        await agent.wait_for_idle(timeout=30)
        users = [m.text for m in (await agent.get_state()).messages if m.role == "user"]
        assert users == ["Could you hold the door for me?", "What time is it?", "And a dessert wine?"]

        # Typing while an answer streams: the typed line stays whole on its own line; Ctrl-C aborts.
        await terminal.type("Count to 240, please")
        await terminal.keys("Enter")
        await terminal.wait_for("w020")
        await terminal.type("not garbled")
        await terminal.wait_for_match(r"steer> not garbled\s*$")
        await terminal.keys("C-c")
        await terminal.wait_for("aborted")
        await terminal.wait_for(PROMPT_READY)
        assert (await agent.get_state()).messages[-1].stop_reason == "aborted"
        assert "[exited" not in await terminal.screen()


async def test_the_terminal_chat_says_when_no_worker_runs_the_conversation(
    temporal_client: Client, tmp_path: Path, terminal: Terminal
) -> None:
    """Not a chat that hangs (it reads the conversation's event offset before its prompt) and then
    fails untyped: the error in a line, naming the task queue, once the no-worker check is sure (at
    its default timings, 5 s confirmed 20 s later: before the query's own 30 s timeout, which would
    show as "Temporal refused the call")."""
    from agentcore import AgentOptions
    from agentcore.client import AgentClient
    from agentcore.testing.scripted import scripted_model

    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    agent = await AgentClient(temporal_client, task_queue=queue).start(
        f"unserved-{uuid.uuid4().hex[:6]}", AgentOptions(model=scripted_model())
    )
    address = temporal_client.service_client.config.target_host
    argv = [AGENTCORE, "--address", address, "--task-queue", queue, "--data-dir", str(tmp_path / "data"),
            "chat", agent.session_id, "--attach-only"]  # fmt: skip
    await terminal.start(argv, chat_env())
    screen = await terminal.wait_for("[exited", timeout=45)
    assert f"NO_WORKER: no worker polls task queue '{queue}'" in screen, screen
    assert "agentcore worker" in screen and "[exited 1]" in screen and "Traceback" not in screen, screen
    await agent.terminate("test over")
