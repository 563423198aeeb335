"""The ``agentcore`` CLI against a real dev server, a real worker and the demo model on loopback.

Most commands run in-process through ``agentcore.cli.run`` (same parser, same code paths, no
interpreter start-up per call); the console script itself runs as a subprocess where the process
matters: exit codes, Ctrl-C, an unreachable server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from agentcore.cli import run
from agentcore.messages import AssistantMessage
from agentcore.protocol import QueuesState
from tests.support.cli import AGENTCORE, Deployment, demo_deployment
from tests.support.durable import eventually


@pytest.fixture
async def deployment(temporal_client: Client, tmp_path: Path):  # type: ignore[no-untyped-def]
    async with demo_deployment(temporal_client, tmp_path) as deployment:
        yield deployment


async def test_send_wait_streams_tool_calls_and_the_answer(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    await deployment.start_demo("cli-send")
    code = await run(
        deployment.argv("send", "cli-send", "Anything from the Rhône under $80 for lamb?", "--wait")
    )
    out = capsys.readouterr().out
    assert code == 0
    assert '-> search_wines(region="Rhône", max_price=80.0, query="lamb"' in out
    assert "<- search_wines: 1 wine(s) match." in out
    assert "-> wine_details(wine_id=13)" in out
    assert "agent> I'd open the **Domaine du Vieux Télégraphe" in out


async def test_state_and_events_resume_from_an_offset(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = await deployment.start_demo("cli-events")
    await agent.prompt("What is 12 * 7.5?")
    await agent.wait_for_idle(timeout=30)
    capsys.readouterr()

    assert await run(deployment.argv("state", "cli-events")) == 0
    state_text = capsys.readouterr().out
    assert "status    idle" in state_text and "messages  4" in state_text and "demo/cellar-demo" in state_text

    assert await run(deployment.argv("events", "cli-events", "--from", "0")) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    offsets = [line["offset"] for line in lines]
    assert offsets == list(range(len(lines)))
    assert lines[0]["event"]["type"] == "agent_start" and lines[-1]["event"]["type"] == "agent_end"
    assert any(line["event"].get("tool_name") == "calculator" for line in lines)

    # A reader that stopped after offset 5 resumes with --from 6: the rest, nothing repeated.
    assert await run(deployment.argv("events", "cli-events", "--from", "6")) == 0
    resumed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert resumed == lines[6:]


async def test_steer_follow_up_and_abort_reach_the_conversation(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = await deployment.start_demo("cli-signals")
    assert await run(deployment.argv("steer", "cli-signals", "Only half bottles.")) == 0
    assert await run(deployment.argv("follow-up", "cli-signals", "And a dessert wine?")) == 0
    assert await run(deployment.argv("abort", "cli-signals")) == 0
    queues = await agent.get_queues()
    assert [m.message.text for m in queues.steering] == ["Only half bottles."]
    assert [m.message.text for m in queues.follow_up] == ["And a dessert wine?"]
    printed_ids = capsys.readouterr().out.split()
    assert printed_ids == [queues.steering[0].id, queues.follow_up[0].id]


async def test_clear_drops_queued_messages_and_prints_them(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = await deployment.start_demo("cli-clear")
    for queued in (agent.steer("Only half bottles."), agent.steer("Red only."), agent.follow_up("Dessert?")):
        await queued
    capsys.readouterr()
    assert await run(deployment.argv("clear", "cli-clear", "--steering")) == 0
    assert capsys.readouterr().out.splitlines() == ["steering: Only half bottles.", "steering: Red only."]
    queues = await agent.get_queues()
    assert queues.steering == [] and [m.message.text for m in queues.follow_up] == ["Dessert?"]

    await agent.steer("Under 30 dollars.")
    assert await run(deployment.argv("clear", "cli-clear")) == 0
    assert capsys.readouterr().out.splitlines() == ["steering: Under 30 dollars.", "follow_up: Dessert?"]
    assert await agent.get_queues() == QueuesState()
    assert await run(deployment.argv("clear", "cli-clear", "--follow-up")) == 0
    assert capsys.readouterr().out == ""


async def test_sessions_lists_status_model_messages_and_cost(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = await deployment.start_demo("cli-list")
    await agent.prompt("What is 2 + 2?")
    await agent.wait_for_idle(timeout=30)
    capsys.readouterr()

    async def listing() -> list[str]:
        assert await run(deployment.argv("sessions", "--query", 'WorkflowId = "cli-list"')) == 0
        return capsys.readouterr().out.splitlines()

    # Visibility is eventually consistent: the index catches up with the run's end.
    lines = await eventually(listing, lambda lines: len(lines) == 2 and lines[1].split()[3:4] == ["4"])
    header, row = lines
    assert header.split() == ["SESSION", "STATUS", "MODEL", "MESSAGES", "COST", "STARTED"]
    cells = row.split()
    assert cells[0] == "cli-list" and cells[1].startswith("running")
    assert cells[2] == "demo/cellar-demo" and cells[3] == "4" and cells[4].startswith("$")


async def test_export_and_recover_from_the_session_file(
    deployment: Deployment, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    agent = await deployment.start_demo("cli-file")
    await agent.prompt("We bought 3 bottles of #24")
    await agent.wait_for_idle(timeout=30)
    path = deployment.sessions_dir / "cli-file.jsonl"

    output = tmp_path / "cli-file.md"
    assert await run(deployment.argv("export", "cli-file", "-o", str(output))) == 0
    markdown = output.read_text()
    assert markdown.startswith("# Session cli-file")
    assert "### User\n\nWe bought 3 bottles of #24" in markdown
    assert "**Tool call** `update_stock`" in markdown and '"change": 3' in markdown
    assert "Added 3 bottle(s) of G.D. Vajra" in markdown

    capsys.readouterr()
    assert await run(deployment.argv("recover", str(path), "--session-id", "cli-file-2")) == 0
    assert capsys.readouterr().out.strip() == "cli-file-2"
    recovered = await deployment.agents.attach("cli-file-2")
    state = await recovered.get_state()
    assert state.message_count == 4 and state.model.id == "cellar-demo"
    assert await run(deployment.argv("send", "cli-file-2", "What is 6 * 7?", "--wait")) == 0
    assert "<- calculator: 6 * 7 = 42" in capsys.readouterr().out


async def test_chat_once_asks_and_leaves(deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    argv = deployment.argv("chat", "cli-chat", "--demo-port", str(deployment.demo_port), "--once", "hello")
    assert await run(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("you> hello\nagent> Hello! I'm Cellar, your sommelier.")
    state = await (await deployment.agents.attach("cli-chat")).get_state()
    assert state.message_count == 2 and [t.name for t in state.tools][0] == "search_wines"


async def test_missing_session_is_agent_not_found(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (
        ["state", "nope"],
        ["send", "nope", "hi"],
        ["abort", "nope"],
        ["chat", "nope", "--attach-only"],
    ):
        assert await run(deployment.argv(*command)) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("agentcore: AGENT_NOT_FOUND:"), err
    assert await run(deployment.argv("export", "nope")) == 3


def test_unreachable_server_is_one_line_and_exit_69() -> None:
    result = subprocess.run(
        [AGENTCORE, "--address", "127.0.0.1:1", "state", "anything"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 69
    assert result.stderr.strip() == "agentcore: cannot reach Temporal at 127.0.0.1:1 (connection refused)"


async def test_ctrl_c_aborts_the_turn_and_the_chat_goes_on(temporal_client: Client, tmp_path: Path) -> None:
    async with demo_deployment(temporal_client, tmp_path, pacing=0.05) as deployment:
        agent = await deployment.start_demo("cli-ctrl-c")
        chat = await asyncio.create_subprocess_exec(
            AGENTCORE, *deployment.argv("chat", "cli-ctrl-c", "--attach-only"),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert chat.stdin is not None and chat.stdout is not None
        output = b""

        async def read_until(marker: bytes) -> None:
            nonlocal output
            while marker not in output:
                chunk = await asyncio.wait_for(chat.stdout.read(256), 30)  # type: ignore[union-attr]
                assert chunk, output
                output += chunk

        chat.stdin.write(b"Hello there\n")
        await read_until(b"agent> Hello")
        chat.send_signal(signal.SIGINT)
        await read_until(b"[aborted")
        chat.stdin.write(b"What is 2 * 21?\n/quit\n")
        await chat.stdin.drain()
        chat.stdin.close()
        await read_until(b"2 * 21 = 42")
        assert await asyncio.wait_for(chat.wait(), 30) == 0
        messages = (await agent.get_state()).messages
        assert isinstance(messages[1], AssistantMessage) and messages[1].stop_reason == "aborted"
        assert messages[1].text.startswith("Hello") and messages[1].text != messages[-1].text
        assert messages[-1].text == "2 * 21 = 42."


def test_dev_on_a_taken_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [AGENTCORE, "dev", "--port", str(port), "--no-ui", "--no-chat", "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    # What holds the port is named, with the command that stops it.
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"agentcore: port {port}, asked for Temporal, is held by process {os.getpid()} (")
    assert last.endswith(f"stop it with: kill {os.getpid()}  (or pick another port)")
    assert "Traceback" not in result.stderr


async def test_a_reader_that_leaves_early_is_not_an_error(deployment: Deployment) -> None:
    agent = await deployment.start_demo("cli-pipe")
    await agent.prompt("Anything from the Rhône under $80 for lamb?")
    await agent.wait_for_idle(timeout=30)
    for command in (("events", "cli-pipe", "--from", "0"), ("messages", "cli-pipe")):
        gone, stdout = os.pipe()
        os.close(gone)  # `| head` that already left: every write fails with EPIPE
        try:
            result = await asyncio.to_thread(
                subprocess.run, [AGENTCORE, *deployment.argv(*command)], stdout=stdout, capture_output=False,
                stderr=subprocess.PIPE, timeout=60,
            )  # fmt: skip
        finally:
            os.close(stdout)
        assert (result.returncode, result.stderr) == (0, b""), command


def test_sigterm_stops_dev_and_the_server_it_started(tmp_path: Path) -> None:
    argv = [
        AGENTCORE,
        "dev",
        "--no-chat",
        "--port",
        "0",
        "--no-ui",
        "--demo-port",
        "0",
        "--data-dir",
        str(tmp_path),
    ]
    dev = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    servers: list[str] = []
    try:
        assert dev.stderr is not None
        lines = []
        for line in dev.stderr:
            lines.append(line)
            if "serving until Ctrl-C" in line:
                break
        # The server is started from one of the SDK's threads: its parent is that thread.
        children = [
            pid
            for task in Path(f"/proc/{dev.pid}/task").iterdir()
            for pid in (task / "children").read_text().split()
        ]
        servers = [pid for pid in children if "temporal" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert servers, lines
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(timeout=30) == 143
        rest = dev.stderr.read()
        assert "stopping the Temporal dev server" in rest and "Traceback" not in rest, rest
        for pid in servers:
            assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    finally:
        if dev.poll() is None:
            dev.kill()
            for pid in servers:
                os.kill(int(pid), signal.SIGKILL)


def _dev(data_dir: Path, *more: str, lines: list[str] | None = None) -> subprocess.Popen[str]:
    """``agentcore dev`` serving (no chat, web or UI), once it says so; its stderr lines in ``lines``."""
    argv = [
        AGENTCORE,
        "dev",
        "--no-chat",
        "--no-web",
        "--no-ui",
        "--demo-port",
        "0",
        "--data-dir",
        str(data_dir),
    ]
    dev = subprocess.Popen([*argv, *more], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert dev.stderr is not None
    lines = [] if lines is None else lines
    for line in dev.stderr:
        lines.append(line)
        if "serving until Ctrl-C" in line:
            return dev
    raise AssertionError("dev did not start: " + "".join(lines))


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if "zombie" in Path(f"/proc/{pid}/status").read_text():
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_sigkill_of_dev_takes_its_temporal_server_with_it(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dev = _dev(tmp_path, "--port", str(port))
    children = [
        int(pid)
        for task in Path(f"/proc/{dev.pid}/task").iterdir()
        for pid in (task / "children").read_text().split()
    ]
    [server] = [pid for pid in children if "start-dev" in Path(f"/proc/{pid}/cmdline").read_text()]
    try:
        dev.kill()  # SIGKILL: no handler runs, nothing unwinds
        dev.wait(timeout=10)
        assert _gone(server), "the Temporal dev server outlived the SIGKILLed dev"
        # The next dev gets the same port and the same database.
        again = _dev(tmp_path, "--port", str(port))
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=30) == 143
        assert again.stderr is not None and "Traceback" not in again.stderr.read()
    finally:
        for process in (dev,):
            if process.poll() is None:
                process.kill()
        if not _gone(server, 0.1):
            os.kill(server, signal.SIGKILL)


def test_a_temporal_server_left_by_an_earlier_run_is_replaced(tmp_path: Path) -> None:
    from agentcore.temporal import find_temporal_binary

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # What a dev SIGKILLed on a system without a parent-death signal left behind.
    stale = subprocess.Popen(
        [find_temporal_binary(), "server", "start-dev", "--headless", "--port", str(port),
         "--db-filename", str(tmp_path / "temporal.db")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    (tmp_path / "temporal.pid").write_text(f"{stale.pid}\n")
    dev = None
    try:
        lines: list[str] = []
        dev = _dev(tmp_path, "--port", "0", lines=lines)
        assert f"stopped a Temporal dev server an earlier run left running (pid {stale.pid})\n" in lines, (
            lines
        )
        assert stale.wait(timeout=10) is not None
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(timeout=30) == 143
    finally:
        if stale.poll() is None:
            stale.kill()
        if dev is not None and dev.poll() is None:
            dev.kill()
