"""docker-compose.yml and the Dockerfile hang together: services, images, versions, health checks,
volumes, addresses, one-shot setup jobs, the worker's metrics and shutdown, the optional profiles.

Nothing here starts a container; these are the mistakes that otherwise show up only as a cluster
that never becomes healthy (a typo in a service name, an unpinned image, a worker on another path).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentcore.search_attributes import SEARCH_ATTRIBUTES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
TEMPORAL_FRONTEND = "temporal:7233"
ONE_SHOT = ("temporal-schema", "temporal-setup")
OBSERVABILITY = ("otel-collector", "jaeger", "prometheus")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(document, dict)
    return document


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services = compose["services"]
    assert isinstance(services, dict)
    return services


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a dict, whichever of compose's two spellings it uses."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


def script(services: dict[str, dict[str, Any]], name: str) -> str:
    command = services[name]["command"]
    return command[0] if isinstance(command, list) else str(command)


def image_version(service: dict[str, Any]) -> str:
    return str(service["image"]).rsplit(":", 1)[1]


def worker_argv(services: dict[str, dict[str, Any]]) -> list[str]:
    command = services["worker"]["command"]
    assert isinstance(command, list)
    return [str(part) for part in command]


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.fixture(scope="module")
def embedded_versions() -> dict[str, str]:
    """Server and UI versions of the dev server ``agentcore dev`` embeds (``temporal --version``)."""
    from agentcore.temporal import find_temporal_binary

    output = subprocess.run(
        [find_temporal_binary(), "--version"], capture_output=True, text=True, check=True
    ).stdout
    found = dict(re.findall(r"(Server|UI) (\d+\.\d+\.\d+)", output))
    assert set(found) == {"Server", "UI"}, output
    return found


def test_expected_services_exist(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == {
        "postgresql",
        *ONE_SHOT,
        "temporal",
        "temporal-ui",
        "worker",
        "codec-server",
        *OBSERVABILITY,
    }


def test_images_are_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        image = service["image"]
        if "build" in service:
            assert image == "agentcore:local", name  # built here, one image for worker and codec server
            continue
        assert ":" in image, f"{name}: image {image!r} has no tag"
        assert not image.endswith(":latest"), f"{name}: image {image!r} is not pinned"
        assert "${" not in image, f"{name}: image {image!r} depends on the environment"


def test_temporal_runs_current_images_at_the_embedded_servers_minor(
    services: dict[str, dict[str, Any]], embedded_versions: dict[str, str]
) -> None:
    images = [str(service.get("image", "")) for service in services.values()]
    assert not any("auto-setup" in image for image in images)
    assert services["temporal"]["image"].startswith("temporalio/server:")
    server = image_version(services["temporal"])
    for name in ONE_SHOT:
        assert services[name]["image"].startswith("temporalio/admin-tools:")
        assert image_version(services[name]) == server, name
    minor = ".".join(embedded_versions["Server"].split(".")[:2])
    assert server.startswith(minor + "."), (server, embedded_versions)
    assert image_version(services["temporal-ui"]) == embedded_versions["UI"]


def test_every_dependency_exists_and_has_a_condition(services: dict[str, dict[str, Any]]) -> None:
    valid_conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, service in services.items():
        depends_on = service.get("depends_on", {})
        assert isinstance(depends_on, dict), f"{name}: depends_on must use the long form with conditions"
        for target, spec in depends_on.items():
            assert target in services, f"{name} depends on unknown service {target!r}"
            assert spec["condition"] in valid_conditions
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in services[target], (
                    f"{name} waits for {target} to be healthy; it has no check"
                )
            if spec["condition"] == "service_completed_successfully":
                assert target in ONE_SHOT
            # A service in no profile cannot wait for one that only runs in a profile.
            if not service.get("profiles"):
                assert not services[target].get("profiles"), (name, target)


def test_startup_order(services: dict[str, dict[str, Any]]) -> None:
    assert services["temporal-schema"]["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert (
        services["temporal"]["depends_on"]["temporal-schema"]["condition"] == "service_completed_successfully"
    )
    assert services["temporal-setup"]["depends_on"]["temporal"]["condition"] == "service_healthy"
    depends_on = services["worker"]["depends_on"]
    assert depends_on["temporal"]["condition"] == "service_healthy"
    assert depends_on["temporal-setup"]["condition"] == "service_completed_successfully"


def test_every_service_has_a_health_check_or_is_a_one_shot_job(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        if name in ONE_SHOT:
            assert service["restart"] == "no" and "healthcheck" not in service, name
            continue
        check = service["healthcheck"]
        assert check["test"][0] in {"CMD", "CMD-SHELL"}, name
        assert service["restart"] == "unless-stopped", name
    assert "pg_isready" in " ".join(services["postgresql"]["healthcheck"]["test"])


@pytest.mark.parametrize("name", ["worker", "codec-server"])
def test_python_health_checks_compile(services: dict[str, dict[str, Any]], name: str) -> None:
    test = services[name]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    compile(test[3], "<healthcheck>", "exec")


def test_the_worker_service(services: dict[str, dict[str, Any]]) -> None:
    from agentcore.cli import build_parser

    worker = services["worker"]
    assert worker["deploy"]["replicas"] == 2
    assert worker["build"]["context"] == "."
    argv = worker_argv(services)
    assert argv[:2] == ["agentcore", "worker"]
    args = build_parser().parse_args(argv[1:])  # the flags exist, with these values
    assert args.metrics_port == 9464
    # Docker's SIGKILL comes after the worker's own grace period has run out.
    stop_grace = int(str(worker["stop_grace_period"]).removesuffix("s"))
    assert args.graceful_shutdown < stop_grace
    # Replicas cannot share a published port: metrics are reached inside the network only.
    assert "ports" not in worker
    assert str(args.metrics_port) in [str(port) for port in worker["expose"]]
    assert str(args.metrics_port) in worker["healthcheck"]["test"][3]


def test_workers_share_the_sessions_volume(services: dict[str, dict[str, Any]]) -> None:
    worker = services["worker"]
    env = environment(worker)
    assert "sessions:/sessions" in worker["volumes"]
    assert env["AGENTCORE_SESSIONS_DIR"] == "/sessions"
    demo_db_dir = str(Path(env["AGENTCORE_DEMO_DB"]).parent)
    assert any(mount.endswith(f":{demo_db_dir}") for mount in worker["volumes"])


def test_workers_pass_secrets_and_settings_through_without_values(
    services: dict[str, dict[str, Any]],
) -> None:
    env = environment(services["worker"])
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "AGENTCORE_ENCRYPTION_KEY",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ):
        assert env[name] == f"${{{name}:-}}", name
    assert env["OTEL_SERVICE_NAME"] == "agentcore-worker"
    assert env["AGENTCORE_LOG_FORMAT"] == "${AGENTCORE_LOG_FORMAT:-json}"


def test_the_codec_server_runs_with_the_encryption_key(services: dict[str, dict[str, Any]]) -> None:
    from agentcore.cli import build_parser

    codec = services["codec-server"]
    assert codec["profiles"] == ["encryption"]
    assert (
        environment(codec)["AGENTCORE_ENCRYPTION_KEY"]
        == environment(services["worker"])["AGENTCORE_ENCRYPTION_KEY"]
    )
    args = build_parser().parse_args([str(part) for part in codec["command"][1:]])
    assert args.handler.__name__ == "cmd_codec_server"
    assert args.host == "0.0.0.0"
    assert f"127.0.0.1:{args.port}:{args.port}" in codec["ports"]
    assert environment(codec)["AGENTCORE_CODEC_TOKEN"] == "${AGENTCORE_CODEC_TOKEN:-}"
    assert f":{args.port}/" in codec["healthcheck"]["test"][3]
    assert "http://localhost:8080" in args.origin  # the UI's origin, as the browser sees it
    assert "TEMPORAL_CODEC_ENDPOINT" in environment(services["temporal-ui"])


def test_the_observability_profile(services: dict[str, dict[str, Any]]) -> None:
    for name in OBSERVABILITY:
        assert services[name]["profiles"] == ["observability"], name
    collector = yaml.safe_load((ROOT / "deploy" / "otel-collector.yaml").read_text())
    assert collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    exporters = collector["service"]["pipelines"]["traces"]["exporters"]
    assert [collector["exporters"][name]["endpoint"] for name in exporters] == ["jaeger:4317"]
    assert "127.0.0.1:4318:4318" in services["otel-collector"]["ports"]
    # Prometheus finds every worker replica at its metrics port.
    prometheus = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    [job] = prometheus["scrape_configs"]
    [discovery] = job["dns_sd_configs"]
    assert discovery["names"] == ["worker"]
    assert discovery["port"] == int(option(worker_argv(services), "--metrics-port"))
    # Each mounted config is where the image reads it from.
    assert any(
        mount.startswith("./deploy/prometheus.yml:/etc/prometheus/prometheus.yml")
        for mount in services["prometheus"]["volumes"]
    )
    config_path = services["otel-collector"]["command"][0].split("=", 1)[1]
    assert f"./deploy/otel-collector.yaml:{config_path}:ro" in services["otel-collector"]["volumes"]


def test_named_volumes_are_declared(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name}: bind mount source {source} is missing"
            else:
                assert source in declared, f"{name}: volume {source!r} is not declared"


def test_published_ports_do_not_collide(services: dict[str, dict[str, Any]]) -> None:
    host_ports: list[str] = []
    for service in services.values():
        for mapping in service.get("ports", []):
            parts = str(mapping).split(":")
            assert len(parts) >= 2, f"port {mapping!r} should name its host port"
            host_ports.append(parts[-2])
    assert len(host_ports) == len(set(host_ports))
    # This machine only: nothing is published on every interface unless someone decides to.
    published = [str(m) for service in services.values() for m in service.get("ports", [])]
    assert all(mapping.startswith("127.0.0.1:") for mapping in published), published
    assert {"7233", "8080", "8081", "16686", "9090", "4318"} <= set(host_ports)


def test_temporal_and_its_schema_job_use_one_database(services: dict[str, dict[str, Any]]) -> None:
    postgres = environment(services["postgresql"])
    for name in ("temporal", "temporal-schema"):
        env = environment(services[name])
        assert services[env["POSTGRES_SEEDS"]]["image"].startswith("postgres:")
        assert env["DB"] == "postgres12" and env["DB_PORT"] == "5432"
        assert env["POSTGRES_USER"] == postgres["POSTGRES_USER"]
        assert env["POSTGRES_PWD"] == postgres["POSTGRES_PASSWORD"]
    schema = script(services, "temporal-schema")
    assert "--plugin postgres12 --ep postgresql" in schema
    assert "setup-schema -v 0.0" in schema and "update-schema" in schema
    assert "v12/$$db/versioned" in schema


def test_dynamic_config_is_mounted_where_the_server_reads_it(services: dict[str, dict[str, Any]]) -> None:
    temporal = services["temporal"]
    config_path = environment(temporal)["DYNAMIC_CONFIG_FILE_PATH"]  # relative to /etc/temporal
    mounts = [mount.split(":") for mount in temporal["volumes"]]
    matching = [
        source for source, target, *_ in mounts if f"/etc/temporal/{config_path}".startswith(target + "/")
    ]
    assert len(matching) == 1
    local_file = ROOT / matching[0] / Path(config_path).name
    assert local_file.is_file()
    assert isinstance(yaml.safe_load(local_file.read_text()), dict)


def test_the_cluster_reads_its_task_queues_as_fast_as_the_embedded_server() -> None:
    """The embedded server's task-queue read rates (``DevServer``) hold for the compose cluster too."""
    from agentcore.temporal.devserver import DYNAMIC_CONFIG

    cluster = yaml.safe_load((ROOT / "deploy" / "dynamicconfig" / "development.yaml").read_text())
    rates = dict(value.split("=", 1) for value in DYNAMIC_CONFIG if "ProcessorMaxPollRPS" in value)
    assert len(rates) == 3
    for key, value in rates.items():
        assert cluster[key] == [{"value": int(value), "constraints": {}}], key


def test_clients_point_at_the_temporal_frontend(services: dict[str, dict[str, Any]]) -> None:
    host, port = TEMPORAL_FRONTEND.split(":")
    assert host in services
    assert any(str(mapping).endswith(f":{port}") for mapping in services[host]["ports"])
    for name in ("temporal-ui", "temporal-setup", "worker"):
        assert environment(services[name])["TEMPORAL_ADDRESS"] == TEMPORAL_FRONTEND, name
    assert "TEMPORAL_CORS_ORIGINS" in environment(services["temporal-ui"])


def test_setup_creates_the_namespace_and_registers_the_librarys_search_attributes(
    services: dict[str, dict[str, Any]],
) -> None:
    setup = script(services, "temporal-setup")
    registered = dict(re.findall(r"^\s*register (\w+) (\w+)\s*$", setup, re.MULTILINE))
    assert registered == SEARCH_ATTRIBUTES
    assert "temporal operator search-attribute create" in setup
    assert "temporal operator namespace create --namespace default" in setup


@pytest.mark.parametrize("name", ONE_SHOT)
def test_scripts_escape_dollars_for_compose(services: dict[str, dict[str, Any]], name: str) -> None:
    # A single $ would be interpolated by compose (usually to an empty string) before the shell runs.
    assert re.search(r"(?<!\$)\$(?!\$)", script(services, name).replace("$$", "")) is None


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell")
@pytest.mark.parametrize("name", ONE_SHOT)
def test_scripts_are_valid_shell(services: dict[str, dict[str, Any]], name: str) -> None:
    subprocess.run(["sh", "-n", "-c", script(services, name).replace("$$", "$")], check=True)


def _instructions() -> list[str]:
    # One logical line per instruction: join backslash continuations.
    lines = [line.strip() for line in DOCKERFILE.read_text().replace("\\\n", " ").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_the_image_runs_agentcore_worker_as_a_non_root_user(services: dict[str, dict[str, Any]]) -> None:
    instructions = _instructions()
    assert instructions[0].startswith("FROM python:3.11-slim")
    cmd = [line for line in instructions if line.startswith("CMD")]
    assert cmd, "the Dockerfile has no CMD"
    command = cmd[-1].removeprefix("CMD").strip()
    argv = yaml.safe_load(command) if command.startswith("[") else shlex.split(command)
    assert argv[:2] == ["agentcore", "worker"]
    assert f"EXPOSE {option(argv, '--metrics-port')}" in instructions
    assert option(argv, "--metrics-port") == option(worker_argv(services), "--metrics-port")
    assert "STOPSIGNAL SIGTERM" in instructions
    users = [line.split()[1] for line in instructions if line.startswith("USER ")]
    assert users and users[-1] not in {"root", "0"}
    # The tracing and encryption extras are in the image (off until their variables are set).
    assert any(line.startswith("RUN") and 'pip install ".[otel,encryption]"' in line for line in instructions)


def test_dockerfile_copies_what_the_package_build_needs() -> None:
    text = DOCKERFILE.read_text()
    for needed in ("pyproject.toml", "README.md", "worker.py", "agentcore", "workflows", "activities"):
        assert re.search(rf"^COPY .*\b{re.escape(needed)}\b", text, re.MULTILINE), needed
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not {"agentcore", "workflows", "activities", "worker.py", "README.md", "pyproject.toml"} & set(
        ignored
    )
