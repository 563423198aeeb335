"""The CLI behaves like the tools around it: ``--version``, ``--output json``, the ``temporal`` CLI's
connection flag names, and exit codes a script can tell apart (2 usage, 3 not found, 69 Temporal
cannot be reached), each failure in one line that keeps its cause."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path

import pytest
from temporalio.client import Client

from agentcore.cli import build_parser, connection_settings, run
from agentcore.temporal import load_connect_config
from tests.support.cli import AGENTCORE, Deployment, demo_deployment
from tests.support.durable import eventually


@pytest.fixture
async def deployment(temporal_client: Client, tmp_path: Path) -> AsyncIterator[Deployment]:
    async with demo_deployment(temporal_client, tmp_path) as deployment:
        yield deployment


def _agentcore(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTCORE, *argv], capture_output=True, text=True, timeout=60)


def test_version_and_usage() -> None:
    shown = _agentcore("--version")
    assert (shown.returncode, shown.stdout.strip()) == (0, f"agentcore {version('agentcore')}")
    bad = _agentcore("state")  # the session argument is missing
    assert bad.returncode == 2 and "required: session" in bad.stderr


def test_unreachable_temporal_is_its_own_exit_code_with_the_cause() -> None:
    refused = _agentcore("--address", "127.0.0.1:1", "state", "anything")
    assert refused.returncode == 69
    assert refused.stderr.strip() == "agentcore: cannot reach Temporal at 127.0.0.1:1 (connection refused)"
    unknown = _agentcore("--address", "no-such-host.invalid:7233", "sessions")
    assert unknown.returncode == 69
    assert unknown.stderr.strip().splitlines() == [
        "agentcore: cannot reach Temporal at no-such-host.invalid:7233 (dns error: the host name does not resolve)"
    ]


def test_connection_flags_have_the_temporal_clis_names_and_keep_the_old_ones(tmp_path: Path) -> None:
    pem = tmp_path / "x.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    new = build_parser().parse_args(
        [
            "-n",
            "ns1",
            "--tls-ca-path",
            str(pem),
            "--tls-cert-path",
            str(pem),
            "--tls-key-path",
            str(pem),
            "--grpc-meta",
            "x-team=agents",
            "--grpc-meta",
            "x-env=test",
            "sessions",
        ]  # fmt: skip
    )
    old = build_parser().parse_args(
        [
            "sessions",
            "--namespace",
            "ns1",
            "--tls-ca-cert",
            str(pem),
            "--tls-cert",
            str(pem),
            "--tls-key",
            str(pem),
        ]
    )
    for args in (new, old):
        settings = connection_settings(args)
        assert (settings.namespace, settings.tls_ca_cert, settings.tls_cert, settings.tls_key) == (
            "ns1",
            str(pem),
            str(pem),
            str(pem),
        )
    config = load_connect_config(connection_settings(new))
    assert config["rpc_metadata"] == {"x-team": "agents", "x-env": "test"}
    assert config["namespace"] == "ns1" and config["tls"]


async def test_a_missing_namespace_is_reported_as_such(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run(["--namespace", "no-such-namespace", *deployment.argv("state", "anything")]) == 3
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("agentcore: NAMESPACE_NOT_FOUND:") and "no-such-namespace" in line
    assert await run(deployment.argv("state", "anything")) == 3
    assert "AGENT_NOT_FOUND" in capsys.readouterr().err


async def test_output_json_on_the_commands_that_print_data(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = await deployment.start_demo("cli-json")
    await agent.prompt("Hello")
    await agent.wait_for_idle(timeout=30)
    capsys.readouterr()

    assert await run(deployment.argv("state", "cli-json", "--output", "json")) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["message_count"] == 2 and state["messages"][0]["role"] == "user"

    assert await run(deployment.argv("messages", "cli-json", "-o", "json")) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["index"], line["message"]["role"]) for line in lines] == [(0, "user"), (1, "assistant")]
    assert all(line["entry_id"] for line in lines)

    async def listing() -> list[dict[str, object]]:  # visibility is eventually consistent
        assert await run(deployment.argv("sessions", "--output", "json")) == 0
        return list(json.loads(capsys.readouterr().out))

    # (The namespace is shared with the other tests: their conversations are listed too.)
    listed = await eventually(
        listing, lambda listed: any(item["session_id"] == "cli-json" for item in listed)
    )
    [mine] = [item for item in listed if item["session_id"] == "cli-json"]
    assert mine["status"] == "RUNNING" and mine["model"] == "demo/cellar-demo"


def _completions(line: str, tmp_path: Path) -> list[str]:
    out = tmp_path / "completions"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
    }
    done = subprocess.run([AGENTCORE], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [word.strip() for word in out.read_text().split("\n") if word.strip()]


def test_shell_completion_offers_commands_and_flags(tmp_path: Path) -> None:
    assert _completions("agentcore sta", tmp_path) == ["state"]
    flags = _completions("agentcore sessions --tls-c", tmp_path)
    assert "--tls-cert-path" in flags and "--tls-ca-path" in flags


def test_connection_flags_only_on_commands_that_connect() -> None:
    assert "--tls-ca-path PATH" in _agentcore("state", "--help").stdout
    assert "--address" not in _agentcore("codec-server", "--help").stdout
    offline = _agentcore("export", "some-session", "--address", "localhost:7233")
    assert offline.returncode == 2 and "unrecognized arguments: --address" in offline.stderr
