"""docker-compose.yml and the Dockerfile hang together: services, images, volumes, addresses, setup.

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

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
WORKERS = ("worker-1", "worker-2")
TEMPORAL_FRONTEND = "temporal:7233"


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


def setup_script(services: dict[str, dict[str, Any]]) -> str:
    command = services["temporal-setup"]["command"]
    return command[0] if isinstance(command, list) else str(command)


def test_expected_services_exist(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) >= {"postgresql", "temporal", "temporal-ui", "temporal-setup", *WORKERS}


def test_images_are_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        if "build" in service and "image" not in service:
            continue
        image = service["image"]
        assert ":" in image, f"{name}: image {image!r} has no tag"
        assert not image.endswith(":latest"), f"{name}: image {image!r} is not pinned"
        assert "${" not in image, f"{name}: image {image!r} depends on the environment"


def test_temporal_server_and_admin_tools_share_a_version(services: dict[str, dict[str, Any]]) -> None:
    server_version = services["temporal"]["image"].split(":")[1]
    admin_version = services["temporal-setup"]["image"].split(":")[1]
    assert services["temporal"]["image"].startswith("temporalio/auto-setup:")
    assert services["temporal-setup"]["image"].startswith("temporalio/admin-tools:")
    assert admin_version.split("-")[0] == server_version


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


def test_startup_order(services: dict[str, dict[str, Any]]) -> None:
    assert services["temporal"]["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert services["temporal-setup"]["depends_on"]["temporal"]["condition"] == "service_healthy"
    for worker in WORKERS:
        depends_on = services[worker]["depends_on"]
        assert depends_on["temporal"]["condition"] == "service_healthy"
        assert depends_on["temporal-setup"]["condition"] == "service_completed_successfully"


def test_named_volumes_are_declared(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name}: bind mount source {source} is missing"
            else:
                assert source in declared, f"{name}: volume {source!r} is not declared"


def test_workers_share_the_sessions_volume_at_one_path(services: dict[str, dict[str, Any]]) -> None:
    mounts = {worker: set(services[worker]["volumes"]) for worker in WORKERS}
    assert all("sessions:/sessions" in worker_mounts for worker_mounts in mounts.values())
    assert len({frozenset(worker_mounts) for worker_mounts in mounts.values()}) == 1
    for worker in WORKERS:
        env = environment(services[worker])
        assert env["AGENTCORE_SESSIONS_DIR"] == "/sessions"
        demo_db_dir = str(Path(env["AGENTCORE_DEMO_DB"]).parent)
        assert any(mount.endswith(f":{demo_db_dir}") for mount in services[worker]["volumes"])


def test_published_ports_do_not_collide(services: dict[str, dict[str, Any]]) -> None:
    host_ports: list[str] = []
    for service in services.values():
        for mapping in service.get("ports", []):
            parts = str(mapping).split(":")
            assert len(parts) >= 2, f"port {mapping!r} should name its host port"
            host_ports.append(parts[-2])
    assert len(host_ports) == len(set(host_ports))
    assert {"7233", "8080"} <= set(host_ports)


def test_temporal_runs_on_the_postgres_service(services: dict[str, dict[str, Any]]) -> None:
    env = environment(services["temporal"])
    postgres = services[env["POSTGRES_SEEDS"]]
    assert postgres["image"].startswith("postgres:")
    assert env["DB"] == "postgres12"
    assert env["DB_PORT"] == "5432"
    assert env["POSTGRES_USER"] == environment(postgres)["POSTGRES_USER"]
    assert env["POSTGRES_PWD"] == environment(postgres)["POSTGRES_PASSWORD"]


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
    for name in ("temporal-ui", "temporal-setup", *WORKERS):
        assert environment(services[name])["TEMPORAL_ADDRESS"] == TEMPORAL_FRONTEND, name
    assert "TEMPORAL_CORS_ORIGINS" in environment(services["temporal-ui"])


def test_workers_pass_provider_keys_through_without_values(services: dict[str, dict[str, Any]]) -> None:
    for worker in WORKERS:
        env = environment(services[worker])
        assert env["OPENAI_API_KEY"] == "${OPENAI_API_KEY:-}"
        assert env["ANTHROPIC_API_KEY"] == "${ANTHROPIC_API_KEY:-}"
        assert services[worker]["restart"] == "unless-stopped"
        assert services[worker]["build"]["context"] == "."


def test_long_running_services_have_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    for name in ("postgresql", "temporal", *WORKERS):
        check = services[name]["healthcheck"]
        assert check["test"][0] in {"CMD", "CMD-SHELL"}, name
    assert "pg_isready" in " ".join(services["postgresql"]["healthcheck"]["test"])
    assert "health" in services["temporal"]["healthcheck"]["test"]


def test_worker_healthcheck_is_valid_python(services: dict[str, dict[str, Any]]) -> None:
    test = services["worker-1"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    compile(test[3], "<healthcheck>", "exec")


def test_setup_registers_exactly_the_search_attributes_of_the_library(
    services: dict[str, dict[str, Any]],
) -> None:
    registered = dict(re.findall(r"^\s*register (\w+) (\w+)\s*$", setup_script(services), re.MULTILINE))
    assert registered == SEARCH_ATTRIBUTES
    assert "temporal operator search-attribute create" in setup_script(services)


def test_setup_script_escapes_dollars_for_compose(services: dict[str, dict[str, Any]]) -> None:
    # A single $ would be interpolated by compose (usually to an empty string) before the shell runs.
    script = setup_script(services)
    assert re.search(r"(?<!\$)\$(?!\$)", script.replace("$$", "")) is None


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell")
def test_setup_script_is_valid_shell(services: dict[str, dict[str, Any]]) -> None:
    script = setup_script(services).replace("$$", "$")
    subprocess.run(["sh", "-n", "-c", script], check=True)


def test_dockerfile_runs_the_worker_as_a_non_root_user() -> None:
    # One logical line per instruction: join backslash continuations.
    lines = [line.strip() for line in DOCKERFILE.read_text().replace("\\\n", " ").splitlines()]
    instructions = [line for line in lines if line and not line.startswith("#")]
    assert instructions[0].startswith("FROM python:3.11-slim")
    cmd = [line for line in instructions if line.startswith("CMD")]
    assert cmd, "the Dockerfile has no CMD"
    command = cmd[-1].removeprefix("CMD").strip()
    argv = yaml.safe_load(command) if command.startswith("[") else shlex.split(command)
    assert argv == ["python", "worker.py"]
    users = [line.split()[1] for line in instructions if line.startswith("USER ")]
    assert users and users[-1] not in {"root", "0"}
    assert any(line.startswith("RUN") and "pip install ." in line for line in instructions)


def test_dockerfile_copies_what_the_package_build_needs() -> None:
    text = DOCKERFILE.read_text()
    for needed in ("pyproject.toml", "README.md", "worker.py", "agentcore", "workflows", "activities"):
        assert re.search(rf"^COPY .*\b{re.escape(needed)}\b", text, re.MULTILINE), needed
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not {"agentcore", "workflows", "activities", "worker.py", "README.md", "pyproject.toml"} & set(
        ignored
    )
