"""Connecting anywhere: ``temporalio.envconfig`` (variables, the TOML profile file) under explicit flags,
and TLS for real, through a TLS-terminating proxy in front of the dev server."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, KeepAliveConfig
from temporalio.testing import WorkflowEnvironment

from agentcore.client import AgentClient
from agentcore.state import AgentOptions
from agentcore.temporal import ConnectionSettings, TemporalConfigError, connect, load_connect_config
from agentcore.testing.loopback import LoopbackServer
from tests.support.cli import AGENTCORE
from tests.support.durable import add_tool, collect_run, running_worker
from tests.support.replay import watch_task_queue
from tests.support.tls import TlsProxy, make_ca, make_pki

TEMPORAL_VARIABLES = (
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_API_KEY",
    "TEMPORAL_TLS",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_SERVER_NAME",
    "TEMPORAL_PROFILE",
    "TEMPORAL_CONFIG_FILE",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in TEMPORAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # No profile file of the machine's user leaks in.
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "absent.toml"))
    return monkeypatch


def test_defaults_without_any_configuration(clean_env: pytest.MonkeyPatch) -> None:
    config = load_connect_config()
    assert config["target_host"] == "localhost:7233"
    assert config["namespace"] == "default"
    assert "tls" not in config and "api_key" not in config


def test_variables_then_flags(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("TEMPORAL_ADDRESS", "my-ns.a1b2c.tmprl.cloud:7233")
    clean_env.setenv("TEMPORAL_NAMESPACE", "my-ns.a1b2c")
    clean_env.setenv("TEMPORAL_API_KEY", "secret-key")
    config = load_connect_config()
    assert config["target_host"] == "my-ns.a1b2c.tmprl.cloud:7233"
    assert config["namespace"] == "my-ns.a1b2c"
    # An API key alone means TLS with the system's roots: Temporal Cloud by variables alone.
    assert config["api_key"] == "secret-key" and config["tls"] is not False
    flagged = load_connect_config(ConnectionSettings(address="other:7233", namespace="other", tls=False))
    assert (flagged["target_host"], flagged["namespace"], flagged["tls"]) == ("other:7233", "other", False)
    assert flagged["api_key"] == "secret-key"


def test_mtls_by_variables(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "client.pem").write_text("CERT")
    (tmp_path / "client.key").write_text("KEY")
    clean_env.setenv("TEMPORAL_ADDRESS", "my-ns.a1b2c.tmprl.cloud:7233")
    clean_env.setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", str(tmp_path / "client.pem"))
    clean_env.setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", str(tmp_path / "client.key"))
    tls = load_connect_config()["tls"]
    assert tls.client_cert == b"CERT" and tls.client_private_key == b"KEY"


def test_profile_file_and_profile_choice(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config_file = tmp_path / "temporal.toml"
    config_file.write_text(
        '[profile.default]\naddress = "default-host:7233"\n\n'
        '[profile.prod]\naddress = "prod-host:7233"\nnamespace = "prod"\n'
    )
    clean_env.setenv("TEMPORAL_CONFIG_FILE", str(config_file))
    assert load_connect_config()["target_host"] == "default-host:7233"
    clean_env.setenv("TEMPORAL_PROFILE", "prod")
    assert load_connect_config()["namespace"] == "prod"
    # The variable beats the file; the flag beats the variable.
    clean_env.setenv("TEMPORAL_ADDRESS", "env-host:7233")
    assert load_connect_config()["target_host"] == "env-host:7233"
    assert load_connect_config(ConnectionSettings(address="flag-host:1"))["target_host"] == "flag-host:1"


def test_unusable_settings_are_one_clear_error(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(TemporalConfigError, match="no Temporal config file"):
        load_connect_config(ConnectionSettings(config_file=str(tmp_path / "missing.toml")))
    with pytest.raises(TemporalConfigError, match="cannot read a TLS file"):
        load_connect_config(ConnectionSettings(tls_ca_cert=str(tmp_path / "missing-ca.pem")))
    broken = tmp_path / "broken.toml"
    broken.write_text("[profile.default\naddress = ")
    with pytest.raises(TemporalConfigError, match="cannot load the Temporal connection profile"):
        load_connect_config(ConnectionSettings(config_file=str(broken)))


def _dev_server_address(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


async def test_a_turn_over_tls_with_the_ca_from_the_environment(
    temporal_env: WorkflowEnvironment,
    temporal_client: Client,
    clean_env: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    pki = make_pki(tmp_path / "pki")
    async with TlsProxy(pki, _dev_server_address(temporal_env)) as proxy, LoopbackServer() as model_server:
        clean_env.setenv("TEMPORAL_ADDRESS", proxy.address)
        clean_env.setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", str(pki.ca_cert))
        client = await connect()
        assert client.service_client.config.tls is not False
        async with running_worker(
            client, tmp_path, None, tools=[add_tool()], get_api_key=lambda provider: "sk-loopback"
        ) as harness:
            # Replayed through the dev server itself: the proxy is gone by then.
            watch_task_queue(temporal_client, harness.task_queue, temporal_client.data_converter)
            agent = await harness.agents.start(
                "tls-turn", AgentOptions(model=model_server.model(), tools=["add"])
            )
            await agent.prompt('/tool add {"a": 2, "b": 40}')
            events = await collect_run(agent)
    results = [event for event in events if event.type == "tool_execution_end"]
    assert [event.result.content[0].text for event in results] == ["42.0"]
    assert events[-1].type == "agent_end"


async def test_the_profile_file_carries_tls(
    temporal_env: WorkflowEnvironment, clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path / "pki")
    async with TlsProxy(pki, _dev_server_address(temporal_env)) as proxy:
        config_file = tmp_path / "temporal.toml"
        config_file.write_text(
            f'[profile.tls]\naddress = "{proxy.address}"\n'
            f'[profile.tls.tls]\nserver_ca_cert_path = "{pki.ca_cert}"\n'
        )
        client = await connect(settings=ConnectionSettings(config_file=str(config_file), profile="tls"))
        assert (await client.count_workflows()).count >= 0


async def test_a_wrong_ca_fails_with_one_clear_line(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path / "pki")
    wrong_ca, _, _ = make_ca(tmp_path, "some-other-ca")
    async with TlsProxy(pki, _dev_server_address(temporal_env)) as proxy:
        process = await asyncio.create_subprocess_exec(
            AGENTCORE, "--address", proxy.address, "--tls-ca-cert", str(wrong_ca), "state", "anything",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
    lines = stderr.decode().strip().splitlines()
    assert process.returncode == 69
    assert lines == [
        f"agentcore: cannot reach Temporal at {proxy.address} (TLS: the server's certificate is not trusted)"
    ]


async def test_agent_client_and_dev_connect_to_a_given_cluster(
    temporal_env: WorkflowEnvironment,
    temporal_client: Client,
    clean_env: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    address = _dev_server_address(temporal_env)
    queues = [f"dev-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for queue in queues:  # the conversations `agentcore dev` starts
        watch_task_queue(temporal_client, queue, temporal_client.data_converter)
    clean_env.setenv("TEMPORAL_ADDRESS", address)
    agents = await AgentClient.connect(task_queue="unused", sessions_dir=tmp_path / "sessions")
    assert agents.client.service_client.config.target_host == address
    # `agentcore dev --address`: the chat, worker and demo model on that cluster, no server of its own.
    process = await asyncio.create_subprocess_exec(
        AGENTCORE, "--address", address, "--task-queue", queues[0],
        "--data-dir", str(tmp_path / "data"), "dev", "--once", "hello", "--demo-port", "0", "--fast",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0, stderr.decode()
    assert f"attached to the Temporal server at {address} (default), named by --address" in stderr.decode()
    assert "starting an embedded Temporal dev server" not in stderr.decode()
    assert stdout.decode().startswith("you> hello")

    # TEMPORAL_ADDRESS alone (no flag) is just as explicit: dev attaches and says so.
    process = await asyncio.create_subprocess_exec(
        AGENTCORE, "--task-queue", queues[1], "--data-dir", str(tmp_path / "data2"),
        "dev", "--once", "hello", "--demo-port", "0", "--fast", "--no-web",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0, stderr.decode()
    assert (
        f"attached to the Temporal server at {address} (default), named by TEMPORAL_ADDRESS"
        in stderr.decode()
    )
    assert "starting an embedded" not in stderr.decode() and not (tmp_path / "data2" / "temporal.db").exists()
    assert stdout.decode().startswith("you> hello")


async def test_a_dead_connection_is_given_up_within_seconds(
    temporal_env: WorkflowEnvironment, clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every agentcore connection (the worker's, the CLI's, ``AgentClient.connect``'s) pings the
    server once it has been silent for 10 s and gives the connection up when the ping is not
    answered within 5 s (the SDK's default: 30 s and 15 s), and gives each attempt at a new one 3 s
    (the SDK's: no limit), so a worker cut off by a blackhole makes a new connection within seconds
    of the path's return rather than waiting out TCP's backoff (the turn that gains from it:
    tests/reliability/test_network_faults.py). A caller's own settings are kept, ``None`` included."""
    address = _dev_server_address(temporal_env)
    shipped = KeepAliveConfig(interval_millis=10_000, timeout_millis=5_000)
    client = await connect(address)
    assert client.service_client.config.keep_alive_config == shipped
    assert client.service_client.config.connect_timeout == timedelta(seconds=3)
    agents = await AgentClient.connect(
        task_queue="unused", sessions_dir=tmp_path / "sessions", settings=ConnectionSettings(address=address)
    )
    assert agents.client.service_client.config.keep_alive_config == shipped
    own = KeepAliveConfig(interval_millis=20_000, timeout_millis=10_000)
    mine = await connect(address, keep_alive_config=own, connect_timeout=timedelta(seconds=10))
    assert mine.service_client.config.keep_alive_config == own
    assert mine.service_client.config.connect_timeout == timedelta(seconds=10)
    none = await connect(address, keep_alive_config=None, connect_timeout=None)
    assert none.service_client.config.keep_alive_config is None
    assert none.service_client.config.connect_timeout is None
