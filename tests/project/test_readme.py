"""Every command in the README is exercised here, so the README cannot drift from the code.

``README_COMMANDS`` lists each line of the README's ``bash`` blocks with how it is exercised; a line
added to the README without an entry fails ``test_every_readme_command_is_exercised``:

- ``quick-start``: run on a clean virtualenv (``test_quick_start_on_a_clean_virtualenv``), with the
  chat scripted instead of typed;
- ``ci``: ``.ci/run`` runs it verbatim;
- ``run``: run as is, as a subprocess, against a demo deployment (a real dev server and worker)
  through the environment variables the README documents;
- ``serve``: started the same way, watched until it reports it is serving, then stopped;
- ``model``: parsed by the CLI's parser and resolved to the model it would call (no API key here);
- ``connect``: parsed, with its variables set, and resolved to the connection it would open (Temporal
  Cloud is not reachable from a test);
- ``mcp``: parsed, and resolved to the MCP servers the worker would connect to.

``docker compose up`` is quoted in the text; its compose file is checked by ``tests/project/test_compose.py``.

Every ``python`` block runs as written, as a script in a subprocess, against the test's Temporal
server (``TEMPORAL_ADDRESS``) and the loopback model the blocks start themselves; and every CLI
command a ``bash`` block names answers ``agentcore COMMAND --help``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from agentcore.cli import build_parser
from agentcore.cli.common import choose_model
from tests.support.cli import AGENTCORE, demo_deployment
from tests.support.replay import watch_task_queue

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

QUICK_START = "python3.11 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/agentcore dev"
TEST_COMMAND = (
    "python3.11 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/python -m pytest -q -n 2"
)
KEYGEN = (
    'export AGENTCORE_ENCRYPTION_KEY=$(python -c "import base64, os; '
    'print(base64.b64encode(os.urandom(32)).decode())")'
)

CLOUD_API_KEY = (
    "TEMPORAL_ADDRESS=us-east-1.aws.api.temporal.io:7233 TEMPORAL_NAMESPACE=my-ns.a1b2c "
    "TEMPORAL_API_KEY=my-api-key agentcore worker"
)
CLOUD_MTLS = (
    "TEMPORAL_ADDRESS=my-ns.a1b2c.tmprl.cloud:7233 TEMPORAL_NAMESPACE=my-ns.a1b2c "
    "TEMPORAL_TLS_CLIENT_CERT_PATH=client.pem TEMPORAL_TLS_CLIENT_KEY_PATH=client.key agentcore worker"
)
OBSERVED_WORKER = (
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 agentcore worker --metrics-port 9464 --log-format json"
)

MCP_WORKER = (
    "agentcore worker --mcp 'files=npx -y @modelcontextprotocol/server-filesystem /data' "
    "--mcp docs=https://example.com/mcp"
)

README_COMMANDS: dict[str, str] = {
    QUICK_START: "quick-start",
    TEST_COMMAND: "ci",
    "ANTHROPIC_API_KEY=sk-ant-your-key agentcore dev --model anthropic/claude-haiku-4-5": "model",
    "agentcore dev --model ollama/llama3.1 --base-url http://localhost:11434/v1": "model",
    "TEMPORAL_ADDRESS=temporal.example.internal:7233 AGENTCORE_SESSIONS_DIR=/mnt/sessions agentcore worker": "serve",
    "agentcore sessions": "run",
    'agentcore send cellar-demo "Any Pinot Noir for salmon?" --wait': "run",
    'agentcore steer cellar-demo "Only bottles under 50 dollars, please."': "run",
    "agentcore events cellar-demo --follow --from 40": "serve",
    "agentcore recover .agentcore/sessions/cellar-demo.jsonl --session-id cellar-demo-2": "run",
    KEYGEN: "run",
    "agentcore dev": "run",
    "agentcore codec-server --port 8081 --origin http://localhost:8080": "serve",
    CLOUD_API_KEY: "connect",
    CLOUD_MTLS: "connect",
    OBSERVED_WORKER: "serve",
    MCP_WORKER: "mcp",
    "agentcore dev --mcp-config mcp.json": "mcp",
    "agentcore web --port 8780": "serve",
}

# What each command prints when it works (stdout and stderr together).
EXPECTED = {
    "agentcore sessions": "cellar-demo",
    'agentcore send cellar-demo "Any Pinot Noir for salmon?" --wait': "Domaine Drouhin Oregon",
    "agentcore recover .agentcore/sessions/cellar-demo.jsonl --session-id cellar-demo-2": "cellar-demo-2",
    "agentcore dev": "payload encryption on",
    "TEMPORAL_ADDRESS=temporal.example.internal:7233 AGENTCORE_SESSIONS_DIR=/mnt/sessions agentcore worker": "worker on",
    "agentcore events cellar-demo --follow --from 40": '"offset":40,',
    "agentcore codec-server --port 8081 --origin http://localhost:8080": "codec server on",
    OBSERVED_WORKER: '"message": "metrics on http://',
    "agentcore web --port 8780": "web chat at http://127.0.0.1:",
}


def readme_commands() -> list[str]:
    """The command lines of the README's ``bash`` blocks, in order (comments dropped)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL):
        for line in block.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def readme_python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def readme_cli_subcommands() -> list[str]:
    """Each ``agentcore COMMAND`` the ``bash`` blocks name (``.venv/bin/agentcore dev`` included)."""
    found = []
    for command in readme_commands():
        words = shlex.split(command)
        for program, subcommand in zip(words, words[1:], strict=False):
            if Path(program).name == "agentcore" and subcommand not in found:
                found.append(subcommand)
    return found


def _split(command: str) -> tuple[dict[str, str], list[str]]:
    """``VAR=value ... program args`` -> the assignments and the argv."""
    words = shlex.split(command)
    assignments: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        assignments[name] = value
    return assignments, words


def test_every_readme_command_is_exercised() -> None:
    commands = readme_commands()
    assert len(commands) == len(set(commands)), "a command repeated in the README"
    assert set(commands) == set(README_COMMANDS), (
        f"README commands without a test: {set(commands) - set(README_COMMANDS)}; "
        f"listed here but gone from the README: {set(README_COMMANDS) - set(commands)}"
    )


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert TEST_COMMAND in ci_lines
    assert QUICK_START in readme_commands() and TEST_COMMAND in readme_commands()


def test_the_compose_command_names_the_checked_compose_file() -> None:
    # ``docker compose up`` (quoted in the text, not a bash block) needs Docker; the compose file it
    # runs is checked service by service in tests/project/test_compose.py.
    assert "`docker compose up -d --build`" in README.read_text()
    assert (ROOT / "docker-compose.yml").is_file() and (ROOT / "tests" / "project" / "test_compose.py").is_file()


@pytest.mark.parametrize("command", [c for c, how in README_COMMANDS.items() if how == "model"])
def test_provider_commands_resolve_to_the_documented_model(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assignments, argv = _split(command)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in assignments.items():
        monkeypatch.setenv(name, value)
    assert argv[0] == "agentcore"
    args = build_parser().parse_args(argv[1:])
    model = choose_model(args.model, args.base_url, args.demo_port)
    expected = {
        "ANTHROPIC_API_KEY": ("anthropic", "claude-haiku-4-5", None),
        "ollama": ("ollama", "llama3.1", "http://localhost:11434/v1"),
    }
    key = next(k for k in expected if k in command)
    provider, model_id, base_url = expected[key]
    assert (model.provider, model.id) == (provider, model_id)
    if base_url is not None:
        assert model.base_url == base_url and model.api == "openai-completions"


@pytest.mark.parametrize("command", [c for c, how in README_COMMANDS.items() if how == "connect"])
def test_cloud_commands_connect_as_documented(
    command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agentcore.cli import connection_settings
    from agentcore.temporal import load_connect_config

    assignments, argv = _split(command)
    for name in [name for name in os.environ if name.startswith("TEMPORAL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "none.toml"))
    for name, value in assignments.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "client.pem").write_text("client certificate")
    (tmp_path / "client.key").write_text("client key")
    args = build_parser().parse_args(argv[1:])
    config = load_connect_config(connection_settings(args))
    assert config["target_host"] == assignments["TEMPORAL_ADDRESS"]
    assert config["namespace"] == assignments["TEMPORAL_NAMESPACE"]
    if "TEMPORAL_API_KEY" in assignments:
        assert config["api_key"] == assignments["TEMPORAL_API_KEY"] and config["tls"] is True
    else:
        assert config["tls"].client_cert == b"client certificate"
        assert config["tls"].client_private_key == b"client key"


@pytest.mark.parametrize("command", [c for c, how in README_COMMANDS.items() if how == "mcp"])
def test_mcp_commands_name_the_documented_servers(
    command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agentcore.cli.dev import mcp_servers

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcp.json").write_text(
        '{"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-filesystem", "/data"]}}}'
    )
    _, argv = _split(command)
    servers = {server.name: server for server in mcp_servers(build_parser().parse_args(argv[1:]))}
    assert set(servers) >= {"files"} and "npx" in servers["files"].where()
    if "docs=" in command:
        assert servers["docs"].where() == "https://example.com/mcp"


async def _serve_until(command: str, env: dict[str, str], cwd: Path, marker: str) -> str:
    # The README's cluster address and shared volume stand for the test's server and directory.
    _, argv = _split(command)
    argv[0] = AGENTCORE
    for port in ("--port", "--metrics-port"):  # a fixed port may be taken on a developer's machine
        if port in argv:
            argv[argv.index(port) + 1] = "0"
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    output = ""
    try:
        while marker not in output:
            chunk = await asyncio.wait_for(process.stdout.read(512), 30)
            assert chunk, output
            output += chunk.decode()
    finally:
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.wait(), 30)
    return output


# About ten CLI processes, each a fresh interpreter, and ``agentcore dev`` starting its own server:
# 60 s alone on a loaded 2-core machine, past the default 120 s inside a loaded full run. Each step
# keeps its own deadline (90 s a command, 30 s a read), so a hang still fails on its own.
@pytest.mark.timeout(300)
async def test_cli_commands_against_a_demo_deployment(temporal_client: Client, tmp_path: Path) -> None:
    async with demo_deployment(temporal_client, tmp_path, data_dir=tmp_path / ".agentcore") as deployment:
        agent = await deployment.start_demo("cellar-demo")
        await agent.prompt("Hi! We're having roast lamb tonight. Anything from the Rhône under $80?")
        await agent.wait_for_idle(timeout=30)
        env = deployment.env()
        env.pop("AGENTCORE_DATA_DIR")  # the README's paths are relative to .agentcore in the cwd
        env.pop("AGENTCORE_SESSIONS_DIR")
        env["PATH"] = f"{Path(AGENTCORE).parent}{os.pathsep}{env['PATH']}"
        for command in readme_commands():
            how = README_COMMANDS[command]
            if how == "serve":
                output = await _serve_until(command, env, tmp_path, EXPECTED[command])
                continue
            if how != "run":
                continue
            if command == KEYGEN:
                key = subprocess.run(
                    ["bash", "-c", f"{command} && echo $AGENTCORE_ENCRYPTION_KEY"],
                    capture_output=True, text=True, env=env, check=True,
                ).stdout.strip()  # fmt: skip
                env["AGENTCORE_ENCRYPTION_KEY"] = key
                continue
            argv = shlex.split(command)
            run_env = env
            if argv == ["agentcore", "dev"]:
                # Its own embedded server, encrypted, on free ports; one scripted question. Not this
                # test's server and task queue: `agentcore dev` attaches to a TEMPORAL_ADDRESS given,
                # and this process's worker (no key) would take some of its tasks.
                argv += ["--once", "hello", "--port", "0", "--no-ui", "--demo-port", "0", "--codec-port", "0"]
                argv += ["--data-dir", str(tmp_path / "encrypted")]
                run_env = {
                    k: v for k, v in env.items() if k not in ("TEMPORAL_ADDRESS", "AGENTCORE_TASK_QUEUE")
                }
            result = await asyncio.to_thread(
                subprocess.run, argv, cwd=tmp_path, env=run_env, input="/state\n/quit\n",
                capture_output=True, text=True, timeout=90,
            )  # fmt: skip
            output = result.stdout + result.stderr
            assert result.returncode == 0, (command, output)
            assert EXPECTED.get(command, "") in output, (command, output)
            if run_env is not env:  # (the embedded server, not this test's)
                assert env["TEMPORAL_ADDRESS"] not in output, output
        assert env.get("AGENTCORE_ENCRYPTION_KEY")


@pytest.mark.timeout(240)
def test_quick_start_on_a_clean_virtualenv(tmp_path: Path) -> None:
    """The README's main job on a fresh virtualenv: pip install from this checkout, then ``agentcore dev``.

    Two deviations from the typed command, both for a test: the venv lives in a temporary directory
    (not the checkout's .venv), and the chat plays the demo questions instead of reading a keyboard,
    on free ports so it cannot collide with a developer's running server."""
    python = shutil.which("python3.11") or sys.executable
    # The test's own venv python would make a venv of a venv; the base interpreter is what a user has.
    base = getattr(sys, "_base_executable", python)
    venv = tmp_path / "venv"
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=60)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "-e", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    argv = [str(venv / "bin" / "agentcore"), "dev", "--demo-script", "--fast"]
    argv += ["--port", "0", "--no-ui", "--demo-port", "0", "--data-dir", str(tmp_path / ".agentcore")]
    result = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("you> Hi! We're having roast lamb tonight.")
    assert "-> update_stock(wine_id=13, change=-2)" in result.stdout
    assert "Now 4 in stock." in result.stdout


# What each ``python`` block prints when it works, in the README's order (a block added to the
# README without an entry here fails ``test_every_python_block_runs_as_written``).
PYTHON_OUTPUTS = [
    "The tool returned: Lisbon: 21°C, sunny",  # the in-process agent and its tool
    "idle The tool returned: 6 * 75 * 0.9 = 405",  # the durable client, its worker and a run
    "agent.sub.call_loopback_0 The tool returned: You said: A red for salmon?",  # a sub-agent, in-process
    "The tool returned: deployed web",  # a tool call approved by a person
]


def test_every_python_block_runs_as_written(temporal_client: Client, tmp_path: Path) -> None:
    blocks = readme_python_blocks()
    assert len(blocks) == len(PYTHON_OUTPUTS), "a python block without its expected output here"
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_client.service_client.config.target_host}
    watch_task_queue(temporal_client, "readme", temporal_client.data_converter)  # the blocks' conversations
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTCORE_ENCRYPTION_KEY"):
        env.pop(key, None)  # the README's blocks run offline, on the loopback model
    for index, (block, expected) in enumerate(zip(blocks, PYTHON_OUTPUTS, strict=True)):
        script = tmp_path / f"block{index}.py"
        script.write_text(block)
        result = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
        )
        assert result.returncode == 0, (block, result.stderr[-3000:])
        assert expected in result.stdout, (block, result.stdout[-3000:])


def test_every_cli_command_in_the_readme_answers_help() -> None:
    subcommands = readme_cli_subcommands()
    assert {"dev", "worker", "send", "recover", "codec-server"} <= set(subcommands), subcommands
    for subcommand in subcommands:
        result = subprocess.run([AGENTCORE, subcommand, "--help"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, (subcommand, result.stderr)
        assert f"usage: agentcore {subcommand}" in result.stdout, (subcommand, result.stdout)
